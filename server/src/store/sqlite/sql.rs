//! The SQLite store's SQL texts and what it decodes rows with.

use crate::store::StoreResult;
use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use sqlx::Row;
use uuid::Uuid;

use super::convert::parse_uuid;
use crate::store::chunk::Pick;
pub(super) use crate::store::rows::agent_from_row;
use crate::store::rows::{corrupt, seq_to_column, KeyColumns};
use crate::store::RUN_OUTLINE_KINDS;

/// Ids one read looks up at most (one statement each, on one read connection).
pub(super) const IDS_PER_READ_MAX: usize = 256;

pub(super) const AGENT_COLUMNS: &str =
    "id, name, system, description, model, metadata, tags, head_seq, created_at, owner, \
     root_id, parent_id, fork_seq, current_branch";
/// The columns a stream read needs of the same rows, in this order (`reader::expand_contents`
/// decodes them): not the ids, times and JSON columns it never looks at.
pub(super) const CONTENT_COLUMNS: &str = "first_seq, last_seq, kind, content, pieces";

/// A log's head, when it is not known in memory.
pub(super) const HEAD_SQL: &str = "SELECT head_seq FROM agents WHERE id = ?";
/// Where a branch was forked from (none for a log that is no branch).
pub(super) const FORK_ORIGIN_SQL: &str =
    "SELECT parent_id, fork_seq FROM agents WHERE id = ? AND parent_id IS NOT NULL";

/// A stream's row by its path.
pub(super) fn stream_sql() -> String {
    format!("SELECT {} FROM streams WHERE path = ?", crate::store::streams::STREAM_COLUMNS)
}

/// The look-ups a stream's first read makes before its page — its row, its log's head, whether
/// the log is a branch — each with an argument that finds nothing: run once on a connection,
/// sqlx keeps each prepared there.
pub(super) fn lookups() -> [String; 3] {
    [stream_sql(), HEAD_SQL.to_owned(), FORK_ORIGIN_SQL.to_owned()]
}
pub(super) const EVENT_COLUMNS: &str = "agent_id, first_seq, last_seq, id, run_id, thread_id, block_id, \
     message_id, kind, delta, delta_path, delta_action, content, raw, metadata, created_at, pieces, \
     raws";

/// A row of `recent` that is not in `events` too: a step copies a log's oldest rows into
/// `events` and deletes them from `recent` only once the table's first pages are all copied.
pub(super) const LIVE: &str = "first_seq > COALESCE((SELECT moved.last_seq FROM events moved \
     WHERE moved.agent_id = recent.agent_id ORDER BY moved.first_seq DESC LIMIT 1), 0)";

/// `columns` of an agent's rows from the one holding `?2 + 1` on, in order, at most `?3` rows
/// (each holds at least one wanted event). In `events` it walks the table's `(agent_id,
/// first_seq)` key: one seek for the row holding the seq (the greatest first seq not past it),
/// then forward; that row is skipped when it ends before the seq (the seq is in `recent`: the
/// row would take one of the page's rows and give no event, and a short page reads as the log's
/// end). In `recent` it scans
/// the rows from `?4` on, the first the log may have there ([`super::recent::RecentIndex`]), and
/// keeps those not moved yet: above the log's last seq in `events` (one seek; [`LIVE`]). One
/// statement: one snapshot, so a step between two parts cannot hide or repeat rows.
pub(super) fn range_sql(columns: &str) -> String {
    format!(
        "SELECT {columns} FROM events WHERE agent_id = ?1 AND first_seq >= COALESCE( \
         (SELECT MAX(first_seq) FROM events WHERE agent_id = ?1 AND first_seq <= ?2 + 1), 1) \
         AND last_seq > ?2 UNION ALL SELECT {columns} FROM recent \
         WHERE n >= ?4 AND agent_id = ?1 AND last_seq > ?2 AND first_seq > COALESCE( \
         (SELECT last_seq FROM events WHERE agent_id = ?1 ORDER BY first_seq DESC LIMIT 1), 0) \
         ORDER BY first_seq LIMIT ?3"
    )
}

pub(super) fn range_query(
    agent_id: Uuid,
    since: u64,
    limit: u32,
    first_recent_row: i64,
) -> StoreResult<Vec<(Vec<SqlValue>, Pick)>> {
    let params = vec![
        SqlValue::Text(agent_id.to_string()),
        SqlValue::Integer(seq_to_column(since)?),
        SqlValue::Integer(i64::from(limit)),
        SqlValue::Integer(first_recent_row),
    ];
    Ok(vec![(params, Pick::Range { since, limit })])
}

pub(super) fn blob_of(id: Uuid) -> SqlValue {
    SqlValue::Blob(id.as_bytes().to_vec())
}

/// A run's outline events, by run id (walks the partial index `events_run_outline`; outline
/// events are never in run rows), and those still in `recent` (a scan of a bounded table).
pub(super) fn run_outline_sql() -> String {
    let wanted = format!("run_id = ?1 AND kind IN {RUN_OUTLINE_KINDS}");
    format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE {wanted} \
         UNION ALL SELECT {EVENT_COLUMNS} FROM recent WHERE {wanted} AND {LIVE} \
         ORDER BY first_seq"
    )
}

/// `run_started` events whose run never ended: the open-runs table (kept by each append), then
/// each start by its `(agent_id, first_seq)` key. Its cost is the runs open now, not all runs.
pub(super) fn unfinished_runs_sql() -> String {
    let wanted = "(agent_id, first_seq) IN (SELECT agent_id, started_seq FROM open_runs)";
    format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE {wanted} \
         UNION ALL SELECT {EVENT_COLUMNS} FROM recent WHERE {wanted} AND {LIVE} \
         ORDER BY agent_id, first_seq"
    )
}

/// The rows that may hold the event with id `?1`: in each table, the one with the greatest
/// first id not past it (walks `events_id`; scans `recent`); the reader keeps the event only
/// from the row that holds its id.
pub(super) fn by_id_sql() -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM (SELECT {EVENT_COLUMNS} FROM events WHERE id <= ?1 \
         ORDER BY id DESC LIMIT 1) UNION ALL SELECT {EVENT_COLUMNS} FROM (SELECT \
         {EVENT_COLUMNS} FROM recent WHERE id <= ?1 AND {LIVE} ORDER BY id DESC LIMIT 1)"
    )
}

pub(super) fn parse_time(text: &str) -> StoreResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|error| corrupt(format!("bad timestamp {text:?}: {error}")))
}

impl KeyColumns for sqlx::sqlite::SqliteRow {
    fn uuid_column(&self, column: &str) -> StoreResult<Option<Uuid>> {
        optional_uuid(self.try_get(column)?)
    }

    fn time_column(&self, column: &str) -> StoreResult<DateTime<Utc>> {
        parse_time(self.try_get(column)?)
    }
}

fn optional_uuid(text: Option<&str>) -> StoreResult<Option<Uuid>> {
    text.map(parse_uuid).transpose()
}
