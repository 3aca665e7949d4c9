//! Event reads on blocking threads, with rusqlite connections of their own.
//!
//! Through sqlx every row of a result comes over a channel from its SQLite worker thread; a
//! 10 000-event catch-up was 10 000 such hops. Here a page is one blocking call that steps the
//! statement and decodes each row in place (text columns borrowed, not copied). Connections are
//! kept for the next read (bounded); WAL lets them read beside the append thread.

use crate::store::StoreResult;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::AgentEvent;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection};

use super::convert::sqlite_error;
use uuid::Uuid;

use super::convert::parse_uuid;
use crate::limits::SQLITE_READS_AT_ONCE_MAX;
use crate::store::chunk::{self, EventSink, Made, Pick, StoredRow};
use crate::store::rows::{checked_json, corrupt, seq_from_column, EventRow};
use crate::store::{ContentPage, StoreError};
use app::EventKind;

/// How much of the database file a read connection maps into memory instead of `pread`ing it
/// page by page. Address space, not memory: the pages are the OS's page cache, shared by every
/// connection. The connection's own cache is 2 MiB, so a 10 000-event catch-up (~4.6 MiB of
/// rows) went through `pread` again on every read; the first read of a stream after a restart
/// was ~330 of them (rows of 100 messages overflow their leaves). Measured: first read of a
/// 10 000-message stream after a restart 11.4–16.1 → 8.8–10.8 ms; a 10 000-event WebSocket
/// resume read a second time 13.9–14.2 → 11.9–13.0 ms (medians of 7).
const READ_MMAP_BYTES_MAX: i64 = 1 << 30;

/// Idle read connections kept for the next read.
const SQLITE_READ_CONNECTIONS_IDLE_MAX: usize = 4;

/// A statement that makes a connection read the schema (any table named in a statement does).
pub(super) const SCHEMA_READ_SQL: &str = "SELECT name FROM sqlite_schema WHERE 0";

pub(super) struct Reader {
    path: PathBuf,
    busy_timeout_ms: u64,
    idle: Arc<Mutex<Vec<Connection>>>,
    at_once: Arc<tokio::sync::Semaphore>,
}

impl Reader {
    pub(super) fn new(path: PathBuf, busy_timeout_ms: u64) -> Reader {
        Reader {
            path,
            busy_timeout_ms,
            idle: Arc::new(Mutex::new(Vec::new())),
            at_once: Arc::new(tokio::sync::Semaphore::new(SQLITE_READS_AT_ONCE_MAX)),
        }
    }

    /// Opens the connections kept idle, reads the schema on each and prepares `statements` (kept
    /// in each connection's statement cache), so the first reads after a start do not pay for it
    /// (opening, mapping, parsing the schema and the statement: ~0.5 ms of a first read).
    pub(super) async fn warm(&self, statements: Vec<String>) -> StoreResult<()> {
        let (idle, path) = (self.idle.clone(), self.path.clone());
        let busy_timeout = Duration::from_millis(self.busy_timeout_ms);
        tokio::task::spawn_blocking(move || {
            let mut opened = Vec::with_capacity(SQLITE_READ_CONNECTIONS_IDLE_MAX);
            for _ in 0..SQLITE_READ_CONNECTIONS_IDLE_MAX {
                let connection = open(&path, busy_timeout)?;
                connection.execute_batch(SCHEMA_READ_SQL).map_err(sqlite_error)?;
                for sql in &statements {
                    connection.prepare_cached(sql).map_err(sqlite_error)?;
                }
                opened.push(connection);
            }
            let mut idle = idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let room = SQLITE_READ_CONNECTIONS_IDLE_MAX.saturating_sub(idle.len());
            idle.extend(opened.into_iter().take(room));
            Ok(())
        })
        .await
        .map_err(|error| StoreError::Unavailable(format!("a read thread failed: {error}")))?
    }

    /// The reads' permits: whoever holds all of them knows no read is in flight and none can
    /// start (the append thread, to restart the WAL).
    pub(super) fn gate(&self) -> Arc<tokio::sync::Semaphore> {
        self.at_once.clone()
    }

