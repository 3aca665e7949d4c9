import { defineConfig } from "@playwright/test";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

// The server under test: the release binary and site that `scripts/test.sh` built with
// cargo-leptos, on its own port and a fresh SQLite file, with tokens paced so streaming is visible.
const repository = path.resolve(__dirname, "..");
// The same default as scripts/install.sh.
const targetDirectory =
  process.env.CARGO_TARGET_DIR ?? path.join(os.homedir(), ".cache", "agentstream", "target");
const serverBinary = process.env.AGENTSTREAM_SERVER_BIN ?? path.join(targetDirectory, "release", "server");
const port = Number(process.env.AGENTSTREAM_E2E_PORT ?? 3100);
/** The port and token of the second server, which requires an access token. */
export const guardedPort = port + 1;
export const guardedToken = "e2e-token";
/** The port of the third server, whose scripted replies are long and unpaced (tests/fast.spec.ts). */
export const fastPort = port + 2;
export const fastReplyTokens = 10_000;
/** The server behind the example app (examples/react-chat): an operator token, a token secret,
 * and the app's origin allowed (tests/example-app.spec.ts). */
export const exampleServerPort = port + 3;
export const exampleServerToken = "e2e-operator";
export const exampleServerSecret = "e2e-secret-e2e-secret-e2e-secret-0123";
/** The example app's own origin: its page and its tiny backend. */
export const exampleAppPort = port + 4;
/** The example's browser tokens live this long, so a test sees one renewed. */
export const exampleTokenTtlSeconds = 8;
/** The server behind the bring-your-own-loop example (examples/bring-your-own-loop), and the
 * example app's own origin (tests/bring-your-own-loop.spec.ts). */
export const loopServerPort = port + 5;
export const loopAppPort = port + 6;
export const loopServerToken = "e2e-loop-operator";
/** The example's mock model: this many words (tests/bring-your-own-loop.spec.ts checks them). */
export const loopReplyWords = 80;
/** A server a test starts, kills (-9) and starts again itself (tests/openai-crash.spec.ts). */
export const crashServerPort = port + 7;
export const crashServerBinary = serverBinary;
// The servers' databases live in one directory per run, removed by global-teardown.ts. The config
// is evaluated again in every worker; the environment carries the runner's directory to them.
process.env.AGENTSTREAM_E2E_DIRECTORY ??= fs.mkdtempSync(path.join(os.tmpdir(), "agentstream-e2e-"));
const database = path.join(process.env.AGENTSTREAM_E2E_DIRECTORY, "e2e.db");

export default defineConfig({
  testDir: "./tests",
  globalTeardown: "./global-teardown.ts",
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  // Test files run side by side, two per core: a test mostly waits (paced tokens, sockets,
  // timers). On 2 cores the suite took 5.2 min one at a time, 3.4 min two, 2.8 min four.
  workers: Number(process.env.AGENTSTREAM_E2E_WORKERS ?? 2 * os.availableParallelism()),
  retries: 0,
  reporter: [["list"]],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
    trace: "off",
  },
  webServer: [
    {
      command: serverBinary,
      cwd: repository,
      url: `http://127.0.0.1:${port}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        LEPTOS_SITE_ADDR: `127.0.0.1:${port}`,
        LEPTOS_SITE_ROOT: path.join(repository, "target", "site"),
        DATABASE_URL: `sqlite://${database}`,
        AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS: "25",
        AGENTSTREAM_SCRIPTED_REPLY_TOKENS: "60",
        // An MCP server on the official SDK (started only for agents that name it).
        AGENTSTREAM_MCP_CONFIG: path.join(repository, "end2end", "fixtures", "mcp.json"),
        RUST_LOG: "warn",
      },
    },
    // The same server with an access token, for tests/guarded.spec.ts.
    {
      command: serverBinary,
      cwd: repository,
      url: `http://127.0.0.1:${guardedPort}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        LEPTOS_SITE_ADDR: `127.0.0.1:${guardedPort}`,
        LEPTOS_SITE_ROOT: path.join(repository, "target", "site"),
        DATABASE_URL: `sqlite://${database}.guarded`,
        AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS: "25",
        AGENTSTREAM_SCRIPTED_REPLY_TOKENS: "60",
        AGENTSTREAM_API_TOKEN: guardedToken,
        RUST_LOG: "warn",
      },
    },
    // The same server with replies far faster than a browser takes frames, for tests/fast.spec.ts.
    {
      command: serverBinary,
      cwd: repository,
      url: `http://127.0.0.1:${fastPort}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        LEPTOS_SITE_ADDR: `127.0.0.1:${fastPort}`,
        LEPTOS_SITE_ROOT: path.join(repository, "target", "site"),
        DATABASE_URL: `sqlite://${database}.fast`,
        AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS: "0",
        AGENTSTREAM_SCRIPTED_REPLY_TOKENS: String(fastReplyTokens),
        RUST_LOG: "warn",
      },
    },
    // The server the example app talks to from its own origin, with scoped tokens.
    {
      command: serverBinary,
      cwd: repository,
      url: `http://127.0.0.1:${exampleServerPort}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        LEPTOS_SITE_ADDR: `127.0.0.1:${exampleServerPort}`,
        LEPTOS_SITE_ROOT: path.join(repository, "target", "site"),
        DATABASE_URL: `sqlite://${database}.example`,
        AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS: "40",
        AGENTSTREAM_SCRIPTED_REPLY_TOKENS: "60",
        AGENTSTREAM_API_TOKEN: exampleServerToken,
        AGENTSTREAM_TOKEN_SECRET: exampleServerSecret,
        AGENTSTREAM_ALLOWED_ORIGINS: `http://127.0.0.1:${exampleAppPort}`,
        RUST_LOG: "warn",
      },
    },
    // The example app itself (examples/react-chat), bundled now and served by its backend.
    {
      command: "npm run build && node server.mjs",
      cwd: path.join(repository, "examples", "react-chat"),
      url: `http://127.0.0.1:${exampleAppPort}/`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        PORT: String(exampleAppPort),
        AGENTSTREAM_URL: `http://127.0.0.1:${exampleServerPort}`,
        AGENTSTREAM_API_TOKEN: exampleServerToken,
        TOKEN_TTL_S: String(exampleTokenTtlSeconds),
      },
    },
    // The server the bring-your-own-loop example pipes its streams into.
    {
      command: serverBinary,
      cwd: repository,
      url: `http://127.0.0.1:${loopServerPort}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        LEPTOS_SITE_ADDR: `127.0.0.1:${loopServerPort}`,
        LEPTOS_SITE_ROOT: path.join(repository, "target", "site"),
        DATABASE_URL: `sqlite://${database}.loop`,
        AGENTSTREAM_API_TOKEN: loopServerToken,
        AGENTSTREAM_TOKEN_SECRET: exampleServerSecret,
        AGENTSTREAM_ALLOWED_ORIGINS: `http://127.0.0.1:${loopAppPort}`,
        RUST_LOG: "warn",
      },
    },
    // The example app with its own streamText (examples/bring-your-own-loop).
    {
      command: "npm run build && node server.mjs",
      cwd: path.join(repository, "examples", "bring-your-own-loop"),
      url: `http://127.0.0.1:${loopAppPort}/`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        PORT: String(loopAppPort),
        AGENTSTREAM_URL: `http://127.0.0.1:${loopServerPort}`,
        AGENTSTREAM_API_TOKEN: loopServerToken,
        REPLY_WORDS: String(loopReplyWords),
        WORD_DELAY_MS: "60",
      },
    },
  ],
});
