//! `/healthz` is liveness; `/readyz` looks at the database, the writer and (PostgreSQL) the
//! notice listener, and says which part is down.
use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use agentstream_server::config::Config;
use agentstream_server::http::rest::readyz;
use agentstream_server::http::rest::Readiness;
use agentstream_server::state::AppState;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{Store, StoreError};
use axum::extract::State;
use common::hooked_store::{HookedStore, Hooks, Read};
use common::TestServer;
use serde_json::Value;

#[tokio::test]
async fn a_serving_server_is_ready() {
    let server = TestServer::start().await;
    let (status, body) = common::wait_until("the server to be ready", || async {
        let response = server.get("/readyz").await;
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (status == 200).then_some((status, body))
    })
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["checks"]["database"], "ok", "{body}");
    assert_eq!(body["checks"]["writer"], "ok", "{body}");
    if common::testing_postgres() {
        assert_eq!(body["checks"]["listener"], "ok", "{body}");
    }
    let health = server.get("/healthz").await;
    assert_eq!(health.status(), 200);
}

/// A database that stopped answering reads.
struct Unreachable(AtomicBool);

impl Hooks for Arc<Unreachable> {
    fn before_read(&self, _read: Read) -> Result<(), StoreError> {
        if self.0.load(Ordering::Relaxed) {
            return Err(StoreError::Unavailable("connection refused".into()));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_database_that_does_not_answer_is_named_in_a_503() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("log.db").display());
    let down = Arc::new(Unreachable(AtomicBool::new(false)));
    let store: Arc<dyn Store> = Arc::new(HookedStore {
        inner: SqliteStore::open(&url).await.unwrap(),
        hooks: down.clone(),
    });
    let config = Config { database_url: url, ..Config::default() };
    let state = AppState::open_with_store(&config, store).await.unwrap();
    let ready = |state: &AppState| {
        let readiness =
            Readiness { store: state.store.clone(), writer: state.writer.clone(), cluster: None };
        async move {
            let response = readyz(State(readiness)).await;
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024).await.unwrap();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    assert_eq!(ready(&state).await.0, 200);
    down.0.store(true, Ordering::Relaxed);
    let (status, body) = ready(&state).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false);
    let database = body["checks"]["database"].as_str().unwrap();
    assert!(database.starts_with("down: "), "{body}");
    // The database's own words (hosts, users, paths) stay in the operator's log: this route
    // answers without a token.
    assert!(!database.contains("connection refused"), "{body}");
    assert_eq!(body["checks"]["writer"], "ok");
}
