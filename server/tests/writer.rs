//! The writer against a store whose commit answers get lost: what committed is the answer, and
//! nothing is written twice.

use crate::common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use agentstream_server::delivery::hub::Hub;
use agentstream_server::delivery::writer::Writer;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{Agents, AppendBatch, EventDraft, EventLog, NewAgent, StoreError};
use app::EventKind;
use common::hooked_store::{HookedStore, Hooks};
use uuid::Uuid;

/// The next `.0` appends commit and then report a transient failure, as a connection that
/// breaks after COMMIT does.
struct LosesAnswers(AtomicU32);

impl Hooks for Arc<LosesAnswers> {
    fn after_commit(&self, _batches: &[AppendBatch]) -> Result<(), StoreError> {
        let left = self.0.load(Ordering::Relaxed);
        if left > 0 {
            self.0.store(left - 1, Ordering::Relaxed);
            return Err(StoreError::Unavailable("the answer to COMMIT was lost".into()));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_commit_whose_answer_was_lost_is_not_written_twice() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("w.db").display());
    let lose = Arc::new(LosesAnswers(AtomicU32::new(0)));
    let store = Arc::new(HookedStore {
        inner: SqliteStore::open(&url).await.unwrap(),
        hooks: lose.clone(),
    });
    let hub = Arc::new(Hub::new(16));
    let writer = Writer::spawn(store.clone(), hub.clone());
    let agent = store.inner.create_agent(NewAgent::default()).await.unwrap();
    let mut live = hub.subscribe(agent.id);
    writer.append(agent.id, vec![EventDraft::new(EventKind::Text)]).await.unwrap();

    lose.0.store(1, Ordering::Relaxed);
    let drafts = vec![EventDraft::new(EventKind::Text), EventDraft::new(EventKind::Text)];
    let ids: Vec<Uuid> = drafts.iter().map(|draft| draft.id).collect();
    let events =
        writer.append(agent.id, drafts).await.expect("the committed events are the answer");
    assert_eq!(
        events.iter().map(|event| (event.id, event.seq)).collect::<Vec<_>>(),
        vec![(ids[0], 2), (ids[1], 3)]
    );
    // In the log once, published once, and the next append follows on.
    assert_eq!(store.head_seq(agent.id).await.unwrap(), Some(3));
    writer.append(agent.id, vec![EventDraft::new(EventKind::Text)]).await.unwrap();
    let log = store.read_events(agent.id, 0, 10).await.unwrap();
    assert_eq!(log.iter().map(|event| event.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    let mut published = Vec::new();
    while published.len() < 4 {
        published.extend(live.recv().await.unwrap().iter().map(|event| event.seq));
    }
    assert_eq!(published, vec![1, 2, 3, 4]);
}
