-- Runs are looked up by id only for their outline (start, usage, end); an index on every
-- event's run_id cost each commit one more index page per agent in it. This partial index
-- holds just the outline rows (see the SQLite migration of the same name).
DROP INDEX agent_events_run;
CREATE INDEX agent_events_run_outline ON agent_events (run_id)
    WHERE kind IN ('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled');
