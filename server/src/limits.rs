//! The server's named limits and defaults, at the bottom of the module graph: every floor
//! imports them from here, `config.rs` reads them as the defaults of what the environment may
//! change ([`Limits`]), and no floor fetches another's constant sideways. Each name says
//! its unit. Grouped by the part of the server that enforces them.

// Runs (agent/registry/limits.rs)

/// Bytes one run may write unless configured otherwise (its events' deltas, contents and raw
/// provider events, as JSON): a long answer with tools is a few megabytes.
pub const RUN_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;

/// Events one run may write unless configured otherwise: far beyond any real reply (a 20 000-token
/// answer is about 20 000 events), low enough that a runaway model cannot fill the disk.
pub const RUN_EVENTS_MAX_DEFAULT: u64 = 100_000;

/// LLM calls one run makes at most (LLM → tools → LLM …) unless configured otherwise; a model
/// that keeps asking for tools ends with stop reason `max_iterations`.
pub const RUN_ITERATIONS_MAX_DEFAULT: u32 = 10;

/// One event larger than this (as JSON) is not written: the run ends as past its byte limit.
/// Every event the server makes from bounded parts is far smaller (a tool result is cut at
/// `TOOL_RESULT_CHARS_MAX`, a call's input at `TOOL_CALL_INPUT_BYTES_MAX`).
pub const EVENT_BYTES_MAX: usize = 1024 * 1024;

// Tools (agent/tools.rs)

/// A tool result longer than this is cut (and says so) before it goes back to the model (by
/// default; see [`Limits`]).
pub const TOOL_RESULT_CHARS_MAX: usize = 16 * 1024;

// Starting a run (agent/start.rs)

/// A key as stored, its surface's prefix included (`native:`, `otid:`, `ai-sdk:`,
/// `approval:` …), longer than this is refused.
pub const IDEMPOTENCY_KEY_CHARS_MAX: usize = 256;

/// An idempotency key a client sends (before its surface's prefix) longer than this is refused.
pub const CLIENT_IDEMPOTENCY_KEY_CHARS_MAX: usize = 200;

/// A user message longer than this (in bytes) is refused.
pub const RUN_CONTENT_BYTES_MAX: usize = 32 * 1024;

// Approvals (agent/approval.rs, agent/approval_timeout.rs)

/// Approval requests one answer may take at once (a step's calls at most).
pub const APPROVALS_PER_ANSWER_MAX: usize = TOOL_CALLS_PER_STEP_MAX;

/// The longest timeout an agent or the server may set (30 days).
pub const APPROVAL_TIMEOUT_MS_MAX: u64 = 30 * 24 * 3_600_000;

// External producers (agent/produce/)

/// A producer that sends nothing for this long, by default, has its run ended `interrupted`.
pub const PRODUCER_LEASE_MS_DEFAULT: u64 = 30_000;

// A model's step (agent/step.rs)

/// Tool calls one LLM step may make; further calls get an error result without running.
pub const TOOL_CALLS_PER_STEP_MAX: usize = 16;

// Delivery (delivery/hub.rs, delivery/writer/)

/// Batches a room keeps for its slowest subscriber. Past this the subscriber lags and catches up
/// from the store. A batch is what one request to the writer committed (a run's append is an
/// event or a few; a Durable Streams append, the messages of one body), so this bounds a room
/// at this many requests' events, shared by every subscriber of the room.
pub const HUB_ROOM_BATCHES_MAX_DEFAULT: usize = 1024;

// Delivery (delivery/hub.rs, delivery/writer/)

/// Times the writer tries a group again, by default, when the database says trying again may
/// work (busy, an I/O hiccup, a PostgreSQL restart) before it fails the group's requests.
/// Retrying here, in the one writer task, keeps every agent's order: nothing behind the group
/// commits first. With the delays below, about 2.5 s in all: a database restart, not an outage.
pub const WRITER_COMMIT_RETRIES_MAX_DEFAULT: u32 = 12;

// HTTP (http/)

/// Request bodies above this are refused with 413 before they are read in full (by default; see
/// [`Limits`]). The largest legitimate body is a run's user message
/// (`agent::start::RUN_CONTENT_BYTES_MAX`) plus its JSON framing.
pub const REQUEST_BODY_BYTES_MAX: usize = 64 * 1024;

// HTTP (http/)

/// A whole request body must arrive within this (by default; see [`Limits`]).
pub const BODY_READ_MS_MAX: u64 = 30_000;

// HTTP (http/)

/// Events per page at most: one page stays a few hundred kilobytes.
pub const EVENTS_PAGE_LIMIT_MAX: u32 = 1000;

// HTTP (http/)

/// Requests one token subject may have in flight at once, by default.
pub const REQUESTS_PER_SUBJECT_MAX: usize = 64;

// HTTP (http/)

