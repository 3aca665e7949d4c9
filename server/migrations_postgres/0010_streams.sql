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
    accessed_at  bigint NOT NULL
);
