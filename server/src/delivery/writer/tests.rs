//! The writer against a real SQLite store: ordering, refusals, lost commit answers.

use super::*;
use crate::store::sqlite::SqliteStore;
use crate::store::{Agents, NewAgent};
use app::EventKind;

#[tokio::test]
async fn a_published_event_is_already_in_the_store() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("w.db").display());
    let store = Arc::new(SqliteStore::open(&url).await.unwrap());
    let hub = Arc::new(Hub::new(1024));
    let writer = Writer::spawn(store.clone(), hub.clone());
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let mut live = hub.subscribe(agent.id);

    let mut receipts = Vec::new();
    for _ in 0..200 {
        let receipt = writer
            .submit(agent.id, vec![EventDraft::new(EventKind::Text)])
            .await
            .unwrap();
        receipts.push(receipt);
    }
    let mut seen = 0;
    while seen < 200 {
        let batch = live.recv().await.unwrap();
        let last = batch.last().unwrap().seq;
        // Read the store the moment the batch is seen: it must be there already.
        let stored = store.read_events(agent.id, last - 1, 1).await.unwrap();
        assert_eq!(
            stored.len(),
            1,
            "seq {last} was published before it was committed"
        );
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
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("w.db").display());
    let store = Arc::new(SqliteStore::open(&url).await.unwrap());
    let hub = Arc::new(Hub::new(16));
    let writer = Writer::spawn(store.clone(), hub);
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let good = writer
        .submit(agent.id, vec![EventDraft::new(EventKind::Text)])
        .await
        .unwrap();
    let bad = writer
        .submit(Uuid::new_v4(), vec![EventDraft::new(EventKind::Text)])
        .await
        .unwrap();
    let also_good = writer
        .submit(agent.id, vec![EventDraft::new(EventKind::Text)])
        .await
        .unwrap();
    assert!(matches!(
        wait(bad).await,
        Err(AppendError::Store(StoreError::UnknownAgent(_)))
    ));
    assert_eq!(wait(good).await.unwrap()[0].seq, 1);
    assert_eq!(wait(also_good).await.unwrap()[0].seq, 2);
}

/// SQLite whose next `lose` appends commit and then report a transient failure, as a
/// connection that breaks after COMMIT does.
struct LosesAnswers {
    inner: SqliteStore,
    lose: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl EventLog for LosesAnswers {
    async fn head_seq(&self, id: Uuid) -> Result<Option<u64>, StoreError> {
        self.inner.head_seq(id).await
    }
    async fn read_events(
        &self,
        id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.read_events(id, since, limit).await
    }
    async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.run_outline(run_id).await
    }
    async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.unfinished_runs().await
    }
    async fn producer_position(
        &self,
        agent_id: Uuid,
        producer_id: &str,
    ) -> Result<Option<crate::store::ProducerPosition>, StoreError> {
        self.inner.producer_position(agent_id, producer_id).await
    }
    async fn waiting_call(&self, agent_id: Uuid) -> Result<Option<String>, StoreError> {
        self.inner.waiting_call(agent_id).await
    }
    async fn due_approvals(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        server_timeout_ms: Option<u64>,
        timeout_ms_max: u64,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<(crate::store::OpenApproval, u64)>, StoreError> {
        self.inner
            .due_approvals(now, server_timeout_ms, timeout_ms_max, limit, offset)
            .await
    }
    async fn open_approvals(
        &self,
        limit: u32,
    ) -> Result<Vec<crate::store::OpenApproval>, StoreError> {
        self.inner.open_approvals(limit).await
    }
    async fn events_by_id(&self, ids: &[Uuid]) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.events_by_id(ids).await
    }
    async fn append(&self, batches: &[AppendBatch]) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
        let committed = self.inner.append(batches).await?;
        let left = self.lose.load(std::sync::atomic::Ordering::Relaxed);
        if left > 0 {
            self.lose
                .store(left - 1, std::sync::atomic::Ordering::Relaxed);
            return Err(StoreError::Unavailable(
                "the answer to COMMIT was lost".into(),
            ));
        }
        Ok(committed)
    }
}

#[tokio::test]
async fn a_commit_whose_answer_was_lost_is_not_written_twice() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("w.db").display());
    let store = Arc::new(LosesAnswers {
        inner: SqliteStore::open(&url).await.unwrap(),
        lose: std::sync::atomic::AtomicU32::new(0),
    });
    let hub = Arc::new(Hub::new(16));
    let writer = Writer::spawn(store.clone(), hub.clone());
    let agent = store.inner.create_agent(NewAgent::default()).await.unwrap();
    let mut live = hub.subscribe(agent.id);
    writer
        .append(agent.id, vec![EventDraft::new(EventKind::Text)])
        .await
        .unwrap();

    store.lose.store(1, std::sync::atomic::Ordering::Relaxed);
    let drafts = vec![
        EventDraft::new(EventKind::Text),
        EventDraft::new(EventKind::Text),
    ];
    let ids: Vec<Uuid> = drafts.iter().map(|draft| draft.id).collect();
    let events = writer
        .append(agent.id, drafts)
        .await
        .expect("the committed events are the answer");
    assert_eq!(
        events
            .iter()
            .map(|event| (event.id, event.seq))
            .collect::<Vec<_>>(),
        vec![(ids[0], 2), (ids[1], 3)]
    );
    // In the log once, published once, and the next append follows on.
    assert_eq!(store.head_seq(agent.id).await.unwrap(), Some(3));
    writer
        .append(agent.id, vec![EventDraft::new(EventKind::Text)])
        .await
        .unwrap();
    let log = store.read_events(agent.id, 0, 10).await.unwrap();
    assert_eq!(
        log.iter().map(|event| event.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    let mut published = Vec::new();
    while published.len() < 4 {
        published.extend(live.recv().await.unwrap().iter().map(|event| event.seq));
    }
    assert_eq!(published, vec![1, 2, 3, 4]);
}

/// A barrier answers once what was queued before it is committed: a read after it sees it.
#[tokio::test]
async fn a_barrier_waits_for_what_was_queued_before_it() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("w.db").display());
    let store = Arc::new(SqliteStore::open(&url).await.unwrap());
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
