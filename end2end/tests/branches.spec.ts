import { APIRequestContext, expect, Page, test } from "@playwright/test";
import { createAgent, openLive, send, serverReplies, waitForCompletion } from "./helpers";

// Branches in the live view: Edit a sent message and Regenerate an answer each run the turn
// again on a new branch (the turn as it was stays on its own line); the "‹ n / m ›" switcher
// moves between lines without reloading; a reload shows the current line; two tabs on two
// lines each see only their own. The scripted provider answers "/echo <text>" with <text> and
// "/recall" with the user messages the model was given.

const messages = (page: Page) => page.locator(".timeline .message");
const answers = (page: Page) => page.locator(".message.kind-text .markdown");

async function branches(request: APIRequestContext, agentId: string) {
  const response = await request.get(`/v1/agents/${agentId}/branches`);
  expect(response.status()).toBe(200);
  return response.json();
}

test("edit, regenerate, switch and reload: every line stays whole and the current one is shown", async ({ page, request }) => {
  const agentId = await createAgent(request, "branches");
  await openLive(page, agentId);
  await send(page, "/echo one");
  await waitForCompletion(page);
  await expect(answers(page)).toHaveText(["one"]);
  await send(page, "/echo two");
  await expect(answers(page)).toHaveText(["one", "two"]);
  await waitForCompletion(page);
  const pageLoads = await page.evaluate(() => performance.getEntriesByType("navigation").length);

  // Edit the second message: the model sees the first turn and the edited one, never "two".
  const second = page.locator(".message.kind-user").nth(1);
  await second.locator("button.edit-message").click();
  await second.locator(".edit-form textarea").fill("/recall");
  await second.locator(".edit-form button[type=submit]").click();
  await expect(answers(page)).toHaveText(["one", "You said:/echo one"]);
  await expect(page.locator(".message.kind-user").nth(1).locator(".branch-position")).toHaveText("2 / 2");
  await waitForCompletion(page);

  // Regenerate the first answer: a third line, holding one turn. The first message now has two
  // versions (the edited line shares the first turn with the main line).
  await page.locator(".message.kind-text").first().locator("button.regenerate").click();
  await expect(page.locator(".message.kind-user")).toHaveCount(1);
  await expect(page.locator(".message.kind-user .branch-position")).toHaveText("2 / 2");
  await waitForCompletion(page);
  await expect(answers(page)).toHaveText(["one"]);

  // Back to the first line, through the switcher: exactly as it was, without a page load.
  await page.locator(".message.kind-user").first().locator("button.branch-prev").click();
  await expect(page.locator(".message.kind-user").first().locator(".branch-position")).toHaveText("1 / 2");
  await expect(answers(page)).toHaveText(["one", "two"]);
  await expect(page.locator(".message.kind-user").nth(1).locator(".branch-position")).toHaveText("1 / 2");
  expect(await page.evaluate(() => performance.getEntriesByType("navigation").length)).toBe(pageLoads);
  const listed = await branches(request, agentId);
  expect(listed.current_branch).toBe(agentId);
  expect(listed.branches.length).toBe(2);
  expect(await serverReplies(request, agentId)).toEqual(["one", "two"]);

  // The current line survives a reload: switch to the edited one, reload, find it.
  await page.locator(".message.kind-user").nth(1).locator("button.branch-next").click();
  await expect(answers(page)).toHaveText(["one", "You said:/echo one"]);
  await page.reload();
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
  await expect(answers(page)).toHaveText(["one", "You said:/echo one"]);
  await expect(page.locator("details.lines summary")).toHaveText("3 lines in this conversation");

  // The history page draws the current line too, and links the other versions of a turn.
  await page.goto(`/agents/${agentId}/history`);
  await expect(answers(page)).toHaveText(["one", "You said:/echo one"]);
  const back = page.locator(".message.kind-user").nth(1).locator("a.branch-prev");
  await expect(back).toHaveAttribute("href", `/agents/${agentId}/history?line=main`);
  await back.click();
  await expect(answers(page)).toHaveText(["one", "two"]);
});

test("two tabs on two lines of one conversation each see only their own", async ({ browser, request }) => {
  const agentId = await createAgent(request, "two tabs");
  const run = await request.post(`/v1/agents/${agentId}/runs`, { data: { content: "/echo shared" } });
  expect(run.status()).toBe(202);
  // Forked after the run's end, once the run has completed: the run is accepted before its
  // first event is written, so a head read earlier may still be 0, and a fork after seq 0 is a
  // branch from the empty start (that raced once, and the branch lacked "shared").
  const runId = (await run.json()).run_id;
  await expect
    .poll(async () => (await (await request.get(`/v1/runs/${runId}`)).json()).status, { timeout: 20_000 })
    .toBe("completed");
  const head = (await (await request.get(`/v1/agents/${agentId}`)).json()).head_seq;
  const forked = await request.post(`/v1/agents/${agentId}/branches`, { data: { after_seq: head } });
  expect(forked.status()).toBe(201);
  const branchId = (await forked.json()).id;

  const main = await browser.newPage();
  const side = await browser.newPage();
  await openLive(main, agentId);
  await openLive(side, branchId);
  await send(side, "/echo on the branch");
  await waitForCompletion(side);
  await expect(answers(side)).toHaveText(["shared", "on the branch"]);
  await send(main, "/echo on the main line");
  await waitForCompletion(main);
  await expect(answers(main)).toHaveText(["shared", "on the main line"]);
  await expect(answers(side)).toHaveText(["shared", "on the branch"]);
  expect(await serverReplies(request, branchId)).toEqual(["shared", "on the branch"]);
  await main.close();
  await side.close();
});
