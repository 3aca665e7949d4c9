-- Each agent's folded timeline as of a seq (see the SQLite migration of the same name).
CREATE TABLE timeline_snapshots (
    agent_id uuid PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    last_seq bigint NOT NULL CHECK (last_seq >= 1),
    event_id uuid NOT NULL,
    body     bytea NOT NULL
);
