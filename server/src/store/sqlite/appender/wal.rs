//! The WAL's upkeep beside the append thread: a checkpointer thread, and restarts of the WAL so
//! its file stays small under steady writes.

use crate::store::StoreResult;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;

use crate::limits::SQLITE_READS_AT_ONCE_MAX;
use crate::store::sqlite::convert::sqlite_error;
use crate::store::StoreError;

/// How often the checkpointer moves committed WAL frames into the database file.
const CHECKPOINT_INTERVAL_MS: u64 = 200;

/// WAL pages past which the append thread starts the WAL over from its beginning.
///
/// SQLite restarts the WAL only when a write begins with every frame already checkpointed, which
/// under steady writes never happens: a passive checkpoint always ends behind the newest commit.
/// The WAL then grew without end (hundreds of MB in seconds under load), and every commit
/// appended to a growing file, so its `fdatasync` also had to write the file's new size: a
/// commit of ten rows took 0.26 ms appending against 0.14 ms overwriting (same disk, same rows).
/// 8 192 pages of 4 KiB: the WAL stays near 32 MiB.
pub(in crate::store::sqlite) const WAL_RESET_PAGES: i64 = 8_192;

/// A WAL file larger than this is cut back to it when the WAL restarts (a burst of writes, or
/// restarts held off by long reads, leave a long file; a file this size is overwritten in place).
pub(super) const WAL_FILE_BYTES_KEPT_MAX: i64 = 64 * 1024 * 1024;

/// Commits that look for a pause in the reads before the WAL restart waits for one.
const WAL_RESTART_TRIES_MAX: u32 = 64;

/// When and how the append thread restarts the WAL.
pub(in crate::store::sqlite) struct WalRestart {
    /// WAL pages past which a restart is wanted.
    pub(in crate::store::sqlite) reset_pages: i64,
    /// The event reads' permits ([`super::reader::Reader::gate`]).
    pub(in crate::store::sqlite) reads: Arc<tokio::sync::Semaphore>,
}

impl WalRestart {
    /// Restarts the WAL if no event read is in flight, holding every read permit meanwhile so
    /// none starts. A read on the old WAL makes the restart give up, and with subscribers and
    /// pages always being read some read always was: the WAL grew without end (checkpoint
    /// starvation). After [`WAL_RESTART_TRIES_MAX`] commits that found reads in flight, it waits
    /// for them to finish (new reads queue behind it; a read is one page, milliseconds): a stall
    /// of one read's length once per `reset_pages` of WAL. True once a restart was tried.
    pub(super) fn restart_when_reads_pause(
        &self,
        connection: &Connection,
        busy: Duration,
        tries: u32,
    ) -> bool {
        let reads = SQLITE_READS_AT_ONCE_MAX as u32;
        let quiet = match self.reads.try_acquire_many(reads) {
            Ok(permits) => Some(permits),
            Err(_) if tries >= WAL_RESTART_TRIES_MAX => {
                futures::executor::block_on(self.reads.acquire_many(reads)).ok()
            }
            Err(_) => None,
        };
        let Some(_quiet) = quiet else { return false };
        restart_wal(connection, busy);
        true
    }
}

/// Checkpoints on a thread of their own. With SQLite's automatic checkpoint, every 1000th page
/// the commit that crossed the line also copied the WAL into the database and synced it — a
/// stall of milliseconds for every event in that commit (the stream latency's p99). The append
/// connection does not checkpoint; this thread does, in PASSIVE mode (it never blocks the
/// writer or readers), until the returned sender is dropped. When the WAL has grown past
/// [`WAL_RESET_PAGES`], it checkpoints once more (so little is left) and asks the append thread
/// to restart the WAL before its next commit (see [`restart_wal`]).
pub(super) fn start_checkpointer(
    path: &std::path::Path,
    busy_timeout_ms: u64,
    wal_reset_pages: i64,
    reset_wanted: Arc<AtomicBool>,
) -> StoreResult<std::sync::mpsc::Sender<()>> {
    let connection = Connection::open(path).map_err(sqlite_error)?;
    connection.busy_timeout(Duration::from_millis(busy_timeout_ms)).map_err(sqlite_error)?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || {
            let interval = Duration::from_millis(CHECKPOINT_INTERVAL_MS);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(interval)
            {
                match passive_checkpoint(&connection) {
                    Ok(wal_pages) if wal_pages >= wal_reset_pages => {
                        match passive_checkpoint(&connection) {
                            Ok(_) => reset_wanted.store(true, Ordering::Relaxed),
                            Err(error) => {
                                tracing::warn!(%error, "WAL checkpoint failed; trying again later")
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "WAL checkpoint failed; trying again later")
                    }
                }
            }
        })
        .map_err(|error| {
            StoreError::Unavailable(format!("cannot start the checkpoint thread: {error}"))
        })?;
    Ok(stop)
}

/// A PASSIVE checkpoint; the pages in the WAL.
pub(super) fn passive_checkpoint(connection: &Connection) -> rusqlite::Result<i64> {
    connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get(1))
}

/// Checkpoints what the checkpointer left (a few commits) and makes the next commit write the
/// WAL from its start. Only the append connection writes, so no writer is waited for; a reader
/// still on the old WAL makes it give up at once (no busy wait on the commit path), and the
/// checkpointer asks again next time.
pub(super) fn restart_wal(connection: &Connection, busy_timeout: Duration) {
    if let Err(error) = connection.busy_timeout(Duration::ZERO) {
        tracing::debug!(%error, "WAL restart deferred");
        return;
    }
    match connection.query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| row.get::<_, i64>(0)) {
        Ok(0) => {}
        Ok(_) => tracing::debug!("WAL restart deferred: a reader is on the old WAL"),
        Err(error) => tracing::debug!(%error, "WAL restart deferred"),
    }
    if let Err(error) = connection.busy_timeout(busy_timeout) {
        // Without its busy timeout the next commit would fail at the first lock it meets.
        tracing::error!(%error, "cannot restore the append connection's busy timeout");
    }
}
