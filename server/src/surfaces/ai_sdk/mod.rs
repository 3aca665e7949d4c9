//! The AI SDK's UI message stream (v1, what `useChat` reads) as another view of the log.
//! `chunks.rs` is the pure mapping from a run's events to the stream's chunks; `messages.rs`
//! the conversation as `UIMessage[]` from the folded log; `request.rs` reads the transport's
//! request body.

pub mod chunks;
pub mod messages;
pub mod request;
#[cfg(test)]
mod test_log;
