import { expect, Request, test } from "@playwright/test";
import { fastPort, fastReplyTokens } from "../playwright.config";
import { createAgent, openLive, send, serverReplies, waitForCompletion } from "./helpers";

// A server whose scripted reply is 10 000 tokens, unpaced: thousands of events a second, more
// than a browser reads frame by frame. The live view asks the server to coalesce, so what waits
// for it arrives merged; the reply must still be exactly the server's.
test.use({ baseURL: `http://127.0.0.1:${fastPort}` });

test("a live view that falls behind a fast stream gets merged appends and the exact reply", async ({
  page,
  request,
}) => {
  const received = { events: 0, merged: 0, seqs: 0 };
  page.on("websocket", (socket) => {
    socket.on("framereceived", ({ payload }) => {
      const message = JSON.parse(typeof payload === "string" ? payload : payload.toString());
      if (message.type !== "events") return;
      for (const event of message.events) {
        received.events++;
        const first = event.coalesced_from ?? event.seq;
        received.seqs += event.seq - first + 1;
        if (event.coalesced_from !== undefined) received.merged++;
      }
    });
  });
  const agentId = await createAgent(request, "fast");
  await openLive(page, agentId);
  await send(page, "stream fast");
  await waitForCompletion(page);

  const [serverText] = await serverReplies(request, agentId);
  expect(serverText.split(" ").length).toBeGreaterThanOrEqual(fastReplyTokens);
  await expect(page.locator(".message.kind-text .body")).toHaveText(serverText);
  // The view fell behind and the server merged what waited for it: fewer events arrived than
  // the seqs they stand for.
  expect(received.merged).toBeGreaterThan(0);
  expect(received.events).toBeLessThan(received.seqs);
});

test("a view that was offline while a long reply was written catches up over REST, pages at once", async ({
  page,
  context,
  request,
}) => {
  const agentId = await createAgent(request, "away");
  await openLive(page, agentId);

  // The log pages the view reads over REST after it comes back, and how many were in flight at
  // once (the view reads the pages after the first several at a time: their cursors are known).
  let tracking = false;
  const inFlight = new Set<Request>();
  const pages: string[] = [];
  let mostInFlight = 0;
  page.on("request", (request) => {
    if (!tracking || !/\/v1\/agents\/[^/]+\/events\?/.test(request.url())) return;
    pages.push(request.url());
    inFlight.add(request);
    mostInFlight = Math.max(mostInFlight, inFlight.size);
  });
  page.on("requestfinished", (request) => inFlight.delete(request));
  page.on("requestfailed", (request) => inFlight.delete(request));

  await context.setOffline(true);
  await expect(page.locator(".connection")).not.toHaveAttribute("data-state", "live");
  const started = await request.post(`/v1/agents/${agentId}/runs`, {
    data: { content: "write while the reader is away" },
  });
  expect(started.status()).toBe(202);
  await expect
    .poll(async () => ((await serverReplies(request, agentId))[0] ?? "").split(" ").length, {
      timeout: 30_000,
    })
    .toBeGreaterThanOrEqual(fastReplyTokens);

  tracking = true;
  await context.setOffline(false);
  await waitForCompletion(page);
  const [serverText] = await serverReplies(request, agentId);
  await expect(page.locator(".message.kind-text .body")).toHaveText(serverText);
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");

  // Over 10 000 events behind: at least ten pages of 1 000, merged, several in flight at once.
  expect(pages.length).toBeGreaterThanOrEqual(10);
  expect(pages.every((url) => url.includes("coalesce=true"))).toBe(true);
  expect(mostInFlight).toBeGreaterThan(1);
});

// How fast the inspector draws a long run (server render of the whole fold, then hydration):
// printed for the closing figures, not asserted — speed belongs to the benchmarks.
test("the inspector of a 10 000-token run", async ({ page, request }) => {
  const agentId = await createAgent(request, "inspect a long run");
  await openLive(page, agentId);
  await send(page, "stream fast");
  await waitForCompletion(page);
  const href = await page.locator(".run-header a.run-inspect").last().getAttribute("href");
  const log = await (await request.get(`/v1/agents/${agentId}/events?limit=1`)).json();
  const started = Date.now();
  await page.goto(href!);
  await expect(page.locator(".inspector")).toHaveAttribute("data-status", "completed");
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
  const ms = Date.now() - started;
  await expect(page.locator(".lane.kind-model .lane-figures").first()).toContainText("tokens/s");
  console.log(`inspector of a run of ${log.head_seq} events: ${ms} ms to drawn and live`);
  test.info().annotations.push({ type: "inspector-ms", description: `${log.head_seq} events: ${ms} ms` });
});
