-- `events` as a rowid table, its `(agent_id, first_seq)` key a unique index beside it.
--
-- As a `WITHOUT ROWID` table the log was an index B-tree whose cells are whole rows, and an
-- index B-tree keeps at most ~1 000 bytes of a cell on its 4 KiB page. A row of one append's
-- messages (64 messages of ~45 bytes: ~3 KB) spilled to an overflow page, and SQLite compares a
-- key with a spilled cell only after copying the cell whole (`sqlite3BtreeIndexMoveto`): every
-- insert's descent copied the rows it passed, ~10 % of the server's CPU under 64-message
-- appends. Here the search is by the key's own small index, a new row goes to the end of the
-- table (rowids only grow), and a table leaf keeps ~4 000 bytes of a row, so those rows no
-- longer spill at all. Measured beside the old layout (`./scripts/bench.sh --peers`): 64-message
-- appends +11–22 %, bytes written per message 360 → 258, on disk 88 → 76; a streamed token's
-- share of the log 16.0 → 13.7 bytes (appended rows fill the table's pages).
--
-- The rows are copied in key order, so each log's old rows stay together. The copy runs once, at
-- the first start of a build with this migration, and leaves the old table's pages free inside
-- the file: later rows reuse them, `VACUUM` (offline) gives them back to the file system. A
-- 666 MB log of 8.9 million stream messages took ~3 s, and its file grew to 1.24 GB.
CREATE TABLE events_new (
    agent_id     TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    first_seq    INTEGER NOT NULL CHECK (first_seq >= 1),
    last_seq     INTEGER NOT NULL CHECK (last_seq >= first_seq),
    id           BLOB NOT NULL,
    run_id       BLOB,
    thread_id    BLOB,
    block_id     BLOB,
    message_id   BLOB,
    kind         TEXT NOT NULL,
    delta        TEXT,
    delta_path   TEXT,
    delta_action TEXT CHECK (delta_action IN ('append', 'replace', 'merge')),
    content      TEXT NOT NULL,
    raw          TEXT,
    metadata     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    pieces       BLOB,
    raws         BLOB
);
INSERT INTO events_new SELECT agent_id, first_seq, last_seq, id, run_id, thread_id, block_id,
    message_id, kind, delta, delta_path, delta_action, content, raw, metadata, created_at, pieces,
    raws FROM events ORDER BY agent_id, first_seq;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_key ON events (agent_id, first_seq);
CREATE UNIQUE INDEX events_id ON events (id);
CREATE INDEX events_run_outline ON events (run_id)
    WHERE kind IN ('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled');
