// The example app (examples/react-chat) in Chromium: a React page on its own origin using
// `useChat` (@ai-sdk/react 3.0.328, ai 6.0.325) straight against agentstream, with only a
// short-lived token its backend minted for the user's one agent. Streams, resumes after a
// reload mid-answer as exactly one answer, stops, answers an approval, renews its token — and
// the same token can do nothing else.
import { expect, test, Page } from "@playwright/test";
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import {
  exampleAppPort,
  exampleServerSecret,
  exampleServerPort,
  exampleServerToken,
  exampleTokenTtlSeconds,
} from "../playwright.config";

const app = `http://127.0.0.1:${exampleAppPort}`;
const agentstream = `http://127.0.0.1:${exampleServerPort}`;
const operator = { Authorization: `Bearer ${exampleServerToken}` };

type Message = { id: string; role: string; metadata?: any; parts: any[] };

const assistant = (page: Page) => page.locator('.message[data-role="assistant"]');

async function send(page: Page, text: string) {
  await page.getByRole("textbox", { name: "message" }).fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

async function ready(page: Page) {
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "ready");
}

/** The conversation as agentstream keeps it (asked as the operator). */
async function history(chatId: string): Promise<Message[]> {
  const response = await fetch(`${agentstream}/v1/ai-sdk/chat/${chatId}/messages`, { headers: operator });
  expect(response.status).toBe(200);
  return response.json();
}

const textOf = (message: Message) =>
  message.parts.filter((part) => part.type === "text").map((part) => part.text).join("");

test("the example app streams, resumes after a reload, stops, approves and renews its token from another origin", async ({ page }) => {
  const user = `alice-${Date.now()}`;
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  await page.goto(`${app}/?user=${user}`);
  await ready(page);
  const session = await (await fetch(`${app}/api/session`, { method: "POST", body: JSON.stringify({ user }) })).json();
  const chatId: string = session.chatId;

  // 1. A reply streams in; the page is reloaded mid-answer and shows it exactly once.
  await send(page, "tell me something long");
  await expect(assistant(page).first().locator(".text")).not.toHaveText("");
  const partial = await assistant(page).first().innerText();
  await page.reload();
  // The history leaves the answer in flight out; the resumed stream brings it, once.
  await expect.poll(async () => (await history(chatId)).map((message) => message.role)).toEqual(["user", "assistant"]);
  let stored = await history(chatId);
  await expect(assistant(page).first().locator(".text")).toHaveText(textOf(stored[1]));
  await ready(page);
  await expect(assistant(page)).toHaveCount(1);
  await expect(page.locator('.message[data-role="user"]')).toHaveCount(1);
  expect(textOf(stored[1]).length).toBeGreaterThan(partial.length - "Assistant: ".length);

  // 2. Stop: the run on the server is cancelled, not only the reading.
  await send(page, "and another long one");
  await expect(assistant(page).nth(1).locator(".text")).not.toHaveText("");
  await page.getByRole("button", { name: "Stop" }).click();
  await ready(page);
  const runId = await assistant(page).nth(1).getAttribute("data-run-id");
  await expect
    .poll(async () => (await (await fetch(`${agentstream}/v1/runs/${runId}`, { headers: operator })).json()).status)
    .toBe("cancelled");

  // 3. An approval, answered in the page: the call runs and the answer goes on.
  await send(page, "/tools calculator 6*7");
  const card = page.locator('.tool[data-tool="calculator"]').last();
  await expect(card).toHaveAttribute("data-state", "approval-requested");
  await card.getByRole("button", { name: "Approve" }).click();
  await expect(card).toHaveAttribute("data-state", "output-available");
  await expect(card.locator(".output")).toHaveText(" = 42");
  await ready(page);

  // 4. The token runs out and is renewed before a request needs it: the chat goes on.
  const renewals = Number(await page.locator("body").getAttribute("data-token-renewals"));
  await page.waitForTimeout(exampleTokenTtlSeconds * 1000 - 2_000);
  await send(page, "/echo after the renewal");
  await expect(assistant(page)).toHaveCount(4);
  await expect(assistant(page).last().locator(".text")).toHaveText("after the renewal");
  await ready(page);
  expect(Number(await page.locator("body").getAttribute("data-token-renewals"))).toBeGreaterThan(renewals);

  stored = await history(chatId);
  expect(stored.filter((message) => message.role === "assistant")).toHaveLength(4);
  expect(pageErrors).toEqual([]);
});

test("the example's token reaches its user's agent and nothing else", async () => {
  const mint = async (user: string) =>
    (await fetch(`${app}/api/session`, { method: "POST", body: JSON.stringify({ user }) })).json();
  const alice = await mint(`alice-${Date.now()}`);
  const bob = await mint(`bob-${Date.now()}`);
  const as = (session: any, path: string, init: RequestInit = {}) =>
    fetch(`${agentstream}${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${session.token}`, "content-type": "application/json", Origin: app },
    });
  // Its own agent: listed, readable.
  const listed = await (await as(alice, "/v1/agents")).json();
  expect(listed.map((agent: any) => agent.id)).toEqual([alice.chatId]);
  expect((await as(alice, `/v1/ai-sdk/chat/${alice.chatId}/messages`)).status).toBe(200);
  // Another user's: as if it did not exist.
  const theirs = await as(alice, `/v1/ai-sdk/chat/${bob.chatId}/messages`);
  expect(theirs.status).toBe(404);
  expect((await theirs.json()).error.code).toBe("unknown_agent");
  // Operator operations: refused, and nothing changed.
  const deleted = await as(alice, `/v1/agents/${alice.chatId}`, { method: "DELETE" });
  expect(deleted.status).toBe(403);
  expect((await deleted.json()).error.code).toBe("operator_only");
  expect((await as(alice, "/v1/agents", { method: "POST", body: "{}" })).status).toBe(403);
  expect((await as(alice, "/v1/tokens", { method: "POST", body: "{}" })).status).toBe(403);
  expect((await as(alice, "/v1/stats")).status).toBe(403);
  expect((await as(alice, `/v1/agents/${alice.chatId}`)).status).toBe(200);
});

// The README's recipes for minting a token without the operator token (the secret instead):
// what they print is accepted, for the agent they name and nothing else.
test("tokens minted by the Node and Python recipes are accepted", async () => {
  const created = await fetch(`${agentstream}/v1/agents`, {
    method: "POST",
    headers: { ...operator, "content-type": "application/json" },
    body: JSON.stringify({ name: "recipe", owner: "carol" }),
  });
  expect(created.status).toBe(201);
  const agentId = (await created.json()).id;
  const recipes = path.join(__dirname, "..", "..", "examples", "mint-token");
  const env = { ...process.env, AGENTSTREAM_TOKEN_SECRET: exampleServerSecret };
  for (const [program, file] of [["node", "mint.mjs"], ["python3", "mint.py"]]) {
    const token = execFileSync(program, [path.join(recipes, file), "carol", agentId, "read", "60"], { env })
      .toString()
      .trim();
    const listed = await fetch(`${agentstream}/v1/agents`, { headers: { Authorization: `Bearer ${token}` } });
    expect(listed.status, file).toBe(200);
    expect((await listed.json()).map((agent: any) => agent.id), file).toEqual([agentId]);
    const write = await fetch(`${agentstream}/v1/agents/${agentId}/runs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ content: "hi" }),
    });
    expect(write.status, file).toBe(403);
  }
});
