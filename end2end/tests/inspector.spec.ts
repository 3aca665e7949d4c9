import { expect, test } from "@playwright/test";
import { createAgent, openLive, send, waitForCompletion } from "./helpers";

// The run inspector: a run's blocks as lanes on its own clock, from the log's event times,
// server-rendered and then live.

test("a run's lanes: its message, each model call and each tool, with their figures", async ({ page, request }) => {
  const agentId = await createAgent(request, "inspected");
  await openLive(page, agentId);
  await send(page, "/tools calculator 2+3; slow 1");
  await waitForCompletion(page);
  await page.locator(".run-header a.run-inspect").last().click();
  await expect(page).toHaveURL(new RegExp(`/agents/${agentId}/runs/[0-9a-f-]{36}$`));
  await expect(page.locator(".inspector")).toHaveAttribute("data-status", "completed");
  await expect(page.locator(".inspector-summary")).toContainText("completed");
  const kinds = await page.locator(".lane").evaluateAll((lanes) => lanes.map((lane) => lane.getAttribute("data-kind")));
  expect(kinds[0]).toBe("input");
  expect(kinds.filter((kind) => kind === "model").length).toBeGreaterThanOrEqual(2);
  expect(kinds.filter((kind) => kind === "tool")).toHaveLength(2);
  const slow = page.locator(".lane.kind-tool").filter({ hasText: "slow" });
  // The slow tool took about a second, and the bars say where in the run it was.
  await expect(slow.locator(".lane-figures")).toContainText(/· 1\.\d s · done/);
  await expect(page.locator(".lane.kind-model .lane-figures").first()).toContainText("first token after");
  // Hovering a lane shows its stored JSON, and only then.
  await expect(page.locator(".lane-raw")).toHaveCount(0);
  await slow.hover();
  await expect(page.locator(".lane-raw")).toContainText('"tool_call_id"');

  // The same run on the other surfaces: the Responses API answers it as a response.
  const runId = page.url().split("/").at(-1)!;
  const responseLink = page.locator('.surfaces a[data-surface="responses"]');
  await expect(responseLink).toHaveAttribute("href", `/v1/responses/resp_${runId.replaceAll("-", "")}`);
  const response = await (await request.get((await responseLink.getAttribute("href"))!)).json();
  expect(response.status).toBe("completed");
  expect(response.agentstream.run_id).toBe(runId);
  const tools = response.output.filter((item: any) => item.type === "agentstream:tool_call").map((item: any) => item.name);
  expect(tools.sort()).toEqual(["calculator", "slow"]);

  // A phone's width: nothing runs off the side.
  await page.setViewportSize({ width: 390, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  expect(overflow).toBeLessThanOrEqual(0);
});

test("the inspector follows a run while it goes", async ({ page, request }) => {
  // Each page loads one bundle: the live view the main one, the inspector its own (the main
  // bundle carries no inspector, the inspector's nothing else).
  const bundles: string[] = [];
  page.on("request", (sent) => {
    if (sent.url().endsWith(".wasm")) bundles.push(new URL(sent.url()).pathname);
  });
  const agentId = await createAgent(request, "inspected live");
  await openLive(page, agentId);
  expect(bundles).toEqual(["/pkg/agentstream.wasm"]);
  await send(page, "/tools slow 3");
  const link = page.locator(".run-header a.run-inspect").last();
  await expect(link).toBeVisible();
  await page.goto((await link.getAttribute("href"))!);
  await expect.poll(() => bundles.length).toBe(2);
  expect(bundles[1]).toBe("/pkg/inspector/pkg/agentstream.wasm");
  await expect(page.locator(".inspector")).toHaveAttribute("data-status", "running");
  await expect(page.locator(".lane.kind-tool")).toContainText("slow");
  await expect(page.locator(".inspector")).toHaveAttribute("data-status", "completed", { timeout: 20_000 });
  await expect(page.locator(".lane.kind-tool .lane-figures")).toContainText("done");
  await expect(page.locator(".lane.kind-model").last()).toBeVisible();
});
