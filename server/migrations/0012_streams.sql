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
    accessed_at  INTEGER NOT NULL  -- Unix milliseconds: a TTL counts from here
);
