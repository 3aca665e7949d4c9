-- Branches: a conversation's other lines. A branch is a log of its own (an agents row no agent
-- list shows, with the conversation's settings copied) whose first `fork_seq` events are its
-- parent's, read from the parent and never copied: forking costs one row, however long the
-- conversation. Its own events start at `fork_seq + 1`, so every branch is gapless from 1.
-- `root_id` is the conversation (the agent people see); deleting it deletes its branches.
ALTER TABLE agents ADD COLUMN root_id TEXT REFERENCES agents(id) ON DELETE CASCADE;
ALTER TABLE agents ADD COLUMN parent_id TEXT;
ALTER TABLE agents ADD COLUMN fork_seq INTEGER CHECK (fork_seq >= 0);
-- On a conversation: the branch its clients follow (NULL: its own log, the main line).
ALTER TABLE agents ADD COLUMN current_branch TEXT;
CREATE INDEX agents_root ON agents (root_id, created_at) WHERE root_id IS NOT NULL;
CREATE INDEX agents_parent ON agents (parent_id) WHERE parent_id IS NOT NULL;
