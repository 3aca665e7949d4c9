//! PostgreSQL's append: one transaction that locks and bumps the agents' heads (one statement),
//! checks the runs are this process's, inserts the whole group as column arrays and notifies the
//! other processes at commit (one statement). A group of plain events is four round trips:
//! `BEGIN`, the heads, the rows, `COMMIT` (it was six).

use crate::store::StoreResult;
use app::{AgentEvent, DeltaAction, EventKind};
use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::{micros, PgStore, EVENTS_CHANNEL};
use crate::store::chunk::Written;
use crate::store::rows::{content_column, json_text, totals, SeqCursors};
use crate::store::{AppendBatch, StoreError};

/// The rows of a group as column arrays, for one `INSERT … SELECT FROM UNNEST(…)`.
#[derive(Default)]
struct Columns {
    id: Vec<Uuid>,
    agent_id: Vec<Uuid>,
    first_seq: Vec<i64>,
    last_seq: Vec<i64>,
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
    pieces: Vec<Option<Vec<u8>>>,
    raws: Vec<Option<Vec<u8>>>,
}

impl Columns {
    /// The columns every row has, from its first event.
    fn push_head(&mut self, event: &AgentEvent, last_seq: u64, content: String) {
        self.id.push(event.id);
        self.agent_id.push(event.agent_id);
        self.first_seq.push(event.seq as i64);
        self.last_seq.push(last_seq as i64);
        self.run_id.push(event.run_id);
        self.thread_id.push(event.thread_id);
        self.block_id.push(event.block_id);
        self.message_id.push(event.message_id);
        self.kind.push(event.kind.as_str());
        self.delta_path.push(event.delta_path.clone());
        self.delta_action.push(event.delta_action.map(DeltaAction::as_str));
        self.content.push(content);
        self.metadata.push(json_text(&event.metadata));
        self.created_at.push(event.created_at);
    }

    fn push(&mut self, row: Written<'_>) {
        match row {
            Written::Event(event) => {
                self.push_head(event, event.seq, content_column(event).into_owned());
                self.delta.push(event.delta.as_ref().map(json_text));
                self.raw.push(event.raw.as_ref().map(json_text));
                self.pieces.push(None);
                self.raws.push(None);
            }
            Written::Chunk(chunk) => {
                let content = chunk.content_column();
                self.pieces.push(Some(chunk.pieces_column(&content).into_owned()));
                self.push_head(&chunk.head, chunk.last_seq, content);
                self.delta.push(chunk.delta_column().map(str::to_owned));
                self.raw.push(None);
                self.raws.push(chunk.raws_column());
            }
        }
    }

