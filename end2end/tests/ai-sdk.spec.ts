// The AI SDK's own chat client — `Chat` from @ai-sdk/react with `DefaultChatTransport` from ai,
// what `useChat` runs on — unchanged, in Node, against the real server, for four pinned
// versions: ai 5.0.2, 5.0.60 and 5.0.100 (strict chunk schemas: any field outside the protocol
// of that version fails the stream) and ai 6.0.325. Send, tools, resume after the first client went away (also from a reloaded
// app's history), resume with nothing in flight, stop, history, edits and regenerates as
// branches, bad input, the access token.
import { expect, test, APIRequestContext } from "@playwright/test";
import { createRequire } from "node:module";
import { guardedPort, guardedToken } from "../playwright.config";
import { numberedWords, serverReplies } from "./helpers";

const load = createRequire(__filename);

/** `Chat` and `DefaultChatTransport` of one pinned @ai-sdk/react and the ai it depends on. */
function sdk(alias: string): { Chat: any; DefaultChatTransport: any; ai: string } {
  const react = load(alias);
  const fromReact = createRequire(load.resolve(alias));
  const ai = fromReact("ai");
  const version = fromReact("ai/package.json").version;
  return { Chat: react.Chat, DefaultChatTransport: ai.DefaultChatTransport, ai: version };
}

// The oldest ai 5 supported (5.0.0 and 5.0.1 leave a chat "submitted" for good when a resume
// finds nothing in flight — their own bug, fixed in 5.0.2), the last before the finish chunk's
// schema took `finishReason` (5.0.92: strict schemas refuse any key they do not know), the
// newest 5 and the newest 6.
const versions = [
  { alias: "ai-sdk-react-v2-oldest", ai: "5.0.2" },
  { alias: "ai-sdk-react-v2-60", ai: "5.0.60" },
  { alias: "ai-sdk-react-v2", ai: "5.0.100" },
  { alias: "ai-sdk-react-v3", ai: "6.0.325" },
];

type Message = { id: string; role: string; metadata?: any; parts: any[] };

