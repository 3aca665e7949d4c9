import { APIRequestContext, expect, Page, test } from "@playwright/test";
import { createAgent, openLive, waitForCompletion } from "./helpers";

// Messages drawn as Markdown (app/src/markdown): the same DOM live and on the history page,
// hostile input inert, a streamed answer never showing a raw fence, and nothing off the side.
// The scripted provider answers "/echo <text>" with exactly <text>, word by word.

const CORPUS = [
  "# Release notes",
  "",
  "Some **bold**, *emphasis*, ~~struck~~ and `inline code`, see [the docs](https://example.com/docs).",
  "",
  "- first item",
  "- [x] a done task",
  "",
  "1. one",
  "2. two",
  "",
  "| name | value |",
  "|:-----|------:|",
  "| a    |     1 |",
  "",
  "```rust",
  "fn main() {",
  "    let answer = 42; // the answer",
  '    println!("{answer}");',
  "}",
  "```",
  "",
  "> quoted",
].join("\n");

const CODE = ['fn main() {', "    let answer = 42; // the answer", '    println!("{answer}");', "}", ""].join("\n");

async function startRun(request: APIRequestContext, agentId: string, content: string) {
  const response = await request.post(`/v1/agents/${agentId}/runs`, { data: { content } });
  expect(response.status()).toBe(202);
}

/** The rendered HTML without the framework's hydration markers (comments). */
async function markup(page: Page, selector: string): Promise<string> {
  const html = await page.locator(selector).innerHTML();
  return html.replace(/<!--[^]*?-->/g, "");
}

test("Markdown renders live and on the history page, with the same DOM", async ({ page, request }) => {
  const agentId = await createAgent(request, "markdown");
  await openLive(page, agentId);
  await startRun(request, agentId, `/echo ${CORPUS}`);
  await waitForCompletion(page);
  const body = page.locator(".message.kind-text .markdown");
  await expect(body.locator("h1")).toHaveText("Release notes");
  await expect(body.locator("strong")).toHaveText("bold");
  await expect(body.locator("em")).toHaveText("emphasis");
  await expect(body.locator("del")).toHaveText("struck");
  await expect(body.locator("p code")).toHaveText("inline code");
  const link = body.locator('a[href="https://example.com/docs"]');
  await expect(link).toHaveText("the docs");
  await expect(link).toHaveAttribute("rel", "noopener noreferrer nofollow");
  await expect(body.locator("ul li")).toHaveCount(2);
  await expect(body.locator("input[type=checkbox][disabled]")).toBeChecked();
  await expect(body.locator("ol li")).toHaveText(["one", "two"]);
  await expect(body.locator("table th")).toHaveText(["name", "value"]);
  await expect(body.locator("table td.right")).toHaveText("1");
  await expect(body.locator(".code .code-language")).toHaveText("rust");
  await expect(body.locator("pre code.language-rust .tok-keyword").first()).toHaveText("fn");
  await expect(body.locator("pre code .tok-comment")).toHaveText("// the answer");
  await expect(body.locator("blockquote")).toHaveText("quoted");
  // The user's message is Markdown too.
  await expect(page.locator(".message.kind-user .markdown strong")).toHaveText("bold");

  const live = await markup(page, ".message.kind-text .markdown");
  await page.goto(`/agents/${agentId}/history`);
  await expect(page.locator(".message.kind-text .markdown h1")).toHaveText("Release notes");
  expect(await markup(page, ".message.kind-text .markdown")).toBe(live);
  // And a reload of the live view (server-rendered, then hydrated) draws it the same again.
  await page.goto(`/agents/${agentId}`);
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
  expect(await markup(page, ".message.kind-text .markdown")).toBe(live);
  // The run inspector's hover draws a model call's text the same way.
  await page.locator(".run-header a.run-inspect").last().click();
  await page.locator(".lane.kind-model").first().hover();
  await expect(page.locator(".lane-text h1")).toHaveText("Release notes");
  await expect(page.locator(".lane-text pre code .tok-keyword").first()).toHaveText("fn");
});

test("when the run ends, the last block is drawn as written, not as repaired", async ({ page, request }) => {
  const agentId = await createAgent(request, "unclosed");
  await openLive(page, agentId);
  // Unclosed `**` at the end: repaired (bold) while streaming, literal once the run ended.
  await startRun(request, agentId, "/echo 2 * 3 is six, and **not closed");
  await waitForCompletion(page);
  const body = page.locator(".message.kind-text .markdown");
  await expect(body).toHaveText("2 * 3 is six, and **not closed");
  await expect(body.locator("strong")).toHaveCount(0);
  const live = await markup(page, ".message.kind-text .markdown");
  await page.goto(`/agents/${agentId}/history`);
  expect(await markup(page, ".message.kind-text .markdown")).toBe(live);
});

test("the copy button copies the code exactly", async ({ page, context, request }) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  const agentId = await createAgent(request, "copy code");
  await openLive(page, agentId);
  await startRun(request, agentId, `/echo ${CORPUS}`);
  await waitForCompletion(page);
  await page.locator(".message.kind-text .copy-code").click();
  await expect(page.locator(".message.kind-text .copy-code")).toHaveText("Copied");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(CODE);
  // The history page is HTML with one island, its timeline: hydrated, its buttons copy too —
  // the code, and a message's Markdown as the log has it.
  await page.evaluate(() => navigator.clipboard.writeText(""));
  await page.goto(`/agents/${agentId}/history`);
  await page.locator(".message.kind-text .copy-code").click();
  await expect(page.locator(".message.kind-text .copy-code")).toHaveText("Copied");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(CODE);
  await page.locator(".message.kind-text .copy-message").click();
  await expect(page.locator(".message.kind-text .copy-message")).toHaveText("Copied");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(CORPUS);
});

