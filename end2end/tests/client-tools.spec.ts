// Tools that run in the client, through each ecosystem's own client, pinned: the AI SDK's `Chat`
// (a tool without `execute`: `onToolCall` answers with `addToolResult` (ai 5) / `addToolOutput`
// (ai 6), `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls` goes on) for ai
// 5.0.2, 5.0.60, 5.0.100 and 6.0.325; AG-UI's `HttpAgent` (CopilotKit's frontend actions: the
// run's `tools`, a tool message answers); the Letta SDK (`client_tools`, a `tool` return in an
// approval message). Each call waits in the log: a client that comes back later (a reload)
// finds it pending and answers it, exactly once.
import { expect, test, APIRequestContext } from "@playwright/test";
import { createRequire } from "node:module";
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import Letta from "@letta-ai/letta-client";
import { openLive, send } from "./helpers";

const load = createRequire(__filename);

/** The tool the client runs in every test: ask the user to confirm. */
const confirmTool = {
  name: "confirm",
  description: "Ask the user to confirm something; answers {confirmed: boolean}.",
  parameters: {
    type: "object",
    properties: { question: { type: "string" } },
    required: ["question"],
  },
};
const asking = '/tools confirm {"question": "ship it?"}';

type Message = { id: string; role: string; metadata?: any; parts: any[] };

async function until(check: () => boolean, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The agent's log. */
async function log(request: APIRequestContext, agentId: string): Promise<any[]> {
  const response = await request.get(`/v1/agents/${agentId}/events?limit=1000`);
  expect(response.status()).toBe(200);
  return (await response.json()).events;
}

function resultsOf(events: any[], callId: string): any[] {
  return events.filter((event) => event.kind === "tool_result" && event.content.tool_call_id === callId);
}

/** Messages as they would travel as JSON (no `undefined` fields); ai 5 keeps no reasoning id. */
function held(messages: Message[], ai: string): Message[] {
  const copy: Message[] = JSON.parse(JSON.stringify(messages));
  if (ai.startsWith("5.")) {
    for (const part of copy.flatMap((message) => message.parts)) {
      if (part.type === "reasoning") delete part.id;
    }
  }
  return copy;
}

const versions = [
  { alias: "ai-sdk-react-v2-oldest", ai: "5.0.2" },
  { alias: "ai-sdk-react-v2-60", ai: "5.0.60" },
  { alias: "ai-sdk-react-v2", ai: "5.0.100" },
  { alias: "ai-sdk-react-v3", ai: "6.0.325" },
];

for (const version of versions) {
  test(`ai ${version.ai}: a tool without execute waits in the log; after a reload it is answered once, and onToolCall answers the next`, async ({ baseURL, request }) => {
    const react = load(version.alias);
    const ai = createRequire(load.resolve(version.alias))("ai");
    expect(createRequire(load.resolve(version.alias))("ai/package.json").version).toBe(version.ai);
    const id = `client-tool-${version.ai.replace(/\./g, "_")}-${Date.now()}`;
    const transport = new ai.DefaultChatTransport({
      api: `${baseURL}/v1/ai-sdk/chat`,
      body: { clientTools: [confirmTool] },
    });
    const history = async (): Promise<Message[]> => {
      const response = await request.get(`/v1/ai-sdk/chat/${id}/messages`);
      expect(response.status()).toBe(200);
      return response.json();
    };
    const answer = (chat: any, toolCallId: string, output: unknown) =>
      (chat.addToolOutput ?? chat.addToolResult).call(chat, { tool: "confirm", toolCallId, output });
    const confirmParts = (chat: any) =>
      (chat.messages.at(-1) as Message).parts.filter((part) => part.type === "tool-confirm");

    // The first tab sees the call and goes away before the user answers.
    const seen: string[] = [];
    const first = new react.Chat({
      id,
      transport,
      sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithToolCalls,
      onToolCall: ({ toolCall }: any) => void seen.push(toolCall.toolName),
    });
    await first.sendMessage({ text: asking });
    expect(first.error).toBeUndefined();
    expect(seen).toEqual(["confirm"]);
    const [waiting] = confirmParts(first);
    expect(waiting).toMatchObject({ state: "input-available", input: { question: "ship it?" } });
    const agentId = first.messages[1].metadata.agent_id;
    const asked = first.messages[1].id;
    expect(held(await history(), version.ai)).toEqual(held(first.messages, version.ai));

    // The reloaded tab starts from the history: the call still waits, and its answer goes on.
    const automatic: string[] = [];
    const second: any = new react.Chat({
      id,
      transport,
      messages: await history(),
      sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithToolCalls,
      onToolCall: ({ toolCall }: any) => {
        if (toolCall.toolName !== "confirm") return;
        automatic.push(toolCall.toolCallId);
        // Not awaited: the output is added once the stream that carried the call has ended.
        void answer(second, toolCall.toolCallId, { confirmed: false });
      },
    });
    expect(confirmParts(second)[0]).toMatchObject({ state: "input-available", toolCallId: waiting.toolCallId });
    await answer(second, waiting.toolCallId, { confirmed: true });
    await until(
      () => second.status === "ready" && second.messages.at(-1).parts.some((part: any) => part.type === "text"),
      "the continuation's reply",
    );
    expect(second.error).toBeUndefined();
    expect(second.messages.map((message: Message) => message.role)).toEqual(["user", "assistant"]);
    expect(second.messages[1].id).toBe(asked);
    expect(confirmParts(second)[0]).toMatchObject({ state: "output-available", output: { confirmed: true } });
    expect(resultsOf(await log(request, agentId), waiting.toolCallId).map((event) => event.content.result)).toEqual([
      { confirmed: true },
    ]);
    expect(held(await history(), version.ai)).toEqual(held(second.messages, version.ai));

    // The first tab answering too is refused, and writes nothing.
    const before = (await log(request, agentId)).length;
    const late = await request.post("/v1/ai-sdk/chat", {
      data: {
        id,
        trigger: "submit-message",
        clientTools: [confirmTool],
        messages: [first.messages[0], { ...first.messages[1], parts: first.messages[1].parts.map((part: any) =>
          part.type === "tool-confirm" ? { ...part, state: "output-available", output: { confirmed: false } } : part) }],
      },
    });
    expect(late.status()).toBe(409);
    expect((await log(request, agentId)).length).toBe(before);

    // A new call while the tab is open: onToolCall answers it and the chat goes on by itself.
    await second.sendMessage({ text: '/tools confirm {"question": "and this?"}' });
    await until(
      () => second.status === "ready" && automatic.length === 1 &&
        confirmParts(second).every((part: any) => part.state === "output-available") &&
        (second.messages.at(-1) as Message).parts.at(-1)?.type === "text",
      "the second call answered by onToolCall",
    );
    expect(second.error).toBeUndefined();
    expect(resultsOf(await log(request, agentId), automatic[0]).map((event) => event.content.result)).toEqual([
      { confirmed: false },
    ]);
    expect(held(await history(), version.ai)).toEqual(held(second.messages, version.ai));
  });
}

/** `HttpAgent` with `connect()`: the same request, to `…/connect`. */
class ConnectingAgent extends HttpAgent {
  connect(input: any) {
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(`${this.url}/connect`, this.requestInit(input))),
    );
  }
}

