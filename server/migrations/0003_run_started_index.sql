-- Start-up recovery looks for runs that started and never ended; this partial index holds just
-- the `run_started` rows, so that look-up does not scan the whole log.
CREATE INDEX agent_events_run_started ON agent_events (run_id) WHERE kind = 'run_started';
