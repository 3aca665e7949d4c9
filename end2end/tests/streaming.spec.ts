import { expect, test } from "@playwright/test";

// The foundation's promise in a real browser: create an agent, send a message, watch the reply
// grow token by token over the WebSocket until the run completes, then reload and read the same
// reply from history.
test("a reply streams in live and survives a reload", async ({ page }) => {
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));

  // A name of its own, so the front page lists it once however often the test runs on a server.
  const name = `e2e agent ${Date.now()}`;
  await page.goto("/");
  await expect(page.getByRole("heading", { name: "Agents" })).toBeVisible();
  await page.getByPlaceholder("New agent name").fill(name);
  await page.getByRole("button", { name: "Create agent" }).click();
  await expect(page).toHaveURL(/\/agents\/[0-9a-f-]{36}$/);
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");

  const composer = page.locator(".composer textarea");
  await composer.fill("Hello, agent");
  await composer.press("Enter");

  await expect(page.locator(".message.kind-user .body")).toHaveText("Hello, agent");
  const reply = page.locator(".message.kind-text .body");
  await expect(reply).not.toBeEmpty();

  // While the run is going, the reply grows.
  const early = (await reply.textContent()) ?? "";
  await expect(page.locator(".run-status")).toHaveAttribute("data-status", "running");
  await expect
    .poll(async () => ((await reply.textContent()) ?? "").length)
    .toBeGreaterThan(early.length);

  await expect(page.locator(".run-status")).toHaveAttribute("data-status", "completed", {
    timeout: 30_000,
  });
  const finished = (await reply.textContent()) ?? "";
  expect(finished.split(/\s+/).filter((word) => word.length > 0)).toHaveLength(60);
  expect(finished.length).toBeGreaterThan(early.length);
  await expect(page.locator(".message.kind-thinking .body")).not.toBeEmpty();

  // The raw JSON of a message shows on hover, and only then.
  const textMessage = page.locator(".message.kind-text");
  await expect(textMessage.locator(".raw-json")).toHaveCount(0);
  await textMessage.hover();
  await expect(textMessage.locator(".raw-json")).toContainText('"kind": "text"');
  await expect(textMessage.locator(".raw-json")).toContainText('"message_id"');
  await page.mouse.move(0, 0);
  await expect(textMessage.locator(".raw-json")).toHaveCount(0);

  await page.reload();
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
  await expect(page.locator(".message.kind-text .body")).toHaveText(finished);
  await expect(page.locator(".message.kind-user .body")).toHaveText("Hello, agent");
  await expect(page.locator(".run-status")).toHaveAttribute("data-status", "completed");

  // The agent is listed on the front page.
  await page.goto("/");
  await expect(page.getByRole("link", { name, exact: true })).toBeVisible();

  expect(pageErrors).toEqual([]);
});
