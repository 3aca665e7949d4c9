import { expect, test } from "@playwright/test";
import {
  createAgent,
  numberedWords,
  openLive,
  send,
  serverReplies,
  waitForCompletion,
} from "./helpers";

// The scripted provider replies to "/echo <text>" with exactly <text>, one word per token, paced
// by the server's token delay (25 ms in these tests).

test("cut the network mid-stream: the page says so, reconnects and converges", async ({
  page,
  context,
  request,
}) => {
  const agentId = await createAgent(request, "offline");
  await openLive(page, agentId);
  const words = numberedWords(160);
  await send(page, `/echo ${words}`);
  const reply = page.locator(".message.kind-text .body");
  await expect(reply).toContainText("w5");

  await context.setOffline(true);
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "reconnecting");
  await page.waitForTimeout(2_500);
  await context.setOffline(false);

  await waitForCompletion(page);
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
  const [serverText] = await serverReplies(request, agentId);
  expect(serverText).toBe(words);
  await expect(reply).toHaveText(serverText);
});

test("reload mid-stream: the reply converges to exactly the server's text", async ({
  page,
  request,
}) => {
  const agentId = await createAgent(request, "reload");
  await openLive(page, agentId);
  const words = numberedWords(120);
  await send(page, `/echo ${words}`);
  await expect(page.locator(".message.kind-text .body")).toContainText("w10");
  await page.reload();
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
  await waitForCompletion(page);
  const [serverText] = await serverReplies(request, agentId);
  expect(serverText).toBe(words);
  await expect(page.locator(".message.kind-text .body")).toHaveText(serverText);
});

test("two tabs on one agent show the identical reply", async ({ context, request }) => {
  const agentId = await createAgent(request, "two tabs");
  const first = await context.newPage();
  const second = await context.newPage();
  await openLive(first, agentId);
  await openLive(second, agentId);
  await send(first, "Hello from the first tab");
  await waitForCompletion(first);
  await waitForCompletion(second);
  const [serverText] = await serverReplies(request, agentId);
  await expect(first.locator(".message.kind-text .body")).toHaveText(serverText);
  await expect(second.locator(".message.kind-text .body")).toHaveText(serverText);
  await expect(second.locator(".message.kind-user .body")).toHaveText("Hello from the first tab");
});

test("the history page shows the conversation with JavaScript disabled", async ({
  page,
  browser,
  request,
}) => {
  const agentId = await createAgent(request, "history");
  await openLive(page, agentId);
  await send(page, "What happened?");
  await waitForCompletion(page);
  const [serverText] = await serverReplies(request, agentId);

  const noScript = await browser.newContext({ javaScriptEnabled: false });
  const reader = await noScript.newPage();
  await reader.goto(`/agents/${agentId}/history`);
  await expect(reader.getByRole("heading", { name: "history · history" })).toBeVisible();
  await expect(reader.locator(".message.kind-user .body")).toHaveText("What happened?");
  await expect(reader.locator(".message.kind-text .body")).toHaveText(serverText);
  await expect(reader.locator(".message.kind-thinking .body")).not.toBeEmpty();
  await expect(reader.locator(".run-status")).toHaveAttribute("data-status", "completed");
  await noScript.close();
});

test("markup in a reply is shown as text and runs nothing", async ({ page, request }) => {
  const agentId = await createAgent(request, "xss");
  await openLive(page, agentId);
  const markup =
    `<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> ` +
    `<b>bold?</b>`;
  await send(page, `/echo ${markup}`);
  await waitForCompletion(page);
  const reply = page.locator(".message.kind-text .body");
  await expect(reply).toHaveText(markup);
  await expect(page.locator(".timeline img, .timeline script, .timeline b")).toHaveCount(0);
  expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();

  // The server-rendered pages escape it too.
  await page.goto(`/agents/${agentId}/history`);
  await expect(page.locator(".message.kind-text .body")).toHaveText(markup);
  await expect(page.locator(".timeline img, .timeline script, .timeline b")).toHaveCount(0);
  expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
});

test("scrolling up stops auto-scroll; the jump button follows again", async ({
  page,
  request,
}) => {
  const agentId = await createAgent(request, "scroll");
  await openLive(page, agentId);
  await send(page, `/echo ${numberedWords(220, "\n")}`);
  const scroller = page.locator(".timeline-scroll");
  const distanceFromBottom = () =>
    scroller.evaluate((element) => element.scrollHeight - element.scrollTop - element.clientHeight);

  // While following, the view stays at the bottom as the reply grows past the viewport.
  await expect
    .poll(() => scroller.evaluate((element) => element.scrollHeight > element.clientHeight * 2))
    .toBe(true);
  await expect.poll(distanceFromBottom).toBeLessThan(60);

  // The reader scrolls up: the view stays where they put it while output keeps coming.
  // Chromium scrolls a wheel on its compositor thread and hands the main thread a delta: when the
  // view's own follow-scroll lands in between, the first wheel stops a line or two short of the
  // top (seen: 24 or 48 px). Following stops at that wheel, so the second reaches the top.
  await scroller.hover();
  await page.mouse.wheel(0, -100_000);
  await expect.poll(() => scroller.evaluate((element) => element.scrollTop)).toBeLessThan(100);
  await page.mouse.wheel(0, -100_000);
  await expect.poll(() => scroller.evaluate((element) => element.scrollTop)).toBeLessThan(5);
  const heightBefore = await scroller.evaluate((element) => element.scrollHeight);
  await expect
    .poll(() => scroller.evaluate((element) => element.scrollHeight))
    .toBeGreaterThan(heightBefore + 100);
  expect(await scroller.evaluate((element) => element.scrollTop)).toBeLessThan(5);

  // Jumping back follows the output again.
  await page.getByRole("button", { name: /Jump to latest/ }).click();
  await waitForCompletion(page);
  await expect.poll(distanceFromBottom).toBeLessThan(60);
  await expect(page.getByRole("button", { name: /Jump to latest/ })).toHaveCount(0);
});

