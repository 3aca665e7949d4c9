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
}

pub async fn stats(State(state): State<AppState>) -> Json<Stats> {
    let in_use = |max: usize, available: usize| max.saturating_sub(available);
    let limits = &state.limits;
    Json(Stats {
        tasks_alive: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        runs_active: state.runs.active_run_ids().len(),
        websockets_open: in_use(
            limits.ws_connections_max,
            state.ws_connections.available_permits(),
        ),
        websockets_max: limits.ws_connections_max,
        sse_streams_open: in_use(
            limits.sse_streams_max,
            state.sse_streams.available_permits(),
        ),
        sse_streams_max: limits.sse_streams_max,
        timeline_snapshots: state.snapshots.len(),
        timeline_snapshot_bytes: state.snapshots.bytes(),
        hub_rooms: state.hub.rooms_len(),
    })
}
