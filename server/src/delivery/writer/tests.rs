//! The writer against a real SQLite store: ordering, refusals, lost commit answers.

use super::committer::Committer;
use super::*;
use crate::metrics::Metrics;
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

/// A writer that counts (its groups sent ahead among the rest), on a fresh SQLite store.
async fn counting_writer() -> (tempfile::TempDir, Arc<SqliteStore>, Writer) {
    let (directory, store) = SqliteStore::temporary().await;
    let store = Arc::new(store);
    let metrics = Arc::new(Metrics::new());
    let hub = Arc::new(Hub::new(4096));
    let writer = Writer::spawn_observed(store.clone(), hub, 3, metrics);
    (directory, store, writer)
}

fn text_of_run(run_id: Option<Uuid>) -> Vec<EventDraft> {
    vec![EventDraft { run_id, ..EventDraft::new(EventKind::Text) }]
}

/// Groups go to the store while the group before them commits. One that fails (a request for an
/// agent that does not exist is in it) stops the group sent behind it, which is sent again after
/// the failed one was dealt with: every good request commits, and each agent's seqs follow the
/// order the requests were submitted in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_sent_ahead_never_overtakes_a_failed_one() {
    let (_directory, store, writer) = counting_writer().await;
    // Submitters that each send a few requests without waiting, then wait for them all: their
    // requests straddle groups, a group sent ahead among them.
    let mut submitters = Vec::new();
    for submitter in 0..12u64 {
        let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
        let writer = writer.clone();
        submitters.push(tokio::spawn(async move {
            let gone = Uuid::new_v4();
            let mut next_seq = 1;
            for round in 0..80u64 {
                let mut receipts = Vec::new();
                for index in 0..4u64 {
                    // Rare: a failure in the middle of a steady load.
                    let bad = index == 2 && (round * 12 + submitter) % 97 == 0;
                    let agent_id = if bad { gone } else { agent };
                    receipts.push((bad, writer.submit(agent_id, text_of_run(None)).await.unwrap()));
                }
                for (bad, receipt) in receipts {
                    match (bad, wait(receipt).await) {
                        (false, Ok(events)) => {
                            assert_eq!(
                                events[0].seq, next_seq,
                                "submitter {submitter} out of order"
                            );
                            next_seq += 1;
                        }
                        (true, Err(AppendError::Store(StoreError::UnknownAgent(_)))) => {}
                        (bad, outcome) => panic!("submitter {submitter}, bad {bad}: {outcome:?}"),
                    }
                }
            }
            (agent, next_seq - 1)
        }));
    }
    for submitter in submitters {
        let (agent, last_seq) = submitter.await.unwrap();
        assert_eq!(store.head_seq(agent).await.unwrap(), Some(last_seq));
    }
    let metrics = writer.metrics();
    let failed = (0..80u64 * 12).filter(|at| at % 97 == 0).count() as u64;
    let (ahead, again) = (metrics.groups_sent_ahead.get(), metrics.groups_sent_again.get());
    assert!(ahead > 0, "no group was sent ahead");
    // Each failed group stops the one group sent behind it; the one after goes ahead again.
    assert!(again > 0 && again <= failed, "{again} groups sent again after {failed} failures");
    // Once nothing fails, groups go ahead, and none is sent twice.
    let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
    let mut loops = Vec::new();
    for _ in 0..12 {
        let writer = writer.clone();
        loops.push(tokio::spawn(async move {
            for _ in 0..100 {
                writer.append(agent, text_of_run(None)).await.unwrap();
            }
        }));
    }
    for one in loops {
        one.await.unwrap();
    }
    assert!(metrics.groups_sent_ahead.get() > ahead, "no group went ahead after the failures");
    assert_eq!(
        metrics.groups_sent_again.get(),
        again,
        "groups were sent twice with nothing failing"
    );
}

/// A request, and the receipt of its answer.
fn request(agent_id: Uuid, run_id: Option<Uuid>) -> (WriteRequest, AppendReceipt) {
    let (reply, receipt) = oneshot::channel();
    let batch = AppendBatch::new(agent_id, text_of_run(run_id));
    (WriteRequest { batch, continues_run: true, reply }, receipt)
}

/// A run's event refused in one group, and its next event in the group sent ahead behind it:
/// that group comes back not tried, and the run's event is then refused as behind a hole (had the
/// group been tried, it would have committed: its log exists), while its other request commits.
#[tokio::test]
async fn a_run_refused_in_a_group_sent_ahead_keeps_its_hole() {
    let (_directory, store) = SqliteStore::temporary().await;
    let store = Arc::new(store);
    let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
    let metrics = Arc::new(Metrics::new());
    let observed = Observed::new(metrics.clone(), true);
    let mut committer = Committer::new(store.clone(), Arc::new(Hub::new(64)), 3, observed);
    let (sender, mut receiver) = mpsc::channel(4);
    let run = Some(Uuid::new_v4());

    let (first, first_answer) = request(Uuid::new_v4(), run);
    let group = committer.take(first, &mut receiver);
    let flight = committer.send(group, None).await;
    assert!(flight.is_some(), "the first group was committed instead of sent");

    let (later, later_answer) = request(agent, run);
    let (other, other_answer) = request(agent, None);
    sender.send(other).await.unwrap();
    let group = committer.take(later, &mut receiver);
    let flight = committer.send(group, flight).await;
    assert!(flight.is_none(), "the group behind a failed one was left in flight");

    assert!(matches!(
        wait(first_answer).await,
        Err(AppendError::Store(StoreError::UnknownAgent(_)))
    ));
    match wait(later_answer).await {
        Err(AppendError::Store(StoreError::Unavailable(message))) => {
            assert!(message.contains("earlier event of this run"), "{message}")
        }
        outcome => panic!("the run went on past its hole: {outcome:?}"),
    }
    assert_eq!(wait(other_answer).await.unwrap()[0].seq, 1);
    assert_eq!(store.head_seq(agent).await.unwrap(), Some(1));
    assert_eq!((metrics.groups_sent_ahead.get(), metrics.groups_sent_again.get()), (1, 1));
}
