-- Chat ids of the AI SDK surface (`POST /v1/ai-sdk/chat {id}`) that are not agent ids, to the
-- agent each was given on first use: found again later, gone with the agent.
CREATE TABLE chat_agents (
    chat_id    text PRIMARY KEY,
    agent_id   uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL
);
