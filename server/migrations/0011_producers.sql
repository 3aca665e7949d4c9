-- External producers' positions (the producer API, `agent::produce`): per agent and producer id,
-- the epoch and the seq of the last batch committed, and the run it went to. Written by the
-- append transaction that commits the batch, so a batch and its seq commit together or not at
-- all: a retry after a lost answer is a duplicate, never a second copy.
CREATE TABLE producers (
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    producer_id TEXT NOT NULL,
    epoch       INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    run_id      BLOB,
    updated_at  INTEGER NOT NULL,  -- Unix nanoseconds
    PRIMARY KEY (agent_id, producer_id)
);
