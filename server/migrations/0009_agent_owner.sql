-- The user an agent was created for (a scoped token's `sub`): its agents list under it, and no
-- other user's token reaches them. NULL: an agent of the operator's, reached by listing its id.
ALTER TABLE agents ADD COLUMN owner TEXT;
CREATE INDEX agents_owner ON agents (owner, created_at) WHERE owner IS NOT NULL;
