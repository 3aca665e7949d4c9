//! The writer against a real SQLite store: ordering, refusals, lost commit answers.

use super::*;
use crate::store::sqlite::SqliteStore;
use crate::store::{Agents, NewAgent};
use app::EventKind;

#[tokio::test]
async fn a_published_event_is_already_in_the_store() {
    let (_directory, store) = SqliteStore::temporary().await;
    let store = Arc::new(store);
    let hub = Arc::new(Hub::new(1024));
    let writer = Writer::spawn(store.clone(), hub.clone());
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let mut live = hub.subscribe(agent.id);

    let mut receipts = Vec::new();
    for _ in 0..200 {
        let receipt =
            writer.submit(agent.id, vec![EventDraft::new(EventKind::Text)]).await.unwrap();
        receipts.push(receipt);
    }
    let mut seen = 0;
    while seen < 200 {
        let batch = live.recv().await.unwrap();
        let last = batch.last().unwrap().seq;
        // Read the store the moment the batch is seen: it must be there already.
        let stored = store.read_events(agent.id, last - 1, 1).await.unwrap();
        assert_eq!(stored.len(), 1, "seq {last} was published before it was committed");
        for event in batch.iter() {
            seen += 1;
            assert_eq!(event.seq, seen as u64);
        }
    }
    for (index, receipt) in receipts.into_iter().enumerate() {
        let events = wait(receipt).await.unwrap();
        assert_eq!(events[0].seq, index as u64 + 1);
    }
}

#[tokio::test]
async fn a_bad_request_does_not_fail_its_neighbours() {
    let (_directory, store) = SqliteStore::temporary().await;
    let store = Arc::new(store);
    let hub = Arc::new(Hub::new(16));
    let writer = Writer::spawn(store.clone(), hub);
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let good = writer.submit(agent.id, vec![EventDraft::new(EventKind::Text)]).await.unwrap();
    let bad = writer.submit(Uuid::new_v4(), vec![EventDraft::new(EventKind::Text)]).await.unwrap();
    let also_good = writer.submit(agent.id, vec![EventDraft::new(EventKind::Text)]).await.unwrap();
    assert!(matches!(wait(bad).await, Err(AppendError::Store(StoreError::UnknownAgent(_)))));
    assert_eq!(wait(good).await.unwrap()[0].seq, 1);
    assert_eq!(wait(also_good).await.unwrap()[0].seq, 2);
}

/// A barrier answers once what was queued before it is committed: a read after it sees it.
#[tokio::test]
async fn a_barrier_waits_for_what_was_queued_before_it() {
    let (_directory, store) = SqliteStore::temporary().await;
    let store = Arc::new(store);
    let writer = Writer::spawn(store.clone(), Arc::new(Hub::new(64)));
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    for _ in 0..50 {
        let drafts = (0..10).map(|_| EventDraft::new(EventKind::Text)).collect();
        // Submitted, not waited for: the receipts are dropped.
        drop(writer.submit(agent.id, drafts).await.unwrap());
    }
    writer.barrier().await.unwrap();
    assert_eq!(store.head_seq(agent.id).await.unwrap(), Some(500));
}