type AgUiMessage = { id: string; role: string; content?: any; toolCalls?: any[]; toolCallId?: string };

test("AG-UI: a frontend tool's call ends the run; a client that connects later answers it with a tool message, once", async ({ baseURL, request }) => {
  const thread = `agui-frontend-tool-${Date.now()}`;
  const first = new HttpAgent({ url: `${baseURL}/v1/ag-ui`, threadId: thread });
  first.addMessage({ id: `user-${Date.now()}`, role: "user", content: asking } as any);
  await first.runAgent({ tools: [confirmTool] } as any);
  const calls = (first.messages as AgUiMessage[]).flatMap((message) => message.toolCalls ?? []);
  expect(calls.map((call) => call.function.name)).toEqual(["confirm"]);
  const call = calls[0];
  expect(JSON.parse(call.function.arguments)).toEqual({ question: "ship it?" });
  expect((first as any).pendingInterrupts ?? []).toEqual([]);
  expect((first.messages as AgUiMessage[]).some((message) => message.role === "tool")).toBe(false);

  // Another client (a reload) connects: the call is there, unanswered; its tool message answers.
  const later = new ConnectingAgent({ url: `${baseURL}/v1/ag-ui`, threadId: thread });
  await later.connectAgent();
  const pending = (later.messages as AgUiMessage[]).flatMap((message) => message.toolCalls ?? []);
  expect(pending.map((each) => each.id)).toEqual([call.id]);
  expect((later.messages as AgUiMessage[]).some((message) => message.role === "tool")).toBe(false);
  later.addMessage({ id: `tool-${Date.now()}`, role: "tool", toolCallId: call.id, content: "confirmed" } as any);
  await later.runAgent({ tools: [confirmTool] } as any);
  const replies = (later.messages as AgUiMessage[]).filter(
    (message) => message.role === "assistant" && typeof message.content === "string" && message.content.length > 0,
  );
  expect(replies.length).toBeGreaterThan(0);

  const agentId = (later.messages as any[]).find((message) => message.metadata?.agent_id)?.metadata.agent_id;
  expect(agentId).toBeTruthy();
  expect(resultsOf(await log(request, agentId), call.id).map((event) => event.content.result)).toEqual(["confirmed"]);

  // The first client answering too is refused.
  first.addMessage({ id: `tool-late-${Date.now()}`, role: "tool", toolCallId: call.id, content: "late" } as any);
  const again = await request.post("/v1/ag-ui", {
    headers: { accept: "text/event-stream" },
    data: { threadId: thread, runId: "late", messages: first.messages, tools: [confirmTool] },
  });
  expect(again.status()).toBe(409);
});

