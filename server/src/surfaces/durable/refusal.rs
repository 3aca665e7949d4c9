//! Why a stream operation did not happen, as the protocol answers it.

use crate::agent::produce::fence::Fence;
use crate::delivery::writer::AppendError;
use crate::store::StoreError;

/// Why a stream operation did not happen, as the protocol answers it.
#[derive(Debug)]
pub enum Refusal {
    NotFound,
    /// Deleted (or expired) while forks still read it: 410.
    Gone,
    /// A fork's source does not exist: 404.
    NotFoundSource,
    /// 409 with a sentence: a create with other settings, a content type that is not the
    /// stream's, a `Stream-Seq` not past the last one.
    Conflict(&'static str),
    /// 400 with a sentence.
    Bad(&'static str),
    /// The stream is closed: 409 with `Stream-Closed` and its tail.
    Closed {
        tail: u64,
    },
    /// The producer fence said no.
    Fenced(Fence),
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Refusal {
        Refusal::Store(error)
    }
}

impl From<AppendError> for Refusal {
    fn from(error: AppendError) -> Refusal {
        Refusal::Store(match error {
            AppendError::Store(error) => error,
            other => StoreError::Unavailable(other.to_string()),
        })
    }
}
