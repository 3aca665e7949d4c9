import { expect, test } from "@playwright/test";
import * as net from "node:net";
import { createAgent, numberedWords } from "./helpers";

/** A TCP proxy in front of the server whose open connections the test can cut at will. */
async function cuttableProxy(target: URL) {
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      socket.on("error", () => socket.destroy());
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    /** Resets every connection open right now, as a network failure would. */
    cut: () => open.forEach((socket) => socket.resetAndDestroy()),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// The native SSE tail in a real browser: EventSource resumes by itself after the connection is
// cut, sending Last-Event-ID, and the events it delivers are exactly the log, once each, in order.
test("a browser EventSource resumes by itself after the connection is cut", async ({
  page,
  request,
  baseURL,
}) => {
  const agentId = await createAgent(request, "eventsource");
  const proxy = await cuttableProxy(new URL(baseURL!));
  await page.goto(`${proxy.url}/`);
  await page.evaluate((agentId) => {
    const state = { seqs: [] as number[], opens: 0, errors: 0, ended: false };
    (window as any).sse = state;
    const source = new EventSource(`/v1/agents/${agentId}/events/stream`);
    source.onopen = () => state.opens++;
    source.onerror = () => state.errors++;
    source.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (message.lastEventId !== String(event.seq)) throw new Error("the SSE id is not the seq");
      state.seqs.push(event.seq);
      if (event.kind === "run_completed") {
        state.ended = true;
        source.close();
      }
    };
  }, agentId);
  await page.waitForFunction(() => (window as any).sse.opens === 1);

  const response = await request.post(`/v1/agents/${agentId}/runs`, {
    data: { content: `/echo ${numberedWords(200)}` },
  });
  expect(response.status()).toBe(202);
  await page.waitForFunction(() => (window as any).sse.seqs.length >= 20);
  proxy.cut();
  await page.waitForFunction(() => (window as any).sse.errors > 0);
  const seenWhenCut = await page.evaluate(() => (window as any).sse.seqs.length);
  await page.waitForFunction(() => (window as any).sse.ended, null, { timeout: 30_000 });
  await proxy.close();

  const sse = await page.evaluate(() => (window as any).sse);
  expect(sse.opens).toBeGreaterThanOrEqual(2);
  expect(seenWhenCut).toBeLessThan(sse.seqs.length);
  const head = (await (await request.get(`/v1/agents/${agentId}/events?since=0&limit=1`)).json()).head_seq;
  expect(sse.seqs).toEqual(Array.from({ length: head }, (_, index) => index + 1));
});
