//! `app`: what the server and the browser share.
//!
//! - [`event`]: `AgentEvent`, the one record type of the log.
//! - [`approvals`]: which tool calls wait for a person, folded from the log.
//! - [`protocol`]: REST bodies and WebSocket messages.
//! - [`coalesce`]: merging runs of token deltas into one event, for subscribers that fall behind.
//! - [`timeline`]: the pure fold of a log into messages, shared by browser, server and tests.
//! - [`inspect`]: one run as lanes on its own clock, for the run inspector.
//! - [`time`]: RFC 3339 times read from JSON without chrono's general parser.
//! - [`json`]: JSON read in the browser through one parser (a smaller bundle), and islands' props.
//! - [`markdown`]: messages rendered to safe HTML, the same on the server and in the browser.
//! - [`hook`]: `use_agent_messages`, the log as reactive signals (network side in `hydrate` only).
//! - [`pages`]: the Leptos pages, rendered on the server (`ssr`) and hydrated in the browser.
//!
//! Compiles natively (`ssr`, tests) and for wasm32 (`hydrate`); nothing here does server I/O.

#![recursion_limit = "256"]

pub mod approvals;
pub mod branches;
pub mod coalesce;
pub mod event;
pub mod history;
pub mod hook;
pub mod inspect;
pub mod json;
pub mod markdown;
pub mod pages;
pub mod protocol;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
pub mod timeline;

#[cfg(feature = "hydrate")]
pub mod api_client;

pub use event::{AgentEvent, DeltaAction, EventKind, Place};
pub use pages::{shell, App};
