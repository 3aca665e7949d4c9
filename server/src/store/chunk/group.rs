//! Which rows a committing group writes: each event that continues its agent's open run row
//! extends it, a string append that does not starts a new one, anything else is a row of its
//! own. Shared by the two stores' appends (which differ only in how they write a row).

use crate::store::StoreResult;
use std::collections::HashMap;

use app::AgentEvent;
use uuid::Uuid;

use super::join::{place, Placed, WholeRow};
use super::row::Chunk;

/// Agents whose open run row a store keeps, to extend it with their next appends; past it, it
/// forgets them all (their next appends start new rows: a few bytes more, nothing wrong). A row
/// is at most [`crate::limits::CHUNK_BYTES_MAX`] of text and varints and
/// [`crate::limits::CHUNK_RAW_BYTES_MAX`] of raw events.
pub const OPEN_CHUNKS_AGENTS_MAX: usize = 4_096;

/// A row to write.
pub enum Written<'a> {
    /// A row of one event: insert.
    Event(&'a AgentEvent),
    /// A run row: insert, or (written by an earlier group) replace its text and pieces.
    Chunk(&'a Chunk),
}

/// Each agent's open run row, between groups. A group takes its agents' rows out and gives
/// them back only once it committed, so a group that failed leaves no row here that the
/// database does not hold (the agent's next append starts a new row instead).
#[derive(Default)]
pub struct OpenChunks(HashMap<Uuid, Chunk>);

impl OpenChunks {
    /// The open run rows of `agents`, taken out.
    pub fn take(&mut self, agents: impl IntoIterator<Item = Uuid>) -> GroupRows {
        let staged = agents
            .into_iter()
            .filter_map(|agent_id| self.0.remove(&agent_id).map(|chunk| (agent_id, chunk)))
            .map(|(agent_id, chunk)| (agent_id, Staged { chunk, dirty: false }))
            .collect();
        GroupRows { staged }
    }

    /// The open run rows of a committed group, kept for the next.
    pub fn keep(&mut self, chunks: HashMap<Uuid, Chunk>) {
        if self.0.len() + chunks.len() > OPEN_CHUNKS_AGENTS_MAX {
            self.0.clear();
        }
        self.0.extend(chunks);
    }
}

struct Staged {
    chunk: Chunk,
    /// Started or extended by this group: to be written.
    dirty: bool,
}

/// The rows of one group, as its events come.
pub struct GroupRows {
    staged: HashMap<Uuid, Staged>,
}

impl GroupRows {
    /// Adds a committed event (in seq order per agent), writing the rows it closes.
    pub fn add(
        &mut self,
        event: &AgentEvent,
        write: &mut impl FnMut(Written<'_>) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let agent_id = event.agent_id;
        if let Some(open) = self.staged.get_mut(&agent_id) {
            if open.chunk.extend(event) {
                open.dirty = true;
                return Ok(());
            }
        }
        // The agent's run row ends here: written if this group changed it.
        if let Some(ended) = self.staged.remove(&agent_id) {
            if ended.dirty {
                write(Written::Chunk(&ended.chunk))?;
            }
        }
        match Chunk::start(event)? {
            Some(chunk) => {
                self.staged.insert(agent_id, Staged { chunk, dirty: true });
            }
            None => write(Written::Event(event))?,
        }
        Ok(())
    }

    /// Adds a stored run row taken whole: as many of its events as the agent's open row takes
    /// (as [`GroupRows::add`] would have added them one by one), the rest as a row of their own.
    /// False, and nothing changed, when it must go event by event ([`GroupRows::add`]).
    pub fn add_row(
        &mut self,
        whole: &WholeRow<'_>,
        write: &mut impl FnMut(Written<'_>) -> StoreResult<()>,
    ) -> StoreResult<bool> {
        let agent_id = whole.first.agent_id;
        let open = self.staged.get(&agent_id).map(|open| &open.chunk);
        let Some(Placed { taken, rest }) = place(open, whole)? else {
            return Ok(false);
        };
        if taken > 0 {
            let Some(open) = self.staged.get_mut(&agent_id) else {
                return Ok(false);
            };
            if !open.chunk.take_first(whole, taken) {
                return Ok(false);
            }
            open.dirty = true;
        }
        if let Some(chunk) = rest {
            // The open row ends here: written if this group changed it.
            if let Some(ended) = self.staged.remove(&agent_id) {
                if ended.dirty {
                    write(Written::Chunk(&ended.chunk))?;
                }
            }
            self.staged.insert(agent_id, Staged { chunk, dirty: true });
        }
        Ok(true)
    }

    /// Writes the run rows still open that this group changed; returns every open run row, to
    /// keep ([`OpenChunks::keep`]) once the group committed.
    pub fn finish(
        self,
        write: &mut impl FnMut(Written<'_>) -> StoreResult<()>,
    ) -> StoreResult<HashMap<Uuid, Chunk>> {
        for open in self.staged.values() {
            if open.dirty {
                write(Written::Chunk(&open.chunk))?;
            }
        }
        Ok(self.staged.into_iter().map(|(agent_id, open)| (agent_id, open.chunk)).collect())
    }
}
