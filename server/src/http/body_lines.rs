//! A streamed request body read line by line, bounded: a line longer than
//! [`BODY_LINE_BYTES_MAX`], a body silent for [`BODY_IDLE_MS_MAX`] or open past
//! [`BODY_STREAM_MS_MAX`] is an error, never a buffer that grows or a task that waits forever. What the producer API's NDJSON bodies and
//! the AI SDK stream's SSE bodies are read with.

use axum::body::{Body, BodyDataStream};
use futures::StreamExt;

/// One line of a streamed body larger than this is refused.
pub const BODY_LINE_BYTES_MAX: usize = 1024 * 1024;
/// A streamed body that sends nothing for this long is let go. A producer's run ends by its own
/// lease.
pub const BODY_IDLE_MS_MAX: u64 = 60_000;
/// A streamed body open longer than this is let go, however busy: a client trickling bytes (or
/// chunks that carry nothing) cannot hold a connection and a task for ever. A producer whose run
/// outlasts it sends the rest in a new request (the producer headers make that safe).
pub const BODY_STREAM_MS_MAX: u64 = 60 * 60 * 1000;

/// Why a streamed body could not be read on.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("a line is longer than {BODY_LINE_BYTES_MAX} bytes")]
    TooLong,
    #[error("the body sent nothing for {BODY_IDLE_MS_MAX} ms")]
    Idle,
    #[error("the body stayed open past {BODY_STREAM_MS_MAX} ms: send the rest in a new request")]
    OpenTooLong,
    #[error("the body broke: {0}")]
    Broken(String),
}

/// The lines of a body (without their `\n`, and a `\r` before it).
pub struct BodyLines {
    chunks: BodyDataStream,
    pending: Vec<u8>,
    ended: bool,
    idle: std::time::Duration,
    deadline: tokio::time::Instant,
}

impl BodyLines {
    pub fn new(body: Body) -> BodyLines {
        BodyLines::bounded(
            body,
            std::time::Duration::from_millis(BODY_IDLE_MS_MAX),
            std::time::Duration::from_millis(BODY_STREAM_MS_MAX),
        )
    }

    /// [`BodyLines::new`] with other bounds (the tests' short ones).
    pub fn bounded(body: Body, idle: std::time::Duration, open: std::time::Duration) -> BodyLines {
        BodyLines {
            chunks: body.into_data_stream(),
            pending: Vec::new(),
            ended: false,
            idle,
            deadline: tokio::time::Instant::now() + open,
        }
    }

    /// The next line; `None` once the body ended (a last line without `\n` still comes).
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        if tokio::time::Instant::now() >= self.deadline {
            return Err(LineError::OpenTooLong);
        }
        let idle = self.idle;
        loop {
            if let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Some(line));
            }
            if self.pending.len() > BODY_LINE_BYTES_MAX {
                return Err(LineError::TooLong);
            }
            if self.ended {
                return Ok((!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending)));
            }
            match tokio::time::timeout(idle, self.chunks.next()).await {
                Err(_) => return Err(LineError::Idle),
                Ok(None) => self.ended = true,
                Ok(Some(Err(error))) => return Err(LineError::Broken(error.to_string())),
                Ok(Some(Ok(bytes))) => self.pending.extend_from_slice(&bytes),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn body_of(parts: Vec<(u64, &'static str)>) -> Body {
        let stream = futures::stream::iter(parts).then(|(wait_ms, text)| async move {
            tokio::time::sleep(Duration::from_millis(wait_ms)).await;
            Ok::<_, std::io::Error>(axum::body::Bytes::from_static(text.as_bytes()))
        });
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn lines_come_whole_across_chunks_and_the_last_without_its_newline() {
        let body = body_of(vec![(0, "one\r\ntw"), (0, "o\n"), (0, "three")]);
        let mut lines = BodyLines::new(body);
        for expected in ["one", "two", "three"] {
            assert_eq!(
                lines.next_line().await.unwrap().unwrap(),
                expected.as_bytes()
            );
        }
        assert!(lines.next_line().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_silent_body_and_a_body_open_too_long_are_let_go() {
        let (short, long) = (Duration::from_millis(50), Duration::from_secs(10));
        let mut silent = BodyLines::bounded(body_of(vec![(0, "a\n"), (500, "b\n")]), short, long);
        assert_eq!(silent.next_line().await.unwrap().unwrap(), b"a");
        assert!(matches!(silent.next_line().await, Err(LineError::Idle)));
        let trickle: Vec<(u64, &'static str)> = (0..40).map(|_| (10, "x\n")).collect();
        let mut trickling = BodyLines::bounded(body_of(trickle), long, Duration::from_millis(100));
        let mut read = 0;
        let error = loop {
            match trickling.next_line().await {
                Ok(Some(_)) => read += 1,
                Ok(None) => panic!("the body ended before its bound"),
                Err(error) => break error,
            }
        };
        assert!(matches!(error, LineError::OpenTooLong), "{error}");
        assert!(read < 40, "{read} lines read");
    }

    #[tokio::test]
    async fn a_line_past_its_bound_is_refused() {
        let long: &'static str = Box::leak("y".repeat(BODY_LINE_BYTES_MAX + 2).into_boxed_str());
        let mut lines = BodyLines::new(body_of(vec![(0, long)]));
        assert!(matches!(lines.next_line().await, Err(LineError::TooLong)));
    }
}
