// The app's backend: serves the page from its own origin and, for a signed-in user, makes sure
// they have an agent on agentstream and mints them a short-lived token for it. It holds the
// operator token; the browser never sees it. Everything else (streaming, resume, stop,
// approvals) goes from the browser straight to agentstream with the user's token.
//
//   AGENTSTREAM_URL=http://127.0.0.1:3000 AGENTSTREAM_API_TOKEN=… node server.mjs
//
// Node's standard library only. A real app has its own sign-in; here the user is whoever the
// page says it is (`POST /api/session {"user": "alice"}`), which is fine for a demo only.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const agentstream = (process.env.AGENTSTREAM_URL ?? "http://127.0.0.1:3000").replace(/\/$/, "");
const operatorToken = process.env.AGENTSTREAM_API_TOKEN;
const port = Number(process.env.PORT ?? 5173);
/** How long a browser token lives: short, the page renews it before it runs out. */
const tokenTtlSeconds = Number(process.env.TOKEN_TTL_S ?? 300);
const userNameCharsMax = 64;
const requestBodyBytesMax = 4096;

if (!operatorToken) {
  console.error("set AGENTSTREAM_API_TOKEN (the operator token of the agentstream server)");
  process.exit(1);
}

/** A call to agentstream as the operator. */
async function operator(path, init = {}) {
  const response = await fetch(`${agentstream}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json", ...init.headers },
  });
  const body = await response.json();
  if (!response.ok) throw new Error(`agentstream ${path}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

/** The user's agent: the one agentstream lists under them, or a new one made for them. */
async function agentOf(user) {
  const owned = await operator(`/v1/agents?owner=${encodeURIComponent(user)}&limit=1`);
  if (owned.length > 0) return owned[0].id;
  const created = await operator("/v1/agents", {
    method: "POST",
    body: JSON.stringify({
      name: `${user}'s assistant`,
      owner: user,
      // The calculator asks the user first: approvals from the browser.
      metadata: { requires_approval: ["calculator"] },
    }),
  });
  return created.id;
}

async function session(user) {
  const chatId = await agentOf(user);
  const minted = await operator("/v1/tokens", {
    method: "POST",
    body: JSON.stringify({ sub: user, agents: [chatId], scope: "read write approve", ttl_s: tokenTtlSeconds }),
  });
  return { agentstream, chatId, token: minted.token, expiresAt: minted.expires_at };
}

async function readBody(request) {
  let body = "";
  for await (const chunk of request) {
    body += chunk;
    if (body.length > requestBodyBytesMax) throw new Error("body too large");
  }
  return JSON.parse(body || "{}");
}

const files = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/app.js": ["public/app.js", "text/javascript; charset=utf-8"],
};

createServer(async (request, response) => {
  const answer = (status, body) => {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify(body));
  };
  try {
    const path = new URL(request.url, "http://localhost").pathname;
    if (request.method === "POST" && path === "/api/session") {
      const { user } = await readBody(request);
      if (typeof user !== "string" || !/^[A-Za-z0-9_-]+$/.test(user) || user.length > userNameCharsMax) {
        return answer(422, { error: `user must be 1–${userNameCharsMax} characters of A–Z, a–z, 0–9, _ and -` });
      }
      return answer(200, await session(user));
    }
    const file = request.method === "GET" && files[path];
    if (!file) return answer(404, { error: "not found" });
    response.writeHead(200, { "content-type": file[1], "cache-control": "no-cache" });
    response.end(await readFile(join(here, file[0])));
  } catch (error) {
    console.error(error);
    answer(502, { error: String(error.message ?? error) });
  }
}).listen(port, "127.0.0.1", () => console.log(`example app on http://127.0.0.1:${port}, agentstream at ${agentstream}`));
