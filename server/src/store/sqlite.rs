//! The SQLite store: one file, WAL, foreign keys on, `synchronous=FULL` so a commit that returned
//! is on disk. Readers (sqlx's pool) run beside the single writer thanks to WAL; appends run on
//! a thread of their own ([`appender`]).

use crate::store::StoreResult;
use sql::{
    blob_of, by_id_sql, range_query, range_sql, run_outline_sql, unfinished_runs_sql,
    CONTENT_COLUMNS, EVENT_COLUMNS, IDS_PER_READ_MAX,
};
use std::str::FromStr;
use std::time::Duration;

use app::AgentEvent;
use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;
use uuid::Uuid;

use super::branches::{read_along, ForkChains};
use super::chunk::{Made, Pick};
use super::error::unknown_agent_or;
use super::gathered::{Gathered, Sequenced};
use super::page::PageText;
use super::pipeline::AppendPipeline;
use super::rows::{check_contiguous, corrupt, seq_from_column, seq_to_column, EventRow};
use super::{
    AppendBatch, ContentPage, DueApprovals, EventJson, EventLog, JsonPage, OpenApproval,
    StoreError, StoredSnapshot,
};

mod agents;
mod appender;
mod branches;
mod convert;
mod known;
mod reader;
mod recent;
mod sql;
mod streams;
#[cfg(test)]
mod testing;
mod turns;
mod write;

/// Connections in the pool. Reads (history pages, catch-up) run in parallel under WAL; writes are
/// serialized by SQLite anyway, so more connections would only queue.
const SQLITE_POOL_CONNECTIONS_MAX: u32 = 8;
/// Pool connections opened, with the schema read, before the store answers: after a restart
/// the first requests' lookups (a stream's row, a log's head) each waited for a connection to be
/// opened and its schema parsed, ~0.4 ms a hop on the first read of a stream.
const SQLITE_POOL_CONNECTIONS_WARM: u32 = 4;

/// Opens [`SQLITE_POOL_CONNECTIONS_WARM`] pool connections (each reads the schema and prepares
/// the look-ups of a stream's first read, [`sql::lookups`]) and gives them back to the pool,
/// which keeps that many open (`min_connections`).
async fn warm_pool(pool: &sqlx::SqlitePool) -> StoreResult<()> {
    let mut held = Vec::with_capacity(SQLITE_POOL_CONNECTIONS_WARM as usize);
    for _ in 0..SQLITE_POOL_CONNECTIONS_WARM {
        let mut connection = pool.acquire().await?;
        sqlx::query(reader::SCHEMA_READ_SQL).execute(&mut *connection).await?;
        for lookup in sql::lookups() {
            sqlx::query(&lookup).bind("").fetch_optional(&mut *connection).await?;
        }
        held.push(connection);
    }
    Ok(())
}

/// How long a statement waits for another connection's write lock before failing.
const SQLITE_BUSY_TIMEOUT_MS: u64 = 5_000;

/// What [`SqliteStore::open_tuned`] may change.
pub(crate) struct Tuning {
    /// WAL pages past which the append thread restarts the WAL.
    pub(crate) wal_reset_pages: i64,
    /// How long a statement waits for another connection's write lock.
    pub(crate) busy_timeout_ms: u64,
    /// How long appends pause before the append thread moves `recent` into `events` (tests that
    /// fold by hand give it an hour, so that no fold of the store's own races theirs).
    pub(crate) fold_when_idle_ms: u64,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            wal_reset_pages: appender::WAL_RESET_PAGES,
            busy_timeout_ms: SQLITE_BUSY_TIMEOUT_MS,
            fold_when_idle_ms: appender::FOLD_WHEN_IDLE_MS,
        }
    }
}

pub struct SqliteStore {
    pool: SqlitePool,
    appender: appender::Appender,
    reader: reader::Reader,
    recent: recent::RecentIndex,
    /// Branches' chains, as read once (see `store::branches`).
    forks: ForkChains,
    /// Pool writers waiting for the write lock, whom the append thread lets go first.
    turns: turns::WriteTurns,
    /// Each log's head and its producers' positions as last committed (see [`known`]).
    known: known::Known,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://path/to.db`) and migrates it.
    pub async fn open(url: &str) -> StoreResult<SqliteStore> {
        SqliteStore::open_tuned(url, Tuning::default()).await
    }

