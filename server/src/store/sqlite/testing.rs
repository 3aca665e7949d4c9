//! What the SQLite store's unit tests share: a store on a fresh file, and a log's seqs.

use uuid::Uuid;

use super::{SqliteStore, Tuning};
use crate::store::EventLog;

/// A store on a fresh file in a directory of its own (removed when the first part is dropped),
/// and the file's path for a second connection.
pub(super) async fn open() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("log.db");
    let store = SqliteStore::open(&format!("sqlite://{}", path.display())).await.unwrap();
    (directory, path, store)
}

/// [`open`], but the store's append thread never folds by itself (for an hour): a test that
/// moves `recent` into `events` by hand does so alone (with the 20 ms default, a fold of the
/// store's own raced the test's whenever the machine was slow).
pub(super) async fn open_folding_by_hand() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("log.db");
    let tuning = Tuning { fold_when_idle_ms: 3_600_000, ..Tuning::default() };
    let store =
        SqliteStore::open_tuned(&format!("sqlite://{}", path.display()), tuning).await.unwrap();
    (directory, path, store)
}

/// The seqs of up to `limit` events of the log from its start, as a read returns them.
pub(super) async fn seqs(store: &SqliteStore, agent_id: Uuid, limit: u32) -> Vec<u64> {
    let events = store.read_events(agent_id, 0, limit).await.unwrap();
    events.iter().map(|event| event.seq).collect()
}
