//! The store: the source of truth. Agents and their append-only event logs.
//!
//! [`Store`] is the interface, with two implementations chosen by the `DATABASE_URL` scheme
//! ([`open`]): [`sqlite::SqliteStore`] (the embedded default, one process) and
//! [`postgres::PgStore`] (several server processes on one database). In both, seq allocation
//! happens inside the committing transaction (`head_seq` is bumped with the insert).
//!
//! PostgreSQL also implements [`ClusterStore`]: what processes sharing a database need to agree
//! on (one run per agent cluster-wide, who executes it, cancel requests) and the notices that
//! tell each process what the others committed.
//!
//! **Architecture invariant:** only this module touches sqlx.

mod migrations;
pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use app::protocol::Agent;
use app::{AgentEvent, DeltaAction, EventKind};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// Errors of the store boundary.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    #[error("the database failed: {0}")]
    Database(#[from] sqlx::Error),
    #[error("the database failed to migrate: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row that cannot be decoded or breaks an invariant (e.g. seq out of order).
    #[error("the stored log is inconsistent: {0}")]
    Corrupt(String),
    /// The database refused the statement (a constraint, a full disk …).
    #[error("the database failed: {0}")]
    Failed(String),
    /// The database could not do it now (busy, I/O trouble); trying again may work.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// Events of a run this process no longer executes: its lease ran out and another process
    /// ended it. Nothing was written.
    #[error("run {0} is no longer executed by this process (its lease ran out and it was ended)")]
    RunNotOwned(Uuid),
    /// `DATABASE_URL` names no database this server can use.
    #[error("unsupported DATABASE_URL {0:?}: expected sqlite://… or postgres://…")]
    UnsupportedUrl(String),
}

impl StoreError {
    /// True when the same call may succeed if tried again: nothing was written, and the cause
    /// is the database's state, not the request.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable(_) => true,
            StoreError::Database(error) => {
                matches!(
                    error,
                    sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed
                ) || matches!(error, sqlx::Error::Database(database)
                    if database.code().is_some_and(|code| is_transient_code(&code)))
            }
            _ => false,
        }
    }
}

/// Database error codes that mean "not now" rather than "never": SQLite's BUSY (5) and LOCKED
/// (6); PostgreSQL's serialization failure and deadlock (class 40), connection trouble (class
/// 08) and server shutdown or start-up (57P01–57P03).
fn is_transient_code(code: &str) -> bool {
    matches!(
        code,
        "5" | "6" | "40001" | "40P01" | "57P01" | "57P02" | "57P03"
    ) || code.starts_with("08")
}

/// A new agent, before the store gives it an id.
#[derive(Clone, Debug, Default)]
pub struct NewAgent {
    pub name: String,
    pub system: Option<String>,
    pub description: Option<String>,
    pub model: Option<String>,
    pub metadata: Value,
    pub tags: Vec<String>,
}

/// An event before it is committed: everything but `agent_id` and `seq`, which the store assigns.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDraft {
    pub id: Uuid,
    pub run_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub block_id: Option<Uuid>,
    pub message_id: Option<Uuid>,
    pub kind: EventKind,
    pub delta: Option<Value>,
    pub delta_path: Option<String>,
    pub delta_action: Option<DeltaAction>,
    pub content: Value,
    pub raw: Option<Value>,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
}

impl EventDraft {
    /// A draft of `kind` with a fresh id, stamped now, everything else empty.
    ///
    /// The id is a UUIDv7 (time first, then random): unique like any UUID, and ids made one
    /// after another sort together, so the log's id index grows at its end instead of taking
    /// a random page per event (random v4 ids made each commit dirty hundreds of index pages).
    pub fn new(kind: EventKind) -> EventDraft {
        EventDraft {
            id: Uuid::now_v7(),
            run_id: None,
            thread_id: None,
            block_id: None,
            message_id: None,
            kind,
            delta: None,
            delta_path: None,
            delta_action: None,
            content: Value::Null,
            raw: None,
            metadata: Value::Null,
            created_at: Utc::now(),
        }
    }

