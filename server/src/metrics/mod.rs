//! What the server counts for operators, in the Prometheus text format (`GET /metrics`).
//!
//! One [`Metrics`] per server (a registry of its own: no process-global recorder, so the servers
//! a test process runs side by side keep apart). Counting is an atomic add on the event path;
//! values that are a state rather than a flow (queue depth, open connections, database size) are
//! sampled when a scraper asks ([`Sampled`]), so they cost nothing between scrapes.
//!
//! Names: `agentstream_…` with base units (`_seconds`, `_bytes`) and `_total` on counters;
//! the model's and the tools' figures under OpenTelemetry's GenAI metric names as Prometheus
//! renders them (`gen_ai_client_token_usage`, `gen_ai_client_operation_duration_seconds`).
//! **No label holds an unbounded value**: no agent, run, user or model id; a label whose value
//! comes from outside (a stop reason, a tool name, a route) is cut to a known set first
//! ([`labels::bounded`], [`runs::Names`]), anything else counting as `other`.
//!
//! May use: nothing of the server but plain values; everything else uses it.

pub mod http;
pub mod labels;
pub mod runs;

pub use labels::{
    HttpLabels, KindLabel, McpServerLabel, ModelCallLabels, OutcomeLabel, RouteLabel, RunEndLabels,
    SurfaceLabel, TokenLabels, ToolLabels,
};

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

/// The `Content-Type` of `GET /metrics`: Prometheus' text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Everything the server counts. Cheap to share (`Arc`); every field is an atomic.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    // The log.
    pub events_appended: Counter,
    pub commits: Counter,
    pub commit_events: Histogram,
    pub commit_duration: Histogram,
    /// Groups sent to the store while the one before them was still committing, and those of
    /// them sent again because that one did not commit (`store::pipeline`).
    pub groups_sent_ahead: Counter,
    pub groups_sent_again: Counter,
    pub store_errors: Family<KindLabel, Counter>,
    /// External producers' batches by outcome (`agent::produce`).
    pub producer_batches: Family<OutcomeLabel, Counter>,
    // Delivery.
    pub subscribers: Family<SurfaceLabel, Gauge>,
    pub events_delivered: Counter,
    pub lag_notices: Counter,
    pub catch_up_reads: Counter,
    pub bytes_out: Family<SurfaceLabel, Counter>,
    pub frames_out: Family<SurfaceLabel, Counter>,
    // Runs.
    pub runs_started: Counter,
    pub runs_ended: Family<RunEndLabels, Counter>,
    pub run_duration: Histogram,
    // The model and tools.
    pub token_usage: Family<TokenLabels, Histogram>,
    pub model_call_duration: Family<ModelCallLabels, Histogram>,
    pub time_to_first_chunk: Family<ModelCallLabels, Histogram>,
    pub model_call_retries: Counter,
    pub tool_call_duration: Family<ToolLabels, Histogram>,
    tool_names: runs::Names,
    pub mcp_connections: Family<McpServerLabel, Gauge>,
    pub mcp_reconnects: Family<McpServerLabel, Counter>,
    mcp_names: runs::Names,
    // Traces.
    pub trace_spans_exported: Counter,
    pub trace_spans_dropped: Counter,
    pub trace_export_failures: Counter,
    // HTTP.
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_request_duration: Family<RouteLabel, Histogram>,
    /// States read when a scraper asks.
    pub sampled: Sampled,
}

/// Values that are a state, not a flow: set by the `/metrics` handler just before it encodes.
#[derive(Debug, Default)]
pub struct Sampled {
    pub append_queue_requests: Gauge,
    pub append_queue_requests_max: Gauge,
    pub database_bytes: Gauge,
    pub backlog_rows: Gauge,
    pub runs_in_flight: Gauge,
    pub approvals_pending: Gauge,
    pub connections: Family<KindLabel, Gauge>,
    pub connections_max: Family<KindLabel, Gauge>,
    pub tasks_alive: Gauge,
    pub hub_rooms: Gauge,
}

