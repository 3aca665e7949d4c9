//! Stream rows kept in memory when this server is the only one on its database (SQLite): every
//! change to a row goes through the service, which forgets its copy after writing.

use std::collections::HashMap;

use crate::store::StreamRow;

/// Stream rows kept at most; past it the map starts over.
pub const STREAM_ROWS_KEPT_MAX: usize = 4096;

/// Kept stream rows, and a count of forgets: a row read from the store is kept only if nothing
/// was forgotten while it was read (else it may be the row from before a write).
#[derive(Default)]
pub(super) struct Rows {
    rows: HashMap<String, StreamRow>,
    forgets: u64,
}

impl Rows {
    /// The kept row at `path`, else how many forgets there were before the store is read.
    pub(super) fn get(&self, path: &str) -> Result<StreamRow, u64> {
        self.rows.get(path).cloned().ok_or(self.forgets)
    }

    /// Keeps `row` (read from the store) unless a forget came after `forgets` (it may then be
    /// the row from before a write).
    pub(super) fn keep(&mut self, path: &str, row: &StreamRow, forgets: u64) {
        if self.forgets != forgets {
            return;
        }
        if self.rows.len() >= STREAM_ROWS_KEPT_MAX {
            self.rows.clear();
        }
        self.rows.insert(path.to_owned(), row.clone());
    }

    /// Forgets the row at `path`: after every write to it (failed ones too).
    pub(super) fn forget(&mut self, path: &str) {
        self.forgets += 1;
        self.rows.remove(path);
    }
}
