//! A real server on port 0 with a real temporary database, and clients for it.
//!
//! The database is a temporary SQLite file, or, when `AGENTSTREAM_TEST_DATABASE_URL` names a
//! PostgreSQL server (the test command starts a throwaway one), a fresh database on it per test
//! server: the same suite runs against both backends.
#![allow(dead_code)]

mod database;
pub mod hooked_store;
pub mod processes;
mod requests;
pub mod rng;
mod ws;

pub use database::*;
pub use requests::RequestExt;
pub use ws::WsClient;

use std::path::PathBuf;
use std::time::Duration;

use agentstream_server::config::Config;
use app::protocol::{EventsPage, RunAccepted};
use app::{AgentEvent, EventKind};
use leptos::prelude::get_configuration;
use serde_json::{json, Value};
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::MaybeTlsStream;
use uuid::Uuid;

/// How long a test waits for something the server should do promptly before failing.
pub const WAIT_MAX: Duration = Duration::from_secs(30);
/// How often [`wait_until`] looks again.
pub const POLL_INTERVAL_MS: u64 = 20;

/// Looks at `check` every [`POLL_INTERVAL_MS`] until it gives a value, for [`WAIT_MAX`] at most;
/// past that the test fails, saying it waited for `what`.
pub async fn wait_until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT_MAX;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "waited {WAIT_MAX:?} for {what}");
        tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
    }
}

