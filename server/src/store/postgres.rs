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

use std::time::Duration;

use app::protocol::Agent;
use app::{AgentEvent, DeltaAction};
use async_trait::async_trait;
use chrono::{DateTime, DurationRound, Utc};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions, PgRow};
use sqlx::{Executor, PgPool, Row};
use uuid::Uuid;

use super::rows::{
    check_contiguous, corrupt, json_text, parse_json, seq_from_column, totals,
    unknown_agent_or_database, EventRow, SeqCursors,
};
use super::{
    AppendBatch, ClusterOptions, ClusterStore, EventJson, NewAgent, Notice, Notices, Store,
    StoreError, RUN_END_KINDS, RUN_OUTLINE_KINDS,
};

/// Connections of one process, by default. Reads (history, catch-up), the writer and claims share
/// them; the listener has its own.
pub const PG_POOL_CONNECTIONS_MAX_DEFAULT: u32 = 16;
/// How long a request waits for a free connection before failing (transiently).
const PG_ACQUIRE_TIMEOUT_MS: u64 = 5_000;
/// Tries to take an agent's run slot while its holder keeps ending just in between.
const CLAIM_ATTEMPTS_MAX: u32 = 3;
/// The channel commit notices travel on.
const EVENTS_CHANNEL: &str = "agentstream_events";
/// The channel cancel requests travel on.
const CONTROL_CHANNEL: &str = "agentstream_control";

pub struct PgStore {
    pool: PgPool,
    url: String,
    node_id: Uuid,
    run_lease_ms: u64,
}

impl PgStore {
    /// Creates an empty database named `<prefix>_<random>` on the PostgreSQL server `admin`
    /// points at (a URL to any database there) and returns its URL: a throwaway database for a
    /// test server or a benchmark. `prefix` is letters, digits and `_`.
    pub async fn create_database(admin: &str, prefix: &str) -> Result<String, StoreError> {
        use sqlx::Connection;
        if prefix.is_empty()
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(StoreError::Failed(format!(
                "{prefix:?} is not a database name prefix (letters, digits, _)"
            )));
        }
        let (server, _) = admin
            .rsplit_once('/')
            .ok_or_else(|| StoreError::UnsupportedUrl(admin.to_owned()))?;
        let name = format!("{prefix}_{}", Uuid::new_v4().simple());
        let mut connection = sqlx::PgConnection::connect(admin).await?;
        connection
            .execute(format!("CREATE DATABASE {name}").as_str())
            .await?;
        connection.close().await?;
        Ok(format!("{server}/{name}"))
    }

    /// Connects to the database at `url` and migrates it (every process may; PostgreSQL's
    /// advisory lock in sqlx's migrator lets one at a time).
    pub async fn open(url: &str, cluster: &ClusterOptions) -> Result<PgStore, StoreError> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(cluster.pool_connections_max.max(2))
            .acquire_timeout(Duration::from_millis(PG_ACQUIRE_TIMEOUT_MS))
            .connect_with(options)
            .await?;
        super::migrations::postgres().run(&pool).await?;
        Ok(PgStore {
            pool,
            url: url.to_owned(),
            node_id: Uuid::new_v4(),
            run_lease_ms: cluster.run_lease_ms.max(1),
        })
    }

    /// The pool, for tests that look at the database directly.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// An agent's event rows after `since`, in seq order, at most `limit`, each decoded.
    async fn range<T>(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
        decode: fn(&PgRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let since = i64::try_from(since).map_err(|_| corrupt("since beyond i64"))?;
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM agent_events WHERE agent_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3"
        ))
        .bind(agent_id)
        .bind(since)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode).collect()
    }
}

const AGENT_COLUMNS: &str = "id, name, system, description, model, metadata::text AS metadata, \
     tags::text AS tags, head_seq, created_at";
const EVENT_COLUMNS: &str = "id, agent_id, seq, run_id, thread_id, block_id, message_id, kind, \
     delta::text AS delta, delta_path, delta_action, content::text AS content, raw::text AS raw, \
     metadata::text AS metadata, created_at";

/// PostgreSQL keeps microseconds: times are cut to that before they are stored, so what the
/// writer publishes equals what a later read returns.
fn micros(time: DateTime<Utc>) -> DateTime<Utc> {
    time.duration_trunc(chrono::TimeDelta::microseconds(1))
        .unwrap_or(time)
}

