-- Idempotent run requests: the first request with a key claims it for its run; retries with the
-- same key get that run back instead of starting another.
CREATE TABLE run_keys (
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    idempotency_key TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (agent_id, idempotency_key)
);
