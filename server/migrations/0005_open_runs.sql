-- Runs that started and have not ended, kept by the append transaction (a `run_started` adds its
-- run, the run's end removes it). Recovery reads this table: before, it looked at every
-- `run_started` row the log ever had, a cost that grew with every run.
CREATE TABLE open_runs (
    run_id      TEXT PRIMARY KEY NOT NULL,
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    started_seq INTEGER NOT NULL
);

INSERT INTO open_runs (run_id, agent_id, started_seq)
SELECT started.run_id, started.agent_id, started.seq
FROM agent_events AS started
WHERE started.kind = 'run_started' AND started.run_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM agent_events AS ended WHERE ended.run_id = started.run_id
    AND ended.kind IN ('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled')
    AND ended.kind IN ('run_completed', 'run_failed', 'run_cancelled'));
