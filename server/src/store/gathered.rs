//! What a read gathers events into, and what it checks them by: each event's seq. A `Vec` of
//! events (or of their JSON), or one page of their text ([`super::page::PageText`]): the
//! stores' reads and [`super::branches::read_along`] are written once for all of them.

use app::AgentEvent;

use super::records::{ContentJson, EventJson};

/// What a read yields, by its seq.
pub trait Sequenced {
    fn seq(&self) -> u64;
}

impl Sequenced for AgentEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl Sequenced for EventJson {
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl Sequenced for ContentJson {
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// What a read gathers events into: a `Vec` of them, or a page of their text
/// ([`super::page::PageText`]).
pub trait Gathered: Default {
    fn count(&self) -> usize;
    /// The seqs of the events gathered, in order.
    fn seqs(&self) -> impl Iterator<Item = u64> + '_;
    /// Adds `later`'s events after these.
    fn append(&mut self, later: Self);
}

impl<T: Sequenced> Gathered for Vec<T> {
    fn count(&self) -> usize {
        self.len()
    }

    fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(Sequenced::seq)
    }

    fn append(&mut self, later: Vec<T>) {
        self.extend(later);
    }
}
