//! PostgreSQL's append: one transaction that locks and bumps the agents' heads, checks the runs
//! are this process's, inserts the whole group as column arrays and notifies the other
//! processes at commit.

use app::{AgentEvent, DeltaAction, EventKind};
use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::{micros, PgStore, EVENTS_CHANNEL};
use crate::store::rows::{json_text, totals, SeqCursors};
use crate::store::{AppendBatch, StoreError};

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

    /// Inserts the whole group in one statement.
    async fn insert(&self, transaction: &mut Transaction<'_>) -> Result<(), StoreError> {
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
        .bind(&self.id)
        .bind(&self.agent_id)
        .bind(&self.seq)
        .bind(&self.run_id)
        .bind(&self.thread_id)
        .bind(&self.block_id)
        .bind(&self.message_id)
        .bind(&self.kind)
        .bind(&self.delta)
        .bind(&self.delta_path)
        .bind(&self.delta_action)
        .bind(&self.content)
        .bind(&self.raw)
        .bind(&self.metadata)
        .bind(&self.created_at)
        .execute(&mut **transaction)
        .await?;
        Ok(())
    }
}

/// The runs a group starts, as column arrays for `open_runs`.
#[derive(Default)]
struct OpenedRuns {
    run_id: Vec<Uuid>,
    agent_id: Vec<Uuid>,
    seq: Vec<i64>,
}

type Transaction<'a> = sqlx::Transaction<'a, sqlx::Postgres>;

impl PgStore {
    /// [`crate::store::EventLog::append`] for PostgreSQL.
    pub(super) async fn append_group(
        &self,
        batches: &[AppendBatch],
    ) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
        let mut totals = totals(batches);
        totals.sort_by_key(|(agent_id, _)| *agent_id);
        let mut transaction = self.pool.begin().await?;
        let mut cursors = bump_heads(&mut transaction, &totals).await?;
        self.check_runs_owned(&mut transaction, batches).await?;

        let mut committed = Vec::with_capacity(batches.len());
        let mut columns = Columns::default();
        let mut ended_runs: Vec<Uuid> = Vec::new();
        let mut started = OpenedRuns::default();
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
                if let (EventKind::RunStarted, Some(run_id)) = (event.kind, event.run_id) {
                    started.run_id.push(run_id);
                    started.agent_id.push(event.agent_id);
                    started.seq.push(event.seq as i64);
                }
            }
            committed.push(events);
        }
        columns.insert(&mut transaction).await?;
        if !started.run_id.is_empty() {
            sqlx::query(
                "INSERT INTO open_runs (run_id, agent_id, started_seq) \
                 SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::bigint[]) \
                 ON CONFLICT (run_id) DO NOTHING",
            )
            .bind(&started.run_id)
            .bind(&started.agent_id)
            .bind(&started.seq)
            .execute(&mut *transaction)
            .await?;
        }

        // One notice per agent (delivered at commit), and the ended runs free their slots.
        let notices: Vec<String> = totals
            .iter()
            .map(|(agent_id, total)| {
                let next = cursors.take(*agent_id);
                format!("{agent_id} {} {}", next - total, next - 1)
            })
            .collect();
        sqlx::query(
            "WITH ended AS (DELETE FROM active_runs WHERE run_id = ANY($1)), \
                 closed AS (DELETE FROM open_runs WHERE run_id = ANY($1)) \
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

    /// Runs whose events are in this group must be executed by this process (or be lost to
    /// their own, which is how another process ends them).
    async fn check_runs_owned(
        &self,
        transaction: &mut Transaction<'_>,
        batches: &[AppendBatch],
    ) -> Result<(), StoreError> {
        let mut run_ids: Vec<Uuid> = batches
            .iter()
            .flat_map(|batch| batch.drafts.iter().filter_map(|draft| draft.run_id))
            .collect();
        run_ids.sort_unstable();
        run_ids.dedup();
        if run_ids.is_empty() {
            return Ok(());
        }
        let owned: Vec<Uuid> = sqlx::query_scalar(
            "SELECT run_id FROM active_runs WHERE run_id = ANY($1) \
             AND (owner_id = $2 OR lease_until < now())",
        )
        .bind(&run_ids)
        .bind(self.node_id)
        .fetch_all(&mut **transaction)
        .await?;
        match run_ids.iter().find(|run| !owned.contains(run)) {
            Some(lost) => Err(StoreError::RunNotOwned(*lost)),
            None => Ok(()),
        }
    }
}

/// Locks the agents' heads in id order (`totals` is sorted: two processes appending to the same
/// agents never wait on each other in a cycle), bumps them by their totals and returns where
/// each agent's seqs start.
async fn bump_heads(
    transaction: &mut Transaction<'_>,
    totals: &[(Uuid, u64)],
) -> Result<SeqCursors, StoreError> {
    let agent_ids: Vec<Uuid> = totals.iter().map(|(agent_id, _)| *agent_id).collect();
    let counts: Vec<i64> = totals.iter().map(|(_, total)| *total as i64).collect();
    let locked: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM agents WHERE id = ANY($1) ORDER BY id FOR UPDATE")
            .bind(&agent_ids)
            .fetch_all(&mut **transaction)
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
    .fetch_all(&mut **transaction)
    .await?;
    SeqCursors::new(totals, |agent_id| {
        heads
            .iter()
            .find(|row| row.get::<Uuid, _>(0) == agent_id)
            .map(|row| row.get(1))
    })
}
