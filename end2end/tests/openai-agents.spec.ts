// The OpenAI Agents SDK (@openai/agents 0.20.0, pinned in end2end/openai/), unchanged, on the
// `openai` client pointed at agentstream: an agent whose function tool runs here, in the test,
// streamed and not. The SDK sends the whole transcript each turn (no previous_response_id): the
// server answers the call that waits from the trailing function_call_output.
import { expect, test } from "@playwright/test";
import OpenAI from "../openai/node_modules/openai";
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool } from "../openai/node_modules/@openai/agents";
import { z } from "../openai/node_modules/zod";

test("an Agents SDK agent calls its local tool through agentstream, streamed and not", async ({ baseURL }) => {
  const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "not-needed-by-an-open-server" });
  setDefaultOpenAIClient(openai);
  setTracingDisabled(true);
  const called: number[] = [];
  const confirm = tool({
    name: "confirm",
    description: "Confirm a number with the user",
    parameters: z.object({ q: z.number() }),
    execute: async ({ q }) => {
      called.push(q);
      return `confirmed ${q}`;
    },
  });
  const agent = new Agent({ name: "assistant", instructions: "Be brief.", model: "scripted", tools: [confirm] });

  const result = await run(agent, '/tools confirm {"q": 3}');
  expect(called).toEqual([3]);
  expect(result.finalOutput).toContain("confirmed 3");
  // Two responses: the call, then the answer to its output.
  expect(result.rawResponses).toHaveLength(2);

  const streamed = await run(agent, '/tools confirm {"q": 4}', { stream: true });
  const kinds = new Set<string>();
  for await (const event of streamed) kinds.add(event.type);
  await streamed.completed;
  expect(called).toEqual([3, 4]);
  expect(streamed.finalOutput).toContain("confirmed 4");
  expect(kinds).toContain("raw_model_stream_event");
  expect(kinds).toContain("run_item_stream_event");

  // Two calls in one response: both run here, both outputs go back in one request.
  const both = await run(agent, '/tools confirm {"q": 5}; confirm {"q": 6}');
  expect(called.slice(2).sort()).toEqual([5, 6]);
  expect(both.finalOutput).toContain("confirmed 5");
  expect(both.finalOutput).toContain("confirmed 6");

  // A second turn, resent whole, continues the same conversation.
  const next = await run(agent, [...result.history, { role: "user", content: "/echo and again" }]);
  expect(next.finalOutput).toBe("and again");
  const agentOf = async (response: any) => ((await openai.responses.retrieve(response.responseId)) as any).agentstream.agent_id;
  expect(await agentOf(next.rawResponses[0])).toBe(await agentOf(result.rawResponses[0]));
});