function textOf(message: Message | undefined): string {
  return (message?.parts ?? [])
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

/** Messages as they would travel as JSON (no `undefined` fields). */
function plain(messages: Message[]): Message[] {
  return JSON.parse(JSON.stringify(messages));
}

async function until(check: () => boolean, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function runStatus(request: APIRequestContext, runId: string, wanted?: string): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const response = await request.get(`/v1/runs/${runId}`);
    expect(response.status()).toBe(200);
    const status = (await response.json()).status;
    if (!wanted || status === wanted || Date.now() > deadline) return status;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function history(request: APIRequestContext, chatId: string): Promise<Message[]> {
  const response = await request.get(`/v1/ai-sdk/chat/${chatId}/messages`);
  expect(response.status()).toBe(200);
  return response.json();
}

/** Messages as JSON (no `undefined` fields), as a client of ai version `ai` keeps them: ai 5
 * keeps no id on a reasoning part it streamed (ai 6 does; the history gives it, ai 5 ignores
 * it). */
function held(messages: Message[], ai: string): Message[] {
  const copy: Message[] = plain(messages);
  if (ai.startsWith("5.")) {
    for (const part of copy.flatMap((message) => message.parts)) {
      if (part.type === "reasoning") delete part.id;
    }
  }
  return copy;
}

for (const version of versions) {
  test.describe(`ai ${version.ai}`, () => {
    const { Chat, DefaultChatTransport, ai } = sdk(version.alias);
    const chatId = (name: string) => `${name}-${ai.replace(/\./g, "_")}-${Date.now()}`;
    const transport = (baseURL: string | undefined, headers?: Record<string, string>) =>
      new DefaultChatTransport({ api: `${baseURL}/v1/ai-sdk/chat`, headers });

    test("the pinned version is the one loaded", () => {
      expect(ai).toBe(version.ai);
    });

    test("a sent message streams the log's reply; tools arrive as dynamic-tool parts; the history rebuilds what the client holds", async ({ baseURL, request }) => {
      const id = chatId("send");
      const chat = new Chat({ id, transport: transport(baseURL) });
      await chat.sendMessage({ text: "/echo hello from the AI SDK" });
      expect(chat.error).toBeUndefined();
      expect(chat.status).toBe("ready");
      expect(chat.messages.map((message: Message) => message.role)).toEqual(["user", "assistant"]);
      const answer: Message = chat.messages[1];
      expect(textOf(answer)).toBe("hello from the AI SDK");
      const agentId = answer.metadata.agent_id;
      expect(answer.id).toBe(answer.metadata.run_id);
      expect(await serverReplies(request, agentId)).toEqual([textOf(answer)]);
      expect(answer.parts[0].type).toBe("step-start");
      expect(answer.parts.some((part: any) => part.type === "reasoning" && part.text.length > 0)).toBe(true);

      await chat.sendMessage({ text: "/tools clock; calculator 2*(3+4)" });
      expect(chat.error).toBeUndefined();
      const tools: Message = chat.messages[3];
      const calls = tools.parts.filter((part: any) => part.type === "dynamic-tool");
      expect(calls.map((part: any) => [part.toolName, part.state])).toEqual([
        ["clock", "output-available"],
        ["calculator", "output-available"],
      ]);
      expect(calls[1].input).toEqual({ expression: "2*(3+4)" });
      expect(JSON.stringify(calls[1].output)).toContain("14");
      // The model's second call (after the results) is a step of its own.
      expect(tools.parts.filter((part: any) => part.type === "step-start").length).toBe(2);
      expect(textOf(tools)).toBe((await serverReplies(request, agentId)).slice(1).join(""));

      // A retried POST of the same user message writes nothing and re-attaches to its run.
      const last = chat.messages[2];
      const retry = await request.post("/v1/ai-sdk/chat", {
        data: { id, trigger: "submit-message", messages: [last] },
      });
      expect(retry.status()).toBe(200);
      expect(retry.headers()["x-vercel-ai-ui-message-stream"]).toBe("v1");
      const body = await retry.text();
      expect(body).toContain(`"messageId":"${tools.id}"`);
      expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true);

      expect(held(await history(request, id), ai)).toEqual(plain(chat.messages));
      expect(held(await history(request, agentId), ai)).toEqual(plain(chat.messages));
    });

    test("resume after the first client went away ends with one assistant message equal to the log's, also from a reloaded app's history", async ({ baseURL, request }) => {
      const id = chatId("resume");
      const words = numberedWords(80);
      const first = new Chat({ id, transport: transport(baseURL) });
      const sending = first.sendMessage({ text: `/echo ${words}` });
      await until(() => textOf(first.messages[1]).length > 0, "the first words");
      const runId = first.messages[1].id;
      await first.stop(); // the client goes away; the run goes on
      await sending;

      const resumed = new Chat({ id, transport: transport(baseURL) });
      await resumed.resumeStream();
      expect(resumed.error).toBeUndefined();
      expect(resumed.messages.length).toBe(1);
      expect(resumed.messages[0].id).toBe(runId);
      expect(textOf(resumed.messages[0])).toBe(words);
      expect(await runStatus(request, runId)).toBe("completed");

      // A reloaded app: history while the next answer is in flight, then resume.
      const sender = new Chat({ id, transport: transport(baseURL) });
      const second = sender.sendMessage({ text: `/echo ${words} again` });
      // The answer's own words: the user message, there at once, says nothing of the server.
      await until(
        () => sender.messages.at(-1)?.role === "assistant" && textOf(sender.messages.at(-1)).length > 0,
        "the next answer's first words",
      );
      const loaded = await history(request, id);
      expect(loaded.at(-1)!.role).toBe("user");
      const reloaded = new Chat({ id, transport: transport(baseURL), messages: loaded });
      await reloaded.resumeStream();
      await second;
      const assistants = reloaded.messages.filter((message: Message) => message.role === "assistant");
      expect(assistants.length).toBe(2);
      expect(new Set(reloaded.messages.map((message: Message) => message.id)).size).toBe(reloaded.messages.length);
      expect(textOf(assistants[1])).toBe(`${words} again`);
      expect(assistants.map(textOf)).toEqual(await serverReplies(request, assistants[1].metadata.agent_id));
      expect(held(reloaded.messages, ai)).toEqual(held(await history(request, id), ai));
    });

    test("resume with nothing in flight leaves the chat ready and unchanged", async ({ baseURL, request }) => {
      const id = chatId("idle");
      const never = new Chat({ id, transport: transport(baseURL) });
      await never.resumeStream();
      expect(never.status).toBe("ready");
      expect(never.messages).toEqual([]);

      const chat = new Chat({ id, transport: transport(baseURL) });
      await chat.sendMessage({ text: "/echo done already" });
      const held = plain(chat.messages);
      await chat.resumeStream();
      expect(chat.status).toBe("ready");
      expect(chat.error).toBeUndefined();
      expect(plain(chat.messages)).toEqual(held);
      const response = await request.get(`/v1/ai-sdk/chat/${id}/stream`);
      expect(response.status()).toBe(204);
    });

    test("regenerate answers the last user message again; the history shows the new answer in the old one's place", async ({ baseURL, request }) => {
      const id = chatId("regenerate");
      const chat = new Chat({ id, transport: transport(baseURL) });
      await chat.sendMessage({ text: "/echo first answer" });
      const before = chat.messages[1].id;
      await chat.regenerate();
      expect(chat.error).toBeUndefined();
      expect(chat.messages.map((message: Message) => message.role)).toEqual(["user", "assistant"]);
      expect(chat.messages[1].id).not.toBe(before);
      expect(textOf(chat.messages[1])).toBe("first answer");
      expect(held(await history(request, id), ai)).toEqual(plain(chat.messages));
      // Both answers are kept: the new one on a branch, the first on the conversation's line.
      const branch = chat.messages[1].metadata.agent_id;
      const listed = await (await request.get(`/v1/agents/${branch}/branches`)).json();
      expect(listed.current_branch).toBe(branch);
      expect(await serverReplies(request, branch)).toEqual(["first answer"]);
      expect(await serverReplies(request, listed.agent.id)).toEqual(["first answer"]);
    });

    test("an edited message and a regenerated middle answer each branch the chat; switching back finds the first line whole", async ({ baseURL, request }) => {
      const id = chatId("branches");
      const chat = new Chat({ id, transport: transport(baseURL) });
      const roles = () => chat.messages.map((message: Message) => message.role);
      for (const text of ["/echo one", "/echo two", "/recall"]) {
        await chat.sendMessage({ text });
        expect(chat.error).toBeUndefined();
      }
      const main: Message[] = plain(chat.messages);
      expect(textOf(main[5])).toBe("You said:\n- /echo one\n- /echo two");
      const conversation = main[1].metadata.agent_id;

      // Edit the second message: the model sees the first turn and the edited one, never "two".
      await chat.sendMessage({ text: "/recall", messageId: main[2].id });
      expect(chat.error).toBeUndefined();
      expect(roles()).toEqual(["user", "assistant", "user", "assistant"]);
      expect(chat.messages[2].id).toBe(main[2].id);
      expect(textOf(chat.messages[3])).toBe("You said:\n- /echo one");
      expect(held(await history(request, id), ai)).toEqual(plain(chat.messages));

      // Regenerate the middle answer (the first): a new answer, what followed it gone from view.
      await chat.regenerate({ messageId: chat.messages[1].id });
      expect(chat.error).toBeUndefined();
      expect(roles()).toEqual(["user", "assistant"]);
      expect(textOf(chat.messages[1])).toBe("one");
      expect(chat.messages[1].id).not.toBe(main[1].id);
      expect(held(await history(request, id), ai)).toEqual(plain(chat.messages));

      // Three lines; back on the first, it is exactly as it was.
      const listed = await (await request.get(`/v1/agents/${conversation}/branches`)).json();
      expect(listed.branches.length).toBe(2);
      expect(listed.current_branch).toBe(chat.messages[1].metadata.agent_id);
      const back = await request.put(`/v1/agents/${conversation}/current-branch`, { data: { branch: null } });
      expect(back.status()).toBe(200);
      expect(held(await history(request, id), ai)).toEqual(main);
      expect(await serverReplies(request, conversation)).toEqual(["one", "two", textOf(main[5])]);
    });

    test("a failed run ends the stream with its error; the chat shows it and keeps the partial answer", async ({ baseURL, request }) => {
      const id = chatId("failed");
      const chat = new Chat({ id, transport: transport(baseURL), onError: () => {} });
      await chat.sendMessage({ text: "/fail invalid_request_error" });
      expect(chat.status).toBe("error");
      expect(chat.error?.message).toContain("invalid_request_error");
      const answer: Message = chat.messages[1];
      expect(textOf(answer).length).toBeGreaterThan(0);
      expect(await runStatus(request, answer.id)).toBe("failed");
      expect(held(await history(request, id), ai)).toEqual(plain(chat.messages));
    });

    test("stop cancels the run in flight and the stream ends with finish", async ({ baseURL, request }) => {
      const id = chatId("stop");
      const chat = new Chat({ id, transport: transport(baseURL) });
      const sending = chat.sendMessage({ text: `/echo ${numberedWords(200)}` });
      await until(() => textOf(chat.messages[1]).length > 0, "the first words");
      const runId = chat.messages[1].id;
      const stopped = await request.post(`/v1/ai-sdk/chat/${id}/stop`);
      expect(stopped.status()).toBe(200);
      expect((await stopped.json()).cancelled_run_ids).toEqual([runId]);
      await sending;
      expect(chat.status).toBe("ready");
      expect(chat.error).toBeUndefined();
      expect(await runStatus(request, runId)).toBe("cancelled");
      const text = textOf(chat.messages[1]);
      expect(text.length).toBeGreaterThan(0);
      expect(numberedWords(200).startsWith(text)).toBe(true);
      expect(plain(chat.messages)).toEqual(held(await history(request, id), ai));
      // The run's own stream (a retried POST of its message replays it) ends with finish.
      const replay = await request.post("/v1/ai-sdk/chat", {
        data: { id, trigger: "submit-message", messages: [chat.messages[0]] },
      });
      const frames = (await replay.text())
        .trimEnd()
        .split("\n\n")
        .map((frame) => frame.split("\n").find((line) => line.startsWith("data: "))?.slice(6));
      expect(frames.at(-1)).toBe("[DONE]");
      expect(JSON.parse(frames.at(-2)!)).toEqual({ type: "finish", messageMetadata: { usage: null } });
      // Nothing left to stop.
      const again = await request.post(`/v1/ai-sdk/chat/${id}/stop`);
      expect((await again.json()).cancelled_run_ids).toEqual([]);
    });
  });
}

test("bad requests are refused with the reason and write nothing", async ({ request }) => {
  const id = `refused-${Date.now()}`;
  const user = { id: "u1", role: "user", parts: [{ type: "text", text: "hi" }] };
  const cases: [any, number, string][] = [
    [{ id, messages: [user], trigger: "bogus" }, 422, "trigger"],
    [{ id, messages: [], trigger: "submit-message" }, 422, "messages"],
    [{ id, messages: "no", trigger: "submit-message" }, 422, "messages"],
    [{ id, messages: [{ ...user, parts: [{ type: "file", url: "data:," }] }] }, 422, "file parts"],
    [{ id: "not a chat id", messages: [user] }, 400, "chat id"],
    [{ messages: [user] }, 422, "id"],
  ];
  for (const [body, status, says] of cases) {
    const response = await request.post("/v1/ai-sdk/chat", { data: body });
    expect(response.status(), JSON.stringify(body)).toBe(status);
    expect((await response.json()).error.message).toContain(says);
  }
  const malformed = await request.post("/v1/ai-sdk/chat", {
    headers: { "content-type": "application/json" },
    data: Buffer.from("{not json"),
  });
  expect(malformed.status()).toBe(400);
  expect(await history(request, id)).toEqual([]);
  expect((await request.post(`/v1/ai-sdk/chat/${id}/stop`)).status()).toBe(404);
  expect((await request.get(`/v1/ai-sdk/chat/${id}/stream`)).status()).toBe(204);
  const unknownAgent = "00000000-0000-4000-8000-000000000000";
  expect((await request.get(`/v1/ai-sdk/chat/${unknownAgent}/messages`)).status()).toBe(404);
});

test("the access token works as the transport's bearer header", async () => {
  const { Chat, DefaultChatTransport } = sdk(versions.at(-1)!.alias);
  const api = `http://127.0.0.1:${guardedPort}/v1/ai-sdk/chat`;
  const refused = new Chat({ id: `guarded-${Date.now()}`, transport: new DefaultChatTransport({ api }) });
  await refused.sendMessage({ text: "/echo no token" });
  expect(refused.status).toBe("error");
  const chat = new Chat({
    id: `guarded-${Date.now()}`,
    transport: new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${guardedToken}` } }),
  });
  await chat.sendMessage({ text: "/echo with the token" });
  expect(chat.error).toBeUndefined();
  expect(textOf(chat.messages[1])).toBe("with the token");
});

// Tool approval is ai 6's (ai 5's strict schema has no approval chunks): the request arrives as
// an `approval-requested` part, `addToolApprovalResponse` answers it, and the chat sends the
// answer by itself (`sendAutomaticallyWhen`); the run that carries it out goes on with the same
// assistant message, and the history rebuilds exactly what the client holds.
test("ai 6.0.325: a tool that needs approval is approved or denied from the chat", async ({ baseURL, request }) => {
  const react = load("ai-sdk-react-v3");
  const ai = createRequire(load.resolve("ai-sdk-react-v3"))("ai");
  const created = await request.post("/v1/agents", {
    data: { name: "ai-sdk approvals", metadata: { requires_approval: ["calculator"] } },
  });
  const chatId = (await created.json()).id as string;
  const chat = new react.Chat({
    id: chatId,
    transport: new ai.DefaultChatTransport({ api: `${baseURL}/v1/ai-sdk/chat` }),
    sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await chat.sendMessage({ text: "/tools calculator 6*7; calculator 2+2" });
  expect(chat.error).toBeUndefined();
  const asked: Message = chat.messages[1];
  const calls = () => (chat.messages[1] as Message).parts.filter((part: any) => part.type === "dynamic-tool");
  expect(calls().map((part: any) => part.state)).toEqual(["approval-requested", "approval-requested"]);
  expect(asked.metadata.run_id).toBe(asked.id);
  // The history shows the waiting request as the client holds it.
  expect(await history(request, chatId)).toEqual(plain(chat.messages));

  const [first, second] = calls();
  await chat.addToolApprovalResponse({ id: first.approval.id, approved: true });
  await chat.addToolApprovalResponse({ id: second.approval.id, approved: false, reason: "one is enough" });
  await until(() => chat.status === "ready" && calls().every((part: any) => part.state.startsWith("output")), "the answers carried out");
  expect(chat.error).toBeUndefined();
  expect(chat.messages.map((message: Message) => message.role)).toEqual(["user", "assistant"]);
  const done: Message = chat.messages[1];
  expect(done.id).toBe(asked.id);
  expect(calls().map((part: any) => [part.state, part.output])).toEqual([
    ["output-available", 42],
    ["output-denied", undefined],
  ]);
  expect(calls()[1].approval).toEqual({ id: second.approval.id, approved: false, reason: "one is enough" });
  expect(textOf(done).length).toBeGreaterThan(0);
  expect(done.metadata.run_id).not.toBe(done.id);
  expect(await history(request, chatId)).toEqual(plain(chat.messages));

  // A second answer is refused.
  const again = await request.post("/v1/ai-sdk/chat", {
    data: { id: chatId, trigger: "submit-message", messages: [{ ...asked, parts: asked.parts.map((part: any) =>
      part.type === "dynamic-tool" ? { ...part, state: "approval-responded", approval: { id: part.toolCallId, approved: true } } : part) }] },
  });
  expect(again.status()).toBe(409);
});
