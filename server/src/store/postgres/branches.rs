//! Branches on PostgreSQL: rows of `agents` with an origin (`store::branches`).

use crate::store::StoreResult;
use app::protocol::{Agent, BranchOrigin};
use async_trait::async_trait;
use chrono::Utc;
use sqlx::Row;
use uuid::Uuid;

use super::{agent_from_row, micros, PgStore, AGENT_COLUMNS};
use crate::store::branches::{BranchDeletion, Branches, BRANCHES_PER_CONVERSATION_MAX};
use crate::store::rows::{json_text, seq_from_column, seq_to_column};

#[async_trait]
impl Branches for PgStore {
    async fn fork_origin(&self, log: Uuid) -> StoreResult<Option<(Uuid, u64)>> {
        let row = sqlx::query(
            "SELECT parent_id, fork_seq FROM agents WHERE id = $1 AND parent_id IS NOT NULL",
        )
        .bind(log)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| Ok((row.try_get("parent_id")?, seq_from_column(row.try_get("fork_seq")?)?)))
            .transpose()
    }

    async fn insert_branch(
        &self,
        source: &Agent,
        root: Uuid,
        fork_seq: u64,
    ) -> StoreResult<Option<Agent>> {
        let branch = Agent {
            id: Uuid::new_v4(),
            head_seq: fork_seq,
            created_at: micros(Utc::now()),
            branch: Some(BranchOrigin { root, parent: source.id, fork_seq }),
            current_branch: None,
            ..source.clone()
        };
        // The count and the insert under the conversation's row lock: two forks at once on
        // two servers cannot both take the last place.
        let mut transaction = self.pool.begin().await?;
        let count: Option<i64> = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM agents WHERE root_id = $1) FROM agents \
             WHERE id = $1 FOR UPDATE",
        )
        .bind(root)
        .fetch_optional(&mut *transaction)
        .await?;
        if count.is_none_or(|count| count >= i64::from(BRANCHES_PER_CONVERSATION_MAX)) {
            return Ok(None);
        }
        sqlx::query(
            "INSERT INTO agents (id, name, system, description, model, metadata, tags, head_seq, \
             created_at, owner, root_id, parent_id, fork_seq) \
             VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, $8, $9, $10, $11, $12, $8)",
        )
        .bind(branch.id)
        .bind(&branch.name)
        .bind(&branch.system)
        .bind(&branch.description)
        .bind(&branch.model)
        .bind(json_text(&branch.metadata))
        .bind(json_text(&serde_json::json!(branch.tags)))
        .bind(seq_to_column(fork_seq)?)
        .bind(branch.created_at)
        .bind(&branch.owner)
        .bind(root)
        .bind(source.id)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(Some(branch))
    }

    async fn list_branches(&self, root: Uuid) -> StoreResult<Vec<Agent>> {
        let rows = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE root_id = $1 ORDER BY created_at, id \
             LIMIT $2"
        ))
        .bind(root)
        .bind(i64::from(BRANCHES_PER_CONVERSATION_MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn set_current_branch(&self, root: Uuid, branch: Option<Uuid>) -> StoreResult<bool> {
        let updated = sqlx::query(
            "UPDATE agents SET current_branch = $2 WHERE id = $1 AND root_id IS NULL \
             AND ($2::uuid IS NULL OR EXISTS \
                  (SELECT 1 FROM agents b WHERE b.id = $2 AND b.root_id = $1))",
        )
        .bind(root)
        .bind(branch)
        .execute(&self.pool)
        .await?;
        Ok(updated.rows_affected() == 1)
    }

    async fn delete_branch(&self, branch: Uuid) -> StoreResult<BranchDeletion> {
        let mut transaction = self.pool.begin().await?;
        // Its row locked first: a fork of it waits, and then finds it gone.
        let row = sqlx::query(
            "SELECT root_id, parent_id FROM agents WHERE id = $1 AND root_id IS NOT NULL \
             FOR UPDATE",
        )
        .bind(branch)
        .fetch_optional(&mut *transaction)
        .await?;
        let Some(row) = row else {
            return Ok(BranchDeletion::Unknown);
        };
        let forked: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM agents WHERE parent_id = $1)")
                .bind(branch)
                .fetch_one(&mut *transaction)
                .await?;
        if forked {
            return Ok(BranchDeletion::HasBranches);
        }
        let root: Uuid = row.try_get("root_id")?;
        let parent: Uuid = row.try_get("parent_id")?;
        let follows = (parent != root).then_some(parent);
        sqlx::query("UPDATE agents SET current_branch = $1 WHERE id = $2 AND current_branch = $3")
            .bind(follows)
            .bind(root)
            .bind(branch)
            .execute(&mut *transaction)
            .await?;
        sqlx::query("DELETE FROM agents WHERE id = $1")
            .bind(branch)
            .execute(&mut *transaction)
            .await?;
        transaction.commit().await?;
        self.forks.forget(branch);
        Ok(BranchDeletion::Deleted)
    }
}
