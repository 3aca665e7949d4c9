// The official `openai` clients (end2end/openai/, pinned: 7.57.0 and the oldest we support,
// 5.23.2, the last 5.x — background resume exists since 5.0), unchanged, with
// `baseURL = <server>/v1`, against agentstream's Responses API: streamed and not, background
// with both resume paths (the raw cursor and the helper, which replays from the start), cancel,
// the caller's function tools chained and resent whole, a second answer refused, and errors.
import { expect, test } from "@playwright/test";
import { collectEvents, ResponseEvent } from "./helpers";
import OpenAI7 from "../openai/node_modules/openai";
import OpenAI5 from "../openai/node_modules/openai-v5";

type Event = ResponseEvent;
const collect = collectEvents;

const clients: [string, any][] = [
  ["openai 7.57.0", OpenAI7],
  ["openai 5.23.2", OpenAI5],
];

const confirmTool = {
  type: "function",
  name: "confirm",
  description: "Ask the user to confirm a number",
  parameters: {
    type: "object",
    properties: { q: { type: "number" } },
    required: ["q"],
    additionalProperties: false,
  },
  strict: true,
};


/** The assistant's text in a response's output (5.x's stream helper sets no `output_text`). */
function outputText(response: any): string {
  return response.output
    .filter((item: any) => item.type === "message")
    .flatMap((item: any) => item.content)
    .filter((part: any) => part.type === "output_text")
    .map((part: any) => part.text)
    .join("");
}

function deltas(events: Event[]): string {
  return events
    .filter((event) => event.type === "response.output_text.delta")
    .map((event) => event.delta)
    .join("");
}

function expectNumbered(events: Event[], from: number) {
  expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => from + index));
}

