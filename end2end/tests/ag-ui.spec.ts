// AG-UI's own client — `HttpAgent` from @ag-ui/client 1.0.0 (pinned), with its schema
// validation and `verifyEvents` — unchanged, in Node, against the real server: plain, thinking
// and tool-using runs, a run cut off and continued through connect (which HttpAgent leaves to
// subclasses: a four-line one here) and through `after_seq`, cancel, a failed run, bad input.
import { expect, test, APIRequestContext } from "@playwright/test";
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import { numberedWords, serverReplies } from "./helpers";

/** `HttpAgent` with `connect()`: the same request, to `…/connect`. */
class ConnectingAgent extends HttpAgent {
  connect(input: any) {
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(`${this.url}/connect`, this.requestInit(input))),
    );
  }
}

type Message = { id: string; role: string; content?: any; toolCalls?: any[]; toolCallId?: string; metadata?: any };

let counter = 0;
function threadId(name: string): string {
  counter += 1;
  return `agui-${name}-${Date.now()}-${counter}`;
}

function agent(baseURL: string | undefined, thread: string, Kind: typeof HttpAgent = HttpAgent): HttpAgent {
  return new Kind({ url: `${baseURL}/v1/ag-ui`, threadId: thread });
}

function say(client: HttpAgent, text: string): string {
  const id = `user-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  client.addMessage({ id, role: "user", content: text } as any);
  return id;
}

/** The assistant messages' text, in order. */
function replies(messages: Message[]): string[] {
  return messages
    .filter((message) => message.role === "assistant" && typeof message.content === "string")
    .map((message) => message.content);
}

/** Messages without the metadata the client merges in from events. */
function bare(messages: Message[]): Message[] {
  return JSON.parse(JSON.stringify(messages)).map((message: Message) => {
    delete message.metadata;
    for (const call of message.toolCalls ?? []) delete call.metadata;
    return message;
  });
}

async function until(check: () => boolean, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function runStatus(request: APIRequestContext, runId: string): Promise<string> {
  const response = await request.get(`/v1/runs/${runId}`);
  expect(response.status()).toBe(200);
  return (await response.json()).status;
}

/** Every event of one raw AG-UI stream, parsed by the client's own SSE transform. */
async function rawEvents(url: string, body: unknown, headers: Record<string, string> = {}): Promise<any[]> {
  const events: any[] = [];
  await new Promise<void>((resolve, reject) => {
    transformHttpEventStream(
      runHttpRequest(() =>
        fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "text/event-stream", ...headers },
          body: JSON.stringify(body),
        }),
      ),
    ).subscribe({ next: (event: any) => events.push(event), error: reject, complete: resolve });
  });
  return events;
}

test("a plain reply with thinking passes the client's validation; its text equals the log's", async ({ baseURL, request }) => {
  const thread = threadId("plain");
  const client = agent(baseURL, thread);
  const seen: any[] = [];
  client.subscribe({ onEvent: ({ event }: any) => void seen.push(event) });
  const userId = say(client, "/echo hello from AG-UI");
  await client.runAgent({ runId: "client-run-1" });
  const messages = client.messages as Message[];
  expect(messages[0].id).toBe(userId);
  expect(replies(messages)).toEqual(["hello from AG-UI"]);
  expect(messages.some((message) => message.role === "reasoning" && message.content.length > 0)).toBe(true);
  const agentId = seen[0].metadata.agent_id;
  expect(await serverReplies(request, agentId)).toEqual(replies(messages));
  expect(seen[0]).toMatchObject({ type: "RUN_STARTED", threadId: thread, runId: "client-run-1" });
  expect(seen.at(-1)).toMatchObject({ type: "RUN_FINISHED", threadId: thread, runId: "client-run-1" });
  const seqs = seen.map((event) => event.metadata.seq);
  expect(seqs.every((seq, index) => index === 0 || seq >= seqs[index - 1])).toBe(true);
  expect(seen.filter((event) => event.type === "STEP_STARTED").length).toBe(1);
  expect(JSON.stringify(seen)).not.toContain("null");
});

test("a tool run arrives as tool calls with their arguments and results", async ({ baseURL, request }) => {
  const thread = threadId("tools");
  const client = agent(baseURL, thread);
  say(client, "/tools clock; calculator 2*(3+4)");
  await client.runAgent();
  const messages = client.messages as Message[];
  const holder = messages.find((message) => message.toolCalls?.length)!;
  expect(holder.toolCalls!.map((call) => call.function.name)).toEqual(["clock", "calculator"]);
  expect(JSON.parse(holder.toolCalls![1].function.arguments)).toEqual({ expression: "2*(3+4)" });
  const results = messages.filter((message) => message.role === "tool");
  // Results come as the tools finish, each right after the message holding the calls.
  expect(results.map((message) => message.toolCallId).sort()).toEqual(holder.toolCalls!.map((call) => call.id).sort());
  const calculator = holder.toolCalls!.find((call) => call.function.name === "calculator")!;
  expect(results.find((message) => message.toolCallId === calculator.id)!.content).toContain("14");
  const at = messages.indexOf(holder);
  expect(messages.slice(at + 1, at + 3).every((message) => message.role === "tool")).toBe(true);
  const agentId = (holder.metadata ?? messages.at(-1)!.metadata).agent_id;
  expect(replies(messages).join("")).toBe((await serverReplies(request, agentId)).join(""));

  // A second client connecting later holds the same conversation.
  const later = agent(baseURL, thread, ConnectingAgent);
  await later.connectAgent();
  expect(bare(later.messages as Message[])).toEqual(bare(messages));
});

test("a run cut off mid-way continues through connect with its text exactly once", async ({ baseURL, request }) => {
  const thread = threadId("connect");
  const words = numberedWords(80);
  const first = agent(baseURL, thread);
  let contents = 0;
  first.subscribe({ onTextMessageContentEvent: () => void (contents += 1) });
  say(first, `/echo ${words}`);
  const running = first.runAgent().catch(() => undefined);
  await until(() => contents > 3, "the first words");
  first.abortRun(); // the client goes away; the run goes on
  await running;

  const second = agent(baseURL, thread, ConnectingAgent);
  const types: string[] = [];
  second.subscribe({ onEvent: ({ event }: any) => void types.push(event.type) });
  await second.connectAgent();
  expect(types[0]).toBe("RUN_STARTED");
  expect(types[1]).toBe("MESSAGES_SNAPSHOT");
  expect(types.at(-1)).toBe("RUN_FINISHED");
  const messages = second.messages as Message[];
  expect(replies(messages)).toEqual([words]);
  expect(messages.filter((message) => message.role === "user").length).toBe(1);
  const agentId = messages.find((message) => message.metadata?.agent_id)!.metadata.agent_id;
  expect(await serverReplies(request, agentId)).toEqual([words]);
  // The reopened message arrived as its text so far in one piece, then live.
  expect(types.filter((type) => type === "TEXT_MESSAGE_CONTENT").length).toBeLessThan(80);

  // Connecting again after the end: the whole conversation in the snapshot, nothing else.
  const third = agent(baseURL, thread, ConnectingAgent);
  await third.connectAgent();
  expect(bare(third.messages as Message[])).toEqual(bare(messages));
});

test("a client that keeps the cursor continues after it exactly, with after_seq", async ({ baseURL, request }) => {
  const thread = threadId("cursor");
  const words = numberedWords(80);
  const first = agent(baseURL, thread);
  const seen: any[] = [];
  first.subscribe({ onEvent: ({ event }: any) => void seen.push(event) });
  say(first, `/echo ${words}`);
  const running = first.runAgent().catch(() => undefined);
  await until(() => seen.filter((event) => event.type === "TEXT_MESSAGE_CONTENT").length > 5, "the first words");
  first.abortRun();
  await running;
  // What came from the server (the client adds events of its own when it aborts).
  const received = seen.filter((event) => event.metadata?.seq !== undefined);
  const had = received.filter((event) => event.type === "TEXT_MESSAGE_CONTENT").map((event) => event.delta).join("");
  const cursor = received.at(-1).metadata.seq;

  const rest = await rawEvents(`${baseURL}/v1/ag-ui/connect?after_seq=${cursor}`, { threadId: thread });
  expect(rest[0].type).toBe("RUN_STARTED");
  expect(rest.some((event) => event.type === "TEXT_MESSAGE_START")).toBe(false);
  expect(rest.some((event) => event.type === "MESSAGES_SNAPSHOT")).toBe(false);
  expect(rest.every((event, index) => index === 0 || event.metadata.seq > cursor)).toBe(true);
  const more = rest.filter((event) => event.type === "TEXT_MESSAGE_CONTENT").map((event) => event.delta).join("");
  expect(had + more).toBe(words);
  expect(rest.at(-1).type).toBe("RUN_FINISHED");
  expect(await serverReplies(request, received[0].metadata.agent_id)).toEqual([words]);

  // The same with Last-Event-ID (a frame id), and a bad cursor refused.
  const viaHeader = await rawEvents(`${baseURL}/v1/ag-ui/connect`, { threadId: thread }, { "last-event-id": String(cursor) });
  expect(viaHeader.filter((event) => event.type === "TEXT_MESSAGE_CONTENT").map((event) => event.delta).join("")).toBe(more);
  const bad = await request.post(`/v1/ag-ui/connect?after_seq=soon`, { data: { threadId: thread } });
  expect(bad.status()).toBe(400);
});

test("cancel stops the run in flight; the run finishes with outcome cancelled", async ({ baseURL, request }) => {
  const thread = threadId("cancel");
  const client = agent(baseURL, thread);
  const seen: any[] = [];
  client.subscribe({ onEvent: ({ event }: any) => void seen.push(event) });
  say(client, `/echo ${numberedWords(200)}`);
  const running = client.runAgent();
  await until(() => seen.some((event) => event.type === "TEXT_MESSAGE_CONTENT"), "the first words");
  const cancelled = await request.post("/v1/ag-ui/cancel", { data: { threadId: thread } });
  expect(cancelled.status()).toBe(200);
  const runId = (await cancelled.json()).cancelled_run_ids[0];
  await running;
  expect(seen.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "cancelled" } });
  expect(await runStatus(request, runId)).toBe("cancelled");
  expect(numberedWords(200).startsWith(replies(client.messages as Message[])[0])).toBe(true);
});

test("a failed run ends with RUN_ERROR and the client reports it", async ({ baseURL }) => {
  const client = agent(baseURL, threadId("failed"));
  const seen: any[] = [];
  client.subscribe({ onEvent: ({ event }: any) => void seen.push(event), onRunFailed: () => undefined } as any);
  say(client, "/fail invalid_request_error");
  await client.runAgent().then(
    () => undefined,
    () => undefined,
  );
  expect(seen.at(-1)).toMatchObject({ type: "RUN_ERROR", code: "invalid_request_error" });
  expect(seen.at(-1).message).toContain("invalid_request_error");
});

test("bad run inputs are refused with the reason and write nothing", async ({ baseURL, request }) => {
  const thread = threadId("refused");
  const user = { id: "u1", role: "user", content: "hi" };
  const cases: [any, number, string][] = [
    [{ runId: "r", messages: [user] }, 422, "threadId"],
    [{ threadId: thread, runId: "r", messages: [] }, 422, "no new user message"],
    [{ threadId: thread, runId: "r", messages: [user, { id: "a", role: "assistant", content: "x" }] }, 422, "no new user message"],
    [{ threadId: thread, runId: "r" }, 422, "messages"],
    [{ threadId: "bad thread", runId: "r", messages: [user] }, 400, "chat id"],
    [{ threadId: thread, runId: "r", messages: [{ ...user, content: [{ type: "image", source: {} }] }] }, 422, "not supported"],
  ];
  for (const [body, status, says] of cases) {
    const response = await request.post("/v1/ag-ui", { data: body });
    expect(response.status(), JSON.stringify(body)).toBe(status);
    expect((await response.json()).error.message).toContain(says);
  }
  const malformed = await request.post("/v1/ag-ui", {
    headers: { "content-type": "application/json" },
    data: Buffer.from("{not json"),
  });
  expect(malformed.status()).toBe(400);
  // Nothing was written: the thread is still empty, and there is nothing to cancel.
  const connected = await rawEvents(`${baseURL}/v1/ag-ui/connect`, { threadId: thread });
  expect(connected.map((event) => event.type)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
  expect(connected[1].messages).toEqual([]);
  expect((await request.post("/v1/ag-ui/cancel", { data: { threadId: thread } })).status()).toBe(404);
});

test("a tool that needs approval ends the run with an interrupt; resume answers it", async ({ baseURL, request }) => {
  // The thread is an agent made with a tool that needs a person's approval.
  const created = await request.post("/v1/agents", {
    data: { name: "ag-ui approvals", metadata: { requires_approval: ["calculator"] } },
  });
  const thread = (await created.json()).id as string;
  const client = agent(baseURL, thread);
  let finished: any;
  client.subscribe({ onRunFinishedEvent: (params: any) => void (finished = params) });

  say(client, "/tools calculator 6*7; calculator 2+2");
  await client.runAgent();
  expect(finished.outcome).toBe("interrupt");
  const interrupts = (client as any).pendingInterrupts as any[];
  expect(interrupts).toHaveLength(2);
  for (const interrupt of interrupts) {
    expect(interrupt).toMatchObject({ reason: "tool_approval", message: "calculator needs approval" });
    expect(interrupt.toolCallId).toBe(interrupt.id);
  }
  const calls = (client.messages as Message[]).flatMap((message) => message.toolCalls ?? []);
  expect(calls.map((call) => call.id).sort()).toEqual(interrupts.map((interrupt) => interrupt.id).sort());

  // The client refuses to go on without answering every interrupt; answering them continues.
  await expect(client.runAgent()).rejects.toThrow(/pending interrupt/);
  const [first, second] = interrupts;
  await client.runAgent({
    resume: [
      { interruptId: first.id, status: "resolved", payload: { approved: true } },
      { interruptId: second.id, status: "cancelled", payload: { reason: "one is enough" } },
    ],
  } as any);
  expect(finished.outcome).toBe("success");
  expect((client as any).pendingInterrupts).toEqual([]);
  const results = (client.messages as Message[]).filter((message) => message.role === "tool");
  const byCall = new Map(results.map((result) => [result.toolCallId, result]));
  expect(byCall.get(first.id)?.content).toBe("42");
  expect(byCall.get(second.id)?.content).toContain("one is enough");
  expect(replies(client.messages as Message[]).length).toBeGreaterThan(0);

  // An answer again is refused, and the thread's log holds one answer per call.
  const again = await request.post("/v1/ag-ui", {
    headers: { accept: "text/event-stream" },
    data: { threadId: thread, runId: "again", messages: [], resume: [{ interruptId: first.id, status: "resolved" }] },
  });
  expect(again.status()).toBe(409);
  const log = await (await request.get(`/v1/agents/${thread}/events?limit=1000`)).json();
  expect(log.events.filter((event: any) => event.kind === "approval_response")).toHaveLength(2);
});