const HOSTILE = [
  "<script>window.__pwned = 'script'</script>",
  "",
  '<img src="http://127.0.0.2:9/x.png" onerror="window.__pwned = \'onerror\'">',
  "",
  "[click me](javascript:window.__pwned='link')",
  "[entity](&#106;avascript:window.__pwned='entity')",
  "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
  "",
  "![tracking pixel](http://127.0.0.2:9/pixel.png)",
  "",
  '<a href="javascript:window.__pwned=\'raw\'">raw link</a>',
  "",
  "<iframe src=\"http://127.0.0.2:9/\"></iframe>",
  "",
  "```\"><script>window.__pwned='fence'</script>",
  "code",
  "```",
  "",
  "- ".repeat(200) + "deep",
  "",
  "x".repeat(20_000),
].join("\n");

test("hostile Markdown executes nothing and fetches nothing", async ({ page, request, baseURL }) => {
  const dialogs: string[] = [];
  const foreign: string[] = [];
  const errors: string[] = [];
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on("request", (request) => {
    if (!request.url().startsWith(baseURL!) && !request.url().startsWith("ws://")) foreign.push(request.url());
  });
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(error.message));
  const agentId = await createAgent(request, "hostile");
  await openLive(page, agentId);
  await startRun(request, agentId, `/echo ${HOSTILE}`);
  await waitForCompletion(page);
  for (const url of [`/agents/${agentId}`, `/agents/${agentId}/history`]) {
    await page.goto(url);
    const body = page.locator(".message.kind-text .markdown");
    await expect(body).toContainText("<script>window.__pwned = 'script'</script>");
    await expect(body).toContainText("deep");
    expect(await page.evaluate(() => (window as unknown as { __pwned?: string }).__pwned)).toBeUndefined();
    await expect(page.locator(".markdown img, .markdown iframe, .markdown script")).toHaveCount(0);
    await expect(page.locator('.markdown a[href^="javascript:"], .markdown a[href^="data:"]')).toHaveCount(0);
    await expect(body.locator(".image")).toContainText("tracking pixel");
  }
  expect(dialogs).toEqual([]);
  expect(foreign).toEqual([]);
  expect(errors).toEqual([]);
});

test("a streamed answer never shows a raw fence, and finishes highlighted", async ({ page, request }) => {
  const agentId = await createAgent(request, "streamed fence");
  await openLive(page, agentId);
  const lines = Array.from({ length: 60 }, (_, index) => `    let value_${index} = ${index}; // line ${index}`);
  const answer = ["Intro **text**", "", "```rust", "fn main() {", ...lines, "}", "```", "", "Done."].join("\n");
  await startRun(request, agentId, `/echo ${answer}`);
  const body = page.locator(".message.kind-text .markdown");
  // Mid-stream: the code block is open, drawn as code, and no fence is shown.
  await expect(body.locator("pre code .tok-comment").first()).toBeVisible();
  await expect(page.locator(".run-status")).toHaveAttribute("data-status", "running");
  for (let sample = 0; sample < 5; sample += 1) {
    const text = await body.innerText();
    expect(text).not.toContain("```");
    expect(text).not.toContain("**");
    await page.waitForTimeout(150);
  }
  await waitForCompletion(page);
  await expect(body.locator("p").last()).toHaveText("Done.");
  expect(await body.innerText()).not.toContain("```");
});

test("screenshots at desktop and phone widths: long words wrap, code scrolls inside itself", async ({ page, request }, testInfo) => {
  const agentId = await createAgent(request, "markdown screenshots");
  await openLive(page, agentId);
  const long = "unbroken".repeat(600);
  const content = `${CORPUS}\n\nA long word: ${long}\n\n\`\`\`sh\necho ${"wide ".repeat(80)}\n\`\`\``;
  await startRun(request, agentId, `/echo ${content}`);
  await waitForCompletion(page);
  for (const [device, width] of [["desktop", 1280], ["phone", 390]] as const) {
    await page.setViewportSize({ width, height: 900 });
    for (const url of [`/agents/${agentId}`, `/agents/${agentId}/history`]) {
      await page.goto(url);
      await expect(page.locator(".message.kind-text .markdown h1")).toHaveText("Release notes");
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow, `sideways scroll on ${url} at ${width} px`).toBeLessThanOrEqual(0);
      const name = url.endsWith("history") ? "history" : "live";
      await page.screenshot({ path: testInfo.outputPath(`markdown-${name}-${device}.png`), fullPage: true });
    }
  }
});

test("pages send a script policy, and the app runs under it", async ({ page, request }) => {
  const agentId = await createAgent(request, "policy");
  const response = await page.goto(`/agents/${agentId}`);
  const policy = response!.headers()["content-security-policy"];
  expect(policy).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9+/=_-]+' 'wasm-unsafe-eval'/);
  expect(policy).toContain("object-src 'none'");
  expect(policy).toContain("frame-ancestors 'none'");
  // Hydrated (the connection state comes from the wasm app) under that policy.
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
});
