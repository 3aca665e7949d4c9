//! Branches on SQLite: rows of `agents` with an origin (`store::branches`).

use crate::store::StoreResult;
use app::protocol::{Agent, BranchOrigin};
use async_trait::async_trait;
use chrono::Utc;
use sqlx::Row;
use uuid::Uuid;

use super::convert::parse_uuid;
use super::sql::{agent_from_row, AGENT_COLUMNS};
use super::SqliteStore;
use crate::store::branches::{BranchDeletion, Branches, BRANCHES_PER_CONVERSATION_MAX};
use crate::store::rows::{json_text, seq_from_column, seq_to_column};

#[async_trait]
impl Branches for SqliteStore {
    async fn fork_origin(&self, log: Uuid) -> StoreResult<Option<(Uuid, u64)>> {
        let row = sqlx::query(super::sql::FORK_ORIGIN_SQL)
            .bind(log.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            let parent = parse_uuid(row.try_get("parent_id")?)?;
            Ok((parent, seq_from_column(row.try_get("fork_seq")?)?))
        })
        .transpose()
    }

    async fn insert_branch(
        &self,
        source: &Agent,
        root: Uuid,
        fork_seq: u64,
    ) -> StoreResult<Option<Agent>> {
        let _turn = self.pool_write();
        let branch = Agent {
            id: Uuid::new_v4(),
            head_seq: fork_seq,
            created_at: Utc::now(),
            branch: Some(BranchOrigin { root, parent: source.id, fork_seq }),
            current_branch: None,
            ..source.clone()
        };
        let inserted = sqlx::query(
            "INSERT INTO agents (id, name, system, description, model, metadata, tags, head_seq, \
             created_at, owner, root_id, parent_id, fork_seq) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?8 \
             WHERE (SELECT count(*) FROM agents WHERE root_id = ?11) < ?13",
        )
        .bind(branch.id.to_string())
        .bind(&branch.name)
        .bind(&branch.system)
        .bind(&branch.description)
        .bind(&branch.model)
        .bind(json_text(&branch.metadata))
        .bind(json_text(&serde_json::json!(branch.tags)))
        .bind(seq_to_column(fork_seq)?)
        .bind(branch.created_at.to_rfc3339())
        .bind(&branch.owner)
        .bind(root.to_string())
        .bind(source.id.to_string())
        .bind(BRANCHES_PER_CONVERSATION_MAX)
        .execute(&self.pool)
        .await?;
        Ok((inserted.rows_affected() == 1).then_some(branch))
    }

    async fn list_branches(&self, root: Uuid) -> StoreResult<Vec<Agent>> {
        let rows = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE root_id = ? ORDER BY created_at, id LIMIT ?"
        ))
        .bind(root.to_string())
        .bind(BRANCHES_PER_CONVERSATION_MAX)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn set_current_branch(&self, root: Uuid, branch: Option<Uuid>) -> StoreResult<bool> {
        let _turn = self.pool_write();
        let updated = sqlx::query(
            "UPDATE agents SET current_branch = ?2 WHERE id = ?1 AND root_id IS NULL \
             AND (?2 IS NULL OR EXISTS (SELECT 1 FROM agents b WHERE b.id = ?2 AND b.root_id = ?1))",
        )
        .bind(root.to_string())
        .bind(branch.map(|branch| branch.to_string()))
        .execute(&self.pool)
        .await?;
        Ok(updated.rows_affected() == 1)
    }

    async fn delete_branch(&self, branch: Uuid) -> StoreResult<BranchDeletion> {
        let _turn = self.pool_write();
        // IMMEDIATE: the write lock before the read. Begun deferred, the read pinned a snapshot,
        // and a commit of the append thread before the first write made SQLite refuse that
        // write at once (`SQLITE_BUSY_SNAPSHOT`; the busy handler does not wait for it).
        let mut transaction = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query(
            "SELECT root_id, parent_id, EXISTS (SELECT 1 FROM agents c WHERE c.parent_id = ?1) \
             AS forked FROM agents WHERE id = ?1 AND root_id IS NOT NULL",
        )
        .bind(branch.to_string())
        .fetch_optional(&mut *transaction)
        .await?;
        let Some(row) = row else {
            return Ok(BranchDeletion::Unknown);
        };
        if row.try_get::<bool, _>("forked")? {
            return Ok(BranchDeletion::HasBranches);
        }
        let root: String = row.try_get("root_id")?;
        let parent: String = row.try_get("parent_id")?;
        let follows = (parent != root).then_some(parent);
        sqlx::query("UPDATE agents SET current_branch = ?1 WHERE id = ?2 AND current_branch = ?3")
            .bind(follows)
            .bind(&root)
            .bind(branch.to_string())
            .execute(&mut *transaction)
            .await?;
        sqlx::query("DELETE FROM agents WHERE id = ?")
            .bind(branch.to_string())
            .execute(&mut *transaction)
            .await?;
        let committed = transaction.commit().await;
        self.known.deleted();
        committed?;
        self.forks.forget(branch);
        Ok(BranchDeletion::Deleted)
    }
}
