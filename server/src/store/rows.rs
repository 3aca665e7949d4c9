//! Shared by the two stores: decoding rows into agents, events and event JSON, and the checks
//! every read and append makes. Only the SQL and the column types differ between the stores.

use crate::store::StoreResult;
use std::collections::HashMap;

use app::protocol::{Agent, BranchOrigin};
use app::{AgentEvent, DeltaAction, EventKind};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

pub use super::records::{content_column, message_text};
use super::{AppendBatch, ContentJson, StoreError};

pub fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

pub fn parse_json(text: &str) -> StoreResult<Value> {
    serde_json::from_str(text).map_err(|error| corrupt(format!("bad JSON column: {error}")))
}

pub fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("serde_json::Value always serializes")
}

pub fn seq_from_column(value: i64) -> StoreResult<u64> {
    u64::try_from(value).map_err(|_| corrupt(format!("negative seq {value}")))
}

/// A read cursor as the column type (both stores keep seqs as 64-bit signed integers).
pub fn seq_to_column(seq: u64) -> StoreResult<i64> {
    i64::try_from(seq).map_err(|_| corrupt(format!("seq {seq} beyond the column's range")))
}

/// An agent row as the database returns it: id and time decoded, JSON columns still text.
pub struct AgentRow<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub system: Option<&'a str>,
    pub description: Option<&'a str>,
    pub model: Option<&'a str>,
    pub metadata: &'a str,
    pub tags: &'a str,
    pub head_seq: i64,
    pub created_at: DateTime<Utc>,
    pub owner: Option<&'a str>,
    pub root_id: Option<Uuid>,
    pub parent_id: Option<Uuid>,
    pub fork_seq: Option<i64>,
    pub current_branch: Option<Uuid>,
}

/// A row of either store, for the columns whose types differ between them: ids (PostgreSQL's
/// `uuid`, SQLite's text) and times (`timestamptz`, RFC 3339 text).
pub trait KeyColumns {
    fn uuid_column(&self, column: &str) -> StoreResult<Option<Uuid>>;
    fn time_column(&self, column: &str) -> StoreResult<DateTime<Utc>>;
}

/// An agent from a row of `AGENT_COLUMNS`, on either store.
pub fn agent_from_row<'r, R>(row: &'r R) -> StoreResult<Agent>
where
    R: sqlx::Row + KeyColumns,
    &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
{
    let id = row.uuid_column("id")?.ok_or_else(|| corrupt("an agent without an id"))?;
    AgentRow {
        id,
        name: row.try_get("name")?,
        system: row.try_get("system")?,
        description: row.try_get("description")?,
        model: row.try_get("model")?,
        metadata: row.try_get("metadata")?,
        tags: row.try_get("tags")?,
        head_seq: row.try_get("head_seq")?,
        owner: row.try_get("owner")?,
        root_id: row.uuid_column("root_id")?,
        parent_id: row.uuid_column("parent_id")?,
        fork_seq: row.try_get("fork_seq")?,
        current_branch: row.uuid_column("current_branch")?,
        created_at: row.time_column("created_at")?,
    }
    .to_agent()
}

impl AgentRow<'_> {
    pub fn to_agent(&self) -> StoreResult<Agent> {
        Ok(Agent {
            id: self.id,
            name: self.name.to_owned(),
            system: self.system.map(str::to_owned),
            description: self.description.map(str::to_owned),
            model: self.model.map(str::to_owned),
            metadata: parse_json(self.metadata)?,
            tags: serde_json::from_str(self.tags)
                .map_err(|error| corrupt(format!("bad tags {:?}: {error}", self.tags)))?,
            head_seq: seq_from_column(self.head_seq)?,
            created_at: self.created_at,
            owner: self.owner.map(str::to_owned),
            branch: match (self.root_id, self.parent_id, self.fork_seq) {
                (None, None, None) => None,
                (Some(root), Some(parent), Some(fork_seq)) => {
                    Some(BranchOrigin { root, parent, fork_seq: seq_from_column(fork_seq)? })
                }
                _ => return Err(corrupt(format!("agent {}: half a branch origin", self.id))),
            },
            current_branch: self.current_branch,
        })
    }
}

