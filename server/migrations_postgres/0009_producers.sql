-- External producers' positions (see the SQLite migration of the same name).
CREATE TABLE producers (
    agent_id    uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    producer_id text NOT NULL,
    epoch       bigint NOT NULL,
    seq         bigint NOT NULL,
    run_id      uuid,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (agent_id, producer_id)
);
