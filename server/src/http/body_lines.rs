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

/// The lines of a body (without their `\n`, and a `\r` before it). Each byte is searched for a
/// newline once and moved at most once: `pending[start..]` is what is not yet returned, and
/// `pending[start..scanned]` is known to hold no newline.
pub struct BodyLines {
    chunks: BodyDataStream,
    pending: Vec<u8>,
    start: usize,
    scanned: usize,
    ended: bool,
    idle: std::time::Duration,
    deadline: tokio::time::Instant,
    /// Bytes searched for a newline or moved within the buffer so far: linear in the body's
    /// length (the tests hold it to that).
    bytes_examined: u64,
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
            start: 0,
            scanned: 0,
            ended: false,
            idle,
            deadline: tokio::time::Instant::now() + open,
            bytes_examined: 0,
        }
    }

    /// The next line; `None` once the body ended (a last line without `\n` still comes).
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        if tokio::time::Instant::now() >= self.deadline {
            return Err(LineError::OpenTooLong);
        }
        let idle = self.idle;
        loop {
            let unseen = &self.pending[self.scanned..];
            let found = unseen.iter().position(|byte| *byte == b'\n');
            self.bytes_examined += found.map_or(unseen.len(), |at| at + 1) as u64;
            if let Some(at) = found {
                let end = self.scanned + at;
                let mut line = &self.pending[self.start..end];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                let line = line.to_vec();
                self.start = end + 1;
                self.scanned = self.start;
                return Ok(Some(line));
            }
            self.scanned = self.pending.len();
            if self.pending.len() - self.start > BODY_LINE_BYTES_MAX {
                return Err(LineError::TooLong);
            }
            if self.ended {
                let rest = self.pending.split_off(self.start);
                self.pending.clear();
                (self.start, self.scanned) = (0, 0);
                return Ok((!rest.is_empty()).then_some(rest));
            }
            // Before reading on, the returned lines go: the partial line moves to the front
            // once per line (not once per line per chunk).
            if self.start > 0 {
                self.bytes_examined += (self.pending.len() - self.start) as u64;
                self.pending.drain(..self.start);
                self.scanned -= self.start;
                self.start = 0;
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
            assert_eq!(lines.next_line().await.unwrap().unwrap(), expected.as_bytes());
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
    async fn each_byte_is_looked_at_a_bounded_number_of_times() {
        // One long line in small chunks, then many short lines in one chunk: both were quadratic
        // (the whole buffered line searched again after every chunk; each line drained from the
        // front of a large buffer).
        let line: &'static str =
            Box::leak(format!("{}\n", "z".repeat(256 * 1024)).into_boxed_str());
        let chunks: Vec<(u64, &'static str)> = (0..line.len())
            .step_by(64)
            .map(|at| (0, &line[at..(at + 64).min(line.len())]))
            .collect();
        let mut lines = BodyLines::new(body_of(chunks));
        assert_eq!(lines.next_line().await.unwrap().unwrap().len(), 256 * 1024);
        assert!(lines.next_line().await.unwrap().is_none());
        assert!(
            lines.bytes_examined <= 2 * line.len() as u64,
            "{} bytes examined for a body of {}",
            lines.bytes_examined,
            line.len()
        );
        let short: &'static str = Box::leak("a\n".repeat(20_000).into_boxed_str());
        let mut lines = BodyLines::new(body_of(vec![(0, short)]));
        let mut count = 0;
        while lines.next_line().await.unwrap().is_some() {
            count += 1;
        }
        assert_eq!(count, 20_000);
        assert!(
            lines.bytes_examined <= 2 * short.len() as u64,
            "{} bytes examined or moved for a body of {}",
            lines.bytes_examined,
            short.len()
        );
    }

    #[tokio::test]
    async fn a_line_past_its_bound_is_refused() {
        let long: &'static str = Box::leak("y".repeat(BODY_LINE_BYTES_MAX + 2).into_boxed_str());
        let mut lines = BodyLines::new(body_of(vec![(0, long)]));
        assert!(matches!(lines.next_line().await, Err(LineError::TooLong)));
    }
}
