//! `--help`: every variable the server reads, with its default and its flag.

pub const HELP: &str = "\
agentstream server: streams agent output to browsers and API clients, persisted first.

USAGE: server [--help] [--flag value …]

Environment:
  LEPTOS_SITE_ADDR                      address to listen on (default 127.0.0.1:3000)
  LEPTOS_SITE_ROOT                      directory of the built site (default target/site)
  DATABASE_URL                          sqlite://path/to.db (default sqlite://data/agentstream.db,
                                        relative to the directory the server starts in)
                                        or postgres://user@host/db: several servers on one
                                        database, fanning events out with LISTEN/NOTIFY
  AGENTSTREAM_RUN_LEASE_MS              PostgreSQL: a run whose server has not renewed its lease
                                        this long is ended as interrupted (default 10000)
  AGENTSTREAM_PG_POOL_CONNECTIONS_MAX   PostgreSQL connections per server (default 16)
  AGENTSTREAM_PROVIDER                  scripted (default) | anthropic | openai | claude-cli
  AGENTSTREAM_CLAUDE_CLI                the Claude Code executable (default claude)
  AGENTSTREAM_CLAUDE_CLI_ENV            comma-separated variables the CLI gets besides PATH and
                                        HOME, e.g. ANTHROPIC_API_KEY (default: none)
  AGENTSTREAM_MODEL                     model name for anthropic / openai (an agent's model wins)
  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL Anthropic Messages API (default https://api.anthropic.com)
  OPENAI_API_KEY, OPENAI_BASE_URL       any OpenAI-compatible server (default https://api.openai.com/v1)
  AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS   pause between scripted tokens, 0 = no pause (default 30)
  AGENTSTREAM_SCRIPTED_REPLY_TOKENS     words in a scripted reply (default 60)
  AGENTSTREAM_SCRIPTED_SEED             seed of the scripted provider (default 7)
  AGENTSTREAM_HUB_ROOM_BATCHES_MAX      live batches buffered per agent (default 1024)
  AGENTSTREAM_MAX_ITERATIONS            LLM calls per run at most (default 10)
  AGENTSTREAM_WRITER_COMMIT_RETRIES_MAX times a commit is tried again while the database is
                                        busy or restarting, backing off to 500 ms (default 12)
  AGENTSTREAM_LETTA_PING_INTERVAL_MS    ping interval of Letta streams (default 15000)
  AGENTSTREAM_SHUTDOWN_DRAIN_MS         at SIGTERM, how long runs in flight may go on before
                                        they are ended as interrupted (default 10000);
                                        connections get 2 s more, then are dropped
  AGENTSTREAM_API_TOKEN                 require this token on every request (default: none);
                                        a browser opens /?token=<token> once
  AGENTSTREAM_INSECURE_NO_TOKEN         true: serve without an access token on an address other
                                        than loopback (refused otherwise; default false)
  AGENTSTREAM_TOKEN_SECRET              environment only: comma-separated HS256 secrets of
                                        scoped tokens, 32+ bytes each; the first signs, all
                                        verify (default: none; needs AGENTSTREAM_API_TOKEN)
  AGENTSTREAM_TOKEN_TTL_SECONDS_MAX     longest lifetime of a scoped token (default 3600)
  AGENTSTREAM_ALLOWED_ORIGINS           comma-separated origins besides the server's own whose
                                        pages may open a WebSocket and whose scripts may call
                                        the API (CORS) (default: none)
  AGENTSTREAM_ALLOWED_HOSTS             without an access token, requests must name a loopback
                                        host (localhost, 127.0.0.1, [::1]) or one of these,
                                        comma-separated (default: none)
  AGENTSTREAM_MCP_CONFIG                a JSON file of MCP servers agents may name in
                                        metadata.mcp_servers: {\"mcpServers\": {name: {command,
                                        args, env}}} (stdio; default: none)
  AGENTSTREAM_TOOL_CALL_TIMEOUT_MS      how long one MCP tool call may take (default 60000)
  AGENTSTREAM_APPROVAL_TIMEOUT_MS       an approval request nobody answers is answered as
                                        denied after this long (default 0: never); an agent's
                                        metadata.approval_timeout_ms overrides it
  AGENTSTREAM_METRICS_ADDR              also serve GET /metrics (Prometheus) on this address,
                                        without the token (default: none: /metrics on the main
                                        address only, operator token required when one is set)
  AGENTSTREAM_LOG_FORMAT                text or json: one JSON object a line (default text)
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
                                        export traces over OTLP/HTTP protobuf (default: off);
                                        OTEL_SERVICE_NAME (default agentstream),
                                        OTEL_TRACES_SAMPLER and _ARG, OTEL_SDK_DISABLED as usual
  AGENTSTREAM_TRACE_URL_TEMPLATE        a link to a trace, {trace_id} in it (e.g.
                                        http://tempo:3200/trace/{trace_id}): the run inspector
                                        links each run's trace (default: the id, unlinked)
  RUST_LOG                              log filter (default info)
  TOKIO_WORKER_THREADS                  async worker threads (default: one per core, one fewer
                                        on SQLite, whose append thread takes a core)

Limits (each must be at least 1):
  AGENTSTREAM_REQUEST_BODY_BYTES_MAX    request body size (default 65536)
  AGENTSTREAM_WS_MESSAGE_BYTES_MAX      WebSocket frame from a client (default 65536)
  AGENTSTREAM_WS_SUBSCRIPTIONS_PER_CONNECTION_MAX  (default 64)
  AGENTSTREAM_WS_CONNECTIONS_MAX        open WebSockets per server (default 1024)
  AGENTSTREAM_SUBSCRIBER_OUTBOUND_FRAMES_MAX  frames queued per subscriber (default 64)
  AGENTSTREAM_EVENTS_PAGE_LIMIT_MAX     events per page (default 1000); a request
                                        without `limit` gets 100, or this if smaller
  AGENTSTREAM_RUN_EVENTS_MAX            events one run may write (default 100000)
  AGENTSTREAM_RUN_BYTES_MAX             bytes one run may write, as JSON (default 67108864)
  AGENTSTREAM_TOOL_RESULT_CHARS_MAX     tool result length (default 16384)
  AGENTSTREAM_WS_PING_INTERVAL_MS       WebSocket ping interval (default 30000)
  AGENTSTREAM_WS_IDLE_TIMEOUT_MS        a WebSocket silent this long, pongs included, is closed
                                        (default 90000)
  AGENTSTREAM_SSE_STREAMS_MAX           open SSE and Letta streams and Durable Streams long-polls
                                        per server (default 1024)
  AGENTSTREAM_BODY_READ_MS_MAX          a request body must arrive whole within this, else 408
                                        (default 30000; streamed NDJSON and SSE bodies are
                                        bounded by their silence instead)
  AGENTSTREAM_REQUESTS_PER_SUBJECT_MAX  requests one scoped token's user may have open at once,
                                        streams, long-polls and WebSockets included (default 64)

An agent created with metadata {\"provider\": \"<name>\"} uses that provider instead of the
default, when the server has its settings (the scripted provider always).

Scripted provider commands (start a message with them):
  /echo <text>        reply exactly <text>, word by word
  /markdown           reply in Markdown: headings, lists, tables, fenced code
  /tools clock; calculator 2*(3+4); slow 3
                      call those tools concurrently, then report their results;
                      any tool by name, a JSON object as its input: /tools get-sum {\"a\":2,\"b\":3}
  /loop               call the clock at every step (reaches the iteration limit)
  /fail <error_type>  stream a few words, then fail with that provider error
  /stall <seconds>    stream a few words, go silent that long, then finish
";
