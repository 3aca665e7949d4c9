-- The newest rows of every log, in commit order (`store/sqlite/recent.rs`). A commit of single
-- appends to many logs wrote one row per log into `events`, each into that log's own leaf of the
-- `(agent_id, first_seq)` tree: a 4 KiB page to the WAL per ~100-byte row. Here the rows of a
-- commit go to the end of one tree (a page or two per commit), and the append thread moves them
-- into `events` in bulk, one transaction per move, so every event is in exactly one of the two.
-- The columns are `events`'s; `n` is the commit order, given by the append thread from
-- `recent_next` below (never reused, so a reader holding an old `n` never lands on another row;
-- SQLite's own rowids restart at 1 once the table empties, and AUTOINCREMENT costs a write per
-- row).
-- `delta_action`'s check is spelled without `IN`: a list of three made SQLite build a temporary
-- B-tree for every row inserted.
CREATE TABLE recent (
    n            INTEGER PRIMARY KEY,
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
    delta_action TEXT CHECK (delta_action = 'append' OR delta_action = 'replace'
                             OR delta_action = 'merge'),
    content      TEXT NOT NULL,
    raw          TEXT,
    metadata     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    pieces       BLOB,
    raws         BLOB
);

-- The next `n` any writer may give (one row). A commit reads it before it inserts into `recent`
-- and raises it before it commits, so `n` only grows, also with two processes on one file.
CREATE TABLE recent_next (n INTEGER NOT NULL);
INSERT INTO recent_next (n) VALUES (1);
