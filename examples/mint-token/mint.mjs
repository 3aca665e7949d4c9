// Mints an agentstream scoped token in Node, without a library: an HS256 JWT signed with
// AGENTSTREAM_TOKEN_SECRET (its first secret). What POST /v1/tokens answers, for a backend that
// holds the secret instead of the operator token.
//
//   AGENTSTREAM_TOKEN_SECRET=… node mint.mjs alice <agent-id-or-chat-name> "read write" 300
import { createHmac } from "node:crypto";

export function mintToken(secret, { sub, agents, scope, ttlSeconds = 300 }) {
  const encode = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const signed = `${encode({ alg: "HS256", typ: "JWT" })}.${encode({ sub, agents, scope, iat: now, exp: now + ttlSeconds })}`;
  return `${signed}.${createHmac("sha256", secret).update(signed).digest("base64url")}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [sub, agent, scope = "read write approve", ttl = "300"] = process.argv.slice(2);
  const secret = (process.env.AGENTSTREAM_TOKEN_SECRET ?? "").split(",")[0].trim();
  if (!sub || !agent || !secret) {
    console.error("usage: AGENTSTREAM_TOKEN_SECRET=… node mint.mjs <user> <agent> [scope] [ttl seconds]");
    process.exit(2);
  }
  console.log(mintToken(secret, { sub, agents: [agent], scope, ttlSeconds: Number(ttl) }));
}
