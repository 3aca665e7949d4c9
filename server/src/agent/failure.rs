//! Ending a run that stopped without writing its end (the log refused an event, or the run
//! panicked): from what of it the log holds, with retries, so clients are not left waiting on a
//! run that will never say more.

use serde_json::Value;
use uuid::Uuid;

use crate::delivery::writer::{AppendError, Writer};
use crate::store::StoreError;

/// Times a run that stopped without its end tries to write its `run_failed`.
/// If all fail (the database is gone), start-up recovery ends the run as `interrupted`.
pub const RUN_END_WRITE_ATTEMPTS_MAX: u32 = 8;
/// The first of those attempts waits this long after the failure; each further one twice as long.
const RUN_END_WRITE_DELAY_INITIAL_MS: u64 = 10;
/// Ends a run that stopped without its end, from what of it the log holds: an error result for
/// each tool call still unanswered, an `error` carrying `detail` and a `run_failed`, so clients
/// are not left waiting on a run that will never say more. A run whose `run_started` never
/// committed is not in the log at all and gets nothing.
pub(super) async fn end_from_log(
    store: &dyn crate::store::EventLog,
    writer: &Writer,
    agent_id: Uuid,
    run_id: Uuid,
    detail: Value,
) {
    // The run may have events on their way to the log (it pipelines its appends): read the log
    // only once they are in, or a `run_started` still queued looked like a run that never began.
    if let Err(error) = writer.barrier().await {
        tracing::error!(%agent_id, %run_id, %error, "the run's end cannot be written");
        return;
    }
    for attempt in 0..RUN_END_WRITE_ATTEMPTS_MAX {
        tokio::time::sleep(std::time::Duration::from_millis(
            RUN_END_WRITE_DELAY_INITIAL_MS << attempt,
        ))
        .await;
        let outcome = async {
            let Some(started) = store.run_start(run_id).await? else {
                return Ok(());
            };
            let events = crate::agent::recovery::run_events(store, &started).await?;
            if events.iter().any(|event| event.kind.is_run_end()) {
                return Ok(());
            }
            let drafts = crate::agent::recovery::closing_drafts(&started, &events, detail.clone());
            writer.append_closing(agent_id, drafts).await.map(|_| ())
        }
        .await;
        match outcome {
            Ok(()) => return,
            Err(AppendError::WriterStopped) => break,
            Err(AppendError::Store(StoreError::RunNotOwned(_))) => {
                // Another server ended this run (its lease ran out): the log already has its end.
                tracing::warn!(%agent_id, %run_id, "the run was ended by another server");
                return;
            }
            Err(error) => {
                tracing::warn!(%agent_id, %run_id, %error, attempt, "run_failed not written")
            }
        }
    }
    tracing::error!(%agent_id, %run_id, "the run's end could not be written; recovery will end it at the next start");
}
