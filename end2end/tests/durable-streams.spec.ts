// The Durable Streams protocol's own client — `stream()` from @durable-streams/client, pinned at
// the oldest (0.1.5) and newest (0.2.7) — follows an agent's run through its log's stream
// (`/v1/streams/agents/{id}`), goes away mid-run, and resumes from the offset it kept, over SSE
// and then long-poll: every event exactly once, in order, the reply whole.
import { expect, test } from "@playwright/test";
import { createRequire } from "node:module";
import { numberedWords, serverReplies } from "./helpers";

const load = createRequire(__filename);

const versions = [
  { alias: "ds-client-oldest", version: "0.1.5" },
  { alias: "ds-client", version: "0.2.7" },
];

type Event = { seq: number; kind: string; run_id?: string; delta?: unknown; delta_action?: string };

for (const { alias, version } of versions) {
  test(`@durable-streams/client ${version} follows an agent's run, resumes from its offset, and gets every event once`, async ({ baseURL, request }) => {
    const client = load(alias);
    expect(createRequire(load.resolve(alias))(`${alias}/package.json`).version).toBe(version);
    const created = await request.post("/v1/agents", { data: { name: `durable ${version}` } });
    const agentId = (await created.json()).id as string;
    const url = `${baseURL}/v1/streams/agents/${agentId}`;
    const words = numberedWords(60);
    const run = await request.post(`/v1/agents/${agentId}/runs`, { data: { content: `/echo ${words}` } });
    expect(run.status()).toBe(202);

    // First connection, SSE: read some of the run, keep the offset, go away.
    const received: Event[] = [];
    let saved = "-1";
    const first = new AbortController();
    // `json: true`: 0.1.5 takes JSON mode from the first response's type, which for SSE is
    // text/event-stream (0.2 takes it from the stream's).
    const live = await client.stream({ url, offset: "-1", live: "sse", json: true, signal: first.signal });
    // Once it has decided to leave, the reader takes no more batches. The client reads a batch
    // ahead, and 0.1.5 has handed that batch out after the abort with the offset from *before*
    // it (seen under load: seqs 1…35, then 25… again; the server sends each data event and its
    // control event in one write) — a reader that took it would read those events twice.
    let leaving = false;
    await new Promise<void>((resolve) => {
      live.subscribeJson(async (batch: any) => {
        if (leaving) return;
        received.push(...(batch.items as Event[]));
        saved = batch.offset;
        if (received.filter((event) => event.kind === "text").length >= 10) {
          leaving = true;
          resolve();
        }
      });
    });
    first.abort();
    const cut = received.length;
    expect(cut).toBeGreaterThan(0);
    expect(received.some((event) => event.kind === "run_completed")).toBe(false); // mid-run

    // Second connection, long-poll, from the kept offset: the rest of the run.
    const second = new AbortController();
    const resumed = await client.stream({ url, offset: saved, live: "long-poll", json: true, signal: second.signal });
    await new Promise<void>((resolve) => {
      resumed.subscribeJson(async (batch: any) => {
        received.push(...(batch.items as Event[]));
        if (received.some((event) => event.kind === "run_completed")) resolve();
      });
    });
    second.abort();

    const seqs = received.map((event) => event.seq);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1)); // 1, 2, 3 …: none lost, none twice
    const text = received
      .filter((event) => event.kind === "text" && event.delta_action === "append")
      .map((event) => event.delta)
      .join("");
    expect(text).toBe(words);
    expect(await serverReplies(request, agentId)).toEqual([words]);

    // Catch-up only: the whole log at once, as the native API pages it.
    const whole = await client.stream({ url, offset: "-1", live: false });
    const items = (await whole.json()) as Event[];
    expect(items.map((event) => event.seq)).toEqual(seqs);
    // The agent's stream is read-only.
    const write = await request.post(`/v1/streams/agents/${agentId}`, {
      headers: { "content-type": "application/json" },
      data: { nope: true },
    });
    expect(write.status()).toBe(405);
  });
}
