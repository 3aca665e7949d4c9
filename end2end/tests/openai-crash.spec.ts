// A background response whose server is killed (-9) mid-answer, resumed with the official
// `openai` clients after the restart: the events after the caller's cursor, none missing, none
// twice, the replay from the start identical to what went out live, and a terminal event
// (`response.failed`, the run interrupted) — never a stream that hangs.
import { expect, test } from "@playwright/test";
import { collectEvents, ResponseEvent } from "./helpers";
import { ChildProcess, spawn } from "node:child_process";
import * as path from "node:path";
import OpenAI7 from "../openai/node_modules/openai";
import OpenAI5 from "../openai/node_modules/openai-v5";
import { crashServerBinary, crashServerPort } from "../playwright.config";

type Event = ResponseEvent;
const collect = collectEvents;

const baseURL = `http://127.0.0.1:${crashServerPort}`;

async function start(database: string): Promise<ChildProcess> {
  const server = spawn(crashServerBinary, [], {
    env: {
      ...process.env,
      LEPTOS_SITE_ADDR: `127.0.0.1:${crashServerPort}`,
      DATABASE_URL: `sqlite://${database}`,
      // A long, slow answer: the kill lands in its middle.
      AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS: "40",
      AGENTSTREAM_SCRIPTED_REPLY_TOKENS: "400",
      RUST_LOG: "warn",
    },
    stdio: "ignore",
  });
  for (let attempt = 0; attempt < 300; attempt++) {
    if (server.exitCode !== null) throw new Error(`the server exited with ${server.exitCode}`);
    const healthy = await fetch(`${baseURL}/healthz`).then((answer) => answer.ok, () => false);
    if (healthy) return server;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  server.kill("SIGKILL");
  throw new Error("the server did not come up");
}

async function kill(server: ChildProcess) {
  const exited = new Promise((resolve) => server.once("exit", resolve));
  server.kill("SIGKILL");
  await exited;
}


for (const [label, OpenAI] of [
  ["openai 7.57.0", OpenAI7],
  ["openai 5.23.2", OpenAI5],
] as [string, any][]) {
  test(`${label}: a response cut by kill -9 resumes after the restart with no gap, no duplicate and its end`, async ({}, testInfo) => {
    const database = path.join(process.env.AGENTSTREAM_E2E_DIRECTORY!, `crash-${testInfo.workerIndex}-${Date.now()}.db`);
    const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0 });
    let server = await start(database);
    try {
      const cutAt = 12;
      const live = await collect(
        await openai.responses.create({ model: "scripted", input: "a long story, please", background: true, stream: true }),
        (event) => event.sequence_number >= cutAt,
      );
      const id = live[0].response.id;
      // Cut in the middle of an item (thinking or text).
      expect(live.at(-1)!.type).toMatch(/\.delta$/);
      await kill(server);
      server = await start(database);

      const rest = await collect(await openai.responses.retrieve(id, { stream: true, starting_after: cutAt }));
      expect(rest.map((event) => event.sequence_number)).toEqual(rest.map((_, index) => cutAt + 1 + index));
      const end = rest.at(-1)!;
      expect(end.type).toBe("response.failed");
      expect(end.response.status).toBe("failed");
      expect(end.response.error.code).toBe("interrupted");
      // Every item is finished in the end: the message cut off is `incomplete`.
      expect(end.response.output.map((item: any) => item.status)).not.toContain("in_progress");

      const whole = await collect(await openai.responses.retrieve(id, { stream: true }));
      expect(whole.slice(0, cutAt + 1)).toEqual(live);
      expect(whole.slice(cutAt + 1)).toEqual(rest);

      const helper = openai.responses.stream({ response_id: id, starting_after: cutAt });
      const resumed = await collect(helper as any);
      expect(resumed.map((event) => event.sequence_number)).toEqual(rest.map((event) => event.sequence_number));
      expect(resumed.at(-1)!.type).toBe("response.failed");
      // openai 5's helper takes the response of `response.completed` only; on any other end its
      // final response is what it accumulated (status as created). 7 takes every terminal one.
      const final = await helper.finalResponse();
      expect(final.status).toBe(label.startsWith("openai 7") ? "failed" : "queued");
      expect((await openai.responses.retrieve(id)).status).toBe("failed");
    } finally {
      await kill(server);
    }
  });
}

test("a function call waits in the log through kill -9 and is answered after the restart", async ({}, testInfo) => {
  const database = path.join(process.env.AGENTSTREAM_E2E_DIRECTORY!, `crash-call-${testInfo.workerIndex}-${Date.now()}.db`);
  const openai = new OpenAI7({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0 });
  const tools = [{ type: "function", name: "confirm", parameters: { type: "object", properties: {} } }] as any;
  let server = await start(database);
  try {
    const asked = await openai.responses.create({ model: "scripted", input: "/tools confirm", tools });
    const call = asked.output.find((item: any) => item.type === "function_call") as any;
    expect(asked.status).toBe("completed");
    await kill(server);
    server = await start(database);
    const answered = await openai.responses.create({
      model: "scripted",
      previous_response_id: asked.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "yes" }],
      tools,
    });
    expect(answered.status).toBe("completed");
    expect(answered.output_text).toContain("yes");
  } finally {
    await kill(server);
  }
});
