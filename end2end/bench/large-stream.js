// Renders one large stream live in Chromium and prints how it went.
//
//   node bench/large-stream.js [tokens] [token_delay_ms]
//
// `BENCH_PROFILE=file` saves a CPU profile of the Markdown round (DevTools' `.cpuprofile`),
// `BENCH_TRACE=file` a performance trace of it (layouts, paints, tasks: load it in DevTools);
// `BENCH_DUMP=prefix` prints the long tasks' times and, when the Markdown differs from the
// history page's, writes both as `prefix-live.html` and `prefix-history.html`.
//
// Starts the release server (scripts/run.sh builds it) on its own port with a fresh database and
// the scripted provider set to `tokens` reply words, and streams two answers of that length into
// the live view, each on a fresh agent and page: plain words (the baseline), then `/markdown`'s
// answer (headings, lists, tables, fenced code, arriving half-open token by token). For each it
// measures:
// - the server's time to write the run (run_started → run_completed, from the log's timestamps):
//   the baseline;
// - the browser's time from sending to showing "completed" with the whole reply;
// - the longest gap between animation frames while streaming (the page's worst stall) and the
//   frames rendered, from a requestAnimationFrame loop in the page;
// - long tasks (> 50 ms on the main thread, from a PerformanceObserver) and the most DOM updates
//   of the conversation within one animation frame (MutationObserver callbacks per frame);
// - what the live view's WebSocket carried: frames, events, and merged events (the view asks the
//   server to coalesce runs of token appends that wait for it);
// - the main thread's busy time (tasks, and script within them) from the DevTools protocol's
//   performance metrics, in all and per token;
// - whether the rendered reply equals the server's: the words as sent, and the Markdown as the
//   history page (the server's renderer, no JavaScript) renders it.
const { chromium } = require("playwright-core");
const { spawn } = require("node:child_process");
const os = require("node:os");
const path = require("node:path");
const fs = require("node:fs");

const tokens = Number(process.argv[2] ?? 20000);
const delayMs = Number(process.argv[3] ?? 0);
const port = 3300 + Math.floor(Math.random() * 500);
const base = `http://127.0.0.1:${port}`;
const repository = path.resolve(__dirname, "..", "..");
const target =
  process.env.CARGO_TARGET_DIR ?? path.join(os.homedir(), ".cache", "agentstream", "target");

async function waitForServer() {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("the server did not start");
}

async function log(agentId) {
  const events = [];
  let since = 0;
  for (;;) {
    const page = await (await fetch(`${base}/v1/agents/${agentId}/events?since=${since}&limit=1000`)).json();
    events.push(...page.events);
    since = page.next_since;
    if (!page.has_more) return events;
  }
}


/// One answer streamed into a fresh live view: what the server, the page and its main thread did.
async function round(browser, message) {
  const agent = await (
    await fetch(`${base}/v1/agents`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "bench" }),
    })
  ).json();
  const page = await browser.newPage();
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  // What the live view received over its WebSocket: frames, events, and events that stood for
  // several seqs (merged by the server because the view asked for coalescing).
  const received = { frames: 0, events: 0, merged: 0, mergedSeqs: 0 };
  page.on("websocket", (socket) => {
    socket.on("framereceived", ({ payload }) => {
      let frame;
      try {
        frame = JSON.parse(typeof payload === "string" ? payload : payload.toString());
      } catch {
        return;
      }
      if (frame.type !== "events") return;
      received.frames++;
      for (const event of frame.events) {
        received.events++;
        if (event.coalesced_from !== undefined) {
          received.merged++;
          received.mergedSeqs += event.seq - event.coalesced_from + 1;
        }
      }
    });
  });
  await page.goto(`${base}/agents/${agent.id}`);
  await page.waitForSelector('.connection[data-state="live"]');
  await page.evaluate(() => {
    window.__frames = { count: 0, worstGapMs: 0, last: performance.now(), updates: 0, mostUpdatesPerFrame: 0 };
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        window.__longTasks.push(entry.duration);
        (window.__longTaskTimes ??= []).push([Math.round(entry.startTime), Math.round(entry.duration)]);
      }
    }).observe({ type: "longtask" });
    new MutationObserver(() => {
      window.__frames.updates++;
    }).observe(document.body, { childList: true, subtree: true, characterData: true });
    const tick = (now) => {
      const frames = window.__frames;
      frames.worstGapMs = Math.max(frames.worstGapMs, now - frames.last);
      frames.mostUpdatesPerFrame = Math.max(frames.mostUpdatesPerFrame, frames.updates);
      frames.updates = 0;
      frames.last = now;
      frames.count++;
      if (!frames.stop) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const mainThread = async () => {
    const { metrics } = await cdp.send("Performance.getMetrics");
    const seconds = (name) => metrics.find((metric) => metric.name === name)?.value ?? 0;
    return {
      task: seconds("TaskDuration"),
      script: seconds("ScriptDuration"),
      layout: seconds("LayoutDuration"),
      style: seconds("RecalcStyleDuration"),
    };
  };
  const profiling = process.env.BENCH_PROFILE && message === "/markdown";
  if (profiling) {
    await cdp.send("Profiler.enable");
    await cdp.send("Profiler.setSamplingInterval", { interval: 200 });
    await cdp.send("Profiler.start");
  }
  const tracing = process.env.BENCH_TRACE && message === "/markdown";
  if (tracing) {
    await browser.startTracing(page, { path: process.env.BENCH_TRACE, categories: ["devtools.timeline", "disabled-by-default-devtools.timeline"] });
  }
  const before = await mainThread();
  const started = Date.now();
  await page.locator(".composer textarea").fill(message);
  await page.locator(".composer textarea").press("Enter");
  await page.waitForSelector('.run-status[data-status="completed"]', { timeout: 600_000 });
  const browserMs = Date.now() - started;
  const after = await mainThread();
  if (tracing) await browser.stopTracing();
  if (profiling) {
    const { profile } = await cdp.send("Profiler.stop");
    fs.writeFileSync(process.env.BENCH_PROFILE, JSON.stringify(profile));
  }
  const frames = await page.evaluate(() => {
    window.__frames.stop = true;
    return window.__frames;
  });
  const longTasks = await page.evaluate(() => window.__longTasks);
  if (process.env.BENCH_DUMP) {
    console.log(message, "long tasks [start, ms] since load:", JSON.stringify(await page.evaluate(() => window.__longTaskTimes)),
      "stream started at", await page.evaluate(() => Math.round(performance.now())) - browserMs);
  }
  const events = await log(agent.id);
  const reply = events
    .filter((event) => event.kind === "text")
    .map((event) => event.delta)
    .join("");
  const answer = page.locator(".message.kind-text .body").last();
  // Plain words must read back as sent; Markdown must render exactly as the history page (the
  // server's renderer, no JavaScript) renders the finished answer.
  let same;
  if (message === "/markdown") {
    const live = await answer.innerHTML();
    const history = await browser.newPage({ javaScriptEnabled: false });
    await history.goto(`${base}/agents/${agent.id}/history`);
    const drawn = await history.locator(".message.kind-text .body").last().innerHTML();
    // Empty comments are the view library's markers, not content.
    const content = (html) => html.replaceAll("<!---->", "");
    same = content(live) === content(drawn);
    if (!same && process.env.BENCH_DUMP) {
      fs.writeFileSync(`${process.env.BENCH_DUMP}-live.html`, live);
      fs.writeFileSync(`${process.env.BENCH_DUMP}-history.html`, drawn);
    }
    await history.close();
  } else {
    same = (await answer.textContent()) === reply;
  }
  await page.close();
  const startedAt = Date.parse(events.find((event) => event.kind === "run_started").created_at);
  const endedAt = Date.parse(events.find((event) => event.kind === "run_completed").created_at);
  const textEvents = events.filter((event) => event.kind === "text").length;
  return {
    events: events.length,
    textEvents,
    characters: reply.length,
    serverMs: endedAt - startedAt,
    browserMs,
    taskMs: (after.task - before.task) * 1000,
    scriptMs: (after.script - before.script) * 1000,
    layoutMs: (after.layout - before.layout) * 1000,
    styleMs: (after.style - before.style) * 1000,
    frames,
    longTasks,
    received,
    same,
  };
}

