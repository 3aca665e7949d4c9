-- The PostgreSQL schema: the same log as SQLite's, in native types, plus what several server
-- processes on one database need to agree on (one run per agent, who executes it).
CREATE TABLE agents (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    system      text,
    description text,
    model       text,
    metadata    json NOT NULL,
    tags        json NOT NULL,
    -- The newest committed seq. Bumped (row-locked) in the transaction that inserts the events,
    -- so writers on any number of processes are serialized per agent: no gap, no duplicate, and
    -- commit order = seq order.
    head_seq    bigint NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
    created_at  timestamptz NOT NULL
);
CREATE INDEX agents_newest ON agents (created_at DESC, id);

CREATE TABLE agent_events (
    agent_id     uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    seq          bigint NOT NULL CHECK (seq >= 1),
    id           uuid NOT NULL UNIQUE,              -- the dedup key
    run_id       uuid,
    thread_id    uuid,
    block_id     uuid,
    message_id   uuid,
    kind         text NOT NULL,
    delta        json,
    delta_path   text,
    delta_action text CHECK (delta_action IN ('append', 'replace', 'merge')),
    content      json NOT NULL,
    raw          json,
    metadata     json NOT NULL,
    created_at   timestamptz NOT NULL,
    -- Range reads `WHERE agent_id = $1 AND seq > $2 ORDER BY seq` walk this index.
    PRIMARY KEY (agent_id, seq)
);
CREATE INDEX agent_events_run ON agent_events (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX agent_events_run_started ON agent_events (run_id) WHERE kind = 'run_started';

CREATE TABLE run_keys (
    agent_id        uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    idempotency_key text NOT NULL,
    run_id          uuid NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, idempotency_key)
);

-- The run each agent is executing, cluster-wide (one per agent), and the process executing it.
-- The owner renews its lease while the run goes on; a run whose lease ran out lost its process
-- and is ended as interrupted by whichever process sees it first. Events of a run are accepted
-- only while its row is here and the writer owns it (or its lease ran out): a process that lost
-- its run cannot write into the log after another one ended it. The run's terminal event deletes
-- the row in the same transaction.
CREATE TABLE active_runs (
    agent_id    uuid PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    run_id      uuid NOT NULL UNIQUE,
    owner_id    uuid NOT NULL,
    lease_until timestamptz NOT NULL
);
CREATE INDEX active_runs_owner ON active_runs (owner_id);
