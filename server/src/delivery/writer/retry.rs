//! Appends tried again while the store's error is transient, and what a failed append that
//! may have committed becomes: asked of the log before any retry, reconciled later.

use std::sync::Arc;

use app::AgentEvent;
use uuid::Uuid;

use crate::delivery::hub::Hub;
use crate::metrics::Metrics;
use crate::store::{AppendBatch, EventLog, StoreError};

/// The first retry waits this long; each further one waits twice as long, up to
/// [`WRITER_RETRY_DELAY_MAX_MS`].
pub const WRITER_RETRY_DELAY_INITIAL_MS: u64 = 2;
pub const WRITER_RETRY_DELAY_MAX_MS: u64 = 500;

/// One append, tried again (bounded, with backoff) while the error is transient.
///
/// A failed append may still have committed: the connection can break after `COMMIT` reached
/// the database and before its answer came back. Appending again would then write the events
/// twice (or, as the event ids are unique, fail). So before every retry the log is asked
/// whether the group's events are there; if so, those committed events are the outcome.
///
/// `tried`: the error of a first attempt made already (a group sent ahead); it is weighed as the
/// first attempt's would be.
pub(super) async fn append_retrying(
    store: &dyn EventLog,
    batches: &[AppendBatch],
    retries_max: u32,
    store_errors: &Metrics,
    mut tried: Option<StoreError>,
) -> Result<Vec<Vec<AgentEvent>>, Refused> {
    let mut attempt = 0;
    let mut outcome_unknown = false;
    loop {
        let tried = if let Some(error) = tried.take() {
            Err(error)
        } else if outcome_unknown {
            match committed_already(store, batches).await {
                Ok(Some(committed)) => {
                    tracing::warn!("an append whose answer was lost had committed");
                    return Ok(committed);
                }
                Ok(None) => store.append(batches).await,
                Err(error) => Err(error),
            }
        } else {
            store.append(batches).await
        };
        if let Err(error) = &tried {
            store_errors.store_error(error.kind());
        }
        match tried {
            Err(error) if error.is_transient() && attempt < retries_max => {
                tracing::warn!(%error, attempt, "append failed; trying again");
                tokio::time::sleep(retry_delay(attempt)).await;
                attempt += 1;
                outcome_unknown = true;
            }
            Ok(committed) => return Ok(committed),
            Err(error) => return Err(Refused { error, maybe_committed: outcome_unknown }),
        }
    }
}

/// The wait before retry `attempt` (from 0) of a commit or of a reconcile.
pub(super) fn retry_delay(attempt: u32) -> std::time::Duration {
    crate::backoff::backoff(WRITER_RETRY_DELAY_INITIAL_MS, WRITER_RETRY_DELAY_MAX_MS, attempt)
}

/// An append that did not go through, as far as the writer knows.
pub(super) struct Refused {
    pub(super) error: StoreError,
    /// An attempt failed in a way that may have committed, and the log could not be asked.
    pub(super) maybe_committed: bool,
}

/// Times the writer asks the log, after giving up on a group that may have committed, whether
/// it did; each ask waits twice as long as the one before, from [`WRITER_RETRY_DELAY_INITIAL_MS`].
pub const RECONCILE_ATTEMPTS_MAX: u32 = 16;

/// After the writer gave up on a group that may have committed: asks the log (bounded, with
/// backoff) and publishes what did commit, so live subscribers are not left one commit behind
/// when nothing else follows. Publishing late is safe: the hub cuts what it already has and
/// subscribers fill holes from the store.
pub(super) async fn reconcile(store: Arc<dyn EventLog>, hub: Arc<Hub>, batch: AppendBatch) {
    for attempt in 0..RECONCILE_ATTEMPTS_MAX {
        tokio::time::sleep(retry_delay(attempt)).await;
        match committed_already(store.as_ref(), std::slice::from_ref(&batch)).await {
            Ok(Some(mut committed)) => {
                let events = committed.pop().unwrap_or_default();
                tracing::warn!(agent_id = %batch.agent_id, events = events.len(), "a refused append had committed; publishing it");
                hub.publish(batch.agent_id, events);
                return;
            }
            Ok(None) => return,
            Err(_) => continue,
        }
    }
    tracing::error!(agent_id = %batch.agent_id, "could not learn whether a refused append committed");
}

/// The group's events as committed, when an earlier attempt committed them; `None` when none of
/// them is in the log. A group commits whole or not at all.
pub(super) async fn committed_already(
    store: &dyn EventLog,
    batches: &[AppendBatch],
) -> Result<Option<Vec<Vec<AgentEvent>>>, StoreError> {
    let ids: Vec<Uuid> =
        batches.iter().flat_map(|batch| batch.drafts.iter().map(|draft| draft.id)).collect();
    let found = store.events_by_id(&ids).await?;
    if found.is_empty() {
        return Ok(None);
    }
    if found.len() != ids.len() {
        return Err(StoreError::Corrupt(format!(
            "{} of the {} events of one commit are in the log",
            found.len(),
            ids.len()
        )));
    }
    let mut by_id: std::collections::HashMap<Uuid, AgentEvent> =
        found.into_iter().map(|event| (event.id, event)).collect();
    Ok(Some(
        batches
            .iter()
            .map(|batch| batch.drafts.iter().filter_map(|draft| by_id.remove(&draft.id)).collect())
            .collect(),
    ))
}
