-- Durable streams (`surfaces/durable`): a path, its settings, and the log its messages are in —
-- an agents row that no agent list shows, so messages get the log's gapless seqs, its writer,
-- its hub and its readers. Deleting the log deletes the stream.
CREATE TABLE streams (
    path         TEXT PRIMARY KEY,
    log_id       TEXT NOT NULL UNIQUE REFERENCES agents(id) ON DELETE CASCADE,
    content_type TEXT NOT NULL,
    ttl_seconds  INTEGER,
    expires_at   TEXT,            -- Stream-Expires-At as the creator gave it
    closed       INTEGER NOT NULL DEFAULT 0,
    closed_by    TEXT,            -- JSON {producer_id, epoch, seq} of the producer that closed it
    stream_seq   TEXT,            -- the last Stream-Seq a writer sent
    created_at   INTEGER NOT NULL, -- Unix milliseconds
    accessed_at  INTEGER NOT NULL, -- Unix milliseconds: a TTL counts from here
    -- A fork: the stream it was forked from, where (Stream-Fork-Offset's seq and sub-offset as
    -- asked), and the offset its own messages start after (its log's seq N is offset base + N).
    forked_from     TEXT,
    fork_offset     INTEGER,
    fork_sub_offset INTEGER,
    base_offset     INTEGER NOT NULL DEFAULT 0,
    -- Deleted while forks still read it: gone for everyone else, kept for them.
    soft_deleted    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX streams_forked_from ON streams (forked_from) WHERE forked_from IS NOT NULL;
