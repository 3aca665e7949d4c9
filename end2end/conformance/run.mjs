// Runs the conformance suite against the reference server and against agentstream — on SQLite,
// and on PostgreSQL when AGENTSTREAM_TEST_DATABASE_URL names a server — each on a fresh database,
// then prints each target's figures and the tests agentstream fails. Fails when agentstream
// passes fewer tests than the reference server on either store, or fails one the reference
// passes.
//
// Env: AGENTSTREAM_SERVER_BIN (default: the release binary in CARGO_TARGET_DIR),
// AGENTSTREAM_TEST_DATABASE_URL (a PostgreSQL server's admin URL, optional) and AGENTSTREAM_PSQL
// (the psql that makes the suite's database there; default: psql on PATH).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repository = join(here, "..", "..");
const target = process.env.CARGO_TARGET_DIR ?? join(homedir(), ".cache", "agentstream", "target");
const binary = process.env.AGENTSTREAM_SERVER_BIN ?? join(target, "release", "server");
const scratch = mkdtempSync(join(tmpdir(), "agentstream-conformance-"));
/** agentstream's long-poll wait (surfaces/durable/live.rs: LONG_POLL_WAIT_MS). */
const LONG_POLL_WAIT_MS = 15_000;
/** One target's suite may take this long before it is stopped. */
const SUITE_MS_MAX = 15 * 60_000;

function freePort() {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitForHealth(url, child) {
  for (let attempt = 0; attempt < 300; attempt += 1) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode})`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no answer from ${url}`);
}

/** Runs the suite against one target; resolves to {passed, failed, skipped, failures: [names]}. */
function runSuite(name, env) {
  const report = join(scratch, `${name}.json`);
  const vitest = join(here, "node_modules", ".bin", "vitest");
  const run = spawn(vitest, ["run", "suite.test.js", "--reporter=json", `--outputFile=${report}`], {
    cwd: here,
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "inherit"],
    timeout: SUITE_MS_MAX,
  });
  return new Promise((resolve, reject) => {
    run.on("error", reject);
    run.on("close", () => {
      try {
        const results = JSON.parse(readFileSync(report, "utf8"));
        const tests = results.testResults.flatMap((file) => file.assertionResults);
        const named = (status) => tests.filter((test) => test.status === status).map((test) => test.fullName);
        resolve({
          passed: named("passed").length,
          failed: named("failed").length,
          skipped: tests.length - named("passed").length - named("failed").length,
          failures: named("failed"),
        });
      } catch (error) {
        reject(new Error(`${name}: no report from the suite (${error.message})`));
      }
    });
  });
}

/** Starts agentstream on `databaseUrl`; returns the child and its streams' base URL. */
async function startAgentstream(databaseUrl) {
  const port = await freePort();
  const child = spawn(binary, [], {
    cwd: repository,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      LEPTOS_SITE_ADDR: `127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: join(repository, "target", "site"),
      // The suite checks a browser's preflight from this origin.
      AGENTSTREAM_ALLOWED_ORIGINS: "https://example.com",
      RUST_LOG: "warn",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  await waitForHealth(`http://127.0.0.1:${port}/healthz`, child);
  return { child, baseUrl: `http://127.0.0.1:${port}/v1/streams` };
}

/** A fresh database on the PostgreSQL server at `adminUrl`. */
function freshPostgres(adminUrl) {
  const name = `ds_conformance_${process.pid}_${Date.now()}`;
  const psql = process.env.AGENTSTREAM_PSQL ?? "psql";
  const made = spawnSync(psql, [adminUrl, "-q", "-c", `CREATE DATABASE ${name}`], { stdio: "inherit" });
  if (made.status !== 0) throw new Error("could not create a PostgreSQL database for the suite");
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

// The three targets run at once, each with its own server and database: the suite mostly
// waits (long polls, timeouts), so together they take about as long as the slowest alone.
const REFERENCE = "reference server (@durable-streams/server 0.3.7)";
const targets = [[REFERENCE, () => runSuite("reference", { DS_TARGET: "reference" })]];
const stores = [["agentstream on SQLite", `sqlite://${join(scratch, "streams.db")}`]];
const postgres = process.env.AGENTSTREAM_TEST_DATABASE_URL;
if (postgres) stores.push(["agentstream on PostgreSQL", freshPostgres(postgres)]);
for (const [name, databaseUrl] of stores) {
  targets.push([
    name,
    async () => {
      const { child, baseUrl } = await startAgentstream(databaseUrl);
      try {
        return await runSuite(name.replace(/\W+/g, "-"), {
          DS_BASE_URL: baseUrl,
          DS_LONG_POLL_MS: String(LONG_POLL_WAIT_MS),
        });
      } finally {
        child.kill("SIGTERM");
      }
    },
  ]);
}
const results = Object.fromEntries(
  await Promise.all(targets.map(async ([name, run]) => [name, await run()])),
);
rmSync(scratch, { recursive: true, force: true });

const reference = results[REFERENCE];
let ok = true;
for (const [name, result] of Object.entries(results)) {
  console.log(`${name}: ${result.passed} passed, ${result.failed} failed, ${result.skipped} skipped`);
  if (name.startsWith("agentstream")) {
    for (const failure of result.failures) {
      const alsoReference = reference.failures.includes(failure) ? " (the reference server fails it too)" : "";
      console.log(`  failed: ${failure}${alsoReference}`);
    }
    const onlyOurs = result.failures.filter((failure) => !reference.failures.includes(failure));
    if (result.passed < reference.passed || onlyOurs.length > 0) ok = false;
  }
}
console.log(ok ? "conformance: agentstream passes every test the reference server passes" : "conformance: FAILED");
// One line for scripts/test.sh's summary.
console.log(
  Object.entries(results)
    .map(([name, result]) => `${result.passed} passed (${name.replace("agentstream on ", "").replace(/ \(.*\)/, "")})`)
    .join(", "),
);
process.exit(ok ? 0 : 1);
