-- The log in runs: one row per event, except that consecutive string appends to one message part
-- share a row (`store::chunk`), and ids and times are binary. A streamed token cost ~600 bytes
-- as a row of its own with three indexes; inside a run row it costs its text and two varints.
--
-- `WITHOUT ROWID`: the table is its `(agent_id, first_seq)` B-tree, so a range read walks one
-- tree and a commit touches one leaf per agent (before: the rowid table, the `(agent_id, seq)`
-- index and the id index).
CREATE TABLE events (
    agent_id     TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    first_seq    INTEGER NOT NULL CHECK (first_seq >= 1),
    last_seq     INTEGER NOT NULL CHECK (last_seq >= first_seq),
    id           BLOB NOT NULL,     -- the first event's UUID (16 bytes); the k-th's is id + k
    run_id       BLOB,
    thread_id    BLOB,
    block_id     BLOB,
    message_id   BLOB,
    kind         TEXT NOT NULL,
    -- JSON for a row of one event; for a run row, the events' texts concatenated (not JSON).
    delta        TEXT,
    delta_path   TEXT,
    delta_action TEXT CHECK (delta_action IN ('append', 'replace', 'merge')),
    content      TEXT NOT NULL,     -- JSON
    raw          TEXT,              -- JSON
    metadata     TEXT NOT NULL,     -- JSON
    created_at   INTEGER NOT NULL,  -- the first event's time, ns since the Unix epoch
    -- NULL for a row of one event; for a run row, per event: its text's byte length and its time
    -- after the previous event's (LEB128 varints, the time zigzag).
    pieces       BLOB,
    -- NULL unless an event of the run row has a raw provider event: then theirs, deflated (per
    -- event its JSON's byte length plus one, 0 for none, then the JSON). `raw` stays NULL.
    raws         BLOB,
    PRIMARY KEY (agent_id, first_seq)
) WITHOUT ROWID;

-- The old rows, one event each, ids and times kept exactly (times had up to 9 fraction digits
-- in RFC 3339 with a `+00:00` offset).
INSERT INTO events (agent_id, first_seq, last_seq, id, run_id, thread_id, block_id, message_id,
    kind, delta, delta_path, delta_action, content, raw, metadata, created_at, pieces, raws)
SELECT agent_id, seq, seq, unhex(replace(id, '-', '')), unhex(replace(run_id, '-', '')),
    unhex(replace(thread_id, '-', '')), unhex(replace(block_id, '-', '')),
    unhex(replace(message_id, '-', '')), kind, delta, delta_path, delta_action, content, raw,
    metadata,
    unixepoch(substr(created_at, 1, 19)) * 1000000000 + CASE
        WHEN substr(created_at, 20, 1) = '.' THEN CAST(substr(
            substr(created_at, 21, length(created_at) - 26) || '000000000', 1, 9) AS INTEGER)
        ELSE 0 END,
    NULL, NULL
FROM agent_events ORDER BY agent_id, seq;

DROP TABLE agent_events;

-- Look-up by id (a refused commit's events, found again): a run row is found by its first id.
CREATE UNIQUE INDEX events_id ON events (id);
-- As before: the outline rows only; queries repeat the WHERE term exactly.
CREATE INDEX events_run_outline ON events (run_id)
    WHERE kind IN ('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled');
