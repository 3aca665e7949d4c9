//! The HTTP layer: the error every handler answers with, access control, reading requests, the
//! native REST API, the page forms and the server-rendered pages' data. The router that mounts
//! them and the surfaces is above, in [`crate::router`].
//!
//! Client protocols other than the REST API live in [`crate::surfaces`]. May use: the agent's
//! use cases, the store, delivery. Nothing below `agent/`, `delivery/` or `store/` may use this
//! module.

pub mod auth;
pub mod body_deadline;
pub mod body_lines;
pub mod caller;
pub mod cors;
pub mod cross_site;
pub mod edge;
pub mod error;
pub mod forms;
pub mod pager;
pub mod pages;
pub mod params;
pub mod policy;
pub mod produce;
pub mod request_id;
pub mod rest;
pub mod subjects;
pub mod token;
pub mod token_link;
pub mod tokens;
