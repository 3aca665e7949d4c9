// The Durable Streams protocol's Node reference server (@durable-streams/server, pinned in
// end2end/conformance), file-backed (every append fsynced), for the wire-speed bench:
// `node node-reference.mjs <port> <data dir>`. Prints "listening <url>" once it serves.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "..", "end2end", "conformance", "package.json"));
const { DurableStreamTestServer } = await import(require.resolve("@durable-streams/server"));
const [port, dataDir] = process.argv.slice(2);
const server = new DurableStreamTestServer({ port: Number(port), dataDir, compression: false });
const url = await server.start();
console.log(`listening ${url}`);
process.on("SIGTERM", async () => {
  await server.stop();
  process.exit(0);
});