    /// Inserts the group's rows (a run row an earlier group wrote gets its new end, text and
    /// pieces), frees the slots of the runs it ended and queues one notice per agent (delivered
    /// at commit), in one statement: one round trip where there were two. The runs the group
    /// started were inserted before this (a run that starts and ends in one group is deleted
    /// here), as data-modifying parts of one statement see the same snapshot.
    async fn insert_and_notify(
        &self,
        transaction: &mut Transaction<'_>,
        ended_runs: &[Uuid],
        notices: &[String],
    ) -> StoreResult<()> {
        sqlx::query(
            "WITH written AS (INSERT INTO events (id, agent_id, first_seq, last_seq, run_id, \
                 thread_id, block_id, \
                 message_id, kind, delta, delta_path, delta_action, content, raw, metadata, \
                 created_at, pieces, raws) \
             SELECT id, agent_id, first_seq, last_seq, run_id, thread_id, block_id, message_id, \
                 kind, delta, delta_path, delta_action, content::json, raw::json, \
                 metadata::json, created_at, pieces, raws \
             FROM UNNEST($1::uuid[], $2::uuid[], $3::bigint[], $4::bigint[], $5::uuid[], \
                 $6::uuid[], $7::uuid[], $8::uuid[], $9::text[], $10::text[], $11::text[], \
                 $12::text[], $13::text[], $14::text[], $15::text[], $16::timestamptz[], \
                 $17::bytea[], $18::bytea[]) AS row(id, agent_id, first_seq, last_seq, run_id, \
                 thread_id, block_id, message_id, kind, delta, delta_path, delta_action, \
                 content, raw, metadata, created_at, pieces, raws) \
             ON CONFLICT (agent_id, first_seq) DO UPDATE SET last_seq = excluded.last_seq, \
                 delta = excluded.delta, content = excluded.content, pieces = excluded.pieces, \
                 raws = excluded.raws), \
             ended AS (DELETE FROM active_runs WHERE run_id = ANY($19)), \
             closed AS (DELETE FROM open_runs WHERE run_id = ANY($19)) \
             SELECT pg_notify($20, notice) FROM UNNEST($21::text[]) AS notice",
        )
        .bind(&self.id)
        .bind(&self.agent_id)
        .bind(&self.first_seq)
        .bind(&self.last_seq)
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
        .bind(&self.pieces)
        .bind(&self.raws)
        .bind(ended_runs)
        .bind(EVENTS_CHANNEL)
        .bind(notices)
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

/// The approval requests a group asks and answers, as column arrays for `open_approvals`
/// (kept in the append transaction, as in SQLite).
#[derive(Default)]
struct ApprovalRows {
    asked_agent: Vec<Uuid>,
    asked_call: Vec<String>,
    asked_at: Vec<DateTime<Utc>>,
    answered_agent: Vec<Uuid>,
    answered_call: Vec<String>,
}

impl ApprovalRows {
    fn add(&mut self, event: &AgentEvent) {
        let Some(call_id) = crate::store::rows::approval_call_id(event) else {
            return;
        };
        match event.kind {
            EventKind::ApprovalRequested => {
                self.asked_agent.push(event.agent_id);
                self.asked_call.push(call_id.to_owned());
                self.asked_at.push(event.created_at);
            }
            EventKind::ApprovalResponse | EventKind::ToolResult => {
                self.answered_agent.push(event.agent_id);
                self.answered_call.push(call_id.to_owned());
            }
            _ => {}
        }
    }

    /// Asks first, then answers: a group may hold a request and its answer.
    async fn write(&self, transaction: &mut Transaction<'_>) -> Result<(), sqlx::Error> {
        if !self.asked_agent.is_empty() {
            sqlx::query(
                "INSERT INTO open_approvals (agent_id, tool_call_id, requested_at) \
                 SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::timestamptz[]) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(&self.asked_agent)
            .bind(&self.asked_call)
            .bind(&self.asked_at)
            .execute(&mut **transaction)
            .await?;
        }
        if !self.answered_agent.is_empty() {
            sqlx::query(
                "DELETE FROM open_approvals AS open USING \
                 UNNEST($1::uuid[], $2::text[]) AS answered (agent_id, tool_call_id) \
                 WHERE open.agent_id = answered.agent_id \
                 AND open.tool_call_id = answered.tool_call_id",
            )
            .bind(&self.answered_agent)
            .bind(&self.answered_call)
            .execute(&mut **transaction)
            .await?;
        }
        Ok(())
    }
}

type Transaction<'a> = sqlx::Transaction<'a, sqlx::Postgres>;

/// External producers' positions after their batches (kept in the append transaction, as in
/// SQLite); a producer's new epoch (seq 0) forgets the agent's oldest producers past
/// [`crate::store::PRODUCERS_PER_AGENT_MAX`].
async fn write_positions(
    transaction: &mut Transaction<'_>,
    batches: &[AppendBatch],
) -> StoreResult<()> {
    for batch in batches {
        let Some(stamp) = &batch.producer else {
            continue;
        };
        // The position the batch was fenced against must still be the stored one (the agent's
        // row is locked: no other transaction moves it meanwhile).
        let stored: Option<(i64, i64)> = sqlx::query_as(
            "SELECT epoch, seq FROM producers WHERE agent_id = $1 AND producer_id = $2",
        )
        .bind(batch.agent_id)
        .bind(&stamp.producer_id)
        .fetch_optional(&mut **transaction)
        .await?;
        let stored = stored.map(|(epoch, seq)| (epoch as u64, seq as u64));
        if stored != stamp.fenced_at {
            return Err(StoreError::ProducerMoved {
                agent_id: batch.agent_id,
                producer_id: stamp.producer_id.clone(),
            });
        }
        sqlx::query(
            "INSERT INTO producers (agent_id, producer_id, epoch, seq, run_id, updated_at) \
             VALUES ($1, $2, $3, $4, $5, clock_timestamp()) \
             ON CONFLICT (agent_id, producer_id) DO UPDATE SET epoch = excluded.epoch, \
             seq = excluded.seq, run_id = excluded.run_id, updated_at = excluded.updated_at",
        )
        .bind(batch.agent_id)
        .bind(&stamp.producer_id)
        .bind(stamp.epoch as i64)
        .bind(stamp.seq as i64)
        .bind(stamp.run_id)
        .execute(&mut **transaction)
        .await?;
        if stamp.seq == 0 {
            sqlx::query(
                "DELETE FROM producers WHERE agent_id = $1 AND producer_id NOT IN \
                 (SELECT producer_id FROM producers WHERE agent_id = $1 \
                 ORDER BY updated_at DESC LIMIT $2)",
            )
            .bind(batch.agent_id)
            .bind(i64::from(crate::store::PRODUCERS_PER_AGENT_MAX))
            .execute(&mut **transaction)
            .await?;
        }
    }
    Ok(())
}

impl PgStore {
    /// [`crate::store::EventLog::append`] for PostgreSQL.
    pub(super) async fn append_group(
        &self,
        batches: &[AppendBatch],
    ) -> StoreResult<Vec<Vec<AgentEvent>>> {
        let mut totals = totals(batches);
        totals.sort_by_key(|(agent_id, _)| *agent_id);
        let mut transaction = self.pool.begin().await?;
        let mut cursors = bump_heads(&mut transaction, &totals).await?;
        self.check_runs_owned(&mut transaction, batches).await?;

        let mut committed = Vec::with_capacity(batches.len());
        let mut columns = Columns::default();
        let mut rows = self.open_chunks().take(totals.iter().map(|(agent_id, _)| *agent_id));
        let mut write = |row: Written<'_>| {
            columns.push(row);
            Ok(())
        };
        let mut approvals = ApprovalRows::default();
        let mut ended_runs: Vec<Uuid> = Vec::new();
        let mut started = OpenedRuns::default();
        for batch in batches {
            let events: Vec<AgentEvent> = batch
                .drafts
                .iter()
                .map(|draft| {
                    let mut event =
                        draft.clone().into_event(batch.agent_id, cursors.take(batch.agent_id));
                    event.created_at = micros(event.created_at);
                    event
                })
                .collect();
            for event in &events {
                rows.add(event, &mut write)?;
                if event.kind.is_run_end() {
                    ended_runs.extend(event.run_id);
                }
                approvals.add(event);
                if let (EventKind::RunStarted, Some(run_id)) = (event.kind, event.run_id) {
                    started.run_id.push(run_id);
                    started.agent_id.push(event.agent_id);
                    started.seq.push(event.seq as i64);
                }
            }
            committed.push(events);
        }
        let open_after = rows.finish(&mut write)?;
        // Before the rows' statement, which deletes the runs this group ended (see
        // `insert_and_notify`).
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
        approvals.write(&mut transaction).await?;
        write_positions(&mut transaction, batches).await?;

        // One notice per agent (delivered at commit), and the ended runs free their slots.
        let notices: Vec<String> = totals
            .iter()
            .map(|(agent_id, total)| {
                let next = cursors.take(*agent_id);
                format!("{agent_id} {} {}", next - total, next - 1)
            })
            .collect();
        columns.insert_and_notify(&mut transaction, &ended_runs, &notices).await?;
        transaction.commit().await?;
        self.open_chunks().keep(open_after);
        Ok(committed)
    }

    /// Runs whose events are in this group must be executed by this process (or be lost to
    /// their own, which is how another process ends them).
    async fn check_runs_owned(
        &self,
        transaction: &mut Transaction<'_>,
        batches: &[AppendBatch],
    ) -> StoreResult<()> {
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
) -> StoreResult<SeqCursors> {
    let agent_ids: Vec<Uuid> = totals.iter().map(|(agent_id, _)| *agent_id).collect();
    let counts: Vec<i64> = totals.iter().map(|(_, total)| *total as i64).collect();
    // One statement (one round trip where there were two): the sub-select locks the rows in id
    // order as it yields them, and the update touches a row only once it was yielded, so locks
    // are still taken in id order. An agent that is not there gets no row back, which
    // `SeqCursors::new` refuses as `UnknownAgent`.
    let heads = sqlx::query(
        "UPDATE agents SET head_seq = agents.head_seq + bump.count \
         FROM UNNEST($1::uuid[], $2::bigint[]) AS bump(id, count) \
         WHERE agents.id = bump.id \
         AND agents.id IN (SELECT id FROM agents WHERE id = ANY($1) ORDER BY id FOR UPDATE) \
         RETURNING agents.id, agents.head_seq",
    )
    .bind(&agent_ids)
    .bind(&counts)
    .fetch_all(&mut **transaction)
    .await?;
    SeqCursors::new(totals, |agent_id| {
        heads.iter().find(|row| row.get::<Uuid, _>(0) == agent_id).map(|row| row.get(1))
    })
}
