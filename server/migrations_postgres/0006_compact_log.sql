-- The log in runs, as in SQLite (see its migration of the same name): one row per event, except
-- that consecutive string appends to one message part share a row (`store::chunk`). The table is
-- keyed by `(agent_id, first_seq)`; a run row's `delta` is its events' texts concatenated (so
-- `text`, not `json`), `pieces` their lengths and time deltas, `raws` their raw events deflated.
CREATE TABLE events (
    agent_id     uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    first_seq    bigint NOT NULL CHECK (first_seq >= 1),
    last_seq     bigint NOT NULL CHECK (last_seq >= first_seq),
    id           uuid NOT NULL,     -- the first event's id; the k-th's is id + k
    run_id       uuid,
    thread_id    uuid,
    block_id     uuid,
    message_id   uuid,
    kind         text NOT NULL,
    delta        text,
    delta_path   text,
    delta_action text CHECK (delta_action IN ('append', 'replace', 'merge')),
    content      json NOT NULL,
    raw          json,
    metadata     json NOT NULL,
    created_at   timestamptz NOT NULL,  -- the first event's time
    pieces       bytea,
    raws         bytea,
    PRIMARY KEY (agent_id, first_seq)
);

INSERT INTO events (agent_id, first_seq, last_seq, id, run_id, thread_id, block_id, message_id,
    kind, delta, delta_path, delta_action, content, raw, metadata, created_at, pieces, raws)
SELECT agent_id, seq, seq, id, run_id, thread_id, block_id, message_id, kind, delta::text,
    delta_path, delta_action, content, raw, metadata, created_at, NULL, NULL
FROM agent_events ORDER BY agent_id, seq;

DROP TABLE agent_events;

CREATE UNIQUE INDEX events_id ON events (id);
CREATE INDEX events_run_outline ON events (run_id)
    WHERE kind IN ('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled');