pub struct TestServer {
    pub base: String,
    pub ws_url: String,
    pub db_path: PathBuf,
    /// The server's `DATABASE_URL`.
    pub database_url: String,
    pub http: reqwest::Client,
    _directory: tempfile::TempDir,
    _shutdown: oneshot::Sender<()>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    /// Starts a server; `adjust` changes the configuration first (scripted reply length, buffers).
    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let db_path = directory.path().join("agentstream.db");
        let mut config =
            Config { database_url: fresh_database_url(&db_path).await, ..Config::default() };
        config.scripted.token_delay_ms = 0;
        config.scripted.reply_tokens = 40;
        adjust(&mut config);
        let database_url = config.database_url.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let leptos_options = get_configuration(None).unwrap().leptos_options;
        let (shutdown, stop) = oneshot::channel::<()>();
        tokio::spawn(agentstream_server::serve(listener, config, leptos_options, async {
            let _ = stop.await;
        }));
        let server = TestServer {
            base: format!("http://{address}"),
            ws_url: format!("ws://{address}/v1/ws"),
            db_path,
            database_url,
            http: agentstream_server::http_client::client(),
            _directory: directory,
            _shutdown: shutdown,
        };
        wait_until("the server to come up", || async {
            let response = server.http.get(server.url("/healthz")).send().await;
            response.is_ok_and(|response| response.status().is_success()).then_some(())
        })
        .await;
        server
    }

    /// A server whose scripted replies are `reply_tokens` long with `token_delay_ms` between
    /// tokens: long enough to act on a run while it streams.
    pub async fn start_paced(reply_tokens: u32, token_delay_ms: u64) -> TestServer {
        TestServer::start_with(|config| {
            config.scripted.reply_tokens = reply_tokens;
            config.scripted.token_delay_ms = token_delay_ms;
        })
        .await
    }

    /// A new agent's run of `content`, to its end: the agent, the run and the agent's log.
    pub async fn finished_run(&self, content: &str) -> (Uuid, Uuid, Vec<AgentEvent>) {
        let agent_id = self.create_agent().await;
        let run_id = self.start_run(agent_id, content).await;
        let log = self.wait_for_run_end(agent_id, run_id).await;
        (agent_id, run_id, log)
    }

    /// POSTs `body` as JSON to `path`.
    pub async fn post(&self, path: &str, body: &impl serde::Serialize) -> reqwest::Response {
        self.http.post(self.url(path)).json(body).send().await.unwrap()
    }

    /// POSTs `body` as JSON to `path`: the status and the answer's JSON (null when it has none).
    pub async fn post_status(&self, path: &str, body: &Value) -> (u16, Value) {
        self.http.post(self.url(path)).json(body).status_json().await
    }

    /// GETs `path`.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.unwrap()
    }

    /// PUTs `path` with no body.
    pub async fn put(&self, path: &str) -> reqwest::Response {
        self.http.put(self.url(path)).send().await.unwrap()
    }

    /// DELETEs `path`.
    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.http.delete(self.url(path)).send().await.unwrap()
    }

    /// POSTs `body` as JSON to `path` and returns the answer's JSON, whatever the status.
    /// A producer's POST to `agent_id`'s log as `(producer, epoch, seq)`, without a body yet.
    pub fn producer(
        &self,
        agent_id: impl std::fmt::Display,
        producer: (&str, u64, u64),
    ) -> reqwest::RequestBuilder {
        producer_post(&self.http, &self.base, agent_id, producer)
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Value {
        self.post(path, body).await.json().await.unwrap()
    }

    /// GETs `path` and returns the answer's JSON, whatever the status.
    pub async fn get_json(&self, path: &str) -> Value {
        self.get(path).await.json().await.unwrap()
    }

    /// The run a `202 Accepted` answer (`status`, body) names by its `run_id`, once it ended:
    /// its id and the agent's log.
    pub async fn accepted_run_to_end(
        &self,
        agent_id: Uuid,
        (status, accepted): (u16, Value),
    ) -> (Uuid, Vec<AgentEvent>) {
        assert_eq!(status, 202, "{accepted}");
        let run_id: Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
        (run_id, self.wait_for_run_end(agent_id, run_id).await)
    }

    /// Asserts the agent's log still holds `head` events: a refused request wrote nothing.
    pub async fn assert_nothing_written(&self, agent_id: Uuid, head: usize) {
        let events = self.all_events(agent_id).await;
        assert_eq!(events.len(), head, "nothing written");
    }

    /// How many agents the server lists (up to 1 000).
    pub async fn agent_count(&self) -> usize {
        let agents = self.get_json("/v1/agents?limit=1000").await;
        agents.as_array().unwrap().len()
    }

    /// The same server, its test client keeping no idle connection: each request's connection
    /// (and its tasks, client's and server's, which share the test's runtime) ends with the
    /// request, so a count of the runtime's live tasks is the server's own. A pooled client can
    /// open a second connection when a request starts before the last one is back in the pool,
    /// and keep it for 90 s.
    pub fn without_pooled_connections(mut self) -> TestServer {
        self.http =
            agentstream_server::http_client::builder().pool_max_idle_per_host(0).build().unwrap();
        self
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A second, independent connection to the server's database, as an operator would open.
    pub async fn database(&self) -> TestDatabase {
        if self.database_url.starts_with("postgres") {
            let pool =
                PgPoolOptions::new().max_connections(2).connect(&self.database_url).await.unwrap();
            return TestDatabase::Postgres(pool);
        }
        let options = SqliteConnectOptions::new().filename(&self.db_path).read_only(true);
        let pool = SqlitePoolOptions::new().max_connections(2).connect_with(options).await.unwrap();
        TestDatabase::Sqlite(pool)
    }

    /// The log of `agent_id` once its newest event ends a run (waiting for `what`).
    pub async fn log_once_a_run_ended(&self, agent_id: Uuid, what: &str) -> Vec<AgentEvent> {
        wait_until(what, || async {
            let events = self.all_events(agent_id).await;
            let ended = events.last().is_some_and(|event| event.kind.is_run_end());
            ended.then_some(events)
        })
        .await
    }

    /// A run of `content` on `agent_id`, started and waited out: the log then.
    pub async fn run_to_end(&self, agent_id: Uuid, content: &str) -> Vec<AgentEvent> {
        let run_id = self.start_run(agent_id, content).await;
        self.wait_for_run_end(agent_id, run_id).await
    }

    /// Cancels what `agent_id` is running (`POST …/messages/cancel`, which answers once the runs
    /// ended) and checks that `run_id` is what was cancelled; the log then.
    pub async fn cancel_run(&self, agent_id: Uuid, run_id: Uuid) -> Vec<AgentEvent> {
        self.cancel(agent_id, run_id).await;
        self.wait_for_run_end(agent_id, run_id).await
    }

    /// Cancels what `agent_id` is running and checks that `run_id` (ours or a producer's) is
    /// what was cancelled.
    pub async fn cancel(&self, agent_id: Uuid, run_id: impl serde::Serialize) {
        let path = format!("/v1/agents/{agent_id}/messages/cancel");
        let cancelled = self.post_json(&path, &json!({})).await;
        let want = json!([run_id]);
        assert_eq!(cancelled["cancelled_run_ids"], want, "{cancelled}");
    }

    /// A new agent made from `body` (its name, metadata…); its id.
    pub async fn new_agent(&self, body: &Value) -> Uuid {
        let agent = self.post_json("/v1/agents", body).await;
        agent["id"].as_str().unwrap().parse().unwrap()
    }

    /// The server with a new agent: the opening of most tests.
    pub async fn with_agent(self) -> (TestServer, Uuid) {
        let agent_id = self.create_agent().await;
        (self, agent_id)
    }

    pub async fn create_agent(&self) -> Uuid {
        let response = self
            .http
            .post(self.url("/v1/agents"))
            .json(&json!({ "name": "test agent" }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.unwrap();
        Uuid::parse_str(body["id"].as_str().unwrap()).unwrap()
    }

    pub async fn start_run(&self, agent_id: Uuid, content: &str) -> Uuid {
        let response = self
            .http
            .post(self.url(&format!("/v1/agents/{agent_id}/runs")))
            .json(&json!({ "content": content }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        response.json::<RunAccepted>().await.unwrap().run_id
    }

    pub async fn events_page(&self, agent_id: Uuid, since: u64, limit: u32) -> EventsPage {
        let response = self
            .http
            .get(self.url(&format!("/v1/agents/{agent_id}/events?since={since}&limit={limit}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        let page: EventsPage = serde_json::from_str(&text).unwrap();
        // Written around events that are JSON already: byte for byte what serde makes.
        assert_eq!(text, serde_json::to_string(&page).unwrap());
        page
    }

    /// The whole log, read through the paged REST API.
    pub async fn all_events(&self, agent_id: Uuid) -> Vec<AgentEvent> {
        let mut events = Vec::new();
        let mut since = 0;
        loop {
            let page = self.events_page(agent_id, since, 1000).await;
            events.extend(page.events);
            since = page.next_since;
            if !page.has_more {
                return events;
            }
        }
    }

    /// Waits until the newest event of the log is the end of `run_id`, and returns the whole log.
    pub async fn wait_for_run_end(&self, agent_id: Uuid, run_id: Uuid) -> Vec<AgentEvent> {
        wait_until(&format!("run {run_id} to end"), || async {
            let head = self.events_page(agent_id, 0, 1).await.head_seq;
            let newest = self.events_page(agent_id, head.saturating_sub(1), 1).await;
            newest
                .events
                .iter()
                .any(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
                .then_some(())
        })
        .await;
        self.all_events(agent_id).await
    }

    pub async fn connect(&self) -> WsClient {
        self.connect_with(None).await.unwrap()
    }

    /// A socket opened with `query` in its URL (`subscribe=…&since=…`); the refusal of the
    /// handshake when the server answers with an HTTP status instead.
    pub async fn connect_with(&self, query: Option<&str>) -> Result<WsClient, (u16, String)> {
        let url = match query {
            Some(query) => format!("{}?{query}", self.ws_url),
            None => self.ws_url.clone(),
        };
        match tokio_tungstenite::connect_async(&url).await {
            Ok((stream, _)) => Ok(WsClient { stream }),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                let body = response.body().clone().unwrap_or_default();
                Err((response.status().as_u16(), String::from_utf8_lossy(&body).into_owned()))
            }
            Err(error) => panic!("cannot open {url}: {error}"),
        }
    }

    /// A WebSocket client whose socket receive buffer is tiny, so that a client which stops
    /// reading backs the server up quickly.
    pub async fn connect_with_small_buffer(&self) -> WsClient {
        let address = self.base.trim_start_matches("http://").parse().unwrap();
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let tcp: TcpStream = socket.connect(address).await.unwrap();
        let (stream, _) = tokio_tungstenite::client_async(&self.ws_url, MaybeTlsStream::Plain(tcp))
            .await
            .unwrap();
        WsClient { stream }
    }
}

/// Every event of `agent_id`'s log, read from `store` page by page.
pub async fn whole_log(
    store: &dyn agentstream_server::store::EventLog,
    agent_id: Uuid,
) -> Vec<AgentEvent> {
    let mut log = Vec::new();
    loop {
        let page = store.read_events(agent_id, log.len() as u64, 1000).await.unwrap();
        if page.is_empty() {
            return log;
        }
        log.extend(page);
    }
}

/// Asserts that `events` are exactly seqs `first..=last`, each once, in order.
pub fn assert_contiguous(events: &[AgentEvent], first: u64) {
    for (offset, event) in events.iter().enumerate() {
        assert_eq!(
            event.seq,
            first + offset as u64,
            "expected seq {} at position {offset}, got {}",
            first + offset as u64,
            event.seq
        );
    }
}

/// Asserts that `events` account for seqs `first..` with no gap and no overlap, merged events
/// (`coalesced_from..=seq`) included: each event's first seq follows the previous event's seq.
pub fn assert_ranges_contiguous(events: &[AgentEvent], first: u64) {
    let mut next = first;
    for event in events {
        assert!(
            event.first_seq() == next && event.seq >= event.first_seq(),
            "event {}..={} does not follow seq {}",
            event.first_seq(),
            event.seq,
            next - 1
        );
        next = event.seq + 1;
    }
}

/// A producer's append of `batch` to `agent_id`'s log on the server at `base`, as
/// `(producer, epoch, seq)`.
pub fn produce_request(
    http: &reqwest::Client,
    base: &str,
    agent_id: Uuid,
    producer: (&str, u64, u64),
    batch: &Value,
) -> reqwest::RequestBuilder {
    producer_post(http, base, agent_id, producer).json(batch)
}

/// A producer's POST to `agent_id`'s log on the server at `base`, as `(producer, epoch, seq)`,
/// without a body yet.
pub fn producer_post(
    http: &reqwest::Client,
    base: &str,
    agent_id: impl std::fmt::Display,
    (producer, epoch, seq): (&str, u64, u64),
) -> reqwest::RequestBuilder {
    http.post(format!("{base}/v1/agents/{agent_id}/produce"))
        .header("Producer-Id", producer)
        .header("Producer-Epoch", epoch.to_string())
        .header("Producer-Seq", seq.to_string())
}

/// The first event of `kind` in `events`; fails the test, naming the kind, when there is none.
pub fn first_of(events: &[AgentEvent], kind: EventKind) -> &AgentEvent {
    events
        .iter()
        .find(|event| event.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} among {} events", events.len()))
}

/// The contents of `run_id`'s events of `kind`, in log order.
pub fn of_kind(events: &[AgentEvent], run_id: Uuid, kind: EventKind) -> Vec<Value> {
    events
        .iter()
        .filter(|event| event.run_id == Some(run_id) && event.kind == kind)
        .map(|event| event.content.clone())
        .collect()
}

/// A subscriber that stops reading while a 30 000-token run is written (a small socket buffer,
/// the hub keeping one batch per room): it falls behind. The server, the subscriber (subscribed
/// from seq 0, asking for `coalesce`), the run and its whole log.
pub async fn flooded_subscriber(coalesce: bool) -> (TestServer, WsClient, Uuid, Vec<AgentEvent>) {
    let server = TestServer::start_with(|config| {
        config.scripted.reply_tokens = 30_000;
        config.hub_room_batches_max = 1;
    })
    .await;
    let agent_id = server.create_agent().await;
    let mut client = server.connect_with_small_buffer().await;
    client.subscribed(agent_id, 0, coalesce).await;
    let run_id = server.start_run(agent_id, "flood").await;
    let all = server.wait_for_run_end(agent_id, run_id).await;
    (server, client, run_id, all)
}

/// The timeline of `events`, folded in the order given.
pub fn fold(events: &[AgentEvent]) -> app::timeline::Timeline {
    let mut timeline = app::timeline::Timeline::new();
    timeline.apply_all(events.iter().cloned());
    timeline
}

/// The messages of `kind` in the timeline `events` fold to, in order.
pub fn messages_of(events: &[AgentEvent], kind: EventKind) -> Vec<app::timeline::TimelineMessage> {
    let timeline = fold(events);
    let of_kind = timeline.messages().iter().filter(|message| message.kind == kind);
    of_kind.cloned().collect()
}

/// The reply text of `run_id`, folded from its text deltas.
pub fn reply_text(events: &[AgentEvent], run_id: Uuid) -> String {
    events
        .iter()
        .filter(|event| event.run_id == Some(run_id) && event.kind == EventKind::Text)
        .filter_map(|event| event.delta.as_ref().and_then(Value::as_str))
        .collect()
}

/// A request body the test writes as it goes: each string sent goes out at once; dropping the
/// sender ends the body.
pub fn streamed_body() -> (tokio::sync::mpsc::Sender<Result<String, std::io::Error>>, reqwest::Body)
{
    let (lines, receiver) = tokio::sync::mpsc::channel(8);
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|line| (line, receiver))
    });
    (lines, reqwest::Body::wrap_stream(stream))
}
