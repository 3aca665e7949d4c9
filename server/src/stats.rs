//! `GET /v1/stats`: what the server holds right now — live tasks, runs, sockets and streams —
//! for an operator's dashboard and the soak benchmark (`examples/soak`), which watches these
//! stay flat under hours of load.

use axum::extract::State;
use axum::Json;
use serde::Serialize;

use crate::state::AppState;

/// The counts `GET /v1/stats` answers with.
#[derive(Debug, Serialize)]
pub struct Stats {
    /// Tokio tasks alive in the server's runtime (sockets, runs, streams, background loops).
    pub tasks_alive: usize,
    /// Runs in flight on this server.
    pub runs_active: usize,
    /// Open WebSockets, of `websockets_max`.
    pub websockets_open: usize,
    pub websockets_max: usize,
    /// Open SSE streams (native and Letta), of `sse_streams_max`.
    pub sse_streams_open: usize,
    pub sse_streams_max: usize,
    /// Folded timelines held in memory, and their estimated size.
    pub timeline_snapshots: usize,
    pub timeline_snapshot_bytes: usize,
    /// Hub rooms (agents with a live subscriber here).
    pub hub_rooms: usize,
    /// Agents the producer API holds state for (an open produced run, or a request now).
    pub producer_agents: usize,
    /// Durable stream paths held now (a writer at work, or a reader waiting).
    pub stream_paths_held: usize,
    /// Scoped tokens' subjects with a request in flight now.
    pub token_subjects_held: usize,
}

pub async fn stats(State(state): State<AppState>) -> Json<Stats> {
    let in_use = |max: usize, available: usize| max.saturating_sub(available);
    let limits = &state.limits;
    Json(Stats {
        tasks_alive: tokio::runtime::Handle::current().metrics().num_alive_tasks(),
        runs_active: state.runs.active_run_ids().len(),
        websockets_open: in_use(
            limits.ws_connections_max,
            state.ws_connections.available_permits(),
        ),
        websockets_max: limits.ws_connections_max,
        sse_streams_open: in_use(limits.sse_streams_max, state.sse_streams.available_permits()),
        sse_streams_max: limits.sse_streams_max,
        timeline_snapshots: state.snapshots.len(),
        timeline_snapshot_bytes: state.snapshots.bytes(),
        hub_rooms: state.hub.rooms_len(),
        producer_agents: state.producers.agents_held(),
        stream_paths_held: state.durable.paths_held(),
        token_subjects_held: state.subjects.subjects_held(),
    })
}

/// Open approval requests `/metrics` counts at most per scrape (one bounded read).
pub const APPROVALS_COUNTED_MAX: u32 = 10_000;

/// `GET /metrics`: the Prometheus text format. The states (queues, connections, runs in flight,
/// database size, approvals pending) are read now; the flows were counted as they happened.
pub async fn metrics(State(state): State<AppState>) -> axum::response::Response {
    use axum::http::header;
    use axum::response::IntoResponse;
    let sampled = &state.metrics.sampled;
    let limits = &state.limits;
    let in_use = |max: usize, available: usize| max.saturating_sub(available) as i64;
    sampled.append_queue_requests.set(state.writer.queued_requests() as i64);
    sampled
        .append_queue_requests_max
        .set(crate::delivery::writer::WRITER_QUEUE_REQUESTS_MAX as i64);
    sampled.runs_in_flight.set(state.runs.active_run_ids().len() as i64);
    let connections = [
        (
            "websocket",
            in_use(limits.ws_connections_max, state.ws_connections.available_permits()),
            limits.ws_connections_max,
        ),
        (
            "sse",
            in_use(limits.sse_streams_max, state.sse_streams.available_permits()),
            limits.sse_streams_max,
        ),
    ];
    for (kind, open, max) in connections {
        let label = crate::metrics::KindLabel { kind };
        sampled.connections.get_or_create(&label).set(open);
        sampled.connections_max.get_or_create(&label).set(max as i64);
    }
    sampled.tasks_alive.set(tokio::runtime::Handle::current().metrics().num_alive_tasks() as i64);
    sampled.hub_rooms.set(state.hub.rooms_len() as i64);
    // A database that does not answer leaves the last values: the scrape itself still works,
    // and `/readyz` is where an outage shows.
    if let Ok(open) = state.store.open_approvals(APPROVALS_COUNTED_MAX).await {
        sampled.approvals_pending.set(open.len() as i64);
    }
    let database_bytes = match &state.database_file {
        Some(path) => Some(sqlite_bytes(path)),
        None => state.store.database_bytes().await.ok().flatten(),
    };
    if let Some(bytes) = database_bytes {
        sampled.database_bytes.set(bytes as i64);
    }
    if let Some(rows) = state.store.backlog_rows() {
        sampled.backlog_rows.set(rows as i64);
    }
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], state.metrics.encode()).into_response()
}

/// A SQLite database's bytes on disk: the file, its write-ahead log and its shared memory.
fn sqlite_bytes(path: &std::path::Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            std::fs::metadata(file).ok().map(|metadata| metadata.len())
        })
        .sum()
}
