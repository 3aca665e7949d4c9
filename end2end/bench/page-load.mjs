// The live view's first load on a slow connection, in Chromium through the DevTools protocol:
// bytes over the wire and the time from the navigation's start until the page is hydrated and
// live (its connection shows "live", seen by a mutation observer in the page), three loads with
// the cache off.
//
//   node bench/page-load.mjs http://127.0.0.1:3000 [label]
//
// The connection is throttled like "Fast 3G": 1.6 Mbit/s down, 750 kbit/s up, 150 ms latency.
// To compare with the bundle sent uncompressed, serve a copy of target/site without its
// `pkg/*.br` and `pkg/*.gz` files (LEPTOS_SITE_ROOT=that copy) and run it again.
import { chromium } from "@playwright/test";

const [base = "http://127.0.0.1:3000", label = "page load"] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
const loads = [];
for (let i = 0; i < 3; i++) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
  await cdp.send("Network.emulateNetworkConditions", {
    offline: false,
    latency: 150,
    downloadThroughput: 1.6e6 / 8,
    uploadThroughput: 750e3 / 8,
  });
  let bytes = 0;
  cdp.on("Network.loadingFinished", (event) => {
    bytes += event.encodedDataLength;
  });
  const response = await fetch(`${base}/v1/agents`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "page-load" }),
  });
  const agent = await response.json();
  // Timed in the page, from the start of the navigation to the moment the connection says
  // "live" (a mutation observer): polling from here would add up to half a second.
  await page.addInitScript(() => {
    new MutationObserver((_, observer) => {
      if (document.querySelector('.connection[data-state="live"]')) {
        window.__liveAt = performance.now();
        observer.disconnect();
      }
    }).observe(document, { subtree: true, childList: true, attributes: true });
  });
  await page.goto(`${base}/agents/${agent.id}`);
  await page.locator('.connection[data-state="live"]').waitFor({ timeout: 120_000 });
  const ms = Math.round(await page.evaluate(() => window.__liveAt));
  loads.push({ ms, kb: Math.round(bytes / 1024) });
  await context.close();
}
await browser.close();
const median = (values) => values.sort((a, b) => a - b)[1];
console.log(
  `${label}: live after ${median(loads.map((load) => load.ms))} ms, ` +
    `${median(loads.map((load) => load.kb))} KB over the wire (median of 3: ${JSON.stringify(loads)})`,
);