test("the live view arrives server-rendered and hydrates without refetching history", async ({
  page,
  request,
}) => {
  const agentId = await createAgent(request, "ssr");
  await openLive(page, agentId);
  await send(page, "Render me on the server");
  await waitForCompletion(page);
  const [serverText] = await serverReplies(request, agentId);

  // The HTML itself already holds the conversation.
  const html = await (await request.get(`/agents/${agentId}`)).text();
  expect(html).toContain("Render me on the server");
  expect(html).toContain(serverText.split(" ").slice(0, 4).join(" "));

  // Hydration asks only for what came after the server-rendered cursor, never the whole log:
  // its socket opens subscribed from the page's last seq, and nothing is read over REST.
  const eventRequests: string[] = [];
  const sockets: string[] = [];
  page.on("request", (sent) => {
    if (sent.url().includes("/events")) eventRequests.push(sent.url());
  });
  page.on("websocket", (socket) => sockets.push(socket.url()));
  const head = (await (await request.get(`/v1/agents/${agentId}/events?limit=1`)).json()).head_seq;
  expect(head).toBeGreaterThan(0);
  await page.reload();
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
  await expect(page.locator(".message.kind-text .body")).toHaveText(serverText);
  expect(sockets).toEqual([
    expect.stringContaining(`/v1/ws?subscribe=${agentId}&since=${head}&coalesce=true`),
  ]);
  expect(eventRequests).toEqual([]);
});

test("without JavaScript the forms still create an agent and send a message", async ({
  browser,
  request,
}) => {
  const noScript = await browser.newContext({ javaScriptEnabled: false });
  const page = await noScript.newPage();
  await page.goto("/");
  await page.getByPlaceholder("New agent name").fill("plain html");
  await page.getByRole("button", { name: "Create agent" }).click();
  await expect(page).toHaveURL(/\/agents\/[0-9a-f-]{36}$/);
  const agentId = page.url().split("/").pop()!;
  await page.locator(".composer textarea").fill("/echo sent by a form");
  await page.getByRole("button", { name: "Send" }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${agentId}$`));
  await expect
    .poll(async () => (await serverReplies(request, agentId)).join(""), { timeout: 20_000 })
    .toBe("sent by a form");
  await page.goto(`/agents/${agentId}/history`);
  await expect(page.locator(".message.kind-text .body")).toHaveText("sent by a form");
  await noScript.close();
});

test("the stop button cancels a long reply and the page shows it cancelled", async ({
  page,
  request,
}) => {
  const agentId = await createAgent(request, "cancel");
  await openLive(page, agentId);
  const words = numberedWords(400);
  await send(page, `/echo ${words}`);
  const reply = page.locator(".message.kind-text .body");
  await expect(reply).toContainText("w10");
  await page.getByRole("button", { name: "Stop" }).click();
  await expect(page.locator(".run-status")).toHaveAttribute("data-status", "cancelled");
  await expect(page.getByRole("button", { name: "Stop" })).toHaveCount(0);

  // What was produced before the stop is kept, on the page and in the log, and nothing after.
  const [serverText] = await serverReplies(request, agentId);
  expect(words.startsWith(serverText)).toBe(true);
  expect(serverText.length).toBeLessThan(words.length);
  await expect(reply).toHaveText(serverText);
});

test("a tool-using reply shows tool cards with inputs, progress and results", async ({
  page,
  request,
}) => {
  const agentId = await createAgent(request, "tools");
  await openLive(page, agentId);
  await send(page, "/tools calculator 6*7; slow 2");
  const cards = page.locator(".message.kind-tool_call");
  await expect(cards).toHaveCount(2);
  const calculator = cards.filter({ hasText: "calculator" });
  const slow = cards.filter({ hasText: "slow" });
  await expect(slow.locator(".tool-outcome.running")).toBeVisible();
  await expect(calculator.locator(".tool-input")).toContainText('"expression": "6*7"');
  await expect(calculator.locator(".tool-outcome")).toHaveText("result: 42");
  await waitForCompletion(page);
  await expect(slow.locator(".tool-outcome")).toHaveText("result: waited 2 s");
  // The calls the model made together are drawn as one group, said in a person's words.
  await expect(page.locator(".group-label")).toHaveText("called 2 tools at once");
  await expect(page.locator(".block.in-group")).toHaveCount(2);
  await expect(page.locator(".thread-label")).toHaveCount(0);
  // The model's final answer reads the results.
  await expect(page.locator(".message.kind-text .body").last()).toContainText("42");
});
