import { expect, test } from "@playwright/test";
import { fastPort, fastReplyTokens } from "../playwright.config";
import { createAgent, openLive, send, serverReplies, waitForCompletion } from "./helpers";

// A server whose scripted reply is 10 000 tokens, unpaced: thousands of events a second, more
// than a browser reads frame by frame. The live view asks the server to coalesce, so what waits
// for it arrives merged; the reply must still be exactly the server's.
test.use({ baseURL: `http://127.0.0.1:${fastPort}` });

test("a live view that falls behind a fast stream gets merged appends and the exact reply", async ({
  page,
  request,
}) => {
  const received = { events: 0, merged: 0, seqs: 0 };
  page.on("websocket", (socket) => {
    socket.on("framereceived", ({ payload }) => {
      const message = JSON.parse(typeof payload === "string" ? payload : payload.toString());
      if (message.type !== "events") return;
      for (const event of message.events) {
        received.events++;
        const first = event.coalesced_from ?? event.seq;
        received.seqs += event.seq - first + 1;
        if (event.coalesced_from !== undefined) received.merged++;
      }
    });
  });
  const agentId = await createAgent(request, "fast");
  await openLive(page, agentId);
  await send(page, "stream fast");
  await waitForCompletion(page);

  const [serverText] = await serverReplies(request, agentId);
  expect(serverText.split(" ").length).toBeGreaterThanOrEqual(fastReplyTokens);
  await expect(page.locator(".message.kind-text .body")).toHaveText(serverText);
  // The view fell behind and the server merged what waited for it: fewer events arrived than
  // the seqs they stand for.
  expect(received.merged).toBeGreaterThan(0);
  expect(received.events).toBeLessThan(received.seqs);
});