    /// The committed event this draft becomes at `seq`.
    pub fn into_event(self, agent_id: Uuid, seq: u64) -> AgentEvent {
        AgentEvent {
            id: self.id,
            agent_id,
            seq,
            coalesced_from: None,
            run_id: self.run_id,
            thread_id: self.thread_id,
            block_id: self.block_id,
            message_id: self.message_id,
            kind: self.kind,
            delta: self.delta,
            delta_path: self.delta_path,
            delta_action: self.delta_action,
            content: self.content,
            raw: self.raw,
            metadata: self.metadata,
            created_at: self.created_at,
        }
    }
}

/// One committed event as clients receive it: its `AgentEvent` JSON, serialized once, with its
/// seq beside it (the cursor, and the SSE `id:`).
///
/// Catch-up and live delivery send these strings as they are: a 10 000-event resume parsed every
/// stored JSON value into a tree and printed it again (`examples/bench.rs`), and each subscriber
/// of a live agent printed the same events again for itself.
#[derive(Clone, Debug, PartialEq)]
pub struct EventJson {
    pub seq: u64,
    pub json: Box<str>,
}

impl EventJson {
    pub fn of(event: &AgentEvent) -> EventJson {
        EventJson {
            seq: event.seq,
            json: serde_json::to_string(event)
                .expect("events serialize")
                .into(),
        }
    }

    /// `events` as one JSON array, written into `out`.
    pub fn write_array(events: &[EventJson], out: &mut String) {
        out.push('[');
        for (index, event) in events.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(&event.json);
        }
        out.push(']');
    }

    /// The bytes of `events` as a JSON array.
    pub fn array_len(events: &[EventJson]) -> usize {
        2 + events
            .iter()
            .map(|event| event.json.len() + 1)
            .sum::<usize>()
    }
}

