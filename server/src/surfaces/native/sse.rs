//! `GET /v1/agents/{id}/events/stream`: the agent's log as Server-Sent Events.
//!
//! Each event is one SSE message with `id:` = its seq and `data:` = the `AgentEvent` JSON, so a
//! browser `EventSource` resumes by itself: on reconnect it sends `Last-Event-ID`, which wins over
//! `?since=`. Delivery is [`subscription::follow`], the same as the WebSocket's: catch-up from the
//! store, then live, a slow reader lagging and catching up instead of slowing anyone. A `lagged`
//! event says so; keep-alive comments go out every [`SSE_KEEPALIVE_INTERVAL_MS`].

use std::convert::Infallible;
use std::time::Duration;

use app::protocol::ServerMessage;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures::stream::{self, StreamExt};
use tokio::sync::mpsc;

// Messages queued for one SSE response: `limits.subscriber_outbound_frames_max`. When the reader
// is slower, the subscription lags at the hub and catches up from the store.
use crate::delivery::subscription::{self, Form, Outbound};
use crate::http::error::ApiError;
use crate::http::params::{head_for_cursor, parse_agent_id, CountQuery};
use crate::surfaces::Feeds;

/// A comment line goes out this often on a quiet stream, so proxies and clients keep it open.
pub const SSE_KEEPALIVE_INTERVAL_MS: u64 = 15_000;

pub async fn stream_events(
    State(feeds): State<Feeds>,
    Path(agent_id): Path<String>,
    Query(query): Query<CountQuery>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let last_event_id =
        headers.get("last-event-id").map(|value| value.to_str().unwrap_or("").trim().to_owned());
    let since = match last_event_id {
        Some(text) => text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(
                "invalid_cursor",
                format!("Last-Event-ID {text:?} is not a sequence number"),
            )
        })?,
        None => query.since_value()?.unwrap_or(0),
    };
    let coalesce = query.coalesce_value()?;
    // Refuse what cannot be followed before the stream starts, with a proper status.
    head_for_cursor(feeds.store.as_ref(), agent_id, since).await?;
    let slot = crate::surfaces::stream_slot(&feeds.sse_streams, feeds.limits.sse_streams_max)?;

    let (out, receiver) = mpsc::channel::<Outbound>(feeds.limits.subscriber_outbound_frames_max);
    let shutdown = feeds.shutdown.clone();
    super::follow::spawn_follow(feeds, "native_sse", agent_id, since, Form::Json { coalesce }, out);
    let events = stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|message| (message, receiver))
    })
    // What waits while the client is slow goes out together, coalesced where it asked for it.
    .ready_chunks(subscription::OUTBOUND_DRAIN_MESSAGES_MAX)
    .flat_map(|waiting| {
        stream::iter(subscription::coalesce_waiting(waiting).into_iter().flat_map(sse_events))
    })
    // At shutdown the response ends cleanly; EventSource reconnects with Last-Event-ID.
    .take_until(shutdown.cancelled_owned())
    // The stream's slot is given back when the response is dropped.
    .map(move |event| {
        let _held = &slot;
        event
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(SSE_KEEPALIVE_INTERVAL_MS))))
}

/// The SSE messages of one subscription message: one per event, its JSON as it came.
fn sse_events(message: Outbound) -> Vec<Result<Event, Infallible>> {
    match message {
        Outbound::Events { .. } | Outbound::Page { .. } => message
            .event_texts()
            .into_iter()
            .map(|(seq, json)| Ok(Event::default().id(seq.to_string()).data(json)))
            .collect(),
        Outbound::Message(
            message @ (ServerMessage::Lagged { .. } | ServerMessage::Error { .. }),
        ) => {
            let name =
                if matches!(message, ServerMessage::Lagged { .. }) { "lagged" } else { "error" };
            vec![Ok(Event::default()
                .event(name)
                .data(serde_json::to_string(&message).expect("messages serialize")))]
        }
        Outbound::Values { events, .. } => events
            .iter()
            .map(|event| {
                let json = serde_json::to_string(event).expect("events serialize");
                Ok(Event::default().id(event.seq.to_string()).data(json))
            })
            .collect(),
        Outbound::Message(_) => Vec::new(),
    }
}