    /// [`SqliteStore::open`] with other [`Tuning`] (tests use small figures).
    pub(crate) async fn open_tuned(url: &str, tuning: Tuning) -> StoreResult<SqliteStore> {
        let Tuning { wal_reset_pages, busy_timeout_ms, fold_when_idle_ms } = tuning;
        let options = SqliteConnectOptions::from_str(url)?;
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_millis(busy_timeout_ms));
        let pool = SqlitePoolOptions::new()
            .max_connections(SQLITE_POOL_CONNECTIONS_MAX)
            .min_connections(SQLITE_POOL_CONNECTIONS_WARM)
            .connect_with(options.clone())
            .await?;
        super::migrations::sqlite().run(&pool).await?;
        let path = options.get_filename().to_owned();
        warm_pool(&pool).await?;
        let reader = reader::Reader::new(path.clone(), busy_timeout_ms);
        // The range reads' statements, prepared on each: the first reads do not parse them.
        reader.warm(vec![range_sql(CONTENT_COLUMNS), range_sql(EVENT_COLUMNS)]).await?;
        let wal = appender::WalRestart { reset_pages: wal_reset_pages, reads: reader.gate() };
        let recent = recent::RecentIndex::default();
        let turns = turns::WriteTurns::default();
        let known = known::Known::default();
        let appender = appender::Appender::start(appender::Setup {
            path,
            busy_timeout_ms,
            fold_when_idle_ms,
            wal,
            index: recent.clone(),
            turns: turns.clone(),
            known: known.clone(),
        })?;
        Ok(SqliteStore {
            pool,
            appender,
            reader,
            recent,
            forks: ForkChains::default(),
            turns,
            known,
        })
    }

    /// A place in line for a write on the pool, held until it ended (see [`turns`]).
    fn pool_write(&self) -> turns::Turn<'_> {
        self.turns.wait()
    }

    /// Events after `since` of the log `agent_id` names, along its branch's chain (see
    /// `store::branches`), at most `limit`, each segment checked whole: rows of `columns`, each
    /// decoded by `decode` (events in full, as their JSON, or their contents alone).
    ///
    /// Each segment's events are gathered into what `gather` makes for its limit.
    async fn read_range<C, D>(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
        columns: &'static str,
        gather: impl Fn(u32) -> C,
        decode: D,
    ) -> StoreResult<C>
    where
        C: Gathered + Send + 'static,
        D: Fn(&rusqlite::Row<'_>, Pick, &mut C) -> StoreResult<bool> + Copy + Send + 'static,
    {
        let chain = self.forks.chain(self, agent_id).await?;
        let sql = range_sql(columns);
        read_along(&chain, agent_id, since, limit, |log, since, limit| {
            let sql = sql.clone();
            let into = gather(limit);
            async move {
                let query = range_query(log, since, limit, self.recent.first_row(log))?;
                let rows = self.reader.decoded(sql, query, into, decode).await?;
                check_contiguous(log, since, rows.seqs())?;
                Ok(rows)
            }
        })
        .await
    }

    /// [`SqliteStore::read_range`] of whole rows, each event made by `make` (in full or as its
    /// JSON).
    async fn read_made<T: Sequenced + Send + 'static>(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
        make: fn(&EventRow<'_>) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let decode = move |row: &rusqlite::Row<'_>, pick, out: &mut Vec<T>| {
            reader::expand(row, pick, &mut Made { make, out })
        };
        self.read_range(agent_id, since, limit, EVENT_COLUMNS, |_| Vec::new(), decode).await
    }

    /// The pool, for tests that look at the file directly.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

#[async_trait]
impl EventLog for SqliteStore {
    async fn head_seq(&self, agent_id: Uuid) -> StoreResult<Option<u64>> {
        if let Some(head) = self.known.head(agent_id) {
            return Ok(Some(head));
        }
        let changes = self.known.changes();
        let head: Option<i64> = sqlx::query_scalar(sql::HEAD_SQL)
            .bind(agent_id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        let head = head.map(seq_from_column).transpose()?;
        if let Some(head) = head {
            self.known.fill_head(agent_id, head, changes);
        }
        Ok(head)
    }

    async fn read_events(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<Vec<AgentEvent>> {
        self.read_made(agent_id, since, limit, |row| row.to_event()).await
    }

    async fn read_events_json(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<Vec<EventJson>> {
        self.read_made(agent_id, since, limit, super::row_text::event_json).await
    }

    async fn read_events_page(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
        room: usize,
    ) -> StoreResult<JsonPage> {
        let gather = |limit| PageText::new(room, limit);
        let decode =
            |row: &rusqlite::Row<'_>, pick, out: &mut PageText| reader::expand(row, pick, out);
        self.read_range(agent_id, since, limit, EVENT_COLUMNS, gather, decode).await?.done()
    }

    async fn read_contents(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<ContentPage> {
        let gather = |_| ContentPage::default();
        self.read_range(agent_id, since, limit, CONTENT_COLUMNS, gather, reader::expand_contents)
            .await
    }

    async fn run_outline(&self, run_id: Uuid) -> StoreResult<Vec<AgentEvent>> {
        self.reader.events(run_outline_sql(), vec![(vec![blob_of(run_id)], Pick::All)]).await
    }

    async fn unfinished_runs(&self) -> StoreResult<Vec<AgentEvent>> {
        self.reader.events(unfinished_runs_sql(), vec![(Vec::new(), Pick::All)]).await
    }

    async fn producer_position(
        &self,
        agent_id: Uuid,
        producer_id: &str,
    ) -> StoreResult<Option<super::ProducerPosition>> {
        if let Some(position) = self.known.position(agent_id, producer_id) {
            return Ok(Some(position));
        }
        let changes = self.known.changes();
        let row: Option<(i64, i64, Option<Vec<u8>>, i64)> = sqlx::query_as(
            "SELECT epoch, seq, run_id, updated_at FROM producers \
             WHERE agent_id = ? AND producer_id = ?",
        )
        .bind(agent_id.to_string())
        .bind(producer_id)
        .fetch_optional(&self.pool)
        .await?;
        let position = row.map(|(epoch, seq, run_id, updated_at)| -> StoreResult<_> {
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
        });
        let position = position.transpose()?;
        if let Some(position) = &position {
            self.known.fill_position(agent_id, position.clone(), changes);
        }
        Ok(position)
    }

    async fn waiting_call(&self, agent_id: Uuid) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT tool_call_id FROM open_approvals WHERE agent_id = ? \
             ORDER BY requested_at LIMIT 1",
        )
        .bind(agent_id.to_string())
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn due_approvals(&self, due: DueApprovals) -> StoreResult<Vec<(OpenApproval, u64)>> {
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
        .bind(due.server_timeout_ms.map(|ms| ms.min(i64::MAX as u64) as i64))
        .bind(due.timeout_ms_max.min(i64::MAX as u64) as i64)
        .bind(super::chunk::time_nanos(due.now)?)
        .bind(i64::from(due.limit))
        .bind(i64::from(due.offset))
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

    async fn open_approvals(&self, limit: u32) -> StoreResult<Vec<OpenApproval>> {
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

    async fn events_by_id(&self, ids: &[Uuid]) -> StoreResult<Vec<AgentEvent>> {
        let mut events = Vec::new();
        // One statement per id (a seek each); bounded reads: the ids of one commit go in parts.
        for part in ids.chunks(IDS_PER_READ_MAX) {
            let queries = part.iter().map(|id| (vec![blob_of(*id)], Pick::Id(*id))).collect();
            events.extend(self.reader.events(by_id_sql(), queries).await?);
        }
        Ok(events)
    }

    async fn append(&self, batches: &[AppendBatch]) -> StoreResult<Vec<Vec<AgentEvent>>> {
        self.appender.append(batches.to_vec()).await
    }

    fn pipeline(&self) -> Option<&dyn AppendPipeline> {
        Some(&self.appender)
    }

    fn backlog_rows(&self) -> Option<u64> {
        Some(self.recent.live_rows() as u64)
    }

    async fn load_snapshot(&self, agent_id: Uuid) -> StoreResult<Option<StoredSnapshot>> {
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

    async fn save_snapshot(&self, agent_id: Uuid, snapshot: &StoredSnapshot) -> StoreResult<()> {
        let _turn = self.pool_write();
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

#[cfg(test)]
impl SqliteStore {
    /// A store on a new file in a temporary directory (removed when the directory is dropped),
    /// for tests.
    pub async fn temporary() -> (tempfile::TempDir, SqliteStore) {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("test.db").display());
        let store = SqliteStore::open(&url).await.unwrap();
        (directory, store)
    }
}

#[cfg(test)]
mod tests;
