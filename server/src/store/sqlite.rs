//! The SQLite store: one file, WAL, foreign keys on, `synchronous=FULL` so a commit that returned
//! is on disk. Readers (sqlx's pool) run beside the single writer thanks to WAL; appends run on
//! a thread of their own ([`appender`]).

use convert::parse_uuid;
use std::str::FromStr;
use std::time::Duration;

use app::protocol::Agent;
use app::AgentEvent;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use uuid::Uuid;

use rusqlite::types::Value as SqlValue;

use super::chunk::Pick;
use super::error::unknown_agent_or;
use super::rows::{check_contiguous, corrupt, json_text, seq_from_column, seq_to_column, AgentRow};
use super::{
    Agents, AppendBatch, ContentJson, EventJson, EventLog, NewAgent, OpenApproval, RunKeys,
    StoreError, StoredSnapshot, RUN_OUTLINE_KINDS,
};

mod appender;
mod convert;
mod reader;
mod streams;

/// Connections in the pool. Reads (history pages, catch-up) run in parallel under WAL; writes are
/// serialized by SQLite anyway, so more connections would only queue.
const SQLITE_POOL_CONNECTIONS_MAX: u32 = 8;
/// How long a statement waits for another connection's write lock before failing.
const SQLITE_BUSY_TIMEOUT_MS: u64 = 5_000;

pub struct SqliteStore {
    pool: SqlitePool,
    appender: appender::Appender,
    reader: reader::Reader,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://path/to.db`) and migrates it.
    pub async fn open(url: &str) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_tuned(url, appender::WAL_RESET_PAGES).await
    }

    /// [`SqliteStore::open`], restarting the WAL past `wal_reset_pages` (tests use a small one).
    pub(crate) async fn open_tuned(
        url: &str,
        wal_reset_pages: i64,
    ) -> Result<SqliteStore, StoreError> {
        let options = SqliteConnectOptions::from_str(url)?;
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_millis(SQLITE_BUSY_TIMEOUT_MS));
        let pool = SqlitePoolOptions::new()
            .max_connections(SQLITE_POOL_CONNECTIONS_MAX)
            .connect_with(options.clone())
            .await?;
        super::migrations::sqlite().run(&pool).await?;
        let path = options.get_filename().to_owned();
        let reader = reader::Reader::new(path.clone(), SQLITE_BUSY_TIMEOUT_MS);
        let wal = appender::WalRestart {
            reset_pages: wal_reset_pages,
            reads: reader.gate(),
        };
        let appender = appender::Appender::start(path, SQLITE_BUSY_TIMEOUT_MS, wal)?;
        Ok(SqliteStore {
            pool,
            appender,
            reader,
        })
    }

    /// The pool, for tests that look at the file directly.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// Ids one read looks up at most (one statement each, on one read connection).
const IDS_PER_READ_MAX: usize = 256;

const AGENT_COLUMNS: &str =
    "id, name, system, description, model, metadata, tags, head_seq, created_at, owner";
const EVENT_COLUMNS: &str = "agent_id, first_seq, last_seq, id, run_id, thread_id, block_id, \
     message_id, kind, delta, delta_path, delta_action, content, raw, metadata, created_at, pieces, \
     raws";

/// An agent's rows from the one holding `?2 + 1` on, in order, at most `?3` rows (each holds at
/// least one wanted event). Walks the table's `(agent_id, first_seq)` key: one seek for the
/// row holding the seq (the greatest first seq not past it), then forward.
fn range_sql() -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE agent_id = ?1 AND first_seq >= COALESCE( \
         (SELECT MAX(first_seq) FROM events WHERE agent_id = ?1 AND first_seq <= ?2 + 1), 1) \
         ORDER BY first_seq LIMIT ?3"
    )
}

