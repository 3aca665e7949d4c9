//! Tails on their own (which seqs a read gets, what a bound drops) and beside the store (a page
//! from a tail is the page the store gives).

use std::sync::Arc;

use app::{AgentEvent, EventKind};
use serde_json::json;

use super::*;
use crate::delivery::hub::{Batch, Hub};
use crate::delivery::writer::Writer;
use crate::store::sqlite::SqliteStore;
use crate::store::{Agents, EventDraft, NewAgent};

fn batch(agent_id: Uuid, seqs: std::ops::RangeInclusive<u64>, text_bytes: usize) -> EventBatch {
    let events = seqs
        .map(|seq| AgentEvent {
            delta: Some(json!("x".repeat(text_bytes))),
            ..AgentEvent::bare(Uuid::now_v7(), agent_id, seq, EventKind::Text, Value::Null)
        })
        .collect();
    Arc::new(Batch::new(events))
}

fn seqs(events: Option<Vec<EventJson>>) -> Option<Vec<u64>> {
    events.map(|events| events.iter().map(|event| event.seq).collect())
}

/// Which seqs a read gets from batches 1–3, 4–5, 6–9: from the tail's start on, at most
/// `limit`, across batches; nothing (read the store) before the start or at the end.
#[test]
fn a_read_gets_the_seqs_after_its_cursor_as_far_as_the_tail_reaches() {
    let tails = LogTails::default();
    let agent = Uuid::now_v7();
    for (first, last) in [(1, 3), (4, 5), (6, 9)] {
        tails.committed(agent, batch(agent, first..=last, 4));
    }
    let cases: [(u64, u32, Option<Vec<u64>>); 7] = [
        (0, 100, Some((1..=9).collect())),
        (0, 2, Some(vec![1, 2])),
        (2, 3, Some(vec![3, 4, 5])),
        (4, 100, Some(vec![5, 6, 7, 8, 9])),
        (8, 1, Some(vec![9])),
        (9, 10, None),
        (12, 10, None),
    ];
    for (after, limit, expected) in cases {
        assert_eq!(seqs(tails.read(agent, after, limit)), expected, "after {after}, limit {limit}");
    }
    assert_eq!(seqs(tails.read(Uuid::now_v7(), 0, 10)), None, "another agent");
}

/// A batch that does not follow the tail starts it over; one it holds already changes nothing;
/// one that overlaps its end starts it over at the batch.
#[test]
fn a_batch_that_does_not_follow_starts_the_tail_over() {
    let tails = LogTails::default();
    let agent = Uuid::now_v7();
    tails.committed(agent, batch(agent, 1..=3, 4));
    tails.committed(agent, batch(agent, 2..=3, 4));
    assert_eq!(seqs(tails.read(agent, 0, 10)), Some(vec![1, 2, 3]), "held already");
    tails.committed(agent, batch(agent, 6..=7, 4));
    assert_eq!(seqs(tails.read(agent, 0, 10)), None, "seqs 1–5 left the tail");
    assert_eq!(seqs(tails.read(agent, 5, 10)), Some(vec![6, 7]));
    tails.committed(agent, batch(agent, 7..=8, 4));
    assert_eq!(seqs(tails.read(agent, 5, 10)), None);
    assert_eq!(seqs(tails.read(agent, 6, 10)), Some(vec![7, 8]));
}

/// One agent's tail keeps its newest batches within its bound; all tails together keep the
/// most recently used agents within theirs; a forgotten tail is gone and its bytes freed.
#[test]
fn bounds_drop_the_oldest_batches_and_the_least_recent_agents() {
    let tails = LogTails::default();
    let agent = Uuid::now_v7();
    // About 1 MiB a batch (64 events of ~8 KiB counted twice).
    let per_batch = 64;
    for index in 0..40u64 {
        let first = index * per_batch + 1;
        tails.committed(agent, batch(agent, first..=first + per_batch - 1, 8 * 1024));
    }
    let (_, bytes) = tails.held();
    assert!(bytes <= LOG_TAIL_BYTES_MAX, "{bytes} bytes held");
    assert_eq!(seqs(tails.read(agent, 0, 10)), None, "the oldest batches were dropped");
    let newest = 40 * per_batch;
    assert_eq!(seqs(tails.read(agent, newest - 1, 10)), Some(vec![newest]));

    // Nine more agents of ~16 MiB each pass the bound in all: the least recent go first.
    let others: Vec<Uuid> = (0..9).map(|_| Uuid::now_v7()).collect();
    for other in &others {
        for index in 0..16u64 {
            let first = index * per_batch + 1;
            tails.committed(*other, batch(*other, first..=first + per_batch - 1, 8 * 1024));
        }
    }
    let (held, bytes) = tails.held();
    assert!(bytes <= LOG_TAILS_BYTES_MAX, "{bytes} bytes in {held} tails");
    assert_eq!(seqs(tails.read(agent, newest - 1, 10)), None, "the least recent agent went");
    let last = *others.last().unwrap();
    assert!(tails.read(last, 16 * per_batch - 1, 10).is_some(), "the newest stays");

    tails.forget(last);
    assert!(tails.read(last, 16 * per_batch - 1, 10).is_none());
    let (_, after_forget) = tails.held();
    assert!(after_forget < bytes, "forgetting freed nothing: {after_forget} of {bytes}");
}

/// Through the real writer and hub: every page a catch-up reads with the tail is the page the
/// store gives, also when the tail starts mid-log (the server restarted: the store has older
/// events) and when the log holds a commit the hub never saw.
#[tokio::test]
async fn a_page_from_the_tail_is_the_page_the_store_gives() {
    let (_directory, store) = SqliteStore::temporary().await;
    let store = Arc::new(store);
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let drafts = |count: usize| {
        (0..count)
            .map(|index| {
                let mut draft = EventDraft::new(EventKind::Text);
                draft.delta = Some(json!(format!("token {index} ")));
                draft
            })
            .collect::<Vec<_>>()
    };
    // Seqs 1–30 before this server's hub existed; 31–130 through it; 131–140 behind its back.
    store.append(&[crate::store::AppendBatch::new(agent.id, drafts(30))]).await.unwrap();
    let hub = Arc::new(Hub::new(8));
    let writer = Writer::spawn(store.clone(), hub.clone());
    for _ in 0..10 {
        writer.append(agent.id, drafts(10)).await.unwrap();
    }
    store.append(&[crate::store::AppendBatch::new(agent.id, drafts(10))]).await.unwrap();
    assert_eq!(seqs(hub.tails().read(agent.id, 30, 1)), Some(vec![31]), "no room, still a tail");
    for (after, limit) in [(0, 500), (25, 10), (30, 7), (33, 100), (125, 10), (129, 3), (140, 5)] {
        let from_tail = read_json(store.as_ref(), hub.tails(), agent.id, after, limit).await;
        let from_store = store.read_events_json(agent.id, after, limit).await;
        assert_eq!(from_tail.unwrap(), from_store.unwrap(), "after {after}, limit {limit}");
    }
    hub.close(agent.id);
    assert_eq!(hub.tails().held(), (0, 0), "a deleted log's tail stays");
}
