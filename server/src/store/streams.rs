//! Durable streams as the store keeps them: a path, its settings, and the log (an agents row no
//! agent list shows) its messages are in. The protocol lives in `surfaces/durable`; this is only
//! what outlives a restart.

use crate::store::StoreResult;
use async_trait::async_trait;
use serde_json::Value;
use uuid::Uuid;

use super::rows::corrupt;
use super::{Agents, NewAgent, StoreError};

/// One stream's row.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamRow {
    pub path: String,
    /// The log its messages are appended to.
    pub log_id: Uuid,
    pub content_type: String,
    pub ttl_seconds: Option<u64>,
    /// `Stream-Expires-At`, as the creator gave it.
    pub expires_at: Option<String>,
    pub closed: bool,
    /// `{producer_id, epoch, seq}` of the producer whose append closed it.
    pub closed_by: Option<Value>,
    /// The last `Stream-Seq` a writer sent.
    pub stream_seq: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds of the last read or append: a TTL counts from here.
    pub accessed_at: i64,
    /// A fork's source stream.
    pub forked_from: Option<String>,
    /// Where it was forked, as asked (`Stream-Fork-Offset`'s seq, and the sub-offset).
    pub fork_offset: Option<u64>,
    pub fork_sub_offset: Option<u64>,
    /// The offset the stream's own messages start after: its log's seq N is offset base + N.
    pub base_offset: u64,
    /// Deleted while forks still read it.
    pub soft_deleted: bool,
}

/// A stream row's columns, in the order both stores select and insert them.
pub(crate) const STREAM_COLUMNS: &str =
    "path, log_id, content_type, ttl_seconds, expires_at, closed, closed_by, stream_seq, \
     created_at, accessed_at, forked_from, fork_offset, fork_sub_offset, base_offset, soft_deleted";

impl StreamRow {
    /// The row as either store returns it ([`STREAM_COLUMNS`]): the stores differ only in how
    /// they keep the log id (TEXT in SQLite, UUID in PostgreSQL), which the caller decodes.
    /// Flags decode as booleans from SQLite's INTEGER and PostgreSQL's BOOLEAN alike.
    pub(crate) fn from_row<R>(row: &R, log_id: Uuid) -> StoreResult<StreamRow>
    where
        R: sqlx::Row,
        for<'r> &'r str: sqlx::ColumnIndex<R>,
        for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'r> bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    {
        let count = |name: &str| -> StoreResult<Option<u64>> {
            Ok(row.try_get::<Option<i64>, _>(name)?.map(|n| n.max(0) as u64))
        };
        let closed_by: Option<String> = row.try_get("closed_by")?;
        Ok(StreamRow {
            path: row.try_get("path")?,
            log_id,
            content_type: row.try_get("content_type")?,
            ttl_seconds: count("ttl_seconds")?,
            expires_at: row.try_get("expires_at")?,
            closed: row.try_get("closed")?,
            closed_by: closed_by
                .map(|text| serde_json::from_str(&text).map_err(|_| corrupt("a stream's closer")))
                .transpose()?,
            stream_seq: row.try_get("stream_seq")?,
            created_at: row.try_get("created_at")?,
            accessed_at: row.try_get("accessed_at")?,
            forked_from: row.try_get("forked_from")?,
            fork_offset: count("fork_offset")?,
            fork_sub_offset: count("fork_sub_offset")?,
            base_offset: row.try_get::<i64, _>("base_offset")?.max(0) as u64,
            soft_deleted: row.try_get("soft_deleted")?,
        })
    }
}

/// The rows of durable streams.
#[async_trait]
pub trait Streams: Send + Sync + 'static {
    /// The stream at `path`, if there is one.
    async fn stream(&self, path: &str) -> StoreResult<Option<StreamRow>>;
    /// Inserts `row` unless `path` has a stream; true when it was inserted.
    async fn insert_stream(&self, row: &StreamRow) -> StoreResult<bool>;
    /// Saves what changes of a stream: closed (and by whom), its last `Stream-Seq`, when it
    /// was last read or written.
    async fn update_stream(&self, row: &StreamRow) -> StoreResult<()>;
    /// Notes a read: `accessed_at` moves forward to `at_ms`, nothing else of the row changes
    /// (a reader holds no writer lock: writing its whole snapshot back could undo a close).
    async fn touch_stream(&self, path: &str, log_id: Uuid, at_ms: i64) -> StoreResult<()>;
    /// Marks the stream deleted while forks still read it; nothing else of the row changes.
    async fn soft_delete_stream(&self, path: &str, log_id: Uuid) -> StoreResult<()>;
    /// Deletes the stream and its log. False when there was none.
    async fn delete_stream(&self, path: &str) -> StoreResult<bool>;
    /// How many streams are forks of the stream at `path`.
    async fn forks_of(&self, path: &str) -> StoreResult<u64>;
}

/// The stream at `row.path` after the call — `row` with a new log, or the one that was there —
/// and whether this call made it. Two creates at once end with one stream: the loser deletes
/// the log it made.
pub async fn create_stream<S: Agents + Streams + ?Sized>(
    store: &S,
    mut row: StreamRow,
) -> StoreResult<(StreamRow, bool)> {
    if let Some(existing) = store.stream(&row.path).await? {
        return Ok((existing, false));
    }
    let log = store
        .create_agent(NewAgent {
            name: format!("durable stream {}", row.path),
            ..NewAgent::default()
        })
        .await?;
    row.log_id = log.id;
    if store.insert_stream(&row).await? {
        return Ok((row, true));
    }
    store.delete_agent(log.id).await?;
    let existing = store.stream(&row.path).await?;
    let vanished = || StoreError::Failed(format!("stream {:?} vanished while created", row.path));
    Ok((existing.ok_or_else(vanished)?, false))
}