    /// Runs `sql` (which selects `EVENT_COLUMNS`, in that order) once per set of `queries`,
    /// each row expanded into the events it holds that its [`Pick`] wants.
    pub(super) async fn events(
        &self,
        sql: String,
        queries: Vec<(Vec<SqlValue>, Pick)>,
    ) -> StoreResult<Vec<AgentEvent>> {
        let decode = |row: &rusqlite::Row<'_>, pick, out: &mut Vec<AgentEvent>| {
            expand(row, pick, &mut Made { make: |row: &EventRow<'_>| row.to_event(), out })
        };
        self.decoded(sql, queries, Vec::new(), decode).await
    }

    /// Runs `sql` once per set of `queries` on a read connection, `decode` turning each row into
    /// what its [`Pick`] wants, gathered in `events` (true: the read has what it wants).
    pub(super) async fn decoded<C: Send + 'static>(
        &self,
        sql: String,
        queries: Vec<(Vec<SqlValue>, Pick)>,
        mut events: C,
        decode: impl Fn(&rusqlite::Row<'_>, Pick, &mut C) -> StoreResult<bool> + Send + 'static,
    ) -> StoreResult<C> {
        let permit = self
            .at_once
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Unavailable("the reader is closed".into()))?;
        let idle = self.idle.clone();
        let path = self.path.clone();
        let busy_timeout = Duration::from_millis(self.busy_timeout_ms);
        tokio::task::spawn_blocking(move || {
            let kept = idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
            let connection = match kept {
                Some(connection) => connection,
                None => open(&path, busy_timeout)?,
            };
            let mut outcome = Ok(());
            for (params, pick) in queries {
                outcome = query(&connection, &sql, params, pick, &decode, &mut events);
                if outcome.is_err() {
                    break;
                }
            }
            let mut idle = idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if idle.len() < SQLITE_READ_CONNECTIONS_IDLE_MAX {
                idle.push(connection);
            }
            drop(permit);
            outcome.map(|()| events)
        })
        .await
        .map_err(|error| StoreError::Unavailable(format!("a read thread failed: {error}")))?
    }
}

fn open(path: &std::path::Path, busy_timeout: Duration) -> StoreResult<Connection> {
    let connection = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite_error)?;
    connection.busy_timeout(busy_timeout).map_err(sqlite_error)?;
    connection.set_prepared_statement_cache_capacity(16);
    connection.pragma_update(None, "mmap_size", READ_MMAP_BYTES_MAX).map_err(sqlite_error)?;
    Ok(connection)
}

fn query<C>(
    connection: &Connection,
    sql: &str,
    params: Vec<SqlValue>,
    pick: Pick,
    decode: &impl Fn(&rusqlite::Row<'_>, Pick, &mut C) -> StoreResult<bool>,
    out: &mut C,
) -> StoreResult<()> {
    let mut statement = connection.prepare_cached(sql).map_err(sqlite_error)?;
    let mut rows = statement.query(params_from_iter(params)).map_err(sqlite_error)?;
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        if decode(row, pick, out)? {
            break;
        }
    }
    Ok(())
}

fn text<'row>(row: &'row rusqlite::Row<'_>, index: usize) -> StoreResult<&'row str> {
    row.get_ref(index)
        .and_then(|value| value.as_str().map_err(Into::into))
        .map_err(|error| corrupt(format!("column {index}: {error}")))
}

fn optional_text<'row>(
    row: &'row rusqlite::Row<'_>,
    index: usize,
) -> StoreResult<Option<&'row str>> {
    row.get_ref(index)
        .and_then(|value| value.as_str_or_null().map_err(Into::into))
        .map_err(|error| corrupt(format!("column {index}: {error}")))
}

fn blob<'row>(row: &'row rusqlite::Row<'_>, index: usize) -> StoreResult<Option<&'row [u8]>> {
    row.get_ref(index)
        .and_then(|value| value.as_blob_or_null().map_err(Into::into))
        .map_err(|error| corrupt(format!("column {index}: {error}")))
}

fn integer(row: &rusqlite::Row<'_>, index: usize) -> StoreResult<i64> {
    row.get(index).map_err(|error| corrupt(format!("column {index}: {error}")))
}

fn uuid_of(bytes: &[u8]) -> StoreResult<Uuid> {
    Uuid::from_slice(bytes).map_err(|error| corrupt(format!("bad binary uuid: {error}")))
}

