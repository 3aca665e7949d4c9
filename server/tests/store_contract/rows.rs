//! How each store keeps rows: runs of appends in shared rows, an append's messages in one row.

use super::streamed::streamed_groups;
use super::*;

/// The log's rows once the store moved its newest rows (`recent`) into it, which it does when
/// appends pause.
pub(super) async fn sqlite_rows(store: &SqliteStore) -> i64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let recent: i64 = sqlx::query_scalar("SELECT count(*) FROM recent")
            .fetch_one(store.pool())
            .await
            .unwrap();
        if recent == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{recent} rows never left recent");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    sqlx::query_scalar(COUNT_ROWS).fetch_one(store.pool()).await.unwrap()
}

async fn postgres_rows(store: &PgStore) -> i64 {
    sqlx::query_scalar(COUNT_ROWS).fetch_one(store.pool()).await.unwrap()
}

/// Writes the plain stream (`streamed_groups(_, false)`) for two new agents; the events written.
pub(super) async fn write_plain_stream(store: &dyn Store) -> usize {
    let agents = [
        store.create_agent(NewAgent::default()).await.unwrap().id,
        store.create_agent(NewAgent::default()).await.unwrap().id,
    ];
    let mut events = 0;
    for group in streamed_groups(agents, false) {
        events += store.append(&group).await.unwrap().iter().map(Vec::len).sum::<usize>();
    }
    events
}

/// ~7 bytes of text and varints per token, rows of at most 640: ~90 tokens a row.
fn assert_shared_rows(rows: i64, events: usize) {
    assert!(rows > 0 && (rows as usize) * 40 < events, "{rows} rows for {events} events");
}

/// Both stores keep a streamed log in few rows: runs of appends share one.
#[tokio::test]
async fn sqlite_keeps_runs_of_appends_in_shared_rows() {
    let (_directory, store) = new_sqlite().await;
    let events = write_plain_stream(&store).await;
    assert_shared_rows(sqlite_rows(&store).await, events);
}

#[tokio::test]
async fn postgres_keeps_runs_of_appends_in_shared_rows() {
    let store = new_postgres().await;
    let events = write_plain_stream(&store).await;
    assert_shared_rows(postgres_rows(&store).await, events);
}

/// Three appends of 64 stream messages each to a new log (ids chained as the writer chains
/// them); the events the store says it wrote.
pub(super) async fn write_three_appends_of_messages(store: &dyn Store) -> usize {
    let log = store.create_agent(NewAgent::default()).await.unwrap().id;
    let mut chains = IdChains::default();
    let mut events = 0;
    for append in 0..3 {
        let block = Uuid::now_v7();
        let drafts = (0..64)
            .map(|k| {
                let mut draft = EventDraft::new(EventKind::StreamMessage);
                draft.block_id = Some(block);
                // A stream message's content is its JSON text.
                draft.content =
                    json!(json!({"append": append, "k": k, "text": "a token"}).to_string());
                draft
            })
            .collect();
        let mut batch = batch(log, drafts);
        chains.assign(&mut batch);
        events += store.append(&[batch]).await.unwrap()[0].len();
    }
    let read = store.read_events(log, 100, 1_000).await.unwrap();
    assert_eq!(read.len(), 92, "read from inside a row");
    assert_eq!(read[0].content, json!(r#"{"append":1,"k":36,"text":"a token"}"#));
    events
}

/// Both stores keep one append's messages in one row.
#[tokio::test]
async fn sqlite_keeps_an_appends_messages_in_one_row() {
    let (_directory, store) = new_sqlite().await;
    let events = write_three_appends_of_messages(&store).await;
    assert_eq!((sqlite_rows(&store).await, events), (3, 192));
}

#[tokio::test]
async fn postgres_keeps_an_appends_messages_in_one_row() {
    let store = new_postgres().await;
    let events = write_three_appends_of_messages(&store).await;
    assert_eq!((postgres_rows(&store).await, events), (3, 192));
}
