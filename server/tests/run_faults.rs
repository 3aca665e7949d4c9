//! Runs whose provider misbehaves in ways no real provider should: the run still ends, with an
//! error, and its agent is free for the next run. The real SQLite store, writer and registry.
use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use agentstream_server::agent::{Providers, RunLimits, RunOptions, Runs, Turn};
use agentstream_server::delivery::hub::Hub;
use agentstream_server::delivery::writer::Writer;
use agentstream_server::provider::{Events, Provider, ProviderEvent, ProviderRequest};
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{NewAgent, Store};
use app::{AgentEvent, EventKind};
use futures::stream::{self, StreamExt};
use uuid::Uuid;

/// Streams some text, then does what `end` says instead of finishing.
struct Misbehaves {
    end: End,
}

#[derive(Clone, Copy)]
enum End {
    /// The stream's code panics (a bug in a parser, say).
    Panic,
    /// The stream just stops, with no `Stop` (the provider's task died, the connection was cut
    /// without an error).
    Vanish,
}

impl Provider for Misbehaves {
    fn name(&self) -> &'static str {
        "misbehaves"
    }

    fn stream(&self, _request: ProviderRequest) -> Events {
        let words = stream::iter(
            ["partial ", "reply"].map(|word| Ok(ProviderEvent::TextDelta(word.to_owned()))),
        );
        match self.end {
            End::Panic => {
                words.chain(stream::poll_fn(|_| panic!("the provider's parser hit a bug"))).boxed()
            }
            End::Vanish => words.boxed(),
        }
    }
}

struct Setup {
    _directory: tempfile::TempDir,
    store: Arc<dyn Store>,
    runs: Runs,
}

async fn setup(end: End) -> Setup {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("log.db").display());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
    let writer = Writer::spawn(store.clone(), Arc::new(Hub::new(64)));
    let providers = Providers { default: Arc::new(Misbehaves { end }), by_name: HashMap::new() };
    let runs = Runs::new(writer, store.clone(), providers, Vec::new(), 3, RunLimits::default());
    Setup { _directory: directory, store, runs }
}

/// Starts a run and waits until its agent is free again; returns the run's events.
async fn run_to_its_end(setup: &Setup) -> (Uuid, Vec<AgentEvent>) {
    let agent = setup.store.create_agent(NewAgent::default()).await.unwrap();
    let run_id = Uuid::now_v7();
    setup
        .runs
        .start(&agent, run_id, Vec::new(), Turn::User("hello".into()), RunOptions::default())
        .unwrap();
    common::wait_until("the run to let go of its agent", || async {
        setup.runs.active_run(agent.id).is_none().then_some(())
    })
    .await;
    let events = common::wait_until("the run's end in the log", || async {
        let events = setup.store.read_events(agent.id, 0, 1000).await.unwrap();
        events.iter().any(|event| event.kind.is_run_end()).then_some(events)
    })
    .await;
    (agent.id, events)
}

/// The error a run that ended `run_failed` reported (its `error` event's content).
fn failed_with(events: &[AgentEvent]) -> serde_json::Value {
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunFailed, "{events:#?}");
    common::first_of(events, EventKind::Error).content.clone()
}

#[tokio::test]
async fn a_run_whose_provider_panics_ends_failed_and_frees_its_agent() {
    let setup = setup(End::Panic).await;
    let (agent_id, events) = run_to_its_end(&setup).await;
    let error = failed_with(&events);
    assert_eq!(error["type"], "internal_error");
    assert!(
        error["message"].as_str().unwrap().contains("the provider's parser hit a bug"),
        "{error}"
    );
    // The agent takes the next run.
    let agent = setup.store.get_agent(agent_id).await.unwrap().unwrap();
    setup
        .runs
        .start(
            &agent,
            Uuid::now_v7(),
            Vec::new(),
            Turn::User("again".into()),
            RunOptions::default(),
        )
        .expect("the agent is free");
}

#[tokio::test]
async fn a_stream_that_ends_without_its_stop_is_a_failure_not_a_reply() {
    let setup = setup(End::Vanish).await;
    let (_, events) = run_to_its_end(&setup).await;
    let error = failed_with(&events);
    assert_eq!(error["type"], "connection_error", "{error}");
}
