import { expect, test } from "@playwright/test";
import { guardedPort, guardedToken } from "../playwright.config";
import { openLive, send, waitForCompletion } from "./helpers";

// A server started with AGENTSTREAM_API_TOKEN: the browser opens it once with ?token=, which the
// server keeps in an HttpOnly cookie; the page's fetches, its WebSocket and history then work.
test.use({ baseURL: `http://127.0.0.1:${guardedPort}` });

test("with an access token configured, the page works once it is opened with the token", async ({ page }) => {
  const refused = await page.goto("/");
  expect(refused?.status()).toBe(401);
  await page.fill('input[name="token"]', guardedToken);
  await page.click("button");
  await expect(page).toHaveURL(`http://127.0.0.1:${guardedPort}/`);
  expect(page.url()).not.toContain(guardedToken);

  const created = await page.request.post("/v1/agents", { data: { name: "guarded" } });
  expect(created.status()).toBe(201);
  const agentId = (await created.json()).id;
  await openLive(page, agentId);
  await send(page, "/echo behind a token");
  await waitForCompletion(page);
  await expect(page.locator(".message.kind-text .body")).toHaveText("behind a token");

  await page.goto(`/agents/${agentId}/history`);
  await expect(page.locator("body")).toContainText("behind a token");

  // Another browser without the cookie gets nothing.
  const stranger = await page.context().browser()!.newContext();
  const response = await stranger.request.get(`http://127.0.0.1:${guardedPort}/v1/agents`);
  expect(response.status()).toBe(401);
  await stranger.close();
});