/// A row of `EVENT_COLUMNS` (agent_id, first_seq, last_seq, id, run_id, thread_id, block_id,
/// message_id, kind, delta, delta_path, delta_action, content, raw, metadata, created_at,
/// pieces, raws) expanded into the events `pick` wants ([`StoredRow::expand_into`]).
pub(super) fn expand(
    row: &rusqlite::Row<'_>,
    pick: Pick,
    out: &mut impl EventSink,
) -> StoreResult<bool> {
    stored_row(row)?.expand_into(pick, out)
}

/// A row of `EVENT_COLUMNS` as the log keeps it, its columns borrowed from the row.
pub(super) fn stored_row<'r>(row: &'r rusqlite::Row<'_>) -> StoreResult<StoredRow<'r>> {
    let optional_uuid = |index| blob(row, index)?.map(uuid_of).transpose();
    let stored = StoredRow {
        event: EventRow {
            id: uuid_of(blob(row, 3)?.ok_or_else(|| corrupt("an event row without an id"))?)?,
            agent_id: parse_uuid(text(row, 0)?)?,
            seq: seq_from_column(integer(row, 1)?)?,
            run_id: optional_uuid(4)?,
            thread_id: optional_uuid(5)?,
            block_id: optional_uuid(6)?,
            message_id: optional_uuid(7)?,
            kind: text(row, 8)?,
            delta: optional_text(row, 9)?,
            delta_path: optional_text(row, 10)?,
            delta_action: optional_text(row, 11)?,
            content: text(row, 12)?,
            raw: optional_text(row, 13)?,
            metadata: text(row, 14)?,
            created_at: chunk::time_from_nanos(integer(row, 15)?),
        },
        last_seq: seq_from_column(integer(row, 2)?)?,
        pieces: blob(row, 16)?,
        raws: blob(row, 17)?,
    };
    Ok(stored)
}

/// A row of `CONTENT_COLUMNS` (first_seq, last_seq, kind, content, pieces) into the contents
/// of the events `pick` (a range, or all) wants, without the ids, times and other columns a
/// stream read never looks at. A row of stream messages is cut by its lengths, its checksum
/// checked (or, in a row without one, each message checked as JSON): a damaged row is an error,
/// never a broken answer; the events of a run
/// row share the row's content, as [`StoredRow::expand`] gives them.
pub(super) fn expand_contents(
    row: &rusqlite::Row<'_>,
    pick: Pick,
    out: &mut ContentPage,
) -> StoreResult<bool> {
    let (since, limit) = match pick {
        Pick::Range { since, limit } => (since, limit as usize),
        Pick::All => (0, usize::MAX),
        Pick::Id(_) => return Err(corrupt("contents are read by range, not by id")),
    };
    let first_seq = seq_from_column(integer(row, 0)?)?;
    let last_seq = seq_from_column(integer(row, 1)?)?;
    let stream_message = text(row, 2)? == EventKind::StreamMessage.as_str();
    let content = text(row, 3)?;
    if last_seq < first_seq {
        return Err(corrupt("a run row ends before it starts"));
    }
    let from = first_seq.max(since + 1);
    let wanted = (last_seq + 1).saturating_sub(from).min((limit - out.len().min(limit)) as u64);
    match blob(row, 4)? {
        Some(encoded) if stream_message => {
            let count = last_seq - first_seq + 1;
            let (pieces, checked) = chunk::checked_message_pieces(content, encoded, 0, count)?;
            let skip = (from - first_seq) as usize;
            out.reserve(wanted as usize, content.len());
            for (k, piece) in pieces.iter().enumerate().skip(skip).take(wanted as usize) {
                let json = if checked { piece.text } else { checked_json(piece.text)? };
                out.push(first_seq + k as u64, stream_message, json);
            }
        }
        encoded => {
            if encoded.is_none() && last_seq != first_seq {
                return Err(corrupt(format!(
                    "a row of one event spans seqs {first_seq}..={last_seq}"
                )));
            }
            let json = if wanted > 0 { checked_json(content)? } else { "" };
            for seq in from..from + wanted {
                out.push(seq, stream_message, json);
            }
        }
    }
    Ok(out.len() >= limit)
}