for (const [label, OpenAI] of clients) {
  test.describe(label, () => {
    /** A client whose requests are counted (to see that a refusal is not retried). */
    function client(baseURL: string | undefined, counter?: { requests: number }) {
      return new OpenAI({
        baseURL: `${baseURL}/v1`,
        apiKey: "not-needed-by-an-open-server",
        fetch: (url: any, init: any) => {
          if (counter) counter.requests += 1;
          return fetch(url, init);
        },
      });
    }

    test("creates responses, streamed and not, with the stream helper", async ({ baseURL }) => {
      const openai = client(baseURL);
      const response = await openai.responses.create({ model: "scripted", input: "/echo hello from the sdk" });
      expect(response.id).toMatch(/^resp_[0-9a-f]{32}$/);
      expect(response.status).toBe("completed");
      expect(response.output_text).toBe("hello from the sdk");
      expect(response.usage.total_tokens).toBeGreaterThan(0);

      const events = await collect(
        await openai.responses.create({ model: "scripted", input: "/echo streamed in pieces", stream: true }),
      );
      expectNumbered(events, 0);
      expect(events[0].type).toBe("response.created");
      expect(events[1].type).toBe("response.in_progress");
      expect(events.at(-1)!.type).toBe("response.completed");
      expect(deltas(events)).toBe("streamed in pieces");

      const helper = openai.responses.stream({ model: "scripted", input: "/echo through the helper" });
      const seen = await collect(helper as any);
      const final = await helper.finalResponse();
      expect(outputText(final)).toBe("through the helper");
      expect(final.status).toBe("completed");
      expectNumbered(seen, 0);

      // The message it answered is the response's input.
      const items = await openai.responses.inputItems.list(response.id);
      expect(items.data.map((item: any) => item.content[0].text)).toEqual(["/echo hello from the sdk"]);

      // A response that is its whole conversation is deleted with it.
      await openai.responses.delete(response.id);
      await expect(openai.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    });

    test("a background response is polled and resumed by cursor and by the helper, the same every time", async ({
      baseURL,
    }) => {
      const openai = client(baseURL);
      const cutAt = 6;
      const live = await collect(
        await openai.responses.create({ model: "scripted", input: "tell me a story", background: true, stream: true }),
        (event) => event.sequence_number >= cutAt,
      );
      expect(live[0].response.status).toBe("queued");
      expect(live[0].response.background).toBe(true);
      const id = live[0].response.id;
      // The client left; the run goes on.
      const polled = await openai.responses.retrieve(id);
      expect(["queued", "in_progress", "completed"]).toContain(polled.status);

      const rest = await collect(await openai.responses.retrieve(id, { stream: true, starting_after: cutAt }));
      expectNumbered(rest, cutAt + 1);
      expect(rest.at(-1)!.type).toBe("response.completed");

      // Without a cursor: the whole response from `response.created`, identical to what went
      // out live — the numbering is the log's.
      const whole = await collect(await openai.responses.retrieve(id, { stream: true }));
      expectNumbered(whole, 0);
      expect(whole.slice(0, cutAt + 1)).toEqual(live);
      expect(whole.slice(cutAt + 1)).toEqual(rest);
      expect(await collect(await openai.responses.retrieve(id, { stream: true }))).toEqual(whole);

      // The helper asks for everything and drops what the caller had.
      const helper = openai.responses.stream({ response_id: id, starting_after: cutAt });
      const resumed = await collect(helper as any);
      expect(resumed.map((event) => event.sequence_number)).toEqual(rest.map((event) => event.sequence_number));
      const final = await helper.finalResponse();
      expect(final.status).toBe("completed");
      expect(outputText(final)).toBe(deltas(whole));

      const done = await openai.responses.retrieve(id);
      expect(done.status).toBe("completed");
      expect(done.output_text).toBe(deltas(whole));
    });

    test("a background response is cancelled, twice alike", async ({ baseURL }) => {
      const openai = client(baseURL);
      const queued = await openai.responses.create({ model: "scripted", input: "/stall 30", background: true });
      expect(queued.status).toBe("queued");
      const cancelled = await openai.responses.cancel(queued.id);
      expect(cancelled.status).toBe("cancelled");
      expect((await openai.responses.cancel(queued.id)).status).toBe("cancelled");
      expect((await openai.responses.retrieve(queued.id)).status).toBe("cancelled");
      const replay = await collect(await openai.responses.retrieve(queued.id, { stream: true }));
      expect(replay.at(-1)!.type).toBe("response.incomplete");
      expect(replay.at(-1)!.response.status).toBe("cancelled");
    });

    test("the caller's function tools: chained, resent whole, and a second answer refused once", async ({
      baseURL,
    }) => {
      const openai = client(baseURL);
      const asked = await openai.responses.create({
        model: "scripted",
        input: '/tools confirm {"q": 1}',
        tools: [confirmTool],
      });
      expect(asked.status).toBe("completed");
      const call = asked.output.find((item: any) => item.type === "function_call");
      expect(call).toMatchObject({ name: "confirm", status: "completed" });
      expect(call.call_id).toMatch(/^call_/);
      expect(JSON.parse(call.arguments)).toEqual({ q: 1 });

      const chained = await openai.responses.create({
        model: "scripted",
        previous_response_id: asked.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: "yes" }],
        tools: [confirmTool],
      });
      expect(chained.status).toBe("completed");
      expect(chained.previous_response_id).toBe(asked.id);
      expect(chained.output_text).toContain("yes");

      // The same answer again: 409 with `x-should-retry: false`, sent once, not three times.
      const counter = { requests: 0 };
      const again = client(baseURL, counter).responses.create({
        model: "scripted",
        previous_response_id: asked.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: "yes" }],
      });
      await expect(again).rejects.toMatchObject({ status: 409 });
      expect(counter.requests).toBe(1);

      // Stateless, as the Agents SDK sends it: the whole transcript, no previous_response_id.
      const second = await openai.responses.create({
        model: "scripted",
        input: '/tools confirm {"q": 2}',
        tools: [confirmTool],
      });
      const secondCall = second.output.find((item: any) => item.type === "function_call");
      const resent = await openai.responses.create({
        model: "scripted",
        input: [
          { role: "user", content: '/tools confirm {"q": 2}' },
          ...second.output,
          { type: "function_call_output", call_id: secondCall.call_id, output: "no" },
        ],
        tools: [confirmTool],
      });
      expect(resent.status).toBe("completed");
      expect(resent.output_text).toContain("no");
      expect(resent.agentstream.agent_id).toBe(second.agentstream.agent_id);
      const items = await openai.responses.inputItems.list(resent.id);
      expect(items.data.map((item: any) => [item.type, item.output])).toEqual([["function_call_output", "no"]]);
    });

    test("errors say what was wrong, in the SDK's classes", async ({ baseURL }) => {
      const openai = client(baseURL);
      await expect(openai.responses.retrieve(`resp_${"0".repeat(32)}`)).rejects.toMatchObject({ status: 404 });
      await expect(openai.responses.retrieve("resp_nope")).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      const bad = openai.responses.create({ model: "scripted", input: 3 as any });
      await expect(bad).rejects.toBeInstanceOf(OpenAI.BadRequestError);
      await expect(bad).rejects.toMatchObject({ message: expect.stringContaining("input must be") });
      await expect(
        openai.responses.create({ model: "scripted", input: "hi", tools: [{ type: "web_search" } as any] }),
      ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("web_search") });
      await expect(openai.responses.delete(`resp_${"0".repeat(32)}`)).rejects.toMatchObject({ status: 404 });
    });
  });
}
