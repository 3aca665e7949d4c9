-- Each agent's folded timeline as of a seq, so the first read of a long log after a restart
-- starts there instead of folding the log again (`agent::history`). The log stays the source of
-- truth: a snapshot is used only while the event at `last_seq` is still `event_id`, and is
-- replaced by a newer fold.
CREATE TABLE timeline_snapshots (
    agent_id TEXT PRIMARY KEY NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    last_seq INTEGER NOT NULL CHECK (last_seq >= 1),
    event_id BLOB NOT NULL,     -- the id of the event at `last_seq`
    body     BLOB NOT NULL      -- the `Timeline` as JSON, deflated
);