fn range_query(
    agent_id: Uuid,
    since: u64,
    limit: u32,
) -> Result<Vec<(Vec<SqlValue>, Pick)>, StoreError> {
    let params = vec![
        SqlValue::Text(agent_id.to_string()),
        SqlValue::Integer(seq_to_column(since)?),
        SqlValue::Integer(i64::from(limit)),
    ];
    Ok(vec![(params, Pick::Range { since, limit })])
}

fn blob_of(id: Uuid) -> SqlValue {
    SqlValue::Blob(id.as_bytes().to_vec())
}

/// A run's outline events, by run id (walks the partial index `events_run_outline`; outline
/// events are never in run rows).
fn run_outline_sql() -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ?1 \
         AND kind IN {RUN_OUTLINE_KINDS} ORDER BY first_seq"
    )
}

/// `run_started` events whose run never ended: the open-runs table (kept by each append), then
/// each start by its `(agent_id, first_seq)` key. Its cost is the runs open now, not all runs.
fn unfinished_runs_sql() -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events \
         WHERE (agent_id, first_seq) IN (SELECT agent_id, started_seq FROM open_runs) \
         ORDER BY agent_id, first_seq"
    )
}

/// The row that holds the event with id `?1`, if any: the one with the greatest first id not
/// past it (walks `events_id`); the reader keeps the event only if its id is there.
fn by_id_sql() -> String {
    format!("SELECT {EVENT_COLUMNS} FROM events WHERE id <= ?1 ORDER BY id DESC LIMIT 1")
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|error| corrupt(format!("bad timestamp {text:?}: {error}")))
}

fn agent_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<Agent, StoreError> {
    AgentRow {
        id: parse_uuid(row.try_get("id")?)?,
        name: row.try_get("name")?,
        system: row.try_get("system")?,
        description: row.try_get("description")?,
        model: row.try_get("model")?,
        metadata: row.try_get("metadata")?,
        tags: row.try_get("tags")?,
        head_seq: row.try_get("head_seq")?,
        owner: row.try_get("owner")?,
        created_at: parse_time(row.try_get("created_at")?)?,
    }
    .to_agent()
}

