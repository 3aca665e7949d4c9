//! Runs of string appends stored as one row: the unit of storage bigger than a token.
//!
//! A streamed reply is thousands of events that each append a few characters to one message
//! part, and each carried ~280 bytes of ids, names and a time around those characters (625 bytes
//! on disk with the row and its indexes). Here consecutive appends to one part become one row:
//! the first event in full, the concatenated text, and per event two varints (its text's byte
//! length and its time after the previous event's). Every seq stays addressable: a read expands
//! the row into exactly the events that were appended, ids and times included.
//!
//! **Ids.** The events of a run have consecutive ids: the writer gives a string append that
//! follows another of the same part the id after that one's ([`next_id`]), before the commit, so
//! the id a producer, a live subscriber and a later reader see is one id. A row keeps its first
//! event's id; the k-th event's is that id plus k. Ids stay unique: a chained id differs from its
//! head only in the head's 32 random low bits (no carry), and the bits above — the UUIDv7 time
//! and counter — are the head's alone.
//!
//! **Stream messages.** A Durable Streams append of many messages was as many rows (an id, an
//! index entry and ~150 bytes of columns per 45-byte message; the append thread spent most of
//! its time inserting them). The messages of one append — same kind, block (the append), no
//! delta — become one row the same way ([`Form::Messages`]): the first event's columns, the
//! messages' contents as one JSON array (the `content` column, valid JSON for PostgreSQL's
//! `json` type too), and per message its content's byte length and time delta.
//!
//! **Single-message appends.** A producer that appends one message per request (the common
//! case) wrote a row per message all the same, and a row per message again when SQLite's fold
//! moved it, with an entry in the id index each time. A message that is an append by itself is
//! its own block (its id); the writer chains such appends of a stream as it chains a run's string
//! appends, and they share rows the same way — within one commit, and across commits when the
//! fold joins their rows ([`crate::limits::SINGLES_ROW_BYTES_MAX`] a row, small because each fold
//! step that adds to it writes it again). A read gives each message its own block back: the
//! k-th's is its id. An append of several messages has a block of its own, never its first id.
//!
//! Pure: the stores write and read the columns; this module builds and expands them.

mod chains;
mod columns;
mod expand;
mod group;
mod ids;
mod join;
mod row;
pub use chains::{IdChains, ID_CHAINS_AGENTS_MAX};
pub use columns::{checked_message_pieces, message_pieces, pieces, raws, Piece};
pub use expand::{EventSink, Made, Pick, StoredRow};
pub use group::{GroupRows, OpenChunks, Written, OPEN_CHUNKS_AGENTS_MAX};
pub use ids::{next_id, nth_id, time_from_nanos, time_nanos};
pub use join::WholeRow;
pub use row::{continues, Chunk, Form};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod message_tests;

#[cfg(test)]
mod join_tests;
