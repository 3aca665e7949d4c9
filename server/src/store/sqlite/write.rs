//! How the append thread writes a row of the log: the same 18 columns into `recent` (a commit)
//! or into `events` (a fold, which may extend a run row written by an earlier fold).

use crate::store::StoreResult;
use app::{AgentEvent, DeltaAction};
use rusqlite::types::ToSql;
use uuid::Uuid;

use super::convert::sqlite_error;
use crate::store::chunk::{self, Chunk};
use crate::store::rows::json_text;

const COLUMNS: &str = "agent_id, first_seq, last_seq, id, run_id, thread_id, block_id, \
     message_id, kind, delta, delta_path, delta_action, content, raw, metadata, created_at, \
     pieces, raws";
const VALUES: &str = "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, \
     ?17, ?18";

/// A commit's row, at the end of the commit-ordered table (`?19` is its `n`).
pub(super) fn recent_insert_sql() -> String {
    format!("INSERT INTO recent ({COLUMNS}, n) VALUES ({VALUES}, ?19)")
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

fn bytes_of(id: &Option<Uuid>) -> Option<&[u8]> {
    id.as_ref().map(|id| &id.as_bytes()[..])
}

/// Binds the 18 columns (and `n`, for `recent`) and runs `insert`.
fn execute(
    insert: &mut rusqlite::CachedStatement<'_>,
    columns: [&dyn ToSql; 18],
    n: Option<i64>,
) -> StoreResult<()> {
    for (index, value) in columns.into_iter().enumerate() {
        insert.raw_bind_parameter(index + 1, value).map_err(sqlite_error)?;
    }
    if let Some(n) = n {
        insert.raw_bind_parameter(19, n).map_err(sqlite_error)?;
    }
    insert.raw_execute().map_err(sqlite_error)?;
    Ok(())
}

/// A row of one event (`n`: into `recent`, as that row); its text columns' bytes.
pub(super) fn write_event(
    insert: &mut rusqlite::CachedStatement<'_>,
    event: &AgentEvent,
    n: Option<i64>,
) -> StoreResult<usize> {
    let content = crate::store::rows::content_column(event);
    let delta = event.delta.as_ref().map(json_text);
    let bytes = content.len() + delta.as_ref().map_or(0, String::len);
    let agent_id = event.agent_id.to_string();
    let (seq, created_at) = (event.seq as i64, chunk::time_nanos(event.created_at)?);
    let (raw, metadata) = (event.raw.as_ref().map(json_text), json_text(&event.metadata));
    let none: Option<&[u8]> = None;
    execute(
        insert,
        [
            &agent_id,
            &seq,
            &seq,
            &&event.id.as_bytes()[..],
            &bytes_of(&event.run_id),
            &bytes_of(&event.thread_id),
            &bytes_of(&event.block_id),
            &bytes_of(&event.message_id),
            &event.kind.as_str(),
            &delta,
            &event.delta_path,
            &event.delta_action.map(DeltaAction::as_str),
            &content,
            &raw,
            &metadata,
            &created_at,
            &none,
            &none,
        ],
        n,
    )?;
    Ok(bytes)
}

/// A run row, inserted or (by a fold, when an earlier fold wrote it) extended (`n`: into
/// `recent`, as that row); its text columns' bytes.
pub(super) fn write_chunk(
    insert: &mut rusqlite::CachedStatement<'_>,
    chunk: &Chunk,
    n: Option<i64>,
) -> StoreResult<usize> {
    let head = &chunk.head;
    let content = chunk.content_column();
    let pieces = chunk.pieces_column(&content);
    let bytes = content.len() + chunk.delta_column().map_or(0, str::len) + pieces.len();
    let agent_id = head.agent_id.to_string();
    let (first_seq, last_seq) = (head.seq as i64, chunk.last_seq as i64);
    let (metadata, created_at) = (json_text(&head.metadata), chunk::time_nanos(head.created_at)?);
    let none: Option<&str> = None;
    execute(
        insert,
        [
            &agent_id,
            &first_seq,
            &last_seq,
            &&head.id.as_bytes()[..],
            &bytes_of(&head.run_id),
            &bytes_of(&head.thread_id),
            &bytes_of(&head.block_id),
            &bytes_of(&head.message_id),
            &head.kind.as_str(),
            &chunk.delta_column(),
            &head.delta_path,
            &head.delta_action.map(DeltaAction::as_str),
            &content,
            &none,
            &metadata,
            &created_at,
            &&*pieces,
            &chunk.raws_column(),
        ],
        n,
    )?;
    Ok(bytes)
}
