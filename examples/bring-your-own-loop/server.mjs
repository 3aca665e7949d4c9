// An app that keeps its own agent loop — its `streamText`, its model, its tools — and gets
// agentstream's durability for it: every reply's UI message stream goes to the browser *and* is
// piped into agentstream (`POST /v1/ai-sdk/chat/{id}/produce`), so a browser that reloads
// mid-answer resumes from agentstream with a cursor (`useChat({ resume: true })`), and the
// conversation's history is there too. `resumable-stream` without Redis.
//
//   AGENTSTREAM_URL=http://127.0.0.1:3000 AGENTSTREAM_API_TOKEN=… node server.mjs
//
// The model is the AI SDK's own mock (`ai/test`), streaming a long reply word by word after a
// call to the app's `clock` tool: a real app puts its provider here and changes nothing else.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  convertToModelMessages,
  createUIMessageStreamResponse,
  jsonSchema,
  JsonToSseTransformStream,
  simulateReadableStream,
  stepCountIs,
  streamText,
  tool,
} from "ai";
import { MockLanguageModelV3 } from "ai/test";

const here = dirname(fileURLToPath(import.meta.url));
const agentstream = (process.env.AGENTSTREAM_URL ?? "http://127.0.0.1:3000").replace(/\/$/, "");
const operatorToken = process.env.AGENTSTREAM_API_TOKEN;
const port = Number(process.env.PORT ?? 5174);
/** The mock model's reply: this many words, this far apart (long enough to reload mid-answer). */
const replyWords = Number(process.env.REPLY_WORDS ?? 80);
const wordDelayMs = Number(process.env.WORD_DELAY_MS ?? 50);
const requestBodyBytesMax = 1024 * 1024;
const userNameCharsMax = 64;

if (!operatorToken) {
  console.error("set AGENTSTREAM_API_TOKEN (the operator token of the agentstream server)");
  process.exit(1);
}

/** A short-lived agentstream token for `chatId` with `scope` (the operator token stays here). */
async function mint(user, chatId, scope) {
  const response = await fetch(`${agentstream}/v1/tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
    body: JSON.stringify({ sub: user, agents: [chatId], scope, ttl_s: 300 }),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(`mint: ${response.status} ${JSON.stringify(body)}`);
  return body.token;
}

const usage = (input, output) => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

/** The app's model: first a call of its `clock` tool, then a long answer. */
function model() {
  const words = Array.from({ length: replyWords }, (_, index) => `word${index} `);
  const stream = (chunks) => ({ stream: simulateReadableStream({ chunks, chunkDelayInMs: wordDelayMs }) });
  return new MockLanguageModelV3({
    doStream: [
      stream([
        { type: "stream-start", warnings: [] },
        { type: "tool-call", toolCallId: "clock-1", toolName: "clock", input: "{}" },
        { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_use" }, usage: usage(5, 1) },
      ]),
      stream([
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "answer" },
        ...words.map((delta) => ({ type: "text-delta", id: "answer", delta })),
        { type: "text-end", id: "answer" },
        { type: "finish", finishReason: { unified: "stop", raw: "end_turn" }, usage: usage(9, replyWords) },
      ]),
    ],
  });
}

const tools = {
  clock: tool({
    description: "The time now",
    inputSchema: jsonSchema({ type: "object", properties: {} }),
    execute: async () => ({ now: "12:00" }),
  }),
};

/** `POST /api/chat` (useChat's transport): the app's own loop; its stream goes both ways. */
async function chat(body) {
  const { id: chatId, messages } = body;
  const last = messages.at(-1);
  const userText = (last?.parts ?? []).filter((part) => part.type === "text").map((part) => part.text).join("");
  const result = streamText({ model: model(), messages: await convertToModelMessages(messages), tools, stopWhen: stepCountIs(2) });
  const [toBrowser, toAgentstream] = result
    .toUIMessageStream({ generateMessageId: () => `msg-${Date.now()}` })
    .tee();
  // Into agentstream, in one request, as it streams. The browser may go away (a reload): this
  // branch goes on, and agentstream keeps the whole reply.
  const produceToken = await mint(body.user, chatId, "produce");
  const piped = fetch(`${agentstream}/v1/ai-sdk/chat/${encodeURIComponent(chatId)}/produce`, {
    method: "POST",
    duplex: "half",
    headers: {
      authorization: `Bearer ${produceToken}`,
      "content-type": "text/event-stream",
      "agentstream-user-text": encodeURIComponent(userText),
    },
    body: toAgentstream.pipeThrough(new JsonToSseTransformStream()).pipeThrough(new TextEncoderStream()),
  });
  piped
    .then(async (response) => {
      if (!response.ok) console.error(`agentstream refused the stream: ${response.status} ${await response.text()}`);
    })
    .catch((error) => console.error(`piping into agentstream failed: ${error}`));
  return createUIMessageStreamResponse({ stream: toBrowser });
}

async function readBody(request) {
  let body = "";
  for await (const chunk of request) {
    body += chunk;
    if (body.length > requestBodyBytesMax) throw new Error("body too large");
  }
  return JSON.parse(body || "{}");
}

const files = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/app.js": ["public/app.js", "text/javascript; charset=utf-8"],
};

createServer(async (request, response) => {
  const answer = (status, body) => {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify(body));
  };
  try {
    const url = new URL(request.url, "http://app");
    if (request.method === "GET" && files[url.pathname]) {
      const [file, type] = files[url.pathname];
      response.writeHead(200, { "content-type": type, "cache-control": "no-store" });
      response.end(await readFile(join(here, file)));
      return;
    }
    if (request.method === "POST" && url.pathname === "/api/session") {
      // A demo sign-in: the user is whoever the page says. Their chat, and a token to read it.
      const { user } = await readBody(request);
      if (typeof user !== "string" || !/^[\w-]+$/.test(user) || user.length > userNameCharsMax) {
        return answer(400, { error: "user must be a short name" });
      }
      const chatId = `byol-${user}`;
      answer(200, { agentstream, chatId, user, token: await mint(user, chatId, "read") });
      return;
    }
    if (request.method === "POST" && url.pathname === "/api/chat") {
      const body = await readBody(request);
      if (typeof body.id !== "string" || !body.id.startsWith("byol-") || !Array.isArray(body.messages)) {
        return answer(400, { error: "a chat request needs its id and messages" });
      }
      body.user = body.id.slice("byol-".length);
      const reply = await chat(body);
      response.writeHead(reply.status, Object.fromEntries(reply.headers));
      // A browser that goes away stops only its own branch: agentstream's goes on.
      const reader = reply.body.getReader();
      let gone = false;
      response.on("close", () => {
        gone = true;
        reader.cancel().catch(() => {});
      });
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true }));
        if (done || gone) break;
        if (!response.write(value)) {
          await new Promise((resume) => {
            response.once("drain", resume);
            response.once("close", resume);
          });
        }
      }
      response.end();
      return;
    }
    answer(404, { error: "not found" });
  } catch (error) {
    console.error(error);
    if (!response.headersSent) answer(500, { error: String(error.message ?? error) });
    else response.destroy();
  }
}).listen(port, "127.0.0.1", () => console.log(`http://127.0.0.1:${port}/`));
