//! The PostgreSQL store: the same log as SQLite's, for several server processes on one database.
//!
//! Sequencing across processes: an append locks the head rows of its agents (in id order, so two
//! processes never deadlock), bumps them and inserts the events in one transaction. A second
//! writer of the same agent waits on the row lock until the first commits, so seqs are gapless,
//! unique, and committed in seq order, whichever process writes.
//!
//! The same transaction sends a `NOTIFY` per agent (`agent first last`); PostgreSQL delivers it
//! to every listening process at commit, and each delivers those events to its own subscribers
//! from the log ([`crate::cluster`]).
//!
//! Runs across processes: `active_runs` holds each agent's one run, the process executing it and
//! a lease it renews. Events of a run commit only while the run's row is there and belongs to the
//! writing process (or its lease ran out, which is how another process ends a lost run); the
//! run's terminal event deletes the row in the same transaction.

use crate::store::StoreResult;
use std::time::Duration;

use app::AgentEvent;
use async_trait::async_trait;
use chrono::{DateTime, DurationRound, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{Executor, PgPool, Row};
use uuid::Uuid;

use super::branches::{read_along, ForkChains};
use super::chunk::{OpenChunks, Pick, StoredRow};
use super::error::unknown_agent_or;
use super::gathered::Sequenced;
use super::rows::agent_from_row;
use super::rows::{check_contiguous, seq_from_column, seq_to_column, EventRow, KeyColumns};
use super::StoredSnapshot;
use super::{
    AppendBatch, ClusterOptions, DueApprovals, EventJson, EventLog, OpenApproval, StoreError,
    RUN_OUTLINE_KINDS,
};

mod agents;
mod append;
mod branches;
mod cluster;
mod streams;

/// How long a request waits for a free connection before failing (transiently).
const PG_ACQUIRE_TIMEOUT_MS: u64 = 5_000;
/// Tries to take an agent's run slot while its holder keeps ending just in between.
const CLAIM_ATTEMPTS_MAX: u32 = 3;
/// The channel commit notices travel on.
pub(super) const EVENTS_CHANNEL: &str = "agentstream_events";
/// The channel cancel requests travel on.
pub(super) const CONTROL_CHANNEL: &str = "agentstream_control";

pub struct PgStore {
    pool: PgPool,
    /// Each agent's open run row, extended by this process's next appends to the agent (see
    /// `store::chunk`). Another process's appends in between make the next seq not continue it,
    /// and a new row starts.
    open_chunks: std::sync::Mutex<OpenChunks>,
    url: String,
    node_id: Uuid,
    run_lease_ms: u64,
    /// Branches' chains, as read once (see `store::branches`).
    forks: ForkChains,
}

impl PgStore {
    /// Creates an empty database named `<prefix>_<random>` on the PostgreSQL server `admin`
    /// points at (a URL to any database there) and returns its URL: a throwaway database for a
    /// test server or a benchmark. `prefix` is letters, digits and `_`.
    pub async fn create_database(admin: &str, prefix: &str) -> StoreResult<String> {
        use sqlx::Connection;
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(StoreError::Failed(format!(
                "{prefix:?} is not a database name prefix (letters, digits, _)"
            )));
        }
        let (server, _) = admin
            .rsplit_once('/')
            .ok_or_else(|| StoreError::UnsupportedUrl(super::redact_url(admin)))?;
        let name = format!("{prefix}_{}", Uuid::new_v4().simple());
        let mut connection = sqlx::PgConnection::connect(admin).await?;
        connection.execute(format!("CREATE DATABASE {name}").as_str()).await?;
        connection.close().await?;
        Ok(format!("{server}/{name}"))
    }

    /// Connects to the database at `url` and migrates it (every process may; PostgreSQL's
    /// advisory lock in sqlx's migrator lets one at a time).
    pub async fn open(url: &str, cluster: &ClusterOptions) -> StoreResult<PgStore> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(cluster.pool_connections_max.max(2))
            .acquire_timeout(Duration::from_millis(PG_ACQUIRE_TIMEOUT_MS))
            .connect_with(options)
            .await?;
        super::migrations::postgres().run(&pool).await?;
        Ok(PgStore {
            pool,
            open_chunks: std::sync::Mutex::default(),
            forks: ForkChains::default(),
            url: url.to_owned(),
            node_id: Uuid::new_v4(),
            run_lease_ms: cluster.run_lease_ms.max(1),
        })
    }

    fn open_chunks(&self) -> std::sync::MutexGuard<'_, OpenChunks> {
        self.open_chunks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The pool, for tests that look at the database directly.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// An agent's events after `since`, in seq order, at most `limit`, each made by `make`:
    /// the rows from the one holding `since + 1` on (the greatest first seq not past it), at
    /// most `limit` rows (each holds at least one wanted event).
    async fn range<T>(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
        make: fn(&EventRow<'_>) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let since_column = seq_to_column(since)?;
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE agent_id = $1 AND first_seq >= COALESCE( \
             (SELECT max(first_seq) FROM events WHERE agent_id = $1 AND first_seq <= $2 + 1), 1) \
             ORDER BY first_seq LIMIT $3"
        ))
        .bind(agent_id)
        .bind(since_column)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let pick = Pick::Range { since, limit };
        expand_rows(rows.iter().map(|row| (row, pick)), make)
    }

    /// [`PgStore::range`] of one log, checked gapless.
    async fn checked_range<T: Sequenced>(
        &self,
        log: Uuid,
        since: u64,
        limit: u32,
        make: fn(&EventRow<'_>) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let events = self.range(log, since, limit, make).await?;
        check_contiguous(log, since, events.iter().map(Sequenced::seq))?;
        Ok(events)
    }
}

