// The official Letta TypeScript SDK (@letta-ai/letta-client, pinned in package.json), unchanged,
// against the real server: agents, streaming in both cuts, reading back, non-streaming sends,
// cancel, resume from a cursor, and errors.
import { expect, test } from "@playwright/test";
import Letta from "@letta-ai/letta-client";
import { serverReplies } from "./helpers";

function client(baseURL: string | undefined): Letta {
  // No API key: the SDK then sends no Authorization header.
  return new Letta({ baseURL, apiKey: null, maxRetries: 0 });
}

type Chunk = { message_type?: string; [key: string]: any };

async function collect(stream: AsyncIterable<Chunk>, stopAfter?: (chunk: Chunk) => boolean): Promise<Chunk[]> {
  const chunks: Chunk[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    if (stopAfter?.(chunk)) break;
  }
  return chunks;
}

function assistantText(chunks: Chunk[]): string {
  return chunks
    .filter((chunk) => chunk.message_type === "assistant_message")
    .map((chunk) => chunk.content)
    .join("");
}

test("the Letta SDK creates, lists, streams tokens and steps, and reads messages back", async ({ baseURL, request }) => {
  const letta = client(baseURL);
  const agent = await letta.agents.create({
    name: "sdk agent",
    model: "scripted/demo",
    memory_blocks: [{ label: "human", value: "prefers short answers" }],
  } as any);
  expect(agent.id).toBeTruthy();
  expect((await letta.agents.retrieve(agent.id)).name).toBe("sdk agent");
  const listed: string[] = [];
  for await (const each of letta.agents.list()) listed.push(each.id);
  expect(listed).toContain(agent.id);

  // Token streaming: fragments of one message share its id and join to the reply.
  const tokens = await collect(
    await letta.agents.messages.create(agent.id, {
      messages: [{ role: "user", content: "/echo streamed token by token" }],
      streaming: true,
      stream_tokens: true,
    }),
  );
  const fragments = tokens.filter((chunk) => chunk.message_type === "assistant_message");
  expect(fragments.length).toBeGreaterThan(3);
  expect(new Set(fragments.map((chunk) => chunk.id)).size).toBe(1);
  expect(assistantText(tokens)).toBe("streamed token by token");
  expect(tokens.find((chunk) => chunk.message_type === "stop_reason")?.stop_reason).toBe("end_turn");
  expect(tokens.find((chunk) => chunk.message_type === "usage_statistics")?.total_tokens).toBeGreaterThan(0);
  for (const chunk of tokens.filter((chunk) => chunk.id)) {
    expect(chunk.date && chunk.run_id && chunk.otid && typeof chunk.seq_id === "number").toBeTruthy();
  }

  // Step streaming: one whole assistant message.
  const steps = await collect(
    await letta.agents.messages.stream(agent.id, {
      messages: [{ role: "user", content: "/echo one message per step" }],
      stream_tokens: false,
    }),
  );
  const whole = steps.filter((chunk) => chunk.message_type === "assistant_message");
  expect(whole.map((chunk) => chunk.content)).toEqual(["one message per step"]);

  // Non-streaming: the answer comes when the run ends.
  const response = await letta.agents.messages.create(agent.id, {
    messages: [{ role: "user", content: "/echo all at once" }],
  });
  expect(response.stop_reason.stop_reason).toBe("end_turn");
  expect(assistantText(response.messages as Chunk[])).toBe("all at once");

  // Read back, oldest first, through the SDK's auto-paging (3 messages per page).
  const said: string[] = [];
  for await (const message of letta.agents.messages.list(agent.id, { order: "asc", limit: 3 })) {
    const m = message as Chunk;
    if (m.message_type === "user_message" || m.message_type === "assistant_message") said.push(m.content);
  }
  expect(said).toEqual([
    "/echo streamed token by token",
    "streamed token by token",
    "/echo one message per step",
    "one message per step",
    "/echo all at once",
    "all at once",
  ]);
  // The same words the native log has.
  expect(await serverReplies(request, agent.id)).toEqual([
    "streamed token by token",
    "one message per step",
    "all at once",
  ]);
});

test("the Letta SDK cancels a run and resumes a background run from its cursor", async ({ baseURL, request }) => {
  const letta = client(baseURL);
  const agent = await letta.agents.create({ name: "sdk cancel" } as any);

  // Cancel: the stream ends with stop reason `cancelled`.
  const running = await letta.agents.messages.create(agent.id, {
    messages: [{ role: "user", content: "a long reply, please" }],
    streaming: true,
    stream_tokens: true,
    background: true,
  });
  const iterator = running[Symbol.asyncIterator]();
  const first = (await iterator.next()).value as Chunk;
  const runId = first.run_id as string;
  await letta.agents.messages.cancel(agent.id, { run_ids: [runId] });
  const rest: Chunk[] = [];
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) rest.push(next.value as Chunk);
  expect(rest.find((chunk) => chunk.message_type === "stop_reason")?.stop_reason).toBe("cancelled");
  const run = await letta.runs.retrieve(runId);
  expect(run.status).toBe("cancelled");

  // Background run: leave after a few fragments, resume with starting_after, miss nothing.
  const background = await letta.agents.messages.create(agent.id, {
    messages: [{ role: "user", content: "another long reply" }],
    streaming: true,
    stream_tokens: true,
    background: true,
  });
  let fragments = 0;
  const seen = await collect(background, (chunk) => chunk.message_type === "assistant_message" && ++fragments === 10);
  const cursor = seen[seen.length - 1].seq_id as number;
  const backgroundRun = seen[0].run_id as string;
  const resumed = await collect(await letta.runs.messages.stream(backgroundRun, { starting_after: cursor }));
  expect(resumed.filter((chunk) => typeof chunk.seq_id === "number").every((chunk) => chunk.seq_id > cursor)).toBe(true);
  expect(resumed.find((chunk) => chunk.message_type === "stop_reason")?.stop_reason).toBe("end_turn");
  const replies = await serverReplies(request, agent.id);
  expect(assistantText(seen) + assistantText(resumed)).toBe(replies[replies.length - 1]);
  expect((await letta.runs.retrieve(backgroundRun)).status).toBe("completed");
});

