//! Durable streams' rows in PostgreSQL (`store::streams`).

use crate::store::StoreResult;
use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::PgStore;
use crate::store::streams::STREAM_COLUMNS;
use crate::store::{StreamRow, Streams};

fn from_row(row: &sqlx::postgres::PgRow) -> StoreResult<StreamRow> {
    StreamRow::from_row(row, row.try_get("log_id")?)
}

#[async_trait]
impl Streams for PgStore {
    async fn stream(&self, path: &str) -> StoreResult<Option<StreamRow>> {
        let row = sqlx::query(&format!("SELECT {STREAM_COLUMNS} FROM streams WHERE path = $1"))
            .bind(path)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    async fn insert_stream(&self, row: &StreamRow) -> StoreResult<bool> {
        let result = sqlx::query(&format!(
            "INSERT INTO streams ({STREAM_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
             ON CONFLICT (path) DO NOTHING"
        ))
        .bind(&row.path)
        .bind(row.log_id)
        .bind(&row.content_type)
        .bind(row.ttl_seconds.map(|ttl| ttl as i64))
        .bind(&row.expires_at)
        .bind(row.closed)
        .bind(row.closed_by.as_ref().map(|closer| closer.to_string()))
        .bind(&row.stream_seq)
        .bind(row.created_at)
        .bind(row.accessed_at)
        .bind(&row.forked_from)
        .bind(row.fork_offset.map(|seq| seq as i64))
        .bind(row.fork_sub_offset.map(|sub| sub as i64))
        .bind(row.base_offset as i64)
        .bind(row.soft_deleted)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn update_stream(&self, row: &StreamRow) -> StoreResult<()> {
        sqlx::query(
            "UPDATE streams SET closed = $1, closed_by = $2, stream_seq = $3, accessed_at = $4, \
             soft_deleted = $5 WHERE path = $6 AND log_id = $7",
        )
        .bind(row.closed)
        .bind(row.closed_by.as_ref().map(|closer| closer.to_string()))
        .bind(&row.stream_seq)
        .bind(row.accessed_at)
        .bind(row.soft_deleted)
        .bind(&row.path)
        .bind(row.log_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn touch_stream(&self, path: &str, log_id: Uuid, at_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE streams SET accessed_at = GREATEST(accessed_at, $1) \
             WHERE path = $2 AND log_id = $3",
        )
        .bind(at_ms)
        .bind(path)
        .bind(log_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn soft_delete_stream(&self, path: &str, log_id: Uuid) -> StoreResult<()> {
        sqlx::query("UPDATE streams SET soft_deleted = TRUE WHERE path = $1 AND log_id = $2")
            .bind(path)
            .bind(log_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn forks_of(&self, path: &str) -> StoreResult<u64> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM streams WHERE forked_from = $1")
            .bind(path)
            .fetch_one(&self.pool)
            .await?;
        Ok(count.max(0) as u64)
    }

    async fn delete_stream(&self, path: &str) -> StoreResult<bool> {
        let result = sqlx::query(
            "DELETE FROM agents WHERE id = (SELECT log_id FROM streams WHERE path = $1)",
        )
        .bind(path)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() > 0)
    }
}