fn agent_from_row(row: &PgRow) -> Result<Agent, StoreError> {
    let tags: Value = parse_json(row.try_get::<&str, _>("tags")?)?;
    Ok(Agent {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        system: row.try_get("system")?,
        description: row.try_get("description")?,
        model: row.try_get("model")?,
        metadata: parse_json(row.try_get::<&str, _>("metadata")?)?,
        tags: serde_json::from_value(tags).map_err(corrupt)?,
        head_seq: seq_from_column(row.try_get("head_seq")?)?,
        created_at: row.try_get("created_at")?,
    })
}

/// A row of `EVENT_COLUMNS`; the `json` columns come back as the text that was stored.
fn event_row(row: &PgRow) -> Result<EventRow<'_>, StoreError> {
    Ok(EventRow {
        id: row.try_get("id")?,
        agent_id: row.try_get("agent_id")?,
        seq: seq_from_column(row.try_get("seq")?)?,
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

fn event_from_row(row: &PgRow) -> Result<AgentEvent, StoreError> {
    event_row(row)?.to_event()
}

fn event_json_from_row(row: &PgRow) -> Result<EventJson, StoreError> {
    event_row(row)?.to_json()
}

/// The events of a group as column arrays, for one `INSERT … SELECT FROM UNNEST(…)`.
#[derive(Default)]
struct Columns {
    id: Vec<Uuid>,
    agent_id: Vec<Uuid>,
    seq: Vec<i64>,
    run_id: Vec<Option<Uuid>>,
    thread_id: Vec<Option<Uuid>>,
    block_id: Vec<Option<Uuid>>,
    message_id: Vec<Option<Uuid>>,
    kind: Vec<&'static str>,
    delta: Vec<Option<String>>,
    delta_path: Vec<Option<String>>,
    delta_action: Vec<Option<&'static str>>,
    content: Vec<String>,
    raw: Vec<Option<String>>,
    metadata: Vec<String>,
    created_at: Vec<DateTime<Utc>>,
}

impl Columns {
    fn push(&mut self, event: &AgentEvent) {
        self.id.push(event.id);
        self.agent_id.push(event.agent_id);
        self.seq.push(event.seq as i64);
        self.run_id.push(event.run_id);
        self.thread_id.push(event.thread_id);
        self.block_id.push(event.block_id);
        self.message_id.push(event.message_id);
        self.kind.push(event.kind.as_str());
        self.delta.push(event.delta.as_ref().map(json_text));
        self.delta_path.push(event.delta_path.clone());
        self.delta_action
            .push(event.delta_action.map(DeltaAction::as_str));
        self.content.push(json_text(&event.content));
        self.raw.push(event.raw.as_ref().map(json_text));
        self.metadata.push(json_text(&event.metadata));
        self.created_at.push(event.created_at);
    }
}

#[async_trait]
impl Store for PgStore {
    async fn create_agent(&self, agent: NewAgent) -> Result<Agent, StoreError> {
        let created = Agent {
            id: Uuid::new_v4(),
            name: agent.name,
            system: agent.system,
            description: agent.description,
            model: agent.model,
            metadata: agent.metadata,
            tags: agent.tags,
            head_seq: 0,
            created_at: micros(Utc::now()),
        };
        sqlx::query(
            "INSERT INTO agents (id, name, system, description, model, metadata, tags, head_seq, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, 0, $8)",
        )
        .bind(created.id)
        .bind(&created.name)
        .bind(&created.system)
        .bind(&created.description)
        .bind(&created.model)
        .bind(json_text(&created.metadata))
        .bind(json_text(&serde_json::json!(created.tags)))
        .bind(created.created_at)
        .execute(&self.pool)
        .await?;
        Ok(created)
    }

    async fn list_agents(&self, limit: u32) -> Result<Vec<Agent>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents ORDER BY created_at DESC, id LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn get_agent(&self, agent_id: Uuid) -> Result<Option<Agent>, StoreError> {
        let row = sqlx::query(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1"))
            .bind(agent_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(agent_from_row).transpose()
    }

    async fn delete_agent(&self, agent_id: Uuid) -> Result<bool, StoreError> {
        let result = sqlx::query("DELETE FROM agents WHERE id = $1")
            .bind(agent_id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn head_seq(&self, agent_id: Uuid) -> Result<Option<u64>, StoreError> {
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
    ) -> Result<Vec<AgentEvent>, StoreError> {
        let events = self.range(agent_id, since, limit, event_from_row).await?;
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
            .range(agent_id, since, limit, event_json_from_row)
            .await?;
        check_contiguous(agent_id, since, events.iter().map(|event| event.seq))?;
        Ok(events)
    }

    async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM agent_events WHERE run_id = $1 \
             AND kind IN {RUN_OUTLINE_KINDS} ORDER BY seq"
        ))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError> {
        // Runs that started and never ended, and that no live process executes: their row is
        // gone or its lease ran out.
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM agent_events AS started \
             WHERE started.kind = 'run_started' AND NOT EXISTS ( \
                 SELECT 1 FROM agent_events AS ended WHERE ended.run_id = started.run_id \
                 AND ended.kind IN {RUN_OUTLINE_KINDS} AND ended.kind IN {RUN_END_KINDS}) \
             AND NOT EXISTS (SELECT 1 FROM active_runs AS active \
                 WHERE active.run_id = started.run_id AND active.lease_until >= now()) \
             ORDER BY started.agent_id, started.seq"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    async fn release_unstarted_run_keys(&self) -> Result<u64, StoreError> {
        // Another process may be between claiming and starting right now: only what is older
        // than a lease and not executing anywhere is given back.
        let lease = self.run_lease_ms as f64 / 1000.0;
        let slots = sqlx::query(
            "DELETE FROM active_runs WHERE lease_until < now() AND NOT EXISTS ( \
                 SELECT 1 FROM agent_events WHERE agent_events.run_id = active_runs.run_id \
                 AND agent_events.kind = 'run_started')",
        )
        .execute(&self.pool)
        .await?;
        let keys = sqlx::query(
            "DELETE FROM run_keys WHERE created_at < now() - make_interval(secs => $1) \
             AND NOT EXISTS (SELECT 1 FROM agent_events WHERE agent_events.run_id = \
                 run_keys.run_id AND agent_events.kind = 'run_started') \
             AND NOT EXISTS (SELECT 1 FROM active_runs WHERE active_runs.run_id = run_keys.run_id)",
        )
        .bind(lease)
        .execute(&self.pool)
        .await?;
        Ok(slots.rows_affected() + keys.rows_affected())
    }

    async fn claim_run_key(
        &self,
        agent_id: Uuid,
        key: &str,
        run_id: Uuid,
    ) -> Result<Uuid, StoreError> {
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
        .map_err(unknown_agent_or_database(agent_id))?;
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

    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM run_keys WHERE agent_id = $1 AND idempotency_key = $2")
            .bind(agent_id)
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn events_by_id(&self, ids: &[Uuid]) -> Result<Vec<AgentEvent>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM agent_events WHERE id = ANY($1)"
        ))
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    async fn append(&self, batches: &[AppendBatch]) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
        let mut totals = totals(batches);
        totals.sort_by_key(|(agent_id, _)| *agent_id);
        let agent_ids: Vec<Uuid> = totals.iter().map(|(agent_id, _)| *agent_id).collect();
        let counts: Vec<i64> = totals.iter().map(|(_, total)| *total as i64).collect();

        let mut transaction = self.pool.begin().await?;
        // Lock the heads in id order (two processes appending to the same agents never wait on
        // each other in a cycle), then bump them.
        let locked: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM agents WHERE id = ANY($1) ORDER BY id FOR UPDATE")
                .bind(&agent_ids)
                .fetch_all(&mut *transaction)
                .await?;
        if let Some(missing) = agent_ids.iter().find(|id| !locked.contains(id)) {
            return Err(StoreError::UnknownAgent(*missing));
        }
        let heads = sqlx::query(
            "UPDATE agents SET head_seq = agents.head_seq + bump.count \
             FROM UNNEST($1::uuid[], $2::bigint[]) AS bump(id, count) \
             WHERE agents.id = bump.id RETURNING agents.id, agents.head_seq",
        )
        .bind(&agent_ids)
        .bind(&counts)
        .fetch_all(&mut *transaction)
        .await?;
        let mut cursors = SeqCursors::new(&totals, |agent_id| {
            heads
                .iter()
                .find(|row| row.get::<Uuid, _>(0) == agent_id)
                .map(|row| row.get(1))
        })?;

        // Runs whose events are in this group must be executed by this process (or be lost to
        // their own, which is how another process ends them).
        let mut run_ids: Vec<Uuid> = batches
            .iter()
            .flat_map(|batch| batch.drafts.iter().filter_map(|draft| draft.run_id))
            .collect();
        run_ids.sort_unstable();
        run_ids.dedup();
        if !run_ids.is_empty() {
            let owned: Vec<Uuid> = sqlx::query_scalar(
                "SELECT run_id FROM active_runs WHERE run_id = ANY($1) \
                 AND (owner_id = $2 OR lease_until < now())",
            )
            .bind(&run_ids)
            .bind(self.node_id)
            .fetch_all(&mut *transaction)
            .await?;
            if let Some(lost) = run_ids.iter().find(|run| !owned.contains(run)) {
                return Err(StoreError::RunNotOwned(*lost));
            }
        }

        let mut committed = Vec::with_capacity(batches.len());
        let mut columns = Columns::default();
        let mut ended_runs: Vec<Uuid> = Vec::new();
        for batch in batches {
            let events: Vec<AgentEvent> = batch
                .drafts
                .iter()
                .map(|draft| {
                    let mut event = draft
                        .clone()
                        .into_event(batch.agent_id, cursors.take(batch.agent_id));
                    event.created_at = micros(event.created_at);
                    event
                })
                .collect();
            for event in &events {
                columns.push(event);
                if event.kind.is_run_end() {
                    ended_runs.extend(event.run_id);
                }
            }
            committed.push(events);
        }
        sqlx::query(
            "INSERT INTO agent_events (id, agent_id, seq, run_id, thread_id, block_id, \
                 message_id, kind, delta, delta_path, delta_action, content, raw, metadata, \
                 created_at) \
             SELECT id, agent_id, seq, run_id, thread_id, block_id, message_id, kind, \
                 delta::json, delta_path, delta_action, content::json, raw::json, \
                 metadata::json, created_at \
             FROM UNNEST($1::uuid[], $2::uuid[], $3::bigint[], $4::uuid[], $5::uuid[], \
                 $6::uuid[], $7::uuid[], $8::text[], $9::text[], $10::text[], $11::text[], \
                 $12::text[], $13::text[], $14::text[], $15::timestamptz[]) AS event(id, \
                 agent_id, seq, run_id, thread_id, block_id, message_id, kind, delta, \
                 delta_path, delta_action, content, raw, metadata, created_at)",
        )
        .bind(&columns.id)
        .bind(&columns.agent_id)
        .bind(&columns.seq)
        .bind(&columns.run_id)
        .bind(&columns.thread_id)
        .bind(&columns.block_id)
        .bind(&columns.message_id)
        .bind(&columns.kind)
        .bind(&columns.delta)
        .bind(&columns.delta_path)
        .bind(&columns.delta_action)
        .bind(&columns.content)
        .bind(&columns.raw)
        .bind(&columns.metadata)
        .bind(&columns.created_at)
        .execute(&mut *transaction)
        .await?;

        // One notice per agent (delivered at commit), and the ended runs free their slots.
        let notices: Vec<String> = totals
            .iter()
            .map(|(agent_id, total)| {
                let next = cursors.take(*agent_id);
                format!("{agent_id} {} {}", next - total, next - 1)
            })
            .collect();
        sqlx::query(
            "WITH ended AS (DELETE FROM active_runs WHERE run_id = ANY($1)) \
             SELECT pg_notify($2, notice) FROM UNNEST($3::text[]) AS notice",
        )
        .bind(&ended_runs)
        .bind(EVENTS_CHANNEL)
        .bind(&notices)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(committed)
    }
}

#[async_trait]
impl ClusterStore for PgStore {
    fn node_id(&self) -> Uuid {
        self.node_id
    }

    fn run_lease_ms(&self) -> u64 {
        self.run_lease_ms
    }

    async fn claim_agent_run(
        &self,
        agent_id: Uuid,
        run_id: Uuid,
    ) -> Result<Option<Uuid>, StoreError> {
        // The holder may end between the insert and the look-up; then the slot is tried again.
        for _ in 0..CLAIM_ATTEMPTS_MAX {
            let claimed: Option<Uuid> = sqlx::query_scalar(
                "INSERT INTO active_runs (agent_id, run_id, owner_id, lease_until) \
                 VALUES ($1, $2, $3, now() + make_interval(secs => $4)) \
                 ON CONFLICT (agent_id) DO NOTHING RETURNING run_id",
            )
            .bind(agent_id)
            .bind(run_id)
            .bind(self.node_id)
            .bind(self.run_lease_ms as f64 / 1000.0)
            .fetch_optional(&self.pool)
            .await
            .map_err(unknown_agent_or_database(agent_id))?;
            if claimed.is_some() {
                return Ok(None);
            }
            if let Some(holder) = self.active_run(agent_id).await? {
                return Ok(Some(holder));
            }
        }
        Err(StoreError::Unavailable(format!(
            "the run slot of agent {agent_id} kept changing hands"
        )))
    }

    async fn release_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM active_runs WHERE agent_id = $1 AND run_id = $2")
            .bind(agent_id)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn active_run(&self, agent_id: Uuid) -> Result<Option<Uuid>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT run_id FROM active_runs WHERE agent_id = $1")
                .bind(agent_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn renew_leases(&self, run_ids: &[Uuid]) -> Result<(), StoreError> {
        if run_ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE active_runs SET lease_until = now() + make_interval(secs => $3) \
             WHERE owner_id = $1 AND run_id = ANY($2)",
        )
        .bind(self.node_id)
        .bind(run_ids)
        .bind(self.run_lease_ms as f64 / 1000.0)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn send_cancel(&self, agent_id: Uuid, run_id: Uuid) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CONTROL_CHANNEL)
            .bind(format!("cancel {agent_id} {run_id}"))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn listen(&self) -> Result<Box<dyn Notices>, StoreError> {
        let mut listener = PgListener::connect(&self.url).await?;
        // A lost connection is reported, not silently re-made: the caller catches up from the
        // log before it trusts the notices again.
        listener.eager_reconnect(false);
        listener
            .listen_all([EVENTS_CHANNEL, CONTROL_CHANNEL])
            .await?;
        Ok(Box::new(PgNotices { listener }))
    }
}

struct PgNotices {
    listener: PgListener,
}

fn lost() -> StoreError {
    StoreError::Unavailable("the notice connection to PostgreSQL was lost".into())
}

#[async_trait]
impl Notices for PgNotices {
    async fn next(&mut self) -> Result<Notice, StoreError> {
        loop {
            let notification = self.listener.try_recv().await?.ok_or_else(lost)?;
            match parse_notice(notification.channel(), notification.payload()) {
                Some(notice) => return Ok(notice),
                None => tracing::warn!(
                    channel = notification.channel(),
                    payload = notification.payload(),
                    "ignoring a notice that is not ours"
                ),
            }
        }
    }

    async fn ping(&mut self) -> Result<(), StoreError> {
        (&mut self.listener).execute("SELECT 1").await?;
        Ok(())
    }
}

/// Reads a notice payload: `agent first last` on the events channel, `cancel agent run` on the
/// control channel.
fn parse_notice(channel: &str, payload: &str) -> Option<Notice> {
    let mut words = payload.split(' ');
    match channel {
        EVENTS_CHANNEL => {
            let agent_id = words.next()?.parse().ok()?;
            let first_seq = words.next()?.parse().ok()?;
            let last_seq = words.next()?.parse().ok()?;
            Some(Notice::Committed {
                agent_id,
                first_seq,
                last_seq,
            })
        }
        CONTROL_CHANNEL => {
            if words.next()? != "cancel" {
                return None;
            }
            let agent_id = words.next()?.parse().ok()?;
            let run_id = words.next()?.parse().ok()?;
            Some(Notice::Cancel { agent_id, run_id })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_parse_and_garbage_does_not() {
        let agent = Uuid::new_v4();
        let run = Uuid::new_v4();
        assert_eq!(
            parse_notice(EVENTS_CHANNEL, &format!("{agent} 3 7")),
            Some(Notice::Committed {
                agent_id: agent,
                first_seq: 3,
                last_seq: 7
            })
        );
        assert_eq!(
            parse_notice(CONTROL_CHANNEL, &format!("cancel {agent} {run}")),
            Some(Notice::Cancel {
                agent_id: agent,
                run_id: run
            })
        );
        assert_eq!(parse_notice(EVENTS_CHANNEL, "x 1 2"), None);
        assert_eq!(parse_notice(EVENTS_CHANNEL, &format!("{agent} 1")), None);
        assert_eq!(
            parse_notice(CONTROL_CHANNEL, &format!("stop {agent} {run}")),
            None
        );
        assert_eq!(parse_notice("other", "anything"), None);
    }
}
