import { APIRequestContext, expect, Page } from "@playwright/test";

/** Creates an agent over the API and returns its id. */
export async function createAgent(request: APIRequestContext, name: string): Promise<string> {
  const response = await request.post("/v1/agents", { data: { name } });
  expect(response.status()).toBe(201);
  return (await response.json()).id;
}

/** The text of every `text` message of the agent, folded from the log the server has. */
export async function serverReplies(request: APIRequestContext, agentId: string): Promise<string[]> {
  const replies = new Map<string, string>();
  let since = 0;
  for (;;) {
    const response = await request.get(`/v1/agents/${agentId}/events?since=${since}&limit=1000`);
    expect(response.status()).toBe(200);
    const page = await response.json();
    for (const event of page.events) {
      if (event.kind === "text" && event.delta_action === "append") {
        replies.set(event.message_id, (replies.get(event.message_id) ?? "") + event.delta);
      }
    }
    since = page.next_since;
    if (!page.has_more) return [...replies.values()];
  }
}

/** Opens the live view of an agent and waits until it is subscribed. */
export async function openLive(page: Page, agentId: string) {
  await page.goto(`/agents/${agentId}`);
  await expect(page.locator(".connection")).toHaveAttribute("data-state", "live");
}

export async function send(page: Page, text: string) {
  const composer = page.locator(".composer textarea");
  await composer.fill(text);
  await composer.press("Enter");
}

export async function waitForCompletion(page: Page) {
  await expect(page.locator(".run-status")).toHaveAttribute("data-status", "completed", {
    timeout: 45_000,
  });
}

/** `count` distinct words, so a duplicated or missing word changes the text. */
export function numberedWords(count: number, separator = " "): string {
  return Array.from({ length: count }, (_, index) => `w${index + 1}`).join(separator);
}

/** A Responses API stream event, as the OpenAI clients yield it. */
export type ResponseEvent = { type: string; sequence_number: number; [key: string]: any };

/** Every event of a Responses stream (or those up to the first `stopAfter` accepts). */
export async function collectEvents(
  stream: AsyncIterable<ResponseEvent>,
  stopAfter?: (event: ResponseEvent) => boolean,
): Promise<ResponseEvent[]> {
  const events: ResponseEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (stopAfter?.(event)) break;
  }
  return events;
}
