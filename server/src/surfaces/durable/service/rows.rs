//! Stream rows kept in memory when this server is the only one on its database (SQLite): every
//! change to a row goes through [`Service`], which forgets its copy after writing.

use std::collections::HashMap;

use super::Service;
use crate::store::{StoreError, StreamRow};

/// Stream rows kept at most; past it the map starts over.
pub const STREAM_ROWS_KEPT_MAX: usize = 4096;

/// Kept stream rows, and a count of forgets: a row read from the store is kept only if nothing
/// was forgotten while it was read (else it may be the row from before a write).
#[derive(Default)]
pub(super) struct Rows {
    rows: HashMap<String, StreamRow>,
    forgets: u64,
}

impl Service {
    /// The row at `path` as stored: the kept copy, or the store's (then kept).
    pub(super) async fn stored_row(&self, path: &str) -> Result<Option<StreamRow>, StoreError> {
        let Some(rows) = &self.rows else {
            return self.store.stream(path).await;
        };
        let forgets = {
            let rows = rows.lock().expect("rows");
            if let Some(row) = rows.rows.get(path) {
                return Ok(Some(row.clone()));
            }
            rows.forgets
        };
        let row = self.store.stream(path).await?;
        if let Some(row) = &row {
            let mut rows = rows.lock().expect("rows");
            if rows.forgets == forgets {
                if rows.rows.len() >= STREAM_ROWS_KEPT_MAX {
                    rows.rows.clear();
                }
                rows.rows.insert(path.to_owned(), row.clone());
            }
        }
        Ok(row)
    }

    /// Forgets the kept row at `path`: called after every write to it (failed ones too).
    pub(super) fn forget_row(&self, path: &str) {
        if let Some(rows) = &self.rows {
            let mut rows = rows.lock().expect("rows");
            rows.forgets += 1;
            rows.rows.remove(path);
        }
    }
}
