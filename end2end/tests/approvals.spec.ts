import { APIRequestContext, expect, test } from "@playwright/test";
import { openLive, send } from "./helpers";

// A tool that requires approval: the run stops and waits for a person. The request lives in the
// log only, so every page — live views in two tabs, the server-rendered history page, a reload —
// shows the same pending state, and the answer from one tab reaches all of them.

async function guardedAgent(request: APIRequestContext, name: string): Promise<string> {
  const response = await request.post("/v1/agents", {
    data: { name, metadata: { requires_approval: ["calculator"] } },
  });
  expect(response.status()).toBe(201);
  return (await response.json()).id;
}

/** The stop reasons of the agent's ended runs, oldest first. */
async function runEnds(request: APIRequestContext, agentId: string): Promise<string[]> {
  const page = await (await request.get(`/v1/agents/${agentId}/events?limit=1000`)).json();
  return page.events
    .filter((event: any) => event.kind === "run_completed")
    .map((event: any) => event.content.stop_reason);
}

test("Approve on the card runs the call, and every page shows the outcome", async ({ context, request }) => {
  const agentId = await guardedAgent(request, "approve");
  const first = await context.newPage();
  const second = await context.newPage();
  await openLive(first, agentId);
  await openLive(second, agentId);
  await send(first, "/tools calculator 6*7; clock");

  for (const page of [first, second]) {
    const approval = page.locator(".approval[data-state=pending]");
    await expect(approval).toContainText("calculator needs approval");
    await expect(approval.locator("button.approve")).toBeVisible();
    await expect(approval.locator("button.deny")).toBeVisible();
    await expect(page.locator(".tool-outcome.waiting")).toHaveText("waiting for approval");
    // The status bar says what the agent waits for, not "completed".
    await expect(page.locator(".run-status")).toHaveAttribute("data-status", "awaiting_approval");
    await expect(page.locator(".run-status")).toHaveText("run: waiting for approval");
  }
  // The clock ran; the calculator waits.
  await expect(first.locator(".message.kind-tool_call").filter({ hasText: "clock" })).toContainText("result:");

  // The server-rendered history (no script) shows the pending state, without buttons.
  const history = await context.newPage();
  await history.goto(`/agents/${agentId}/history`);
  await expect(history.locator(".approval[data-state=pending]")).toContainText("pending");
  await expect(history.locator(".approval button")).toHaveCount(0);
  // A reload shows it pending too.
  await second.reload();
  await expect(second.locator(".approval[data-state=pending] button.approve")).toBeVisible();

  await first.locator(".approval button.approve").click();
  for (const page of [first, second]) {
    const card = page.locator(".message.kind-tool_call").filter({ hasText: "calculator" });
    await expect(card.locator(".tool-outcome")).toHaveText("result: 42");
    await expect(page.locator(".approval")).toHaveAttribute("data-state", "approved");
    await expect(page.locator(".approval button")).toHaveCount(0);
    await expect(page.locator(".message.kind-approval_response")).toContainText("approved");
    await expect(page.locator(".run-status")).toHaveAttribute("data-status", "completed", { timeout: 45_000 });
  }
  // The loop went on: the model answered after the result.
  expect(await runEnds(request, agentId)).toEqual(["requires_approval", "end_turn"]);
});

test("Deny with a reason: the call's error result carries it", async ({ page, request }) => {
  const agentId = await guardedAgent(request, "deny");
  await openLive(page, agentId);
  await send(page, "/tools calculator 1+1");
  const approval = page.locator(".approval[data-state=pending]");
  await approval.locator("input.deny-reason").fill("not with my numbers");
  await approval.locator("button.deny").click();
  await expect(page.locator(".approval")).toHaveAttribute("data-state", "denied");
  await expect(page.locator(".approval")).toContainText("denied: not with my numbers");
  await expect(page.locator(".tool-outcome.error")).toContainText("a person denied this call: not with my numbers");
  // The model hears of the denial and answers; then the agent is free.
  await expect.poll(async () => (await runEnds(request, agentId)).length, { timeout: 45_000 }).toBe(2);

  // While nothing waits, messages go through again; a message sent while a request waits is
  // refused with the reason on the page.
  await send(page, "/tools calculator 2+2");
  await expect(page.locator(".approval[data-state=pending]")).toBeVisible();
  await send(page, "hello?");
  await expect(page.locator("p.error")).toContainText("waits for approval");
});
