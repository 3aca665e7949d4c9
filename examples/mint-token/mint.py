"""Mints an agentstream scoped token in Python, standard library only: an HS256 JWT signed with
AGENTSTREAM_TOKEN_SECRET (its first secret). What POST /v1/tokens answers, for a backend that
holds the secret instead of the operator token.

    AGENTSTREAM_TOKEN_SECRET=… python3 mint.py alice <agent-id-or-chat-name> "read write" 300
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time


def mint_token(secret: str, sub: str, agents: list[str], scope: str, ttl_seconds: int = 300) -> str:
    def encode(value) -> bytes:
        text = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(text).rstrip(b"=")

    now = int(time.time())
    claims = {"sub": sub, "agents": agents, "scope": scope, "iat": now, "exp": now + ttl_seconds}
    signed = encode({"alg": "HS256", "typ": "JWT"}) + b"." + encode(claims)
    signature = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    return (signed + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()


if __name__ == "__main__":
    secret = os.environ.get("AGENTSTREAM_TOKEN_SECRET", "").split(",")[0].strip()
    if len(sys.argv) < 3 or not secret:
        sys.exit("usage: AGENTSTREAM_TOKEN_SECRET=… python3 mint.py <user> <agent> [scope] [ttl seconds]")
    scope = sys.argv[3] if len(sys.argv) > 3 else "read write approve"
    ttl = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    print(mint_token(secret, sys.argv[1], [sys.argv[2]], scope, ttl))
