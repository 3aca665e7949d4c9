//! A read of a stream or an agent's log: live (long-poll, SSE) or what is there now.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::live;
use super::protocol::{self, format_offset, Live, Offset, ReadQuery};
use super::refusal::Refusal;
use super::response::{
    header_text, messages_response, with, STREAM_CLOSED, STREAM_NEXT_OFFSET, STREAM_UP_TO_DATE,
};
use super::source::Source;
use super::state::DurableState;

/// A read of `source`, live or not.
pub async fn read_source(
    state: &DurableState,
    source: Source,
    query: ReadQuery,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    match query.live {
        Some(Live::Sse) => Ok(live::sse(state, source, query).await),
        Some(Live::LongPoll) => live::long_poll(state, source, query).await,
        None => catch_up(state, &source, &query, headers).await,
    }
}

/// A read that answers with what is there.
async fn catch_up(
    state: &DurableState,
    source: &Source,
    query: &ReadQuery,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    if query.offset == Some(Offset::Now) {
        let (_, tail) = source.read(state, u64::MAX).await?;
        let body = if protocol::is_json(source.content_type()) { "[]" } else { "" };
        let mut response = (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, source.content_type().to_owned()),
                (header::CACHE_CONTROL, "no-store".to_owned()),
            ],
            body,
        )
            .into_response();
        response = with(response, STREAM_NEXT_OFFSET, format_offset(tail));
        response = with(response, STREAM_UP_TO_DATE, "true".into());
        if source.closed() {
            response = with(response, STREAM_CLOSED, "true".into());
        }
        return Ok(response);
    }
    let since = match query.offset {
        Some(Offset::After(seq)) => seq,
        _ => 0,
    };
    let (messages, tail) = source.read(state, since).await?;
    let start = query.offset_text.as_deref().unwrap_or("-1");
    let if_none_match = header_text(headers, "if-none-match");
    Ok(messages_response(source, messages, tail, start, if_none_match))
}
