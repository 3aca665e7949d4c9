//! One fold step's SQL: the rows of `recent` with the given `n`s moved into `events`.

use crate::store::StoreResult;
use std::collections::HashMap;

use app::AgentEvent;
use rusqlite::Connection;
use uuid::Uuid;

use crate::store::chunk::{Chunk, GroupRows, Made, OpenChunks, Pick, Written};
use crate::store::rows::EventRow;
use crate::store::sqlite::convert::sqlite_error;
use crate::store::sqlite::reader::stored_row;
use crate::store::sqlite::sql::EVENT_COLUMNS;
use crate::store::sqlite::write::{events_upsert_sql, write_chunk, write_event};
use crate::store::StoreError;

/// A row that a later one may continue: a run row of string appends, or a row of single
/// stream messages (each an append by itself: its block is its id). A row of one append's
/// messages has no `delta` and its block is not its first id.
const RUN_ROW: &str = "pieces IS NOT NULL AND (delta IS NOT NULL OR block_id = id)";

/// The rows picked by `?1`, a JSON array of `n`s (rowid look-ups).
const PICKED: &str = "n IN (SELECT value FROM json_each(?1))";

/// Copies the rows `ns` (for each log a prefix of its live rows in `recent`) into `events`, in the
/// caller's transaction; the run rows left open. Rows that no later row can continue (single
/// events, the messages of an append of several) are copied by one statement. Run rows (string
/// appends, and single-message appends of a stream, which several commits wrote in pieces) are
/// joined as the commit path would have written them had the commits been one, so the pieces of
/// one run share a row again (a row continues only the run whose last event is its first's
/// predecessor: seq and id). A row is taken whole: as many of its events as the open row takes,
/// the rest a row of their own, its bytes copied rather than each event made again
/// ([`crate::store::chunk::WholeRow`]).
pub(super) fn move_rows(
    connection: &Connection,
    ns: &[i64],
    open_chunks: &mut OpenChunks,
) -> StoreResult<HashMap<Uuid, Chunk>> {
    if ns.is_empty() {
        return Ok(HashMap::new());
    }
    let picked = serde_json::to_string(ns)
        .map_err(|error| StoreError::Failed(format!("cannot list rows to move: {error}")))?;
    connection
        .prepare_cached(&format!(
            "INSERT INTO events ({EVENT_COLUMNS}) SELECT {EVENT_COLUMNS} FROM recent \
             WHERE {PICKED} AND NOT ({RUN_ROW}) ORDER BY agent_id, first_seq"
        ))
        .and_then(|mut copy| copy.execute([&picked]))
        .map_err(sqlite_error)?;
    join_runs(connection, &picked, open_chunks)
}

/// Deletes the rows of `recent` through `n` (all moved: the table's first pages).
pub(super) fn delete_through(connection: &Connection, n: i64) -> StoreResult<()> {
    connection
        .prepare_cached("DELETE FROM recent WHERE n <= ?1")
        .and_then(|mut delete| delete.execute([n]))
        .map_err(sqlite_error)?;
    Ok(())
}

/// The picked run rows, per log in seq order, written into `events` joined with each other and
/// with the log's open run row ([`OpenChunks`]); the run rows left open.
fn join_runs(
    connection: &Connection,
    picked: &str,
    open_chunks: &mut OpenChunks,
) -> StoreResult<HashMap<Uuid, Chunk>> {
    let mut select = connection
        .prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM recent WHERE {PICKED} AND {RUN_ROW} \
             ORDER BY agent_id, first_seq"
        ))
        .map_err(sqlite_error)?;
    let mut insert = connection.prepare_cached(&events_upsert_sql()).map_err(sqlite_error)?;
    let mut write = |row: Written<'_>| match row {
        Written::Event(event) => write_event(&mut insert, event, None).map(drop),
        Written::Chunk(chunk) => write_chunk(&mut insert, chunk, None).map(drop),
    };
    let mut open_after = HashMap::new();
    let mut current: Option<(Uuid, GroupRows)> = None;
    let mut events: Vec<AgentEvent> = Vec::new();
    let mut rows = select.query([picked]).map_err(sqlite_error)?;
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        let stored = stored_row(row)?;
        let agent_id = stored.event.agent_id;
        if !matches!(&current, Some((open, _)) if *open == agent_id) {
            if let Some((_, ended)) = current.take() {
                open_after.extend(ended.finish(&mut write)?);
            }
            current = Some((agent_id, open_chunks.take([agent_id])));
        }
        let Some((_, group)) = current.as_mut() else {
            continue;
        };
        // The row whole (see `chunk::join`); event by event only if it cannot go so.
        if group.add_row(&stored.whole()?, &mut write)? {
            continue;
        }
        events.clear();
        let make = |event: &EventRow<'_>| event.to_event();
        stored.expand_into(Pick::All, &mut Made { make, out: &mut events })?;
        for event in &events {
            group.add(event, &mut write)?;
        }
    }
    if let Some((_, ended)) = current.take() {
        open_after.extend(ended.finish(&mut write)?);
    }
    Ok(open_after)
}
