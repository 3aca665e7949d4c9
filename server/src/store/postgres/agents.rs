//! Agents, chat names and run keys on PostgreSQL: the rows beside the log.

use crate::store::StoreResult;
use app::protocol::Agent;
use async_trait::async_trait;
use chrono::Utc;
use uuid::Uuid;

use super::{agent_from_row, micros, PgStore, AGENT_COLUMNS};
use crate::store::error::unknown_agent_or;
use crate::store::rows::json_text;
use crate::store::{Agents, NewAgent, RunKeys};

#[async_trait]
impl Agents for PgStore {
    async fn create_agent(&self, agent: NewAgent) -> StoreResult<Agent> {
        let created = agent.into_agent(micros(Utc::now()));
        sqlx::query(
            "INSERT INTO agents (id, name, system, description, model, metadata, tags, head_seq, \
             created_at, owner) VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, 0, $8, $9)",
        )
        .bind(created.id)
        .bind(&created.name)
        .bind(&created.system)
        .bind(&created.description)
        .bind(&created.model)
        .bind(json_text(&created.metadata))
        .bind(json_text(&serde_json::json!(created.tags)))
        .bind(created.created_at)
        .bind(&created.owner)
        .execute(&self.pool)
        .await?;
        Ok(created)
    }

    async fn list_agents(&self, owner: Option<&str>, limit: u32) -> StoreResult<Vec<Agent>> {
        let rows = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE ($1::text IS NULL OR owner = $1) \
             AND root_id IS NULL AND NOT EXISTS (SELECT 1 FROM streams WHERE log_id = agents.id) \
             ORDER BY created_at DESC, id LIMIT $2"
        ))
        .bind(owner)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn get_agent(&self, agent_id: Uuid) -> StoreResult<Option<Agent>> {
        // A durable stream's log is no agent.
        let row = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1 \
             AND NOT EXISTS (SELECT 1 FROM streams WHERE log_id = $1)"
        ))
        .bind(agent_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(agent_from_row).transpose()
    }

    async fn delete_agent(&self, agent_id: Uuid) -> StoreResult<bool> {
        let result = sqlx::query("DELETE FROM agents WHERE id = $1")
            .bind(agent_id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn chat_agent(&self, chat_id: &str) -> StoreResult<Option<Uuid>> {
        let agent_id = sqlx::query_scalar("SELECT agent_id FROM chat_agents WHERE chat_id = $1")
            .bind(chat_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(agent_id)
    }

    async fn claim_chat(&self, chat_id: &str, agent_id: Uuid) -> StoreResult<bool> {
        let result = sqlx::query(
            "INSERT INTO chat_agents (chat_id, agent_id, created_at) VALUES ($1, $2, now()) \
             ON CONFLICT (chat_id) DO NOTHING",
        )
        .bind(chat_id)
        .bind(agent_id)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }
}

#[async_trait]
impl RunKeys for PgStore {
    async fn release_unstarted_run_keys(&self) -> StoreResult<u64> {
        // Another process may be between claiming and starting right now: only what is older
        // than a lease and not executing anywhere is given back.
        let lease = self.run_lease_ms as f64 / 1000.0;
        let slots = sqlx::query(
            "DELETE FROM active_runs WHERE lease_until < now() AND NOT EXISTS ( \
                 SELECT 1 FROM events WHERE events.run_id = active_runs.run_id \
                 AND events.kind = 'run_started')",
        )
        .execute(&self.pool)
        .await?;
        let keys = sqlx::query(
            "DELETE FROM run_keys WHERE created_at < now() - make_interval(secs => $1) \
             AND NOT EXISTS (SELECT 1 FROM events WHERE events.run_id = \
                 run_keys.run_id AND events.kind = 'run_started') \
             AND NOT EXISTS (SELECT 1 FROM active_runs WHERE active_runs.run_id = run_keys.run_id)",
        )
        .bind(lease)
        .execute(&self.pool)
        .await?;
        Ok(slots.rows_affected() + keys.rows_affected())
    }

    async fn claim_run_key(&self, agent_id: Uuid, key: &str, run_id: Uuid) -> StoreResult<Uuid> {
        // Insert-or-read in one statement; a concurrent claimer of the same key on another
        // process waits on the unique index and then reads the winner.
        let inserted: Option<Uuid> = sqlx::query_scalar(
            "INSERT INTO run_keys (agent_id, idempotency_key, run_id) VALUES ($1, $2, $3) \
             ON CONFLICT (agent_id, idempotency_key) DO NOTHING RETURNING run_id",
        )
        .bind(agent_id)
        .bind(key)
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(unknown_agent_or(agent_id))?;
        if let Some(run_id) = inserted {
            return Ok(run_id);
        }
        let holder: Uuid = sqlx::query_scalar(
            "SELECT run_id FROM run_keys WHERE agent_id = $1 AND idempotency_key = $2",
        )
        .bind(agent_id)
        .bind(key)
        .fetch_one(&self.pool)
        .await?;
        Ok(holder)
    }

    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM run_keys WHERE agent_id = $1 AND idempotency_key = $2")
            .bind(agent_id)
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
