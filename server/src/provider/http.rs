//! What the HTTP providers share: sending the request, classifying HTTP errors (with
//! `retry-after`), SSE framing (`eventsource-stream`), and handing parsed events to the run
//! through a bounded queue. Dropping the returned stream (a cancelled run) drops the response and
//! closes the connection.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::stream::{self, StreamExt};
use tokio::sync::mpsc;

use super::{Events, ProviderError, ProviderEvent};
use crate::http_client::describe;

/// Parsed events waiting for the run. The run reads as fast as it commits; a full queue makes
/// the reader of the HTTP body wait, which is TCP back-pressure on the provider, not memory.
const PROVIDER_EVENTS_QUEUE_MAX: usize = 256;
/// A provider that sends nothing (not even a ping) for this long is treated as gone.
pub const PROVIDER_IDLE_TIMEOUT_MS: u64 = 120_000;
/// How long to wait for the response headers.
pub const PROVIDER_CONNECT_TIMEOUT_MS: u64 = 30_000;
/// An error body longer than this is cut before it goes into an error message.
const ERROR_BODY_CHARS_MAX: usize = 2_000;
/// An error body is read this far at most: what a provider (or a proxy in front of it) sends
/// with an error status is not ours to hold whole.
const ERROR_BODY_BYTES_MAX: usize = 16 * 1024;
/// And for this long at most: a body that never ends must not keep the run waiting.
const ERROR_BODY_READ_MS_MAX: u64 = 10_000;

/// Turns one SSE event (name, data) into provider events; empty for events that carry nothing.
pub trait SseParser: Send + 'static {
    fn parse(&mut self, event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError>;
    /// Called when the body ends; a parser may flush what it holds or report a cut stream.
    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError>;
}

/// The providers' HTTP client, or why there is none (its TLS could not be set up, say for want
/// of CA certificates): each call then fails with that reason, and the server stays up.
pub fn client() -> Result<reqwest::Client, String> {
    crate::http_client::builder()
        .connect_timeout(Duration::from_millis(PROVIDER_CONNECT_TIMEOUT_MS))
        .build()
        .map_err(|error| {
            let why = format!("no HTTP client for the provider: {}", describe(&error));
            tracing::error!("{why}");
            why
        })
}

/// A step that cannot be sent: one error, not retryable (nothing changes between tries).
pub fn unsendable(why: &str) -> Events {
    futures::stream::once(std::future::ready(Err(ProviderError::invalid(why)))).boxed()
}

/// The error of a non-success answer, from its status, `retry-after` and body.
pub async fn http_error(response: reqwest::Response) -> ProviderError {
    let status = response.status();
    let retry_after_ms = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map(|seconds| (seconds * 1000.0) as u64);
    let body = capped_body(response).await;
    let parsed: Option<serde_json::Value> = serde_json::from_str(&body).ok();
    let error = parsed.as_ref().and_then(|body| body.get("error"));
    let kind = error
        .and_then(|error| error.get("type"))
        .and_then(|kind| kind.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| match status.as_u16() {
            429 => "rate_limit_error".to_owned(),
            529 => "overloaded_error".to_owned(),
            401 | 403 => "authentication_error".to_owned(),
            _ => format!("http_{}", status.as_u16()),
        });
    // The provider's own error message is meant for its API's users and is kept (without
    // addresses). Anything else — a proxy's page, a body that is not an error object — may echo
    // the request: it goes to the operator's log, and the run's error says only the status.
    let message = match error
        .and_then(|error| error.get("message"))
        .and_then(|message| message.as_str())
    {
        Some(message) => crate::redact::urls(message),
        None => {
            let start: String = body.chars().take(ERROR_BODY_CHARS_MAX).collect();
            tracing::warn!(%status, body = %start, "a provider answered with an error body that is not an error object");
            "the answer was not an error object (the server's log has its start)".to_owned()
        }
    };
    ProviderError {
        retryable: matches!(status.as_u16(), 408 | 429 | 500 | 502 | 503 | 504 | 529),
        kind,
        message: format!("HTTP {status}: {message}"),
        retry_after_ms,
    }
}

/// The start of `response`'s body: [`ERROR_BODY_BYTES_MAX`] bytes, or what arrived within
/// [`ERROR_BODY_READ_MS_MAX`].
async fn capped_body(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let read = async {
        while let Ok(Some(chunk)) = response.chunk().await {
            let room = ERROR_BODY_BYTES_MAX - body.len();
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if body.len() >= ERROR_BODY_BYTES_MAX {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(ERROR_BODY_READ_MS_MAX), read).await;
    String::from_utf8_lossy(&body).into_owned()
}

fn transport_error(text: String) -> ProviderError {
    tracing::warn!(error = %text, "a provider call failed");
    ProviderError::connection(crate::redact::urls(&text))
}

/// Sends `request` and streams the parsed events of its SSE body.
pub fn sse_stream(request: reqwest::RequestBuilder, mut parser: impl SseParser) -> Events {
    let (sender, receiver) = mpsc::channel(PROVIDER_EVENTS_QUEUE_MAX);
    tokio::spawn(async move {
        let send_all = |events: Result<Vec<ProviderEvent>, ProviderError>| {
            let sender = sender.clone();
            async move {
                match events {
                    Ok(events) => {
                        for event in events {
                            if sender.send(Ok(event)).await.is_err() {
                                return false;
                            }
                        }
                        true
                    }
                    Err(error) => {
                        let _ = sender.send(Err(error)).await;
                        false
                    }
                }
            }
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                let _ = sender.send(Err(transport_error(describe(&error)))).await;
                return;
            }
        };
        if !response.status().is_success() {
            let _ = sender.send(Err(http_error(response).await)).await;
            return;
        }
        let mut events = response.bytes_stream().eventsource();
        loop {
            let next = tokio::select! {
                // The run went away (cancelled): drop the response, closing the connection.
                _ = sender.closed() => return,
                next = tokio::time::timeout(
                    Duration::from_millis(PROVIDER_IDLE_TIMEOUT_MS),
                    events.next(),
                ) => next,
            };
            let event = match next {
                Err(_) => {
                    let _ = sender
                        .send(Err(transport_error(format!(
                            "the provider sent nothing for {PROVIDER_IDLE_TIMEOUT_MS} ms"
                        ))))
                        .await;
                    return;
                }
                Ok(None) => {
                    send_all(parser.finish()).await;
                    return;
                }
                Ok(Some(Err(error))) => {
                    let _ = sender.send(Err(transport_error(describe(&error)))).await;
                    return;
                }
                Ok(Some(Ok(event))) => event,
            };
            if !send_all(parser.parse(&event.event, &event.data)).await {
                return;
            }
        }
    });
    stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
    .boxed()
}
