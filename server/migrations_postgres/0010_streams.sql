-- Durable streams (see the SQLite migration of the same name).
CREATE TABLE streams (
    path         text PRIMARY KEY,
    log_id       uuid NOT NULL UNIQUE REFERENCES agents(id) ON DELETE CASCADE,
    content_type text NOT NULL,
    ttl_seconds  bigint,
    expires_at   text,
    closed       boolean NOT NULL DEFAULT false,
    closed_by    text,
    stream_seq   text,
    created_at   bigint NOT NULL,
    accessed_at  bigint NOT NULL,
    forked_from     text,
    fork_offset     bigint,
    fork_sub_offset bigint,
    base_offset     bigint NOT NULL DEFAULT 0,
    soft_deleted    boolean NOT NULL DEFAULT false
);
CREATE INDEX streams_forked_from ON streams (forked_from) WHERE forked_from IS NOT NULL;
