//! A streamed request body read line by line, bounded: a line longer than
//! [`BODY_LINE_BYTES_MAX`] or a body silent for [`BODY_IDLE_MS_MAX`] is an error, never a
//! buffer that grows or a task that waits forever. What the producer API's NDJSON bodies and
//! the AI SDK stream's SSE bodies are read with.

use axum::body::{Body, BodyDataStream};
use futures::StreamExt;

/// One line of a streamed body larger than this is refused.
pub const BODY_LINE_BYTES_MAX: usize = 1024 * 1024;
/// A streamed body that sends nothing for this long is let go. A producer's run ends by its own
/// lease.
pub const BODY_IDLE_MS_MAX: u64 = 60_000;

/// Why a streamed body could not be read on.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("a line is longer than {BODY_LINE_BYTES_MAX} bytes")]
    TooLong,
    #[error("the body sent nothing for {BODY_IDLE_MS_MAX} ms")]
    Idle,
    #[error("the body broke: {0}")]
    Broken(String),
}

/// The lines of a body (without their `\n`, and a `\r` before it).
pub struct BodyLines {
    chunks: BodyDataStream,
    pending: Vec<u8>,
    ended: bool,
}

impl BodyLines {
    pub fn new(body: Body) -> BodyLines {
        BodyLines {
            chunks: body.into_data_stream(),
            pending: Vec::new(),
            ended: false,
        }
    }

    /// The next line; `None` once the body ended (a last line without `\n` still comes).
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        let idle = std::time::Duration::from_millis(BODY_IDLE_MS_MAX);
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