/// The events of one agent to commit together, in order.
#[derive(Clone, Debug)]
pub struct AppendBatch {
    pub agent_id: Uuid,
    pub drafts: Vec<EventDraft>,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    async fn create_agent(&self, agent: NewAgent) -> Result<Agent, StoreError>;
    /// Agents, newest first, at most `limit`.
    async fn list_agents(&self, limit: u32) -> Result<Vec<Agent>, StoreError>;
    async fn get_agent(&self, agent_id: Uuid) -> Result<Option<Agent>, StoreError>;
    /// Deletes the agent and its log. False when there was no such agent.
    async fn delete_agent(&self, agent_id: Uuid) -> Result<bool, StoreError>;
    /// The newest committed seq of the agent's log; `None` for an unknown agent.
    async fn head_seq(&self, agent_id: Uuid) -> Result<Option<u64>, StoreError>;
    /// Events with `seq > since`, in seq order, at most `limit`.
    async fn read_events(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError>;
    /// The same events as [`Store::read_events`], as the JSON clients receive. A store that
    /// keeps the JSON pieces as text (SQLite) writes it straight from the row, with no tree in
    /// between.
    async fn read_events_json(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<EventJson>, StoreError> {
        let events = self.read_events(agent_id, since, limit).await?;
        Ok(events.iter().map(EventJson::of).collect())
    }
    /// The lifecycle and usage events of one run (`run_started`, `usage`, the run's end), in seq
    /// order; empty for an unknown run. Reads the run index, not the agent's whole log.
    async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError>;
    /// Claims `key` for `run_id` unless the agent already used it: returns the run that holds the
    /// key (`run_id` when this call claimed it).
    async fn claim_run_key(
        &self,
        agent_id: Uuid,
        key: &str,
        run_id: Uuid,
    ) -> Result<Uuid, StoreError>;
    /// Gives a key back (its run never started).
    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> Result<(), StoreError>;
    /// The `run_started` events of runs with no terminal event and no live process executing
    /// them: cut off by a crash. (With one process, every run without an end at start-up; with
    /// PostgreSQL, the runs whose lease ran out.)
    async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError>;
    /// Gives back the idempotency keys (and, with PostgreSQL, the run slots) whose run never
    /// wrote `run_started`: its request died between claiming and starting. Returns how many.
    async fn release_unstarted_run_keys(&self) -> Result<u64, StoreError>;
    /// The events with these ids, in any order (those not in the log are left out).
    async fn events_by_id(&self, ids: &[Uuid]) -> Result<Vec<AgentEvent>, StoreError>;
    /// Commits every batch in one transaction, assigning each agent's next seqs in batch order.
    /// All or nothing: an unknown agent fails the whole call and writes nothing.
    async fn append(&self, batches: &[AppendBatch]) -> Result<Vec<Vec<AgentEvent>>, StoreError>;
}

/// Shared by the implementations: row values and the checks every one of them makes.
pub(crate) mod rows {
    use std::collections::HashMap;

    use app::{AgentEvent, DeltaAction, EventKind};
    use chrono::{DateTime, Utc};
    use serde_json::Value;
    use uuid::Uuid;

    use super::{AppendBatch, EventJson, StoreError};

    pub fn corrupt(what: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt(what.to_string())
    }

    pub fn parse_json(text: &str) -> Result<Value, StoreError> {
        serde_json::from_str(text).map_err(|error| corrupt(format!("bad JSON column: {error}")))
    }

    pub fn json_text(value: &Value) -> String {
        serde_json::to_string(value).expect("serde_json::Value always serializes")
    }

    pub fn seq_from_column(value: i64) -> Result<u64, StoreError> {
        u64::try_from(value).map_err(|_| corrupt(format!("negative seq {value}")))
    }

    /// Seqs only go up, and the log has no holes: asserted on every read as well as on write.
    pub fn check_contiguous(
        agent_id: Uuid,
        since: u64,
        seqs: impl IntoIterator<Item = u64>,
    ) -> Result<(), StoreError> {
        for (expected, seq) in (since + 1..).zip(seqs) {
            if seq != expected {
                return Err(corrupt(format!(
                    "agent {agent_id}: expected seq {expected}, found {seq}"
                )));
            }
        }
        Ok(())
    }

    /// An event row as the database returns it: ids, numbers and the time decoded; kind, delta
    /// action and JSON columns still text (JSON stored compact by [`json_text`]). Both stores
    /// read rows into this, then into an event or straight into its JSON.
    pub struct EventRow<'a> {
        pub id: Uuid,
        pub agent_id: Uuid,
        pub seq: u64,
        pub run_id: Option<Uuid>,
        pub thread_id: Option<Uuid>,
        pub block_id: Option<Uuid>,
        pub message_id: Option<Uuid>,
        pub kind: &'a str,
        pub delta: Option<&'a str>,
        pub delta_path: Option<&'a str>,
        pub delta_action: Option<&'a str>,
        pub content: &'a str,
        pub raw: Option<&'a str>,
        pub metadata: &'a str,
        pub created_at: DateTime<Utc>,
    }

    impl EventRow<'_> {
        /// The event, its JSON columns parsed.
        pub fn to_event(&self) -> Result<AgentEvent, StoreError> {
            Ok(AgentEvent {
                id: self.id,
                agent_id: self.agent_id,
                seq: self.seq,
                coalesced_from: None,
                run_id: self.run_id,
                thread_id: self.thread_id,
                block_id: self.block_id,
                message_id: self.message_id,
                kind: EventKind::parse(self.kind),
                delta: self.delta.map(parse_json).transpose()?,
                delta_path: self.delta_path.map(str::to_owned),
                delta_action: self.delta_action.map(delta_action).transpose()?,
                content: parse_json(self.content)?,
                raw: self.raw.map(parse_json).transpose()?,
                metadata: parse_json(self.metadata)?,
                created_at: self.created_at,
            })
        }

        /// The JSON serde makes of the same `AgentEvent` (field order, omitted `None`s), byte for
        /// byte, without building the event: the JSON columns are checked without building a
        /// tree and copied. A resume sends these strings as they are.
        pub fn to_json(&self) -> Result<EventJson, StoreError> {
            use std::fmt::Write as _;
            // Names, punctuation, six ids and the time come to about 490 bytes: with this the
            // string never grows (growing it copied every event twice).
            let mut json = String::with_capacity(
                512 + self.delta.map_or(0, str::len)
                    + self.delta_path.map_or(0, str::len)
                    + self.content.len()
                    + self.raw.map_or(0, str::len)
                    + self.metadata.len(),
            );
            let mut uuid_buffer = Uuid::encode_buffer();
            let mut uuid = |json: &mut String, name: &str, id: Option<Uuid>| {
                if let Some(id) = id {
                    json.push_str(name);
                    json.push('"');
                    json.push_str(id.hyphenated().encode_lower(&mut uuid_buffer));
                    json.push('"');
                }
            };
            uuid(&mut json, "{\"id\":", Some(self.id));
            uuid(&mut json, ",\"agent_id\":", Some(self.agent_id));
            let _ = write!(json, ",\"seq\":{}", self.seq);
            uuid(&mut json, ",\"run_id\":", self.run_id);
            uuid(&mut json, ",\"thread_id\":", self.thread_id);
            uuid(&mut json, ",\"block_id\":", self.block_id);
            uuid(&mut json, ",\"message_id\":", self.message_id);
            // `as_str` is serde's name (checked in `app::event`'s tests).
            json.push_str(",\"kind\":\"");
            json.push_str(EventKind::parse(self.kind).as_str());
            json.push('"');
            if let Some(delta) = self.delta {
                json.push_str(",\"delta\":");
                push_json_text(&mut json, delta)?;
            }
            if let Some(path) = self.delta_path {
                json.push_str(",\"delta_path\":");
                json.push_str(&serde_json::to_string(path).expect("strings serialize"));
            }
            if let Some(name) = self.delta_action {
                let action = delta_action(name)?;
                json.push_str(",\"delta_action\":\"");
                json.push_str(action.as_str());
                json.push('"');
            }
            json.push_str(",\"content\":");
            push_json_text(&mut json, self.content)?;
            if let Some(raw) = self.raw {
                json.push_str(",\"raw\":");
                push_json_text(&mut json, raw)?;
            }
            json.push_str(",\"metadata\":");
            push_json_text(&mut json, self.metadata)?;
            // serde's form of a `DateTime<Utc>` (RFC 3339, `Z`).
            json.push_str(",\"created_at\":\"");
            json.push_str(
                &self
                    .created_at
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            );
            json.push_str("\"}");
            Ok(EventJson {
                seq: self.seq,
                json: json.into_boxed_str(),
            })
        }
    }

