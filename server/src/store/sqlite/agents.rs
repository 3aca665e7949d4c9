//! Agents, chat names and run keys on SQLite: the rows beside the log.

use crate::store::StoreResult;
use app::protocol::Agent;
use async_trait::async_trait;
use chrono::Utc;
use uuid::Uuid;

use super::convert::parse_uuid;
use super::sql::{agent_from_row, AGENT_COLUMNS};
use super::SqliteStore;
use crate::store::error::unknown_agent_or;
use crate::store::rows::json_text;
use crate::store::{Agents, NewAgent, RunKeys, RUN_OUTLINE_KINDS};

#[async_trait]
impl Agents for SqliteStore {
    async fn create_agent(&self, agent: NewAgent) -> StoreResult<Agent> {
        let _turn = self.pool_write();
        let created = agent.into_agent(Utc::now());
        sqlx::query(
            "INSERT INTO agents (id, name, system, description, model, metadata, tags, head_seq, \
             created_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
        )
        .bind(created.id.to_string())
        .bind(&created.name)
        .bind(&created.system)
        .bind(&created.description)
        .bind(&created.model)
        .bind(json_text(&created.metadata))
        .bind(json_text(&serde_json::json!(created.tags)))
        .bind(created.created_at.to_rfc3339())
        .bind(&created.owner)
        .execute(&self.pool)
        .await?;
        Ok(created)
    }

    async fn list_agents(&self, owner: Option<&str>, limit: u32) -> StoreResult<Vec<Agent>> {
        let rows = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE (?1 IS NULL OR owner = ?1) \
             AND root_id IS NULL AND NOT EXISTS (SELECT 1 FROM streams WHERE log_id = agents.id) \
             ORDER BY created_at DESC, id LIMIT ?2"
        ))
        .bind(owner)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn get_agent(&self, agent_id: Uuid) -> StoreResult<Option<Agent>> {
        // A durable stream's log is no agent.
        let row = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM streams WHERE log_id = ?1)"
        ))
        .bind(agent_id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(agent_from_row).transpose()
    }

    async fn delete_agent(&self, agent_id: Uuid) -> StoreResult<bool> {
        let _turn = self.pool_write();
        let result = sqlx::query("DELETE FROM agents WHERE id = ?")
            .bind(agent_id.to_string())
            .execute(&self.pool)
            .await;
        // Its branches went with it (a cascade): every kept head is forgotten.
        self.known.deleted();
        Ok(result?.rows_affected() > 0)
    }

    async fn chat_agent(&self, chat_id: &str) -> StoreResult<Option<Uuid>> {
        let agent_id: Option<String> =
            sqlx::query_scalar("SELECT agent_id FROM chat_agents WHERE chat_id = ?")
                .bind(chat_id)
                .fetch_optional(&self.pool)
                .await?;
        agent_id.map(|text| parse_uuid(&text)).transpose()
    }

    async fn claim_chat(&self, chat_id: &str, agent_id: Uuid) -> StoreResult<bool> {
        let _turn = self.pool_write();
        let result = sqlx::query(
            "INSERT INTO chat_agents (chat_id, agent_id, created_at) VALUES (?, ?, ?) \
             ON CONFLICT (chat_id) DO NOTHING",
        )
        .bind(chat_id)
        .bind(agent_id.to_string())
        .bind(Utc::now().to_rfc3339())
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }
}

#[async_trait]
impl RunKeys for SqliteStore {
    async fn release_unstarted_run_keys(&self) -> StoreResult<u64> {
        let _turn = self.pool_write();
        // `kind IN` the outline kinds as well: the look-up walks the outline index.
        let released = sqlx::query(&format!(
            "DELETE FROM run_keys WHERE NOT EXISTS ( \
                 SELECT 1 FROM events WHERE events.run_id = unhex(replace(run_keys.run_id, '-', '')) \
                 AND events.kind IN {RUN_OUTLINE_KINDS} AND events.kind = 'run_started') \
             AND NOT EXISTS (SELECT 1 FROM recent \
                 WHERE recent.run_id = unhex(replace(run_keys.run_id, '-', '')) \
                 AND recent.kind = 'run_started')"
        ))
        .execute(&self.pool)
        .await?;
        Ok(released.rows_affected())
    }

    async fn claim_run_key(&self, agent_id: Uuid, key: &str, run_id: Uuid) -> StoreResult<Uuid> {
        let _turn = self.pool_write();
        let mut transaction = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO run_keys (agent_id, idempotency_key, run_id, created_at) \
             VALUES (?, ?, ?, ?) ON CONFLICT (agent_id, idempotency_key) DO NOTHING",
        )
        .bind(agent_id.to_string())
        .bind(key)
        .bind(run_id.to_string())
        .bind(Utc::now().to_rfc3339())
        .execute(&mut *transaction)
        .await
        .map_err(unknown_agent_or(agent_id))?;
        let holder: String = if inserted.rows_affected() == 1 {
            run_id.to_string()
        } else {
            sqlx::query_scalar(
                "SELECT run_id FROM run_keys WHERE agent_id = ? AND idempotency_key = ?",
            )
            .bind(agent_id.to_string())
            .bind(key)
            .fetch_one(&mut *transaction)
            .await?
        };
        transaction.commit().await?;
        parse_uuid(&holder)
    }

    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> StoreResult<()> {
        let _turn = self.pool_write();
        sqlx::query("DELETE FROM run_keys WHERE agent_id = ? AND idempotency_key = ?")
            .bind(agent_id.to_string())
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
