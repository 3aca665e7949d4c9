// An app that keeps its own agent loop (examples/bring-your-own-loop: a real `streamText` from
// ai 6.0.325 against the AI SDK's mock model, with its own tool) and pipes the UI message stream
// into agentstream. In Chromium, `useChat` (@ai-sdk/react 3.0.328) sends to the app and resumes
// from agentstream: a reload mid-answer shows the answer once, whole. Then the same pipe from the
// oldest and newest ai 5 we support, in Node.
import { expect, test, Page } from "@playwright/test";
import * as path from "node:path";
import { loopAppPort, loopReplyWords, loopServerPort, loopServerToken } from "../playwright.config";

const app = `http://127.0.0.1:${loopAppPort}`;
const agentstream = `http://127.0.0.1:${loopServerPort}`;
const operator = { Authorization: `Bearer ${loopServerToken}` };
const expectedReply = Array.from({ length: loopReplyWords }, (_, index) => `word${index} `).join("");

type Message = { id: string; role: string; parts: any[] };
const textOf = (message: Message) =>
  message.parts.filter((part) => part.type === "text").map((part) => part.text).join("");
const assistant = (page: Page) => page.locator('.message[data-role="assistant"]');

async function history(chatId: string): Promise<Message[]> {
  const response = await fetch(`${agentstream}/v1/ai-sdk/chat/${chatId}/messages`, { headers: operator });
  expect(response.status).toBe(200);
  return response.json();
}

test("an app's own streamText piped in: useChat resumes it from agentstream after a reload, exactly once", async ({ page }) => {
  const user = `bob-${Date.now()}`;
  const chatId = `byol-${user}`;
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  await page.goto(`${app}/?user=${user}`);
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "ready");
  await page.getByRole("textbox", { name: "message" }).fill("what time is it?");
  await page.getByRole("button", { name: "Send" }).click();
  // The app's own loop answers: its tool, then its words, streamed from the app.
  await expect(assistant(page).first().locator(".text")).toContainText("word3 ");
  const partial = await assistant(page).first().locator(".text").innerText();
  expect(partial.length).toBeLessThan(expectedReply.length);

  // A reload mid-answer: the history (from agentstream) leaves the answer in flight out, the
  // resumed stream (from agentstream) brings it from its start, once.
  await page.reload();
  await expect(assistant(page)).toHaveCount(1);
  await expect(assistant(page).first().locator(".text")).toHaveText(expectedReply.trimEnd(), { timeout: 30_000 });
  await expect(page.locator('.message[data-role="user"]')).toHaveCount(1);
  await expect(page.locator('.tool[data-tool="clock"]')).toHaveAttribute("data-state", "output-available");
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "ready");

  // agentstream keeps the conversation: the user's message and the whole answer.
  const stored = await history(chatId);
  expect(stored.map((message) => message.role)).toEqual(["user", "assistant"]);
  expect(textOf(stored[0])).toBe("what time is it?");
  expect(textOf(stored[1])).toBe(expectedReply);
  // The run is the app's, written through the producer API.
  const runId = stored[1].metadata?.run_id ?? (stored[1] as any).metadata?.runId;
  if (runId) {
    const run = await (await fetch(`${agentstream}/v1/runs/${runId}`, { headers: operator })).json();
    expect(run.status).toBe("completed");
  }
  expect(pageErrors).toEqual([]);
});

/** The UI message stream of a `streamText` of the given `ai` package, with a model that
 * streams `words` (a LanguageModelV2 of our own: ai 5's `ai/test` needs msw, not installed). */
async function streamOf(aiPath: string, words: string[]) {
  const ai = await import(path.join(aiPath, "dist", "index.mjs"));
  const model = {
    specificationVersion: "v2",
    provider: "mock",
    modelId: "mock",
    supportedUrls: {},
    doGenerate: async () => {
      throw new Error("streaming only");
    },
    doStream: async () => ({
      stream: ai.simulateReadableStream({
        chunks: [
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "t" },
          ...words.map((delta) => ({ type: "text-delta", id: "t", delta })),
          { type: "text-end", id: "t" },
          { type: "finish", finishReason: "stop", usage: { inputTokens: 3, outputTokens: words.length, totalTokens: 3 + words.length } },
        ],
      }),
    }),
  };
  const result = ai.streamText({ model, prompt: "count" });
  return result.toUIMessageStreamResponse().body as ReadableStream<Uint8Array>;
}

for (const [label, aiPath] of [
  ["ai 5.0.2 (the oldest)", path.join(__dirname, "..", "node_modules", "ai-sdk-react-v2-oldest", "node_modules", "ai")],
  ["ai 5.0.100", path.join(__dirname, "..", "node_modules", "ai")],
]) {
  test(`${label}: toUIMessageStreamResponse() piped in becomes the chat's answer`, async () => {
    const chatId = `pipe-${label.replace(/\W+/g, "-")}-${Date.now()}`;
    const words = ["one ", "two ", "three"];
    const response = await fetch(`${agentstream}/v1/ai-sdk/chat/${chatId}/produce`, {
      method: "POST",
      // @ts-ignore: Node's fetch streams a request body with `duplex: "half"`
      duplex: "half",
      headers: { ...operator, "content-type": "text/event-stream", "agentstream-user-text": encodeURIComponent("count") },
      body: await streamOf(aiPath, words),
    });
    expect(response.status, await response.clone().text()).toBe(200);
    expect((await response.json()).finished).toBe(true);
    const stored = await history(chatId);
    expect(stored.map((message) => message.role)).toEqual(["user", "assistant"]);
    expect(textOf(stored[1])).toBe(words.join(""));
  });
}
