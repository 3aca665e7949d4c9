import { expect, test } from "@playwright/test";
import { openLive, send } from "./helpers";

// An agent with an MCP server's tools (end2end/fixtures/mcp-witness.mjs, on the official MCP
// SDK, configured for this server by playwright.config.ts): the tool's progress reports show on
// its card live, and Stop ends the call and the run.
test("an MCP tool's progress shows live on its card, and Stop ends it", async ({ page, request }) => {
  const created = await request.post("/v1/agents", {
    data: { name: "mcp progress", metadata: { mcp_servers: ["witness"] } },
  });
  expect(created.status()).toBe(201);
  const agentId = (await created.json()).id;
  const tools = await (await request.get(`/v1/tools?agent_id=${agentId}`)).json();
  expect(tools.map((tool: any) => tool.name)).toContain("wait");

  await openLive(page, agentId);
  await send(page, '/tools wait {"seconds": 30}');
  const card = page.locator(".message.kind-tool_call").filter({ hasText: "wait" });
  const progress = card.locator(".tool-progress");
  await expect(progress).toContainText("tick 3");
  // It keeps moving: a later report replaces the earlier one.
  await expect(progress).toContainText(/tick ([5-9]|\d\d)/);
  await page.locator(".composer button.cancel").click();
  await expect(page.locator(".run-status")).toHaveAttribute("data-status", "cancelled", { timeout: 15_000 });
  await expect(card.locator(".tool-outcome.error")).toContainText("cancelled");
});
