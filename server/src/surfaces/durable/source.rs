//! What a read follows: a general stream (its messages, from the service) or an agent's log
//! (its events as the native API sends them, each a message).

use uuid::Uuid;

use super::messages::Messages;
use super::refusal::Refusal;
use super::state::DurableState;
use crate::store::StreamRow;

/// Events one read of an agent's log returns at most (each is a whole event, ~0.5 KiB).
pub const AGENT_READ_EVENTS_MAX: u32 = 1_000;

/// What a live read follows: a general stream, or an agent's log.
#[derive(Clone)]
pub(super) enum Source {
    Stream(Box<StreamRow>),
    Agent { path: String, agent_id: Uuid },
}

impl Source {
    pub(super) fn log_id(&self) -> Uuid {
        match self {
            Source::Stream(row) => row.log_id,
            Source::Agent { agent_id, .. } => *agent_id,
        }
    }

    pub(super) fn path(&self) -> &str {
        match self {
            Source::Stream(row) => &row.path,
            Source::Agent { path, .. } => path,
        }
    }

    pub(super) fn content_type(&self) -> &str {
        match self {
            Source::Stream(row) => &row.content_type,
            Source::Agent { .. } => "application/json",
        }
    }

    pub(super) fn closed(&self) -> bool {
        matches!(self, Source::Stream(row) if row.closed)
    }

    /// The messages after `since` (a page), and the tail.
    pub(super) async fn read(
        &self,
        state: &DurableState,
        since: u64,
    ) -> Result<(Messages, u64), Refusal> {
        match self {
            Source::Stream(row) => Ok(state.service.read(row, since).await?),
            Source::Agent { agent_id, .. } => read_agent(state, *agent_id, since).await,
        }
    }

    /// The source as it stands now: `None` once it is gone.
    pub(super) async fn refreshed(&self, state: &DurableState) -> Result<Option<Source>, Refusal> {
        match self {
            Source::Stream(row) => Ok(state
                .service
                .get(&row.path)
                .await?
                .filter(|row| !row.soft_deleted)
                .map(|row| Source::Stream(Box::new(row)))),
            Source::Agent { agent_id, .. } => {
                Ok(state.store.head_seq(*agent_id).await?.map(|_| self.clone()))
            }
        }
    }
}

/// The agent's events after `since` (a page) as the native API sends them, each with its seq,
/// and the log's head.
async fn read_agent(
    state: &DurableState,
    agent_id: Uuid,
    since: u64,
) -> Result<(Messages, u64), Refusal> {
    let tail = state.store.head_seq(agent_id).await?.ok_or(Refusal::NotFound)?;
    if since >= tail {
        return Ok((Messages::default(), tail));
    }
    // Each event as the native API sends it, written from the row (no tree in between).
    let events = state.store.read_events_json(agent_id, since, AGENT_READ_EVENTS_MAX).await?;
    let mut messages = Messages::default();
    for event in &events {
        messages.push(event.seq, &event.json);
    }
    Ok((messages, tail))
}