    fn delta_action(name: &str) -> Result<DeltaAction, StoreError> {
        DeltaAction::parse(name).ok_or_else(|| corrupt(format!("bad delta_action {name:?}")))
    }

    /// Appends a stored JSON column after checking it is one JSON value (no tree is built).
    fn push_json_text(json: &mut String, text: &str) -> Result<(), StoreError> {
        serde_json::from_str::<serde::de::IgnoredAny>(text)
            .map_err(|error| corrupt(format!("bad JSON {text:?}: {error}")))?;
        json.push_str(text);
        Ok(())
    }

    /// A statement about `agent_id` that broke a foreign key: the agent does not exist.
    pub fn unknown_agent_or_database(agent_id: Uuid) -> impl Fn(sqlx::Error) -> StoreError {
        move |error| match &error {
            sqlx::Error::Database(database) if database.is_foreign_key_violation() => {
                StoreError::UnknownAgent(agent_id)
            }
            _ => StoreError::Database(error),
        }
    }

    /// Events per agent in a group, in order of first appearance.
    pub fn totals(batches: &[AppendBatch]) -> Vec<(Uuid, u64)> {
        let mut totals: Vec<(Uuid, u64)> = Vec::new();
        for batch in batches {
            match totals
                .iter_mut()
                .find(|(agent_id, _)| *agent_id == batch.agent_id)
            {
                Some((_, total)) => *total += batch.drafts.len() as u64,
                None => totals.push((batch.agent_id, batch.drafts.len() as u64)),
            }
        }
        totals
    }

    /// The next seq to hand out per agent of a group, from each agent's head after the bump.
    pub struct SeqCursors(HashMap<Uuid, u64>);

    impl SeqCursors {
        /// `heads`: (agent, head after adding `total`) for every agent of `totals`.
        pub fn new(
            totals: &[(Uuid, u64)],
            head_of: impl Fn(Uuid) -> Option<i64>,
        ) -> Result<SeqCursors, StoreError> {
            let mut next = HashMap::with_capacity(totals.len());
            for (agent_id, total) in totals {
                let head = head_of(*agent_id).ok_or(StoreError::UnknownAgent(*agent_id))?;
                next.insert(*agent_id, seq_from_column(head)? + 1 - total);
            }
            Ok(SeqCursors(next))
        }

