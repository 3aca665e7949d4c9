//! What one token subject (a scoped token's `sub`) may hold at once: its requests in flight —
//! an SSE or Letta stream, a Durable Streams long-poll or SSE read, a WebSocket, an ordinary
//! request — at most `AGENTSTREAM_REQUESTS_PER_SUBJECT_MAX`. One user's token (or a leaked one)
//! cannot take every stream slot or connection of the server; the operator's global limits
//! still bound everyone together. A slot is held by the request's answer until its body ends,
//! and by a WebSocket's task until the socket closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::error::ApiError;

/// The subjects holding requests now, and how many each.
#[derive(Debug)]
pub struct SubjectSlots {
    held: Mutex<HashMap<String, usize>>,
    max: usize,
}

/// One request's hold on its subject's count; given back when dropped.
#[derive(Debug)]
pub struct SubjectSlot {
    slots: Arc<SubjectSlots>,
    subject: String,
}

impl SubjectSlots {
    pub fn new(max: usize) -> Arc<SubjectSlots> {
        Arc::new(SubjectSlots { held: Mutex::new(HashMap::new()), max })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A slot of `subject`, or `None` when it holds its limit already.
    pub fn take(self: &Arc<Self>, subject: &str) -> Option<SubjectSlot> {
        let mut held = self.held();
        let count = held.entry(subject.to_owned()).or_default();
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(SubjectSlot { slots: self.clone(), subject: subject.to_owned() })
    }

    /// Subjects holding anything now (for `/v1/stats`: back to zero once everyone left).
    pub fn subjects_held(&self) -> usize {
        self.held().len()
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

impl Drop for SubjectSlot {
    fn drop(&mut self) {
        let mut held = self.slots.held();
        if let Some(count) = held.get_mut(&self.subject) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.subject);
            }
        }
    }
}

/// A request's slot, in its extensions: a WebSocket's handler keeps a clone for the socket's
/// life.
#[derive(Clone, Debug)]
pub struct HeldSlot(pub Arc<SubjectSlot>);

/// The refusal when a subject holds its limit.
pub fn refused(max: usize) -> Response {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_requests_for_token",
        format!(
            "this token's user has {max} requests open (streams, long-polls, WebSockets); close \
             one and try again"
        ),
    )
    .into_response()
}

/// `response` holding `slot` until its body ends (or is dropped: the client left).
pub fn held_by_body(response: Response, slot: HeldSlot) -> Response {
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &slot;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_holds_at_most_its_limit_and_gets_each_back() {
        let slots = SubjectSlots::new(2);
        let first = slots.take("alice").unwrap();
        let second = slots.take("alice").unwrap();
        assert!(slots.take("alice").is_none(), "past the limit");
        let bob = slots.take("bob").expect("other subjects are apart");
        drop(second);
        let again = slots.take("alice").expect("a slot given back is free");
        drop((first, again, bob));
        assert_eq!(slots.subjects_held(), 0, "nothing kept once everyone left");
    }
}