const AGENT_COLUMNS: &str = "id, name, system, description, model, metadata::text AS metadata, \
     tags::text AS tags, head_seq, created_at, owner, root_id, parent_id, fork_seq, \
     current_branch";
const EVENT_COLUMNS: &str = "events.id, agent_id, first_seq, last_seq, run_id, thread_id, \
     block_id, message_id, kind, delta, delta_path, delta_action, content::text AS content, \
     raw::text AS raw, metadata::text AS metadata, created_at, pieces, raws";

/// PostgreSQL keeps microseconds: times are cut to that before they are stored, so what the
/// writer publishes equals what a later read returns.
fn micros(time: DateTime<Utc>) -> DateTime<Utc> {
    time.duration_trunc(chrono::TimeDelta::microseconds(1)).unwrap_or(time)
}

impl KeyColumns for PgRow {
    fn uuid_column(&self, column: &str) -> StoreResult<Option<Uuid>> {
        Ok(self.try_get(column)?)
    }

    fn time_column(&self, column: &str) -> StoreResult<DateTime<Utc>> {
        Ok(self.try_get(column)?)
    }
}

/// A row of `EVENT_COLUMNS`; the `json` columns come back as the text that was stored.
/// A row of `EVENT_COLUMNS` as the log stores it (one event, or a run row).
fn stored_row(row: &PgRow) -> StoreResult<StoredRow<'_>> {
    Ok(StoredRow {
        event: event_row(row)?,
        last_seq: seq_from_column(row.try_get("last_seq")?)?,
        pieces: row.try_get("pieces")?,
        raws: row.try_get("raws")?,
    })
}

/// The rows' events that `pick` wants (each row with its own pick), made by `make`.
fn expand_rows<'r, T>(
    rows: impl IntoIterator<Item = (&'r PgRow, Pick)>,
    make: fn(&EventRow<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut out = Vec::new();
    for (row, pick) in rows {
        if stored_row(row)?.expand(pick, make, &mut out)? {
            break;
        }
    }
    Ok(out)
}

fn event_row(row: &PgRow) -> StoreResult<EventRow<'_>> {
    Ok(EventRow {
        id: row.try_get("id")?,
        agent_id: row.try_get("agent_id")?,
        seq: seq_from_column(row.try_get("first_seq")?)?,
        run_id: row.try_get("run_id")?,
        thread_id: row.try_get("thread_id")?,
        block_id: row.try_get("block_id")?,
        message_id: row.try_get("message_id")?,
        kind: row.try_get("kind")?,
        delta: row.try_get("delta")?,
        delta_path: row.try_get("delta_path")?,
        delta_action: row.try_get("delta_action")?,
        content: row.try_get("content")?,
        raw: row.try_get("raw")?,
        metadata: row.try_get("metadata")?,
        created_at: row.try_get("created_at")?,
    })
}