#[async_trait]
impl Agents for SqliteStore {
    async fn create_agent(&self, agent: NewAgent) -> Result<Agent, StoreError> {
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

    async fn list_agents(&self, owner: Option<&str>, limit: u32) -> Result<Vec<Agent>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE (?1 IS NULL OR owner = ?1) \
             AND NOT EXISTS (SELECT 1 FROM streams WHERE log_id = agents.id) \
             ORDER BY created_at DESC, id LIMIT ?2"
        ))
        .bind(owner)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn get_agent(&self, agent_id: Uuid) -> Result<Option<Agent>, StoreError> {
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

    async fn delete_agent(&self, agent_id: Uuid) -> Result<bool, StoreError> {
        let result = sqlx::query("DELETE FROM agents WHERE id = ?")
            .bind(agent_id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn chat_agent(&self, chat_id: &str) -> Result<Option<Uuid>, StoreError> {
        let agent_id: Option<String> =
            sqlx::query_scalar("SELECT agent_id FROM chat_agents WHERE chat_id = ?")
                .bind(chat_id)
                .fetch_optional(&self.pool)
                .await?;
        agent_id.map(|text| parse_uuid(&text)).transpose()
    }

    async fn claim_chat(&self, chat_id: &str, agent_id: Uuid) -> Result<bool, StoreError> {
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
impl EventLog for SqliteStore {
    async fn head_seq(&self, agent_id: Uuid) -> Result<Option<u64>, StoreError> {
        let head: Option<i64> = sqlx::query_scalar("SELECT head_seq FROM agents WHERE id = ?")
            .bind(agent_id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        head.map(seq_from_column).transpose()
    }

    async fn read_events(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        let events = self
            .reader
            .events(range_sql(), range_query(agent_id, since, limit)?)
            .await?;
        check_contiguous(agent_id, since, events.iter().map(|event| event.seq))?;
        Ok(events)
    }

    async fn read_events_json(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<EventJson>, StoreError> {
        let events = self
            .reader
            .events_json(range_sql(), range_query(agent_id, since, limit)?)
            .await?;
        check_contiguous(agent_id, since, events.iter().map(|event| event.seq))?;
        Ok(events)
    }

    async fn read_contents(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<ContentJson>, StoreError> {
        let contents = self
            .reader
            .contents(range_sql(), range_query(agent_id, since, limit)?)
            .await?;
        check_contiguous(agent_id, since, contents.iter().map(|content| content.seq))?;
        Ok(contents)
    }

    async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError> {
        self.reader
            .events(run_outline_sql(), vec![(vec![blob_of(run_id)], Pick::All)])
            .await
    }

    async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError> {
        self.reader
            .events(unfinished_runs_sql(), vec![(Vec::new(), Pick::All)])
            .await
    }

    async fn producer_position(
        &self,
        agent_id: Uuid,
        producer_id: &str,
    ) -> Result<Option<super::ProducerPosition>, StoreError> {
        let row: Option<(i64, i64, Option<Vec<u8>>, i64)> = sqlx::query_as(
            "SELECT epoch, seq, run_id, updated_at FROM producers \
             WHERE agent_id = ? AND producer_id = ?",
        )
        .bind(agent_id.to_string())
        .bind(producer_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(epoch, seq, run_id, updated_at)| {
            let run_id = run_id
                .map(|bytes| {
                    Uuid::from_slice(&bytes)
                        .map_err(|_| StoreError::Failed("a producer's run id is not a uuid".into()))
                })
                .transpose()?;
            Ok(super::ProducerPosition {
                stamp: super::ProducerStamp {
                    producer_id: producer_id.to_owned(),
                    epoch: epoch as u64,
                    seq: seq as u64,
                    run_id,
                    fenced_at: None,
                },
                updated_at: super::chunk::time_from_nanos(updated_at),
            })
        })
        .transpose()
    }

    async fn waiting_call(&self, agent_id: Uuid) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT tool_call_id FROM open_approvals WHERE agent_id = ? \
             ORDER BY requested_at LIMIT 1",
        )
        .bind(agent_id.to_string())
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn due_approvals(
        &self,
        now: DateTime<Utc>,
        server_timeout_ms: Option<u64>,
        timeout_ms_max: u64,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<(OpenApproval, u64)>, StoreError> {
        let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT agent_id, tool_call_id, requested_at, timeout_ms FROM ( \
                 SELECT open.agent_id, open.tool_call_id, open.requested_at, \
                     MIN(COALESCE(CASE WHEN json_type(agents.metadata, '$.approval_timeout_ms') \
                         = 'integer' THEN json_extract(agents.metadata, '$.approval_timeout_ms') END, \
                         ?1), ?2) AS timeout_ms \
                 FROM open_approvals AS open JOIN agents ON agents.id = open.agent_id) \
             WHERE timeout_ms > 0 AND requested_at + timeout_ms * 1000000 <= ?3 \
             ORDER BY requested_at + timeout_ms * 1000000 LIMIT ?4 OFFSET ?5",
        )
        .bind(server_timeout_ms.map(|ms| ms.min(i64::MAX as u64) as i64))
        .bind(timeout_ms_max.min(i64::MAX as u64) as i64)
        .bind(super::chunk::time_nanos(now)?)
        .bind(i64::from(limit))
        .bind(i64::from(offset))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(agent_id, tool_call_id, requested_at, timeout_ms)| {
                let approval = OpenApproval {
                    agent_id: agent_id
                        .parse()
                        .map_err(|_| StoreError::Failed(format!("bad agent id {agent_id:?}")))?,
                    tool_call_id,
                    requested_at: super::chunk::time_from_nanos(requested_at),
                };
                Ok((approval, timeout_ms.max(0) as u64))
            })
            .collect()
    }

    async fn open_approvals(&self, limit: u32) -> Result<Vec<OpenApproval>, StoreError> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT agent_id, tool_call_id, requested_at FROM open_approvals \
             ORDER BY requested_at LIMIT ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(agent_id, tool_call_id, requested_at)| {
                Ok(OpenApproval {
                    agent_id: agent_id
                        .parse()
                        .map_err(|_| StoreError::Failed(format!("bad agent id {agent_id:?}")))?,
                    tool_call_id,
                    requested_at: super::chunk::time_from_nanos(requested_at),
                })
            })
            .collect()
    }

    async fn events_by_id(&self, ids: &[Uuid]) -> Result<Vec<AgentEvent>, StoreError> {
        let mut events = Vec::new();
        // One statement per id (a seek each); bounded reads: the ids of one commit go in parts.
        for part in ids.chunks(IDS_PER_READ_MAX) {
            let queries = part
                .iter()
                .map(|id| (vec![blob_of(*id)], Pick::Id(*id)))
                .collect();
            events.extend(self.reader.events(by_id_sql(), queries).await?);
        }
        Ok(events)
    }

    async fn append(&self, batches: &[AppendBatch]) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
        self.appender.append(batches.to_vec()).await
    }

    async fn load_snapshot(&self, agent_id: Uuid) -> Result<Option<StoredSnapshot>, StoreError> {
        let row: Option<(i64, Vec<u8>, Vec<u8>)> = sqlx::query_as(
            "SELECT last_seq, event_id, body FROM timeline_snapshots WHERE agent_id = ?",
        )
        .bind(agent_id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(last_seq, event_id, body)| {
            Ok(StoredSnapshot {
                last_seq: seq_from_column(last_seq)?,
                event_id: Uuid::from_slice(&event_id)
                    .map_err(|error| corrupt(format!("bad snapshot event id: {error}")))?,
                body,
            })
        })
        .transpose()
    }

    async fn save_snapshot(
        &self,
        agent_id: Uuid,
        snapshot: &StoredSnapshot,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO timeline_snapshots (agent_id, last_seq, event_id, body) \
             VALUES (?, ?, ?, ?) ON CONFLICT (agent_id) DO UPDATE SET \
             last_seq = excluded.last_seq, event_id = excluded.event_id, body = excluded.body \
             WHERE excluded.last_seq >= timeline_snapshots.last_seq",
        )
        .bind(agent_id.to_string())
        .bind(seq_to_column(snapshot.last_seq)?)
        .bind(snapshot.event_id.as_bytes().to_vec())
        .bind(&snapshot.body)
        .execute(&self.pool)
        .await
        .map_err(unknown_agent_or(agent_id))?;
        Ok(())
    }
}

#[async_trait]
impl RunKeys for SqliteStore {
    async fn release_unstarted_run_keys(&self) -> Result<u64, StoreError> {
        // `kind IN` the outline kinds as well: the look-up walks the outline index.
        let released = sqlx::query(&format!(
            "DELETE FROM run_keys WHERE NOT EXISTS ( \
                 SELECT 1 FROM events WHERE events.run_id = unhex(replace(run_keys.run_id, '-', '')) \
                 AND events.kind IN {RUN_OUTLINE_KINDS} AND events.kind = 'run_started')"
        ))
        .execute(&self.pool)
        .await?;
        Ok(released.rows_affected())
    }

    async fn claim_run_key(
        &self,
        agent_id: Uuid,
        key: &str,
        run_id: Uuid,
    ) -> Result<Uuid, StoreError> {
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

    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM run_keys WHERE agent_id = ? AND idempotency_key = ?")
            .bind(agent_id.to_string())
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn open_temporary() -> (tempfile::TempDir, SqliteStore) {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("test.db").display());
        let store = SqliteStore::open(&url).await.unwrap();
        (directory, store)
    }

    #[tokio::test]
    async fn the_database_refuses_events_of_unknown_agents_by_itself() {
        let (_directory, store) = open_temporary().await;
        let result = sqlx::query(
            "INSERT INTO events (agent_id, first_seq, last_seq, id, kind, content, metadata, \
             created_at) VALUES ('no-such-agent', 1, 1, x'00', 'text', 'null', 'null', 0)",
        )
        .execute(store.pool())
        .await;
        let error = result.unwrap_err().to_string();
        assert!(error.contains("FOREIGN KEY"), "{error}");
    }

    #[tokio::test]
    async fn range_reads_use_the_agent_seq_index() {
        let (_directory, store) = open_temporary().await;
        let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {}", range_sql()))
            .bind("a")
            .bind(5)
            .bind(10)
            .fetch_all(store.pool())
            .await
            .unwrap();
        let plan: Vec<String> = rows
            .iter()
            .map(|row| row.try_get::<String, _>("detail").unwrap())
            .collect();
        let plan = plan.join(" | ");
        assert!(plan.contains("USING PRIMARY KEY"), "{plan}");
        assert!(!plan.contains("SCAN"), "{plan}");
        assert!(
            !plan.contains("TEMP B-TREE"),
            "range reads must not sort: {plan}"
        );
    }

    /// The plan SQLite picks for `sql` (with `?1` bound to a run id), as one line.
    async fn plan_of(store: &SqliteStore, sql: &str) -> String {
        let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
            .bind(Uuid::nil().as_bytes().to_vec())
            .fetch_all(store.pool())
            .await
            .unwrap();
        rows.iter()
            .map(|row| row.try_get::<String, _>("detail").unwrap())
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// Token deltas carry no run index (it cost each commit a page per agent); the run look-ups
    /// must still find their rows through the partial outline index, not by scanning the log,
    /// and recovery reads the open runs, not every run that ever started.
    #[tokio::test]
    async fn run_look_ups_use_the_outline_index_and_the_open_runs() {
        let (_directory, store) = open_temporary().await;
        let outline = plan_of(&store, &run_outline_sql()).await;
        assert!(
            outline.contains("USING INDEX events_run_outline"),
            "{outline}"
        );
        let unfinished = plan_of(&store, &unfinished_runs_sql()).await;
        assert!(unfinished.contains("open_runs"), "{unfinished}");
        assert!(
            !unfinished.contains("SCAN events"),
            "recovery must not walk the log: {unfinished}"
        );
    }

    /// The WAL restarts also while reads never stop: subscribers catching up, pages being read.
    /// A restart needs every reader off the old WAL; with reads always in flight it gave up at
    /// each try and the WAL grew without end (239 MB after 12 minutes of the soak benchmark).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_restarts_while_reads_never_stop() {
        use crate::store::{Agents, AppendBatch, EventDraft, NewAgent};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        const RESET_PAGES: i64 = 128;
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("test.db");
        let url = format!("sqlite://{}", path.display());
        let store = Arc::new(SqliteStore::open_tuned(&url, RESET_PAGES).await.unwrap());
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        let draft = || {
            let mut draft = EventDraft::new(app::EventKind::Text);
            draft.content = serde_json::json!({ "text": "x".repeat(400) });
            draft
        };
        let batch = || AppendBatch {
            agent_id: agent.id,
            drafts: (0..25).map(|_| draft()).collect(),
            producer: None,
        };
        store.append(&[batch()]).await.unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::new();
        for _ in 0..4 {
            let (store, stop) = (store.clone(), stop.clone());
            readers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    store.read_events(agent.id, 0, 500).await.unwrap();
                }
            }));
        }
        for _ in 0..800 {
            store.append(&[batch()]).await.unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.await.unwrap();
        }
        let wal_bytes = std::fs::metadata(directory.path().join("test.db-wal"))
            .unwrap()
            .len();
        // 20 000 events went through the WAL, ~50 MB with its index pages: it grew to that
        // before; restarted every RESET_PAGES it stays near its size at the first restart
        // (~7 MB: the checkpointer looks every 200 ms, and this append loop is fast).
        assert!(
            wal_bytes < 16 * 1024 * 1024,
            "the WAL grew to {wal_bytes} bytes"
        );
    }
}