/// The longest a token may live (`exp` − `iat`, or `exp` − now without `iat`), by default
/// (`AGENTSTREAM_TOKEN_TTL_SECONDS_MAX`): short, so a leaked browser token is soon worthless.
pub const TOKEN_TTL_SECONDS_MAX_DEFAULT: u64 = 3600;

// Live streams (surfaces/, surfaces/native/ws.rs)

/// Open SSE streams (native, Letta, AI SDK and AG-UI) at most, by default (see [`Limits`]). Each holds a
/// task, a queue and a log subscription like a WebSocket does; past this a new stream is
/// refused with 503.
pub const SSE_STREAMS_MAX: usize = 1024;

// Live streams (surfaces/, surfaces/native/ws.rs)

/// Open WebSocket connections at most (by default; see [`Limits`]). Each costs a task, a queue and its subscriptions; past this
/// the upgrade is refused with 503 so the server stays responsive.
pub const WS_CONNECTIONS_MAX: usize = 1024;

/// A socket silent this long (by default), pongs included, is closed: three pings unanswered.
pub const WS_IDLE_TIMEOUT_MS: u64 = 90_000;

/// The largest frame a client may send. Client messages are small commands; anything bigger is a
/// mistake or an attack.
pub const WS_MESSAGE_BYTES_MAX: usize = 64 * 1024;

/// Frames queued for one socket. When full, the connection's subscriptions wait, lag at the hub,
/// and are caught up from the store: memory per slow client stays bounded.
pub const WS_OUTBOUND_FRAMES_MAX: usize = 64;

/// How often a socket is pinged (by default; see [`Limits`]).
pub const WS_PING_INTERVAL_MS: u64 = 30_000;

/// Subscriptions one connection may hold.
pub const WS_SUBSCRIPTIONS_PER_CONNECTION_MAX: usize = 64;

// MCP (mcp/)

/// How long one MCP tool call may take unless configured otherwise
/// (`AGENTSTREAM_TOOL_CALL_TIMEOUT_MS`).
pub const TOOL_CALL_TIMEOUT_MS_DEFAULT: u64 = 60_000;

// What the environment may change

/// The bounds an operator may change (`config.rs` reads them from the environment), each with
/// its unit in its name. The defaults are the constants above.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Request bodies above this are refused with 413 before they are read in full.
    pub request_body_bytes_max: usize,
    /// A WebSocket frame from a client above this closes that socket.
    pub ws_message_bytes_max: usize,
    /// Subscriptions one WebSocket connection may hold.
    pub ws_subscriptions_per_connection_max: usize,
    /// Open WebSocket connections per server; past it the upgrade answers 503.
    pub ws_connections_max: usize,
    /// Frames queued for one subscriber (WebSocket or SSE); a slower reader lags and is caught up
    /// from the store.
    pub subscriber_outbound_frames_max: usize,
    /// Events per page of `GET /v1/agents/{id}/events` at most.
    pub events_page_limit_max: u32,
    /// Events one run may write before it is stopped (stop reason `max_events`).
    pub run_events_max: u64,
    /// Bytes one run may write before it is stopped (stop reason `max_bytes`).
    pub run_bytes_max: u64,
    /// A tool result longer than this is cut (and says so).
    pub tool_result_chars_max: usize,
    /// A WebSocket is pinged this often; browsers and client libraries answer by themselves.
    pub ws_ping_interval_ms: u64,
    /// A WebSocket from which nothing (not even a pong) came for this long is closed: a
    /// half-open peer must not hold a connection slot forever.
    pub ws_idle_timeout_ms: u64,
    /// Open SSE streams (native and Letta) per server; past it a new stream answers 503.
    pub sse_streams_max: usize,
    /// A request body (other than a streamed one) must arrive whole within this, else 408.
    pub body_read_ms_max: u64,
    /// Requests one scoped token's subject may have in flight at once (streams, long-polls,
    /// WebSockets included), else 429.
    pub requests_per_subject_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            request_body_bytes_max: REQUEST_BODY_BYTES_MAX,
            ws_message_bytes_max: WS_MESSAGE_BYTES_MAX,
            ws_subscriptions_per_connection_max: WS_SUBSCRIPTIONS_PER_CONNECTION_MAX,
            ws_connections_max: WS_CONNECTIONS_MAX,
            subscriber_outbound_frames_max: WS_OUTBOUND_FRAMES_MAX,
            events_page_limit_max: EVENTS_PAGE_LIMIT_MAX,
            run_events_max: RUN_EVENTS_MAX_DEFAULT,
            run_bytes_max: RUN_BYTES_MAX_DEFAULT,
            tool_result_chars_max: TOOL_RESULT_CHARS_MAX,
            ws_ping_interval_ms: WS_PING_INTERVAL_MS,
            ws_idle_timeout_ms: WS_IDLE_TIMEOUT_MS,
            sse_streams_max: SSE_STREAMS_MAX,
            body_read_ms_max: BODY_READ_MS_MAX,
            requests_per_subject_max: REQUESTS_PER_SUBJECT_MAX,
        }
    }
}

