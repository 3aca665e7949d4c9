//! The store: the source of truth. Agents and their append-only event logs.
//!
//! [`Store`] is the interface, with two implementations chosen by the `DATABASE_URL` scheme
//! ([`open`]): [`sqlite::SqliteStore`] (the embedded default, one process) and
//! [`postgres::PgStore`] (several server processes on one database). In both, seq allocation
//! happens inside the committing transaction (`head_seq` is bumped with the insert).
//!
//! PostgreSQL also implements [`ClusterStore`]: what processes sharing a database need to agree
//! on (one run per agent cluster-wide, who executes it, cancel requests) and the notices that
//! tell each process what the others committed.
//!
//! The interface is narrow traits: [`Agents`], [`EventLog`], [`RunKeys`] (together [`Store`])
//! and [`ClusterStore`]; [`StoreError`] is the store's own error.
//!
//! **Architecture invariant:** only this module touches sqlx (and rusqlite). It knows nothing of
//! runs beyond their ids and kinds, nor of HTTP.

pub mod branches;
pub mod chunk;
mod contents;
mod error;
pub(crate) mod event_text;
mod gathered;
mod interface;
mod migrations;
mod opening;
mod page;
pub mod pipeline;
pub mod postgres;
mod records;
pub(crate) mod row_text;
pub(crate) mod rows;
pub mod sqlite;
pub mod streams;

pub use branches::{fork, BranchDeletion, Branches, ForkRefusal};
pub use contents::ContentPage;
pub use error::{redact_url, StoreError, StoreResult};
pub use interface::{
    agent_for_chat, Agents, ClusterOptions, ClusterStore, DueApprovals, EventLog, Notice, Notices,
    OpenApproval, RunKeys, PRODUCERS_PER_AGENT_MAX, RUN_OUTLINE_KINDS,
};
pub use opening::{is_sqlite, open, postgres_migrations_through, sqlite_path, Opened, Store};
pub use page::JsonPage;
pub use records::{
    AppendBatch, ContentJson, EventDraft, EventJson, NewAgent, ProducerPosition, ProducerStamp,
    StoredSnapshot,
};
pub use streams::{StreamRow, Streams};
