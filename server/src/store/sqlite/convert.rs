//! SQLite's errors and values as the store's.

use crate::store::StoreResult;
use rusqlite::ErrorCode;
use uuid::Uuid;

use crate::store::rows::corrupt;
use crate::store::StoreError;

/// SQLite's error as the store's: busy, locked and I/O trouble may pass if tried again.
pub(super) fn sqlite_error(error: rusqlite::Error) -> StoreError {
    let transient = matches!(
        &error,
        rusqlite::Error::SqliteFailure(failure, _)
            if matches!(failure.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::SystemIoFailure)
    );
    if transient {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Failed(format!("SQLite: {error}"))
    }
}

pub(super) fn parse_uuid(text: &str) -> StoreResult<Uuid> {
    Uuid::parse_str(text).map_err(|error| corrupt(format!("bad uuid {text:?}: {error}")))
}
