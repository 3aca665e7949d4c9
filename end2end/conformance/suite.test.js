// The Durable Streams conformance suite (pinned in package.json) against one server: the
// protocol's Node reference server when DS_TARGET is "reference" (started here, in-process), or
// agentstream's streams at DS_BASE_URL. run.mjs runs this file once per target.
import { afterAll } from "vitest";
import { runConformanceTests } from "@durable-streams/server-conformance-tests";

let baseUrl = process.env.DS_BASE_URL;
if (process.env.DS_TARGET === "reference") {
  const { DurableStreamTestServer } = await import("@durable-streams/server");
  const server = new DurableStreamTestServer({ port: 0 });
  baseUrl = await server.start();
  afterAll(async () => server.stop());
}
// How long the server under test holds a long-poll open (agentstream: LONG_POLL_WAIT_MS).
const longPollTimeoutMs = Number(process.env.DS_LONG_POLL_MS ?? 30_000);
runConformanceTests({ baseUrl, longPollTimeoutMs });
