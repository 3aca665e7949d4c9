//! Durable streams' rows in SQLite (`store::streams`).

use crate::store::StoreResult;
use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::SqliteStore;
use crate::store::rows::corrupt;
use crate::store::streams::STREAM_COLUMNS;
use crate::store::{StreamRow, Streams};

fn from_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<StreamRow> {
    let log_id: String = row.try_get("log_id")?;
    let log_id = log_id.parse().map_err(|_| corrupt("a stream's log id"))?;
    StreamRow::from_row(row, log_id)
}

#[async_trait]
impl Streams for SqliteStore {
    async fn stream(&self, path: &str) -> StoreResult<Option<StreamRow>> {
        let row =
            sqlx::query(&super::sql::stream_sql()).bind(path).fetch_optional(&self.pool).await?;
        row.as_ref().map(from_row).transpose()
    }

    async fn insert_stream(&self, row: &StreamRow) -> StoreResult<bool> {
        let _turn = self.pool_write();
        let result = sqlx::query(&format!(
            "INSERT INTO streams ({STREAM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (path) DO NOTHING"
        ))
        .bind(&row.path)
        .bind(row.log_id.to_string())
        .bind(&row.content_type)
        .bind(row.ttl_seconds.map(|ttl| ttl as i64))
        .bind(&row.expires_at)
        .bind(row.closed as i64)
        .bind(row.closed_by.as_ref().map(|closer| closer.to_string()))
        .bind(&row.stream_seq)
        .bind(row.created_at)
        .bind(row.accessed_at)
        .bind(&row.forked_from)
        .bind(row.fork_offset.map(|seq| seq as i64))
        .bind(row.fork_sub_offset.map(|sub| sub as i64))
        .bind(row.base_offset as i64)
        .bind(row.soft_deleted as i64)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn update_stream(&self, row: &StreamRow) -> StoreResult<()> {
        let _turn = self.pool_write();
        sqlx::query(
            "UPDATE streams SET closed = ?, closed_by = ?, stream_seq = ?, accessed_at = ?, \
             soft_deleted = ? WHERE path = ? AND log_id = ?",
        )
        .bind(row.closed as i64)
        .bind(row.closed_by.as_ref().map(|closer| closer.to_string()))
        .bind(&row.stream_seq)
        .bind(row.accessed_at)
        .bind(row.soft_deleted as i64)
        .bind(&row.path)
        .bind(row.log_id.to_string())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn touch_stream(&self, path: &str, log_id: Uuid, at_ms: i64) -> StoreResult<()> {
        let _turn = self.pool_write();
        sqlx::query(
            "UPDATE streams SET accessed_at = MAX(accessed_at, ?) \
             WHERE path = ? AND log_id = ?",
        )
        .bind(at_ms)
        .bind(path)
        .bind(log_id.to_string())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn soft_delete_stream(&self, path: &str, log_id: Uuid) -> StoreResult<()> {
        let _turn = self.pool_write();
        sqlx::query("UPDATE streams SET soft_deleted = 1 WHERE path = ? AND log_id = ?")
            .bind(path)
            .bind(log_id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn forks_of(&self, path: &str) -> StoreResult<u64> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM streams WHERE forked_from = ?")
            .bind(path)
            .fetch_one(&self.pool)
            .await?;
        Ok(count.max(0) as u64)
    }

    async fn delete_stream(&self, path: &str) -> StoreResult<bool> {
        let _turn = self.pool_write();
        let result = sqlx::query(
            "DELETE FROM agents WHERE id = (SELECT log_id FROM streams WHERE path = ?)",
        )
        .bind(path)
        .execute(&self.pool)
        .await;
        self.known.deleted();
        Ok(result?.rows_affected() > 0)
    }
}