// Metrics (metrics/)

/// Distinct values a label taken from outside (tool names, MCP server names) may have, at most;
/// a value past them counts as `other`. Tool names are the configured set, so this is a guard
/// against a configuration with thousands of tools, not a limit anyone meets.
pub const LABEL_VALUES_MAX: usize = 256;

// Catching a subscriber up (delivery/subscription/)

/// Events read from the store per page (and per frame) while catching up, at most. Bounds the
/// memory one catch-up holds and the size of one frame.
pub const CATCHUP_PAGE_EVENTS: u32 = 500;

/// The first page of a catch-up is this small, so the first events of a long gap reach the
/// client at once; each page after it is twice as large, up to [`CATCHUP_PAGE_EVENTS`].
pub const CATCHUP_FIRST_PAGE_EVENTS: u32 = 32;

// Letta (surfaces/letta/)

/// Letta items queued between a run's feed and its HTTP response. A slower reader makes the feed
/// wait; the feed's log subscription then lags and catches up from the store, so the agent never
/// waits for a reader and nothing is lost.
pub const LETTA_FEED_ITEMS_MAX: usize = 64;

// Rows of the log (store/chunk/)

/// Events one row holds at most. Reads find the row holding a seq by the rows' first seqs, so
/// this also bounds what a read skips inside its first row.
pub const CHUNK_EVENTS_MAX: u64 = 256;

/// Bytes of text and per-event varints one row holds at most. Small because a run row is
/// extended while its run streams, and each extension writes the whole row again (both stores).
/// (Chosen when SQLite's `events` was an index B-tree, whose cells keep ~1 000 bytes on a 4 KiB
/// page; a table leaf since migration 15 keeps ~4 000, not measured at other sizes since.)
pub const CHUNK_BYTES_MAX: usize = 640;

/// Bytes of raw provider events (JSON and a length varint each) one row holds at most, before
/// they are deflated.
pub const CHUNK_RAW_BYTES_MAX: usize = 8 * 1024;

/// Bytes of contents, commas and varints one row of stream messages holds at most. Larger than
/// a run row's: the messages of one append are written once, never extended by a later commit.
/// On SQLite a table leaf keeps ~4 000 bytes of a row on its 4 KiB page, so a 64-message append
/// of ~45-byte messages is one row without overflow pages. (When `events` was a `WITHOUT ROWID`
/// table such rows spilled, and every insert's descent copied the spilled rows it compared
/// with; still, capped at 640 bytes so that none spilled, 64-message appends were ~17 % slower.)
pub const MESSAGE_ROW_BYTES_MAX: usize = 32 * 1024;

/// Bytes of contents, commas and varints one row of single-message appends holds at most (the
/// fold joins such appends of one stream, ~40 messages of 45 bytes). Smaller than a row of one
/// append's messages: each fold step that adds to the row writes it again.
pub const SINGLES_ROW_BYTES_MAX: usize = 2 * 1024;

// SQLite's newest rows (store/sqlite/recent.rs): committed, not yet moved into `events`

/// Rows SQLite's `recent` table holds before commits start moving the oldest logs' rows into
/// `events`. A read of a busy log scans its part of `recent`; a log's leaf in `events` is written
/// once per its share of this many rows.
pub const RECENT_ROWS_MAX: usize = 4_096;

/// Bytes of text `recent` holds before commits start moving rows (a few large messages must not
/// make every read of their log scan megabytes).
pub const RECENT_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Rows `recent` may hold before appends are refused: reached only while steps keep failing
/// (they are tried with every append then, and the first that succeeds lets appends in again).
/// It bounds the table, the lists `Recent` keeps of it and what a read of a busy log scans.
pub const RECENT_ROWS_HARD_MAX: usize = 16 * RECENT_ROWS_MAX;

/// Bytes of text `recent` may hold before appends are refused (as [`RECENT_ROWS_HARD_MAX`]).
pub const RECENT_BYTES_HARD_MAX: usize = 16 * RECENT_BYTES_MAX;

// Shared databases (store/)

/// See [`ClusterOptions::run_lease_ms`].
pub const RUN_LEASE_MS_DEFAULT: u64 = 10_000;

/// Connections of one process, by default. Reads (history, catch-up), the writer and claims share
/// them; the listener has its own.
pub const PG_POOL_CONNECTIONS_MAX_DEFAULT: u32 = 16;

// SQLite (store/sqlite/)

/// Reads (and so read connections and blocking threads) at once; more wait their turn.
pub const SQLITE_READS_AT_ONCE_MAX: usize = 8;