function report(label, result) {
  const { frames, longTasks, received } = result;
  const perToken = (ms) => `${((ms * 1000) / result.textEvents).toFixed(1)} µs`;
  console.log(`-- ${label}: ${result.textEvents} text events, ${result.characters} characters, ${result.events} events in all`);
  console.log(`baseline, server wrote the run in:   ${result.serverMs} ms`);
  console.log(`browser showed it complete after:    ${result.browserMs} ms`);
  console.log(`main thread busy (tasks / script):   ${Math.round(result.taskMs)} / ${Math.round(result.scriptMs)} ms, per token ${perToken(result.taskMs)} / ${perToken(result.scriptMs)}`);
  console.log(`  of which layout / style:            ${Math.round(result.layoutMs)} / ${Math.round(result.styleMs)} ms`);
  console.log(`frames while streaming:              ${frames.count}, worst gap between frames ${Math.round(frames.worstGapMs)} ms`);
  console.log(`long tasks (> 50 ms):                ${longTasks.length}${longTasks.length ? `, longest ${Math.round(Math.max(...longTasks))} ms` : ""}`);
  console.log(`most DOM updates within one frame:   ${frames.mostUpdatesPerFrame}`);
  console.log(`WebSocket to the browser:            ${received.frames} frames, ${received.events} events, ${received.merged} of them merged (standing for ${received.mergedSeqs} seqs)`);
  console.log(`rendered as the server has it:       ${result.same}`);
}

(async () => {
  // The database lives in a directory of its own, removed when the run ends.
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "agentstream-large-stream-"));
  const server = spawn(path.join(target, "release", "server"), [], {
    cwd: repository,
    env: {
      ...process.env,
      LEPTOS_SITE_ADDR: `127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: path.join(repository, "target", "site"),
      DATABASE_URL: `sqlite://${path.join(directory, "bench.db")}`,
      AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS: String(delayMs),
      AGENTSTREAM_SCRIPTED_REPLY_TOKENS: String(tokens),
      RUST_LOG: "warn",
    },
    stdio: "inherit",
  });
  try {
    await waitForServer();
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    // Plain words first (the baseline: what a token costs without Markdown's structure), then
    // the same number of tokens as a Markdown answer, each on an agent and a page of its own.
    const plain = await round(browser, "stream a lot");
    const markdown = await round(browser, "/markdown");
    await browser.close();
    console.log(`reply tokens:                        ${tokens} (token delay ${delayMs} ms)`);
    report("plain words", plain);
    report("markdown", markdown);
    process.exitCode = plain.same && markdown.same ? 0 : 1;
  } finally {
    server.kill();
    await new Promise((resolve) => (server.exitCode !== null ? resolve() : server.once("exit", resolve)));
    fs.rmSync(directory, { recursive: true, force: true });
  }
})();