        /// The seq of the agent's next event, then moves on.
        pub fn take(&mut self, agent_id: Uuid) -> u64 {
            let next = self
                .0
                .get_mut(&agent_id)
                .expect("every agent of the group has a cursor");
            let seq = *next;
            *next += 1;
            seq
        }
    }
}

/// Opens the store `url` names, migrating it: `sqlite://path` (created if missing) or
/// `postgres://…` / `postgresql://…`. PostgreSQL comes with its [`ClusterStore`].
pub async fn open(url: &str, cluster: &ClusterOptions) -> Result<Opened, StoreError> {
    if url.starts_with("sqlite:") {
        let store = Arc::new(sqlite::SqliteStore::open(url).await?);
        Ok(Opened {
            store,
            cluster: None,
        })
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = Arc::new(postgres::PgStore::open(url, cluster).await?);
        Ok(Opened {
            store: store.clone(),
            cluster: Some(store),
        })
    } else {
        Err(StoreError::UnsupportedUrl(url.to_owned()))
    }
}

/// An opened store.
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub cluster: Option<Arc<dyn ClusterStore>>,
}

/// How processes sharing a database keep track of each other's runs.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// A run's owner must renew its lease within this long, or the run counts as lost with its
    /// process and is ended (interrupted) by another.
    pub run_lease_ms: u64,
    /// Connections of this process to the database.
    pub pool_connections_max: u32,
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            run_lease_ms: RUN_LEASE_MS_DEFAULT,
            pool_connections_max: postgres::PG_POOL_CONNECTIONS_MAX_DEFAULT,
        }
    }
}

/// The kinds of a run's outline (its start, usage and end), as SQL. The partial index
/// `agent_events_run_outline` holds just these rows; a query by `run_id` must carry
/// `kind IN` this text, character for character, or SQLite will not use the index (it matches a
/// partial index's condition by comparing expressions) and scans the log.
pub const RUN_OUTLINE_KINDS: &str =
    "('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled')";
/// The kinds that end a run, as SQL.
pub const RUN_END_KINDS: &str = "('run_completed', 'run_failed', 'run_cancelled')";

/// See [`ClusterOptions::run_lease_ms`].
pub const RUN_LEASE_MS_DEFAULT: u64 = 10_000;

/// What a process learns from the others through the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Some process committed `first_seq..=last_seq` of the agent's log.
    Committed {
        agent_id: Uuid,
        first_seq: u64,
        last_seq: u64,
    },
    /// Someone asked to cancel this run, wherever it executes.
    Cancel { agent_id: Uuid, run_id: Uuid },
}

/// A connection that receives [`Notice`]s. Notices sent while it is not connected are lost:
/// whoever holds it catches up from the log after reconnecting.
#[async_trait]
pub trait Notices: Send {
    /// The next notice. An error means the connection is gone: drop this and listen anew.
    async fn next(&mut self) -> Result<Notice, StoreError>;
    /// Checks the connection is alive (a quiet connection may be a dead one).
    async fn ping(&mut self) -> Result<(), StoreError>;
}

/// Coordination between server processes that share one database (see the module docs).
#[async_trait]
pub trait ClusterStore: Send + Sync + 'static {
    /// This process's id: the owner recorded on the runs it executes.
    fn node_id(&self) -> Uuid;
    /// How long a lease lasts without renewal.
    fn run_lease_ms(&self) -> u64;
    /// Takes the agent's one run slot for `run_id`, owned by this process. `Some(run)` when
    /// another run holds it (on any process).
    async fn claim_agent_run(
        &self,
        agent_id: Uuid,
        run_id: Uuid,
    ) -> Result<Option<Uuid>, StoreError>;
    /// Gives the slot back (the run never started).
    async fn release_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> Result<(), StoreError>;
    /// The run executing for the agent, on whichever process.
    async fn active_run(&self, agent_id: Uuid) -> Result<Option<Uuid>, StoreError>;
    /// Extends the leases of this process's runs `run_ids`.
    async fn renew_leases(&self, run_ids: &[Uuid]) -> Result<(), StoreError>;
    /// Asks every process to cancel the run (the one executing it does).
    async fn send_cancel(&self, agent_id: Uuid, run_id: Uuid) -> Result<(), StoreError>;
    /// A new connection that receives notices.
    async fn listen(&self) -> Result<Box<dyn Notices>, StoreError>;
}
