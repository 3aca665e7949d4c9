-- Approval requests nobody has answered yet, kept by the append transaction like `open_runs`
-- (an `approval_requested` adds its call, the call's `approval_response` or `tool_result`
-- removes it). The approval timeout reads it, so a request whose time ran out while the server
-- was down is answered at the next start; `requested_at` is the request's own time.
CREATE TABLE open_approvals (
    agent_id     TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    tool_call_id TEXT NOT NULL,
    requested_at INTEGER NOT NULL,  -- Unix nanoseconds, as the event's `created_at`
    PRIMARY KEY (agent_id, tool_call_id)
);
CREATE INDEX open_approvals_oldest ON open_approvals (requested_at);

INSERT OR IGNORE INTO open_approvals (agent_id, tool_call_id, requested_at)
SELECT asked.agent_id, json_extract(asked.content, '$.tool_call_id'), asked.created_at
FROM events AS asked
WHERE asked.kind = 'approval_requested'
  AND json_extract(asked.content, '$.tool_call_id') IS NOT NULL
  AND NOT EXISTS (
    SELECT 1 FROM events AS answered
    WHERE answered.agent_id = asked.agent_id AND answered.first_seq > asked.first_seq
      AND answered.kind IN ('approval_response', 'tool_result')
      AND json_extract(answered.content, '$.tool_call_id')
          = json_extract(asked.content, '$.tool_call_id'));
