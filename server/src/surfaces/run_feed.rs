//! One run followed through the log and cut into a surface's items: the part every streaming
//! surface shares. A surface gives its pure mapping (events in seq order → items); the feed task
//! follows the agent's log from just before the run's start, keeps only the run's events, and
//! closes its channel after the run's end (or after the error that stopped the following).
//!
//! A surface's frames carry where they stand in the log ([`FrameId`]): one event can make
//! several items, so the last item of event `seq` has id `<seq>` and the ones before it
//! `<seq>:<k>`; a client's `Last-Event-ID` then skips exactly what it has, also when it was cut
//! off inside one event's items.

use std::sync::Arc;
use std::time::Duration;

use app::AgentEvent;
use axum::http::StatusCode;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::agent::Runs;
use crate::delivery::hub::Hub;
use crate::delivery::subscription::{self, FollowError, Form, Outbound};
use crate::http::error::ApiError;
use crate::store::Store;

/// Log messages queued between the subscription and the mapping that cuts them into items.
const FEED_LOG_MESSAGES_MAX: usize = 16;
/// How long a retried send waits for the first request's run to appear in the log.
pub const RUN_ATTACH_WAIT_MS_MAX: u64 = 5_000;
/// How often that wait looks in the log.
const RUN_ATTACH_POLL_INTERVAL_MS: u64 = 20;

/// Where a frame stands: after every chunk of the events before `seq`, and `index`'s chunk of
/// event `seq` — or all of that event's chunks when `index` is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameId {
    pub seq: u64,
    pub index: Option<usize>,
}

impl FrameId {
    /// Reads a `Last-Event-ID`: `<seq>` or `<seq>:<k>`.
    pub fn parse(text: &str) -> Option<FrameId> {
        let text = text.trim();
        let (seq, index) = match text.split_once(':') {
            Some((seq, index)) => (seq, Some(index.parse().ok()?)),
            None => (text, None),
        };
        Some(FrameId { seq: seq.parse().ok()?, index })
    }

    /// True when a client at this position already has chunk `index` of event `seq`.
    pub fn has(&self, seq: u64, index: usize) -> bool {
        seq < self.seq || (seq == self.seq && self.index.is_none_or(|held| index <= held))
    }
}

impl std::fmt::Display for FrameId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(index) => write!(formatter, "{}:{index}", self.seq),
            None => write!(formatter, "{}", self.seq),
        }
    }
}

/// The `Last-Event-ID` a reconnecting SSE client sent (a frame id), if any; a malformed one
/// is a 400.
pub fn last_event_id(headers: &axum::http::HeaderMap) -> Result<Option<FrameId>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    value.to_str().ok().and_then(FrameId::parse).map(Some).ok_or_else(|| {
        ApiError::bad_request(
            "invalid_cursor",
            "Last-Event-ID must be the id of a frame this stream sent (<seq> or <seq>:<k>)",
        )
    })
}

/// One event's items (each with the event's seq) as frames with their ids, less those a client
/// at `cursor` has.
pub fn frames<T>(items: Vec<(u64, T)>, cursor: FrameId) -> Vec<(FrameId, T)> {
    let count = items.len();
    items
        .into_iter()
        .enumerate()
        .filter(|(index, (seq, _))| !cursor.has(*seq, *index))
        .map(|(index, (seq, item))| {
            let index = (index + 1 < count).then_some(index);
            (FrameId { seq, index }, item)
        })
        .collect()
}

/// Cancels a foreground run when the request that started it goes away before it ends (the
/// response body, or the waiting handler, is dropped). Harmless after the run ended.
pub struct ForegroundGuard {
    pub runs: std::sync::Arc<Runs>,
    pub agent_id: Uuid,
    pub run_id: Uuid,
    /// False once the client has had the whole run: dropping then cancels nothing.
    pub armed: bool,
}

impl ForegroundGuard {
    pub fn disarm(guard: &mut Option<ForegroundGuard>) {
        if let Some(guard) = guard {
            guard.armed = false;
        }
    }
}

impl Drop for ForegroundGuard {
    fn drop(&mut self) {
        if self.armed && self.runs.cancel(self.agent_id, Some(&[self.run_id])).is_some() {
            tracing::info!(agent_id = %self.agent_id, run_id = %self.run_id, "client left a foreground run: cancelled");
        }
    }
}

/// Aborts a task when dropped, so a feed that ends (or is dropped) takes its log subscription
/// with it.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Which run a feed follows: run `run_id` of `agent_id`, read from the log after `after_seq`
/// (every event of the run has a greater seq).
#[derive(Clone, Copy, Debug)]
pub struct RunCursor {
    pub agent_id: Uuid,
    pub run_id: Uuid,
    pub after_seq: u64,
}

impl RunCursor {
    pub fn new(agent_id: Uuid, run_id: Uuid, after_seq: u64) -> RunCursor {
        RunCursor { agent_id, run_id, after_seq }
    }
}

/// Follows the run `at` names in the log of `store` and `hub` and sends what `map` makes of each
/// of its events, at most `items_max` queued.
/// A slower reader makes the feed wait; its log subscription then lags and catches up from the
/// store, so the agent never waits for a reader and nothing is lost. The channel closes after
/// the items of the run's end, or after an error when the log cannot be followed. Counted as a
/// subscriber of `surface` while it follows.
pub fn feed<T, M>(
    (surface, items_max): (&'static str, usize),
    (store, hub): (Arc<dyn Store>, Arc<Hub>),
    at: RunCursor,
    mut map: M,
) -> mpsc::Receiver<Result<T, FollowError>>
where
    T: Send + 'static,
    M: FnMut(&AgentEvent) -> Vec<T> + Send + 'static,
{
    let RunCursor { agent_id, run_id, after_seq } = at;
    let (items, receiver) = mpsc::channel(items_max);
    tokio::spawn(async move {
        let (log_out, mut log) = mpsc::channel::<Outbound>(FEED_LOG_MESSAGES_MAX);
        let mut follower = AbortOnDrop(tokio::spawn(async move {
            let _subscriber = hub.metrics().subscriber(surface);
            let store = store.as_ref();
            subscription::follow(store, &hub, agent_id, after_seq, Form::Values, &log_out).await
        }));
        loop {
            let Some(message) = log.recv().await else {
                let error = match (&mut follower.0).await {
                    Ok(Err(error)) => error,
                    _ => FollowError::SubscriberGone,
                };
                let _ = items.send(Err(error)).await;
                return;
            };
            let Outbound::Values { events, .. } = message else {
                // `lagged` notices: the subscription catches up from the store by itself.
                continue;
            };
            for event in events.iter().filter(|event| event.run_id == Some(run_id)) {
                for item in map(event) {
                    if items.send(Ok(item)).await.is_err() {
                        return;
                    }
                }
                if event.kind.is_run_end() {
                    return;
                }
            }
        }
    });
    receiver
}

/// The seq of a run's `run_started`, waiting briefly for a run a concurrent request is starting
/// (a retried send finds the first request's run by its key before that run's start is written).
pub async fn run_start_seq(store: &dyn Store, run_id: Uuid) -> Result<u64, ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(RUN_ATTACH_WAIT_MS_MAX);
    loop {
        if let Some(started) = store.run_start(run_id).await? {
            return Ok(started.seq);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "run_not_started",
                format!("the first request with this key has not started run {run_id}; retry"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(RUN_ATTACH_POLL_INTERVAL_MS)).await;
    }
}
