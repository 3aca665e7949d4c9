-- Runs are looked up by id only for their outline (start, usage, end): status pages, recovery,
-- the Letta run endpoints. An index on every event's run_id made each commit touch one more
-- leaf page per agent in it (token deltas are nearly all of the log): 37 → 22 WAL pages per
-- commit of 12 agents' events. This partial index holds just the outline rows. Queries must
-- repeat its WHERE term exactly (`store::RUN_OUTLINE_KINDS`) for SQLite to use it.
DROP INDEX agent_events_run;
CREATE INDEX agent_events_run_outline ON agent_events (run_id)
    WHERE kind IN ('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled');