test("the Letta SDK surfaces Letta-style errors", async ({ baseURL }) => {
  const letta = client(baseURL);
  const missing = "00000000-0000-4000-8000-000000000000";
  await expect(letta.agents.retrieve(missing)).rejects.toMatchObject({ status: 404 });
  await expect(letta.runs.retrieve(missing)).rejects.toMatchObject({ status: 404 });
  await expect(
    letta.agents.messages.create(missing, { messages: [{ role: "user", content: "hi" }] }),
  ).rejects.toMatchObject({ status: 404, error: { detail: `agent ${missing} does not exist` } });
});

test("the Letta SDK sees requires_approval and continues after an approval message", async ({ baseURL }) => {
  const letta = client(baseURL);
  const agent = await letta.agents.create({
    name: "sdk approvals",
    metadata: { requires_approval: ["calculator"] },
  } as any);

  // The model calls a guarded tool: the stream shows the request and stops with requires_approval.
  const asked = await collect(
    await letta.agents.messages.stream(agent.id, {
      messages: [{ role: "user", content: "/tools calculator 6*7" }],
      stream_tokens: false,
    }),
  );
  const request = asked.find((chunk) => chunk.message_type === "approval_request_message");
  expect(request?.tool_call.name).toBe("calculator");
  expect(JSON.parse(request?.tool_call.arguments)).toEqual({ expression: "6*7" });
  expect(asked.find((chunk) => chunk.message_type === "stop_reason")?.stop_reason).toBe("requires_approval");
  expect(asked.some((chunk) => chunk.message_type === "tool_return_message")).toBe(false);

  // A new message meanwhile is refused (409) until the request is answered.
  await expect(
    letta.agents.messages.create(agent.id, { messages: [{ role: "user", content: "hello?" }] }),
  ).rejects.toMatchObject({ status: 409 });

  // The approval message (the current `approvals` form) runs the call and the loop goes on.
  const toolCallId = request?.tool_call.tool_call_id as string;
  const continued = await collect(
    await letta.agents.messages.create(agent.id, {
      messages: [{ type: "approval", approvals: [{ type: "approval", tool_call_id: toolCallId, approve: true }] }],
      streaming: true,
    } as any),
  );
  const answer = continued.find((chunk) => chunk.message_type === "approval_response_message");
  expect(answer).toMatchObject({ approve: true, approval_request_id: request?.id });
  const result = continued.find((chunk) => chunk.message_type === "tool_return_message");
  expect(result).toMatchObject({ tool_call_id: toolCallId, status: "success", tool_return: "42" });
  expect(continued.find((chunk) => chunk.message_type === "stop_reason")?.stop_reason).toBe("end_turn");
  expect(assistantText(continued).length).toBeGreaterThan(0);

  // A second answer is refused.
  await expect(
    letta.agents.messages.create(agent.id, {
      messages: [{ type: "approval", approvals: [{ type: "approval", tool_call_id: toolCallId, approve: false }] }],
    } as any),
  ).rejects.toMatchObject({ status: 409 });

  // The deprecated form (approval_request_id, approve, reason), denying: the reason is the error result.
  const again = await letta.agents.messages.create(agent.id, {
    messages: [{ role: "user", content: "/tools calculator 1+1" }],
  });
  expect(again.stop_reason.stop_reason).toBe("requires_approval");
  const second = (again.messages as Chunk[]).find((chunk) => chunk.message_type === "approval_request_message");
  const denied = await letta.agents.messages.create(agent.id, {
    messages: [{ type: "approval", approval_request_id: second?.id, approve: false, reason: "not now" }],
  } as any);
  const refusal = (denied.messages as Chunk[]).find((chunk) => chunk.message_type === "tool_return_message");
  expect(refusal?.status).toBe("error");
  expect(refusal?.tool_return).toContain("not now");

  // The message list tells the whole story.
  const types: string[] = [];
  for await (const message of letta.agents.messages.list(agent.id, { order: "asc" } as any)) {
    types.push((message as Chunk).message_type as string);
  }
  expect(types.filter((type) => type.startsWith("approval_"))).toEqual([
    "approval_request_message",
    "approval_response_message",
    "approval_request_message",
    "approval_response_message",
  ]);
});