/// Seqs only go up, and the log has no holes: asserted on every read as well as on write.
pub fn check_contiguous(
    agent_id: Uuid,
    since: u64,
    seqs: impl IntoIterator<Item = u64>,
) -> StoreResult<()> {
    for (expected, seq) in (since + 1..).zip(seqs) {
        if seq != expected {
            return Err(corrupt(format!("agent {agent_id}: expected seq {expected}, found {seq}")));
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
    pub fn to_event(&self) -> StoreResult<AgentEvent> {
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
            content: self.content_value()?,
            raw: self.raw.map(parse_json).transpose()?,
            metadata: parse_json(self.metadata)?,
            created_at: self.created_at,
        })
    }

    /// The `content` column as the event's content: a stream message's JSON text as a string,
    /// anything else parsed.
    fn content_value(&self) -> StoreResult<Value> {
        if self.kind == EventKind::StreamMessage.as_str() {
            return Ok(Value::String(self.content.to_owned()));
        }
        parse_json(self.content)
    }

    /// The event's `content` JSON alone, checked and copied (what a stream read sends).
    pub fn to_content(&self) -> StoreResult<ContentJson> {
        Ok(ContentJson {
            seq: self.seq,
            stream_message: self.kind == EventKind::StreamMessage.as_str(),
            json: checked_json(self.content)?.into(),
        })
    }
}

pub(crate) fn delta_action(name: &str) -> StoreResult<DeltaAction> {
    DeltaAction::parse(name).ok_or_else(|| corrupt(format!("bad delta_action {name:?}")))
}

/// `text`, once checked to be JSON (without building a tree): a damaged row is an error, never
/// a broken answer.
pub fn checked_json(text: &str) -> StoreResult<&str> {
    if is_plain_string(text) {
        return Ok(text);
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|error| corrupt(format!("bad JSON {text:?}: {error}")))?;
    Ok(text)
}

/// A JSON string with no escapes (a token's delta, mostly): `"`, then anything but `"`, `\`
/// and control characters, then `"`. Any `&str` is UTF-8, so that is the whole check.
fn is_plain_string(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 2
        && bytes[0] == b'"'
        && bytes[bytes.len() - 1] == b'"'
        && bytes[1..bytes.len() - 1]
            .iter()
            .all(|&byte| byte != b'"' && byte != b'\\' && byte >= 0x20)
}

/// Events per agent in a group, in order of first appearance.
pub fn totals(batches: &[AppendBatch]) -> Vec<(Uuid, u64)> {
    let mut totals: Vec<(Uuid, u64)> = Vec::new();
    for batch in batches {
        match totals.iter_mut().find(|(agent_id, _)| *agent_id == batch.agent_id) {
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
    ) -> StoreResult<SeqCursors> {
        let mut next = HashMap::with_capacity(totals.len());
        for (agent_id, total) in totals {
            let head = head_of(*agent_id).ok_or(StoreError::UnknownAgent(*agent_id))?;
            next.insert(*agent_id, seq_from_column(head)? + 1 - total);
        }
        Ok(SeqCursors(next))
    }

    /// The seq of the agent's next event, then moves on.
    pub fn take(&mut self, agent_id: Uuid) -> u64 {
        let next = self.0.get_mut(&agent_id).expect("every agent of the group has a cursor");
        let seq = *next;
        *next += 1;
        seq
    }
}

/// The tool call an approval request, answer or result is about (`open_approvals`' key).
pub(crate) fn approval_call_id(event: &AgentEvent) -> Option<&str> {
    event.content.get("tool_call_id")?.as_str()
}
