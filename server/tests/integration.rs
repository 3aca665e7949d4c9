//! The server's integration tests, one binary (each file a module: one compile of the shared
//! helpers and one link instead of forty). The simulation is a binary of its own
//! (`tests/simulation/`): it runs seeds on threads of its own for a minute and a half.

mod common;

mod access;
mod ag_ui;
mod agent_loop;
mod ai_sdk;
mod ai_sdk_produce;
mod approvals;
mod auth;
mod bad_input;
mod branch_crash;
mod branches;
mod cancel;
mod claude_cli;
mod client_tools;
mod cluster;
mod coalesce;
mod crash;
mod durable_fast;
mod durable_streams;
mod event_log;
mod hostile_appends;
mod idempotency;
mod leaks;
mod letta;
mod limits;
mod log_migration;
mod mcp;
mod metrics;
mod pages;
mod produce;
mod providers;
mod python_producer;
mod readiness;
mod responses;
mod run_faults;
mod secrets;
mod shutdown;
mod sse;
mod store_contract;
mod tool_write_ahead;
mod traces;
mod writer;