/// Seconds from 100 µs to ~107 s, doubling: commits (sub-millisecond) to model calls (minutes
/// are rare) on one scale.
fn seconds_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0001, 2.0, 21)
}

/// Seconds from 10 ms to ~5.8 h, quadrupling: a run's or a tool's whole time (an approval wait
/// can be long).
fn long_seconds_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.01, 4.0, 11)
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let mut metrics = Metrics {
            events_appended: Counter::default(),
            commits: Counter::default(),
            commit_events: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            commit_duration: Histogram::new(seconds_buckets()),
            groups_sent_ahead: Counter::default(),
            groups_sent_again: Counter::default(),
            store_errors: Family::default(),
            producer_batches: Family::default(),
            subscribers: Family::default(),
            events_delivered: Counter::default(),
            lag_notices: Counter::default(),
            catch_up_reads: Counter::default(),
            bytes_out: Family::default(),
            frames_out: Family::default(),
            runs_started: Counter::default(),
            runs_ended: Family::default(),
            run_duration: Histogram::new(long_seconds_buckets()),
            // Tokens per call: 1 to ~1M, quadrupling (OpenTelemetry's advice spans the same).
            token_usage: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1.0, 4.0, 11))
            }),
            model_call_duration: Family::new_with_constructor(|| Histogram::new(seconds_buckets())),
            time_to_first_chunk: Family::new_with_constructor(|| Histogram::new(seconds_buckets())),
            model_call_retries: Counter::default(),
            tool_call_duration: Family::new_with_constructor(|| {
                Histogram::new(long_seconds_buckets())
            }),
            tool_names: runs::Names::default(),
            mcp_connections: Family::default(),
            mcp_reconnects: Family::default(),
            mcp_names: runs::Names::default(),
            trace_spans_exported: Counter::default(),
            trace_spans_dropped: Counter::default(),
            trace_export_failures: Counter::default(),
            http_requests: Family::default(),
            http_request_duration: Family::new_with_constructor(|| {
                Histogram::new(seconds_buckets())
            }),
            sampled: Sampled::default(),
            registry: Registry::default(),
        };
        {
            let ours = registry.sub_registry_with_prefix("agentstream");
            ours.register(
                "events_appended",
                "Events committed to the log",
                metrics.events_appended.clone(),
            );
            ours.register(
                "commits",
                "Transactions the writer committed (each holds one or more events)",
                metrics.commits.clone(),
            );
            ours.register(
                "commit_events",
                "Events per committed transaction (group commit)",
                metrics.commit_events.clone(),
            );
            ours.register(
                "groups_sent_ahead",
                "Groups the writer sent while the group before them was still committing",
                metrics.groups_sent_ahead.clone(),
            );
            ours.register(
                "groups_sent_again",
                "Groups sent ahead that were not tried (the group before them did not commit), \
                 committed again",
                metrics.groups_sent_again.clone(),
            );
            ours.register_with_unit(
                "commit_duration",
                "Time from a group's first append attempt to its commit, retries included",
                Unit::Seconds,
                metrics.commit_duration.clone(),
            );
            ours.register(
                "store_errors",
                "Appends the database refused, by kind (transient ones are retried first)",
                metrics.store_errors.clone(),
            );
            ours.register(
                "producer_batches",
                "External producers' batches by outcome: appended, duplicate, stale_epoch, gap, refused, busy, run_ended, error",
                metrics.producer_batches.clone(),
            );
            ours.register(
                "append_queue_requests",
                "Append requests waiting for the writer",
                metrics.sampled.append_queue_requests.clone(),
            );
            ours.register(
                "append_queue_requests_max",
                "Append requests the writer's queue holds at most",
                metrics.sampled.append_queue_requests_max.clone(),
            );
            ours.register_with_unit(
                "database_size",
                "The database on disk (SQLite: the file and its WAL; PostgreSQL: the database)",
                Unit::Bytes,
                metrics.sampled.database_bytes.clone(),
            );
            ours.register(
                "store_backlog_rows",
                backlog_rows_help(),
                metrics.sampled.backlog_rows.clone(),
            );
            ours.register(
                "subscribers",
                "Live subscriptions to an agent's log, by surface",
                metrics.subscribers.clone(),
            );
            ours.register(
                "events_delivered",
                "Events handed to live subscribers (live or caught up from the store)",
                metrics.events_delivered.clone(),
            );
            ours.register(
                "lag_notices",
                "Times a subscriber fell behind its live buffer and caught up from the store",
                metrics.lag_notices.clone(),
            );
            ours.register(
                "catch_up_reads",
                "Pages read from the store to catch a subscriber up",
                metrics.catch_up_reads.clone(),
            );
            ours.register_with_unit(
                "response_body",
                "Bytes sent in response bodies and WebSocket messages, by surface",
                Unit::Bytes,
                metrics.bytes_out.clone(),
            );
            ours.register(
                "frames_sent",
                "WebSocket messages and response body chunks sent, by surface",
                metrics.frames_out.clone(),
            );
            ours.register(
                "connections",
                "Open long-lived connections (websocket, sse), against connections_max",
                metrics.sampled.connections.clone(),
            );
            ours.register(
                "connections_max",
                "Long-lived connections allowed at once (AGENTSTREAM_WS_CONNECTIONS_MAX, AGENTSTREAM_SSE_STREAMS_MAX)",
                metrics.sampled.connections_max.clone(),
            );
            ours.register(
                "runs_started",
                "Runs whose run_started was committed",
                metrics.runs_started.clone(),
            );
            ours.register(
                "runs_ended",
                "Runs whose end was committed, by outcome and stop reason",
                metrics.runs_ended.clone(),
            );
            ours.register(
                "runs_in_flight",
                "Runs this server executes now",
                metrics.sampled.runs_in_flight.clone(),
            );
            ours.register_with_unit(
                "run_duration",
                "Time from a run's start to its end, as this server saw them committed",
                Unit::Seconds,
                metrics.run_duration.clone(),
            );
            ours.register(
                "approvals_pending",
                "Tool calls waiting for a person's answer",
                metrics.sampled.approvals_pending.clone(),
            );
            ours.register(
                "model_call_retries",
                "Model calls tried again after a retryable provider error",
                metrics.model_call_retries.clone(),
            );
            ours.register_with_unit(
                "tool_call_duration",
                "Time a tool took to answer, by tool (the configured set) and outcome",
                Unit::Seconds,
                metrics.tool_call_duration.clone(),
            );
            ours.register(
                "mcp_connections",
                "Open MCP server sessions, by configured server",
                metrics.mcp_connections.clone(),
            );
            ours.register(
                "mcp_reconnects",
                "MCP sessions opened again after one was lost, by configured server",
                metrics.mcp_reconnects.clone(),
            );
            ours.register(
                "http_requests",
                "HTTP requests answered, by route template, method and status class",
                metrics.http_requests.clone(),
            );
            ours.register_with_unit(
                "http_request_duration",
                "Time to a response's head, by route template (a stream's body goes on after)",
                Unit::Seconds,
                metrics.http_request_duration.clone(),
            );
            ours.register(
                "trace_spans_exported",
                "Spans sent to the OTLP endpoint",
                metrics.trace_spans_exported.clone(),
            );
            ours.register(
                "trace_spans_dropped",
                "Finished spans dropped because the export queue was full",
                metrics.trace_spans_dropped.clone(),
            );
            ours.register(
                "trace_export_failures",
                "Batches of spans the OTLP endpoint did not take",
                metrics.trace_export_failures.clone(),
            );
            ours.register(
                "tasks_alive",
                "Tokio tasks alive in the server's runtime",
                metrics.sampled.tasks_alive.clone(),
            );
            ours.register(
                "hub_rooms",
                "Agents with a live subscriber on this server",
                metrics.sampled.hub_rooms.clone(),
            );
        }
        // OpenTelemetry's GenAI client metrics, named as Prometheus renders them.
        registry.register(
            "gen_ai_client_token_usage",
            "Tokens used per model call, by token type (input, output)",
            metrics.token_usage.clone(),
        );
        registry.register_with_unit(
            "gen_ai_client_operation_duration",
            "Time of a model call, from the request to the stream's end",
            Unit::Seconds,
            metrics.model_call_duration.clone(),
        );
        registry.register_with_unit(
            "gen_ai_client_operation_time_to_first_chunk",
            "Time from a model call's request to the first piece of its answer",
            Unit::Seconds,
            metrics.time_to_first_chunk.clone(),
        );
        metrics.registry = registry;
        metrics
    }

    /// The registry in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }

    /// A live subscriber on `surface`, counted until the guard is dropped (however the
    /// subscription ends).
    pub fn subscriber(&self, surface: &'static str) -> SubscriberGuard {
        let gauge = self.subscribers.get_or_create(&SurfaceLabel { surface }).clone();
        gauge.inc();
        SubscriberGuard { gauge }
    }

    /// The counters of bytes and of frames sent on `surface`: looked up once per connection or
    /// response, then an atomic add per frame.
    pub fn sent_on(&self, surface: &'static str) -> Sent {
        let label = SurfaceLabel { surface };
        Sent {
            bytes: self.bytes_out.get_or_create(&label).clone(),
            frames: self.frames_out.get_or_create(&label).clone(),
        }
    }

    /// One tool call's time, under its name when it is one of the first
    /// [`crate::limits::LABEL_VALUES_MAX`] names seen (the configured tools), else `other`.
    pub fn tool_call(&self, name: &str, ok: bool, took: Duration) {
        let labels = ToolLabels {
            gen_ai_tool_name: self.tool_names.bounded(name),
            outcome: if ok { "ok" } else { "error" },
        };
        self.tool_call_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// An MCP server's session opened (`reconnect`: after one was lost) or closed.
    pub fn mcp_session(&self, server: &str, change: McpSession) {
        let label = McpServerLabel { server: self.mcp_names.bounded(server) };
        match change {
            McpSession::Opened { reconnect } => {
                self.mcp_connections.get_or_create(&label).inc();
                if reconnect {
                    self.mcp_reconnects.get_or_create(&label).inc();
                }
            }
            McpSession::Closed => {
                self.mcp_connections.get_or_create(&label).dec();
            }
        }
    }

    /// A store error, by the kind of trouble.
    pub fn store_error(&self, kind: &'static str) {
        self.store_errors.get_or_create(&KindLabel { kind }).inc();
    }
}

/// What one connection or response counts as it sends.
pub struct Sent {
    bytes: Counter,
    frames: Counter,
}

impl Sent {
    pub fn frame(&self, bytes: usize) {
        self.bytes.inc_by(bytes as u64);
        self.frames.inc();
    }
}

/// A change of an MCP server's session.
#[derive(Clone, Copy, Debug)]
pub enum McpSession {
    Opened { reconnect: bool },
    Closed,
}

/// Counts one live subscriber while it lives.
pub struct SubscriberGuard {
    gauge: Gauge,
}

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

#[cfg(test)]
mod tests;

/// `store_backlog_rows`'s help, naming the bound at which appends are refused (from the limit
/// itself, so the text cannot drift from the code).
fn backlog_rows_help() -> String {
    format!(
        "Rows committed but not yet moved into the log's index (SQLite's newest rows; \
         appends are refused at {}, reached only while moving them fails)",
        crate::limits::RECENT_ROWS_HARD_MAX
    )
}
