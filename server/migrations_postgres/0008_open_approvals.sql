-- Approval requests nobody has answered yet, kept by the append transaction like `open_runs`
-- (see the SQLite migration of the same name).
CREATE TABLE open_approvals (
    agent_id     uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    tool_call_id text NOT NULL,
    requested_at timestamptz NOT NULL,
    PRIMARY KEY (agent_id, tool_call_id)
);
CREATE INDEX open_approvals_oldest ON open_approvals (requested_at);

INSERT INTO open_approvals (agent_id, tool_call_id, requested_at)
SELECT asked.agent_id, asked.content->>'tool_call_id', asked.created_at
FROM events AS asked
WHERE asked.kind = 'approval_requested'
  AND asked.content->>'tool_call_id' IS NOT NULL
  AND NOT EXISTS (
    SELECT 1 FROM events AS answered
    WHERE answered.agent_id = asked.agent_id AND answered.first_seq > asked.first_seq
      AND answered.kind IN ('approval_response', 'tool_result')
      AND answered.content->>'tool_call_id' = asked.content->>'tool_call_id')
ON CONFLICT DO NOTHING;