test("Letta SDK: client_tools — the call stops the run with requires_approval; a tool return continues it once", async ({ baseURL, request }) => {
  const letta = new Letta({ baseURL, apiKey: null, maxRetries: 0 });
  const agent = await letta.agents.create({ name: "sdk client tools" } as any);
  const collect = async (stream: AsyncIterable<any>) => {
    const chunks: any[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    return chunks;
  };
  const asked = await collect(
    await letta.agents.messages.stream(agent.id, {
      messages: [{ role: "user", content: asking }],
      client_tools: [confirmTool],
      stream_tokens: false,
    } as any),
  );
  const ask = asked.find((chunk) => chunk.message_type === "approval_request_message");
  expect(ask?.tool_call.name).toBe("confirm");
  // As Letta's own server sends a client tool's call: its approval request alone.
  expect(asked.filter((chunk) => chunk.message_type === "tool_call_message" && chunk.tool_call?.name === "confirm")).toHaveLength(0);
  expect(JSON.parse(ask?.tool_call.arguments)).toEqual({ question: "ship it?" });
  expect(asked.find((chunk) => chunk.message_type === "stop_reason")?.stop_reason).toBe("requires_approval");

  const toolCallId = ask?.tool_call.tool_call_id as string;
  const continued = await collect(
    await letta.agents.messages.create(agent.id, {
      messages: [{ type: "approval", approvals: [{ type: "tool", tool_call_id: toolCallId, tool_return: "confirmed", status: "success" }] }],
      client_tools: [confirmTool],
      streaming: true,
    } as any),
  );
  const result = continued.find((chunk) => chunk.message_type === "tool_return_message");
  expect(result).toMatchObject({ tool_call_id: toolCallId, status: "success", tool_return: "confirmed" });
  expect(continued.find((chunk) => chunk.message_type === "stop_reason")?.stop_reason).toBe("end_turn");
  expect(resultsOf(await log(request, agent.id), toolCallId)).toHaveLength(1);

  await expect(
    letta.agents.messages.create(agent.id, {
      messages: [{ type: "approval", approvals: [{ type: "tool", tool_call_id: toolCallId, tool_return: "again", status: "success" }] }],
    } as any),
  ).rejects.toMatchObject({ status: 409 });
});

test("the live view answers its own tools: confirm and prompt_user wait on the card through a reload and another tab", async ({ context, request }) => {
  const created = await request.post("/v1/agents", { data: { name: "live client tools" } });
  const agentId = (await created.json()).id as string;
  const first = await context.newPage();
  const second = await context.newPage();
  await openLive(first, agentId);
  await openLive(second, agentId);
  await send(first, '/tools confirm {"question": "ship it?"}; clock');

  for (const page of [first, second]) {
    const card = page.locator(".client-tool[data-state=pending]");
    await expect(card).toContainText("confirm runs in the client");
    await expect(card.locator(".client-question")).toHaveText("ship it?");
    await expect(card.locator("button.approve")).toHaveText("Yes");
    await expect(page.locator(".tool-outcome.waiting")).toHaveText("waiting for the client");
    await expect(page.locator(".run-status")).toHaveAttribute("data-status", "awaiting_client");
  }
  // A reload shows it waiting still; the history page too, without buttons.
  await second.reload();
  await expect(second.locator(".client-tool[data-state=pending] button.approve")).toBeVisible();
  const history = await context.newPage();
  await history.goto(`/agents/${agentId}/history`);
  await expect(history.locator(".client-tool[data-state=pending]")).toContainText("waiting for the client");
  await expect(history.locator(".client-tool button")).toHaveCount(0);

  await second.locator(".client-tool button.approve").click();
  for (const page of [first, second]) {
    const card = page.locator(".message.kind-tool_call").filter({ hasText: "confirm" });
    await expect(card.locator(".tool-outcome")).toContainText('"confirmed": true');
    await expect(page.locator(".client-tool")).toHaveAttribute("data-state", "returned");
    await expect(page.locator(".run-status")).toHaveAttribute("data-status", "completed");
  }

  // prompt_user: a line of text, sent from the card.
  await send(first, '/tools prompt_user {"question": "favourite colour?"}');
  const prompt = first.locator(".client-tool[data-state=pending]");
  await expect(prompt.locator(".client-question")).toHaveText("favourite colour?");
  await prompt.locator("input.client-answer").fill("blue");
  await prompt.locator("button.approve").click();
  const card = first.locator(".message.kind-tool_call").filter({ hasText: "prompt_user" });
  await expect(card.locator(".tool-outcome")).toContainText('"answer": "blue"');
  const log = await (await request.get(`/v1/agents/${agentId}/events?limit=1000`)).json();
  const results = log.events.filter((event: any) => event.kind === "tool_result" && event.content.name !== "clock");
  expect(results.map((event: any) => event.content.result)).toEqual([{ confirmed: true }, { answer: "blue" }]);
});
