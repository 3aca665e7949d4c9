-- The per-agent append-only event log.
CREATE TABLE agents (
    id          TEXT PRIMARY KEY NOT NULL,          -- UUID, hyphenated
    name        TEXT NOT NULL,
    system      TEXT,
    description TEXT,
    model       TEXT,
    metadata    TEXT NOT NULL DEFAULT 'null',       -- JSON
    tags        TEXT NOT NULL DEFAULT '[]',         -- JSON array of strings
    -- The newest committed seq. Bumped in the same transaction that inserts the events, so seq
    -- allocation is serialized by the database and gapless.
    head_seq    INTEGER NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
    created_at  TEXT NOT NULL                       -- RFC 3339
);

CREATE TABLE agent_events (
    id           TEXT PRIMARY KEY NOT NULL,         -- UUID v4: the dedup key
    agent_id     TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    run_id       TEXT,
    thread_id    TEXT,
    block_id     TEXT,
    message_id   TEXT,
    kind         TEXT NOT NULL,
    delta        TEXT,                              -- JSON
    delta_path   TEXT,
    delta_action TEXT CHECK (delta_action IN ('append', 'replace', 'merge')),
    content      TEXT NOT NULL,                     -- JSON
    raw          TEXT,                              -- JSON
    metadata     TEXT NOT NULL,                     -- JSON
    created_at   TEXT NOT NULL,                     -- RFC 3339
    -- The index SQLite builds for this constraint is the one range reads
    -- `WHERE agent_id = ? AND seq > ? ORDER BY seq` walk (checked with EXPLAIN QUERY PLAN in
    -- the store's tests).
    UNIQUE (agent_id, seq)
);

CREATE INDEX agent_events_run ON agent_events (run_id);
