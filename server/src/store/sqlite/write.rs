//! How the append thread writes a row of the log: the same 18 columns into `recent` (a commit)
//! or into `events` (a fold, which may extend a run row written by an earlier fold).

use app::{AgentEvent, DeltaAction};
use rusqlite::params;
use uuid::Uuid;

use super::convert::sqlite_error;
use crate::store::chunk::{self, Chunk};
use crate::store::rows::json_text;
use crate::store::StoreError;

const COLUMNS: &str = "agent_id, first_seq, last_seq, id, run_id, thread_id, block_id, \
     message_id, kind, delta, delta_path, delta_action, content, raw, metadata, created_at, \
     pieces, raws";
const VALUES: &str = "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, \
     ?17, ?18";

/// A commit's row, at the end of the commit-ordered table (its `n` is the next one).
pub(super) fn recent_insert_sql() -> String {
    format!("INSERT INTO recent ({COLUMNS}) VALUES ({VALUES})")
}

/// A folded row: inserted, or (a run row an earlier fold wrote and this one extends) its text,
/// pieces and end replaced.
pub(super) fn events_upsert_sql() -> String {
    format!(
        "INSERT INTO events ({COLUMNS}) VALUES ({VALUES}) \
         ON CONFLICT (agent_id, first_seq) DO UPDATE SET last_seq = excluded.last_seq, \
         delta = excluded.delta, content = excluded.content, pieces = excluded.pieces, \
         raws = excluded.raws"
    )
}

pub(super) fn blob(id: Option<Uuid>) -> Option<Vec<u8>> {
    id.map(|id| id.as_bytes().to_vec())
}

/// A row of one event; its text columns' bytes.
pub(super) fn write_event(
    insert: &mut rusqlite::CachedStatement<'_>,
    event: &AgentEvent,
) -> Result<usize, StoreError> {
    let content = crate::store::rows::content_column(event);
    let delta = event.delta.as_ref().map(json_text);
    let bytes = content.len() + delta.as_ref().map_or(0, String::len);
    insert
        .execute(params![
            event.agent_id.to_string(),
            event.seq as i64,
            event.seq as i64,
            event.id.as_bytes().to_vec(),
            blob(event.run_id),
            blob(event.thread_id),
            blob(event.block_id),
            blob(event.message_id),
            event.kind.as_str(),
            delta,
            event.delta_path,
            event.delta_action.map(DeltaAction::as_str),
            content,
            event.raw.as_ref().map(json_text),
            json_text(&event.metadata),
            chunk::time_nanos(event.created_at)?,
            None::<Vec<u8>>,
            None::<Vec<u8>>,
        ])
        .map_err(sqlite_error)?;
    Ok(bytes)
}

/// A run row, inserted or (by a fold, when an earlier fold wrote it) extended; its text
/// columns' bytes.
pub(super) fn write_chunk(
    insert: &mut rusqlite::CachedStatement<'_>,
    chunk: &Chunk,
) -> Result<usize, StoreError> {
    let head = &chunk.head;
    let content = chunk.content_column();
    let bytes = content.len() + chunk.delta_column().map_or(0, str::len) + chunk.pieces.len();
    insert
        .execute(params![
            head.agent_id.to_string(),
            head.seq as i64,
            chunk.last_seq as i64,
            head.id.as_bytes().to_vec(),
            blob(head.run_id),
            blob(head.thread_id),
            blob(head.block_id),
            blob(head.message_id),
            head.kind.as_str(),
            chunk.delta_column(),
            head.delta_path,
            head.delta_action.map(DeltaAction::as_str),
            content,
            None::<String>,
            json_text(&head.metadata),
            chunk::time_nanos(head.created_at)?,
            chunk.pieces,
            chunk.raws_column(),
        ])
        .map_err(sqlite_error)?;
    Ok(bytes)
}
