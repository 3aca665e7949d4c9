import { expect, test } from "@playwright/test";
import { createAgent, openLive, send, waitForCompletion } from "./helpers";

// What a person sees on the pages, beyond the live stream itself: no empty cards, a readable
// header on the history page, and the no-JavaScript pages working in full.

test("a tool run shows no empty card, live or in the history", async ({ page, request }) => {
  const agentId = await createAgent(request, "cards");
  await openLive(page, agentId);
  await send(page, "/tools clock; calculator 2+3");
  await waitForCompletion(page);
  await expect(page.locator(".message.kind-tool_call")).toHaveCount(2);
  for (const url of [`/agents/${agentId}`, `/agents/${agentId}/history`]) {
    await page.goto(url);
    await expect(page.locator(".message.kind-tool_call .tool-outcome").first()).toContainText("result:");
    const texts = await page.locator(".message").allInnerTexts();
    expect(texts.length).toBeGreaterThan(3);
    for (const text of texts) expect(text.trim().length, `an empty card on ${url}`).toBeGreaterThan(0);
  }
});

test("the history page's header keeps its parts apart", async ({ page, request }) => {
  const agentId = await createAgent(request, "header");
  await openLive(page, agentId);
  await send(page, "/echo one two three");
  await waitForCompletion(page);
  await page.goto(`/agents/${agentId}/history`);
  const header = await page.locator(".status-bar").innerText();
  expect(header).toMatch(/run: completed\s+tokens in \d+ · out \d+\s+seq \d+/);
  expect(header).not.toMatch(/completedtokens|\dseq/);
});

test.describe("without JavaScript", () => {
  test.use({ javaScriptEnabled: false });

  test("the agents page lists the agents, and a refused form answers with a page", async ({ page, request }) => {
    const agentId = await createAgent(request, "listed without script");
    await page.goto("/");
    await expect(page.locator(`ul.agents a[href="/agents/${agentId}"]`)).toHaveText("listed without script");

    // An empty message: refused, and said as a page (not the API's JSON), with the way back.
    await page.goto(`/agents/${agentId}`);
    await page.locator(".composer button[type=submit]").click();
    await expect(page.locator("h1")).toHaveText("That did not go through");
    await expect(page.locator("p.error")).toContainText("content must not be empty");
    await expect(page.locator(`a[href="/agents/${agentId}"]`)).toHaveText("Go back");
  });
});

test("each run has a header: when, how it ended, how long, what it cost", async ({ page, request }) => {
  const agentId = await createAgent(request, "run headers");
  await openLive(page, agentId);
  await send(page, "/echo first");
  await waitForCompletion(page);
  await send(page, "/echo second");
  const headers = page.locator(".run-header");
  await expect(headers).toHaveCount(2);
  await waitForCompletion(page);
  for (const header of await headers.all()) {
    await expect(header).toHaveAttribute("data-status", "completed");
    await expect(header.locator(".run-outcome")).toHaveText("completed");
    await expect(header.locator(".run-duration")).toHaveText(/^\d+(\.\d)? (ms|s)$/);
    await expect(header.locator(".run-usage")).toHaveText(/^\d+ in · \d+ out tokens$/);
    // Relative once the page runs; the exact time on hover.
    await expect(header.locator("time")).toHaveText(/just now|\d+ s ago/);
    await expect(header.locator("time")).toHaveAttribute("title", /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$/);
  }
  // The server-rendered history has the same headers, with absolute times.
  const history = await request.get(`/agents/${agentId}/history`);
  const html = await history.text();
  expect(html.match(/class="run-header"/g)?.length).toBe(2);
  expect(html).toMatch(/\d\d:\d\d:\d\d UTC<\/time>/);
});

test("the bundle goes out compressed, and a reload revalidates instead of downloading it again", async ({ request }) => {
  const raw = await request.get("/pkg/agentstream.wasm", { headers: { "accept-encoding": "identity" } });
  expect(raw.status()).toBe(200);
  const plain = (await raw.body()).length;
  for (const encoding of ["br", "gzip"]) {
    const response = await request.get("/pkg/agentstream.wasm", { headers: { "accept-encoding": encoding } });
    expect(response.headers()["content-encoding"]).toBe(encoding);
    expect(Number(response.headers()["content-length"])).toBeLessThan(plain / 2);
    expect(response.headers()["vary"].split(", ")).toContain("accept-encoding");
    expect(response.headers()["cache-control"]).toBe("no-cache");
  }
  // A browser asks again with the Last-Modified of what it holds (the brotli copy).
  const held = await request.get("/pkg/agentstream.wasm", { headers: { "accept-encoding": "br" } });
  const modified = held.headers()["last-modified"];
  const again = await request.get("/pkg/agentstream.wasm", {
    headers: { "accept-encoding": "br", "if-modified-since": modified },
  });
  expect(again.status()).toBe(304);
});

// Screenshots of the live view mid-run, the history page and the inspector at a desktop's and a
// phone's width, kept in the test output folder (test-results/); each page is checked for empty
// cards and for anything running off the side.
test("screenshots at desktop and phone widths: no empty card, nothing off the side", async ({ page, request }, testInfo) => {
  const agentId = await createAgent(request, "screenshots");
  await openLive(page, agentId);
  await send(page, "/tools calculator 6*7; slow 2; clock");
  // Mid-run: the slow tool still running (the quick ones may be too, for a moment).
  await expect(page.locator(".tool-outcome.running").first()).toBeVisible();
  const check = async (name: string) => {
    for (const [width, height, device] of [[1280, 800, "desktop"], [390, 844, "phone"]] as const) {
      await page.setViewportSize({ width, height });
      const texts = await page.locator(".message").allInnerTexts();
      for (const text of texts) expect(text.trim().length, `an empty card on the ${name}`).toBeGreaterThan(0);
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(overflow, `the ${name} runs off the side at ${width} px`).toBeLessThanOrEqual(0);
      await page.screenshot({ path: testInfo.outputPath(`${name}-${device}.png`), fullPage: true });
    }
  };
  await check("live-view-mid-run");
  await waitForCompletion(page);
  const inspect = await page.locator(".run-header a.run-inspect").last().getAttribute("href");
  await page.goto(`/agents/${agentId}/history`);
  await check("history");
  await page.goto(inspect!);
  await expect(page.locator(".lane").first()).toBeVisible();
  await check("inspector");
});
