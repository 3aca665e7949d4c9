//! Catch-up: the log read from the store page by page (two pages in flight) and delivered in
//! order, with reads retried while the database is restarting.

use std::sync::Arc;

use tokio::sync::mpsc;
use uuid::Uuid;

use super::outbound::{Form, Outbound, EVENTS_FRAME_HEAD_BYTES};
use crate::limits::{CATCHUP_FIRST_PAGE_EVENTS, CATCHUP_PAGE_EVENTS};
use crate::store::{EventLog, StoreError};

/// Pages a catch-up reads at once. Seqs have no holes, so the cursor of the page after a full
/// page is known before that page arrives: the next read runs beside the one being delivered
/// (on another core, over another read connection) instead of after it.
pub const CATCHUP_READS_AT_ONCE: usize = 2;

/// Sends events after `after` from the store, page by page, up to `until` (inclusive) or to the
/// end of the log. Returns the last seq delivered.
///
/// Up to [`CATCHUP_READS_AT_ONCE`] pages are read at once and delivered in order. A page read
/// ahead assumed every page before it was full; when one is not (the end of the log), what was
/// read ahead of it is dropped unread, and reading goes on (or ends) from what was delivered.
pub(super) async fn catch_up(
    store: &dyn EventLog,
    agent_id: Uuid,
    after: u64,
    until: Option<u64>,
    form: Form,
    out: &mpsc::Sender<Outbound>,
) -> Result<u64, FollowError> {
    let mut last_delivered = after;
    // The next page to ask for: its cursor and size (growing from the first page's).
    let mut cursor = after;
    let mut page_events = CATCHUP_FIRST_PAGE_EVENTS;
    let mut reads = futures::stream::FuturesOrdered::new();
    loop {
        while reads.len() < CATCHUP_READS_AT_ONCE {
            let wanted = match until {
                Some(until) if until <= cursor => break,
                Some(until) => (until - cursor).min(page_events as u64) as u32,
                None => page_events,
            };
            page_events = (page_events * 2).min(CATCHUP_PAGE_EVENTS);
            reads.push_back(async move {
                (wanted, read_retrying(store, agent_id, cursor, wanted, form).await)
            });
            cursor += wanted as u64;
        }
        let Some((wanted, page)) = futures::StreamExt::next(&mut reads).await else {
            return Ok(last_delivered);
        };
        let page = page?;
        let (count, newest) = page.count_and_last_seq();
        let Some(newest) = newest else {
            return match until {
                // The hub showed us a later seq, so the store must have everything before it.
                Some(until) => Err(FollowError::Store(StoreError::Corrupt(format!(
                    "agent {agent_id}: seqs {} to {until} are missing from the store",
                    last_delivered + 1
                )))),
                None => Ok(last_delivered),
            };
        };
        let full_page = count as u32 == wanted;
        last_delivered = newest;
        send(out, page).await?;
        if !full_page {
            if until.is_none() {
                return Ok(last_delivered);
            }
            // Reads ahead started past seqs this page did not have: start again from here.
            reads = futures::stream::FuturesOrdered::new();
            cursor = last_delivered;
        }
    }
}

/// Times a catch-up read is tried again when the database says trying again may work (it is
/// restarting, a connection broke) before the subscription ends with an error.
pub const CATCHUP_READ_RETRIES_MAX: u32 = 10;
/// The first of those waits; each further one doubles, up to [`CATCHUP_RETRY_DELAY_MAX_MS`]
/// (about 5 s in all: a database restart, not an outage).
pub const CATCHUP_RETRY_DELAY_INITIAL_MS: u64 = 20;
pub const CATCHUP_RETRY_DELAY_MAX_MS: u64 = 1_000;

/// A page of the log, read again (bounded) while the error is transient: a subscriber mid-stream
/// rides out a database restart instead of being dropped.
async fn read_retrying(
    store: &dyn EventLog,
    agent_id: Uuid,
    after: u64,
    limit: u32,
    form: Form,
) -> Result<Outbound, StoreError> {
    let mut attempt = 0;
    loop {
        let read = match form {
            // A subscriber that merges appends gets the events one by one, to merge.
            Form::Json { coalesce: true } => store
                .read_events_json(agent_id, after, limit)
                .await
                .map(|events| Outbound::Events {
                    agent_id,
                    events: Arc::from(events),
                    from: 0,
                    coalesce: true,
                }),
            Form::Json { coalesce: false } => store
                .read_events_page(agent_id, after, limit, EVENTS_FRAME_HEAD_BYTES)
                .await
                .map(|page| Outbound::Page { agent_id, page }),
            Form::Values => store
                .read_events(agent_id, after, limit)
                .await
                .map(|events| Outbound::Values { agent_id, events }),
        };
        match read {
            Err(error) if error.is_transient() && attempt < CATCHUP_READ_RETRIES_MAX => {
                tracing::warn!(%agent_id, %error, attempt, "catch-up read failed; trying again");
                tokio::time::sleep(crate::backoff::backoff(
                    CATCHUP_RETRY_DELAY_INITIAL_MS,
                    CATCHUP_RETRY_DELAY_MAX_MS,
                    attempt,
                ))
                .await;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Why a subscription ended other than by the subscriber leaving.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    #[error("since={since} is beyond the newest event of agent {agent_id} (seq {head_seq})")]
    SinceBeyondHead { agent_id: Uuid, since: u64, head_seq: u64 },
    #[error("agent {0} was deleted")]
    AgentDeleted(Uuid),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The connection is gone; nothing to report to anyone.
    #[error("the subscriber went away")]
    SubscriberGone,
}

pub(super) async fn send(
    out: &mpsc::Sender<Outbound>,
    outbound: impl Into<Outbound>,
) -> Result<(), FollowError> {
    out.send(outbound.into()).await.map_err(|_| FollowError::SubscriberGone)
}
