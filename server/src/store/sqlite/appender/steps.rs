//! The append thread's steps between groups: moving `recent` into `events` when appends pause,
//! with the connection's sync level set around them.

use rusqlite::Connection;

use crate::store::sqlite::convert::sqlite_error;
use crate::store::sqlite::recent::{Recent, FOLD_STEP_ROWS_MAX};
use crate::store::StoreResult;

/// How the connection's commits reach the disk: `FULL` (each commit `fsync`s the WAL: a group
/// commit is acknowledged only then) or `NORMAL` (no `fsync` of its own: an idle step's).
pub(super) fn set_synchronous(connection: &Connection, level: &str) -> StoreResult<()> {
    connection.pragma_update(None, "synchronous", level).map_err(sqlite_error)
}

/// [`fold_step`] when appends pause, its commit not synced by itself. A step only moves
/// committed rows from `recent` into `events`: a crash that takes it back leaves them in
/// `recent` (WAL recovery keeps whole commits, in order), and the next group's commit, synced,
/// makes it durable with that group. Synced, an idle step's `fsync` (0.2–0.35 ms) held up the
/// group that came during it — with appends 20 ms apart, nearly every one. `unsynced` is set
/// when `FULL` could not be put back (the thread then commits no group until it is).
pub(super) fn idle_fold_step(
    recent: &mut Recent,
    connection: &mut Connection,
    unsynced: &mut bool,
) -> bool {
    if let Err(error) = set_synchronous(connection, "NORMAL") {
        tracing::warn!(%error, "an idle step could not skip its sync; stepping synced");
    }
    let progress = fold_step(recent, connection);
    *unsynced = set_synchronous(connection, "FULL").is_err();
    progress
}

/// One step of moving `recent` into `events` ([`Recent::step`]) in a transaction of its own,
/// when appends pause; true when it moved or deleted rows (the thread then takes the next step
/// unless a group came). A step that fails leaves both tables as they were; the next is tried
/// after a while ([`Recent::may_step`]).
pub(super) fn fold_step(recent: &mut Recent, connection: &mut Connection) -> bool {
    let outcome = connection
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite_error)
        .and_then(|transaction| {
            recent.catch_up(&transaction)?;
            let step = recent.step(&transaction, FOLD_STEP_ROWS_MAX)?;
            transaction.commit().map_err(sqlite_error)?;
            Ok(step)
        });
    match outcome {
        Ok(step) => {
            let progress = step.did_anything();
            recent.moved(step);
            progress
        }
        Err(error) => {
            tracing::warn!(%error, "moving the newest rows into the log failed; trying later");
            recent.step_failed();
            false
        }
    }
}