fn to_event(row: &EventRow<'_>) -> StoreResult<AgentEvent> {
    row.to_event()
}

fn to_json(row: &EventRow<'_>) -> StoreResult<EventJson> {
    crate::store::row_text::event_json(row)
}

#[async_trait]
impl EventLog for PgStore {
    async fn database_bytes(&self) -> StoreResult<Option<u64>> {
        let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(&self.pool)
            .await?;
        Ok(Some(bytes.max(0) as u64))
    }

    async fn head_seq(&self, agent_id: Uuid) -> StoreResult<Option<u64>> {
        let head: Option<i64> = sqlx::query_scalar("SELECT head_seq FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_optional(&self.pool)
            .await?;
        head.map(seq_from_column).transpose()
    }

    async fn read_events(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<Vec<AgentEvent>> {
        let chain = self.forks.chain(self, agent_id).await?;
        read_along(&chain, agent_id, since, limit, |log, since, limit| {
            self.checked_range(log, since, limit, to_event)
        })
        .await
    }

    async fn read_events_json(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<Vec<EventJson>> {
        let chain = self.forks.chain(self, agent_id).await?;
        read_along(&chain, agent_id, since, limit, |log, since, limit| {
            self.checked_range(log, since, limit, to_json)
        })
        .await
    }

    async fn run_outline(&self, run_id: Uuid) -> StoreResult<Vec<AgentEvent>> {
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE run_id = $1 \
             AND kind IN {RUN_OUTLINE_KINDS} ORDER BY first_seq"
        ))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        expand_rows(rows.iter().map(|row| (row, Pick::All)), to_event)
    }

    async fn unfinished_runs(&self) -> StoreResult<Vec<AgentEvent>> {
        // Runs that started and never ended (the open-runs table, kept by each append), and
        // that no live process executes: their slot is gone or its lease ran out.
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE (agent_id, first_seq) IN ( \
                 SELECT open.agent_id, open.started_seq FROM open_runs AS open \
                 WHERE NOT EXISTS (SELECT 1 FROM active_runs AS active \
                     WHERE active.run_id = open.run_id AND active.lease_until >= now())) \
             ORDER BY agent_id, first_seq"
        ))
        .fetch_all(&self.pool)
        .await?;
        expand_rows(rows.iter().map(|row| (row, Pick::All)), to_event)
    }

    async fn producer_position(
        &self,
        agent_id: Uuid,
        producer_id: &str,
    ) -> StoreResult<Option<crate::store::ProducerPosition>> {
        let row: Option<(i64, i64, Option<Uuid>, DateTime<Utc>)> = sqlx::query_as(
            "SELECT epoch, seq, run_id, updated_at FROM producers \
             WHERE agent_id = $1 AND producer_id = $2",
        )
        .bind(agent_id)
        .bind(producer_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(epoch, seq, run_id, updated_at)| crate::store::ProducerPosition {
            stamp: crate::store::ProducerStamp {
                producer_id: producer_id.to_owned(),
                epoch: epoch as u64,
                seq: seq as u64,
                run_id,
                fenced_at: None,
            },
            updated_at,
        }))
    }

    async fn waiting_call(&self, agent_id: Uuid) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT tool_call_id FROM open_approvals WHERE agent_id = $1 \
             ORDER BY requested_at LIMIT 1",
        )
        .bind(agent_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn due_approvals(&self, due: DueApprovals) -> StoreResult<Vec<(OpenApproval, u64)>> {
        let rows: Vec<(Uuid, String, DateTime<Utc>, i64)> = sqlx::query_as(
            "SELECT agent_id, tool_call_id, requested_at, timeout_ms FROM ( \
                 SELECT open.agent_id, open.tool_call_id, open.requested_at, \
                     LEAST(COALESCE(CASE WHEN json_typeof(agents.metadata -> 'approval_timeout_ms') \
                         = 'number' THEN (agents.metadata ->> 'approval_timeout_ms')::numeric END, \
                         $1), $2)::bigint AS timeout_ms \
                 FROM open_approvals AS open JOIN agents ON agents.id = open.agent_id) AS timed \
             WHERE timeout_ms > 0 \
               AND requested_at + make_interval(secs => timeout_ms / 1000.0) <= $3 \
             ORDER BY requested_at + make_interval(secs => timeout_ms / 1000.0) \
             LIMIT $4 OFFSET $5",
        )
        .bind(due.server_timeout_ms.map(|ms| ms.min(i64::MAX as u64) as i64))
        .bind(due.timeout_ms_max.min(i64::MAX as u64) as i64)
        .bind(due.now)
        .bind(i64::from(due.limit))
        .bind(i64::from(due.offset))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(agent_id, tool_call_id, requested_at, timeout_ms)| {
                let approval = OpenApproval { agent_id, tool_call_id, requested_at };
                (approval, timeout_ms.max(0) as u64)
            })
            .collect())
    }

    async fn open_approvals(&self, limit: u32) -> StoreResult<Vec<OpenApproval>> {
        let rows: Vec<(Uuid, String, DateTime<Utc>)> = sqlx::query_as(
            "SELECT agent_id, tool_call_id, requested_at FROM open_approvals \
             ORDER BY requested_at LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(agent_id, tool_call_id, requested_at)| OpenApproval {
                agent_id,
                tool_call_id,
                requested_at,
            })
            .collect())
    }

    async fn events_by_id(&self, ids: &[Uuid]) -> StoreResult<Vec<AgentEvent>> {
        // Per id, the row with the greatest first id not past it (walks `events_id`); the event
        // is kept only if that row holds it.
        let rows = sqlx::query(&format!(
            "SELECT wanted.id AS wanted, {EVENT_COLUMNS} FROM UNNEST($1::uuid[]) AS wanted(id) \
             CROSS JOIN LATERAL (SELECT * FROM events WHERE events.id <= wanted.id \
                 ORDER BY events.id DESC LIMIT 1) AS events"
        ))
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        let picks = rows
            .iter()
            .map(|row| Ok((row, Pick::Id(row.try_get("wanted")?))))
            .collect::<StoreResult<Vec<_>>>()?;
        expand_rows(picks, to_event)
    }

    async fn append(&self, batches: &[AppendBatch]) -> StoreResult<Vec<Vec<AgentEvent>>> {
        self.append_group(batches).await
    }

    async fn load_snapshot(&self, agent_id: Uuid) -> StoreResult<Option<StoredSnapshot>> {
        let row: Option<(i64, Uuid, Vec<u8>)> = sqlx::query_as(
            "SELECT last_seq, event_id, body FROM timeline_snapshots WHERE agent_id = $1",
        )
        .bind(agent_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(last_seq, event_id, body)| {
            Ok(StoredSnapshot { last_seq: seq_from_column(last_seq)?, event_id, body })
        })
        .transpose()
    }

    async fn save_snapshot(&self, agent_id: Uuid, snapshot: &StoredSnapshot) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO timeline_snapshots (agent_id, last_seq, event_id, body) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (agent_id) DO UPDATE SET \
             last_seq = excluded.last_seq, event_id = excluded.event_id, body = excluded.body \
             WHERE excluded.last_seq >= timeline_snapshots.last_seq",
        )
        .bind(agent_id)
        .bind(seq_to_column(snapshot.last_seq)?)
        .bind(snapshot.event_id)
        .bind(&snapshot.body)
        .execute(&self.pool)
        .await
        .map_err(unknown_agent_or(agent_id))?;
        Ok(())
    }
}
