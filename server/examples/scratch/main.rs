use agentstream_server::delivery::hub::Hub;
use agentstream_server::delivery::writer::Writer;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{Agents, EventDraft, EventLog, NewAgent, Store};
use app::{DeltaAction, EventKind};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let _ = std::fs::remove_file("/tmp/res/s.db");
    let store = Arc::new(SqliteStore::open("sqlite:///tmp/res/s.db").await.unwrap());
    let hub = Arc::new(Hub::new(64));
    let writer = Writer::spawn(store.clone(), hub.clone());
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let run = uuid::Uuid::now_v7();
    let message = uuid::Uuid::now_v7();
    for chunk in 0..100 {
        let drafts: Vec<EventDraft> = (0..100)
            .map(|i| {
                let mut d = EventDraft::new(EventKind::Text);
                d.run_id = Some(run);
                d.message_id = Some(message);
                d.block_id = Some(message);
                d.delta = Some(serde_json::Value::String(format!("tok{chunk}-{i} ")));
                d.delta_action = Some(DeltaAction::Append);
                d
            })
            .collect();
        writer.append(agent.id, drafts).await.unwrap();
    }
    for round in 0..5 {
        let t = Instant::now();
        let mut since = 0;
        let mut bytes = 0;
        loop {
            let page = store.read_events_json(agent.id, since, 500).await.unwrap();
            if page.is_empty() {
                break;
            }
            since = page.last().unwrap().seq;
            bytes += page.iter().map(|e| e.json.len()).sum::<usize>();
        }
        let read = t.elapsed();
        let t = Instant::now();
        let mut since = 0;
        loop {
            let page = store.read_events(agent.id, since, 500).await.unwrap();
            if page.is_empty() {
                break;
            }
            since = page.last().unwrap().seq;
        }
        let t2 = Instant::now();
        let all = store.read_events(agent.id, 0, 10000).await.unwrap();
        let t3 = Instant::now();
        let js: Vec<_> = all.iter().map(agentstream_server::store::EventJson::of).collect();
        let ser = t3.elapsed();
        let t4 = Instant::now();
        let c: Vec<_> = all.iter().cloned().collect();
        println!(
            "one read {:.2} ms, serialize {:.2} ms, clone {:.2} ms {}",
            (t3 - t2).as_secs_f64() * 1e3,
            ser.as_secs_f64() * 1e3,
            t4.elapsed().as_secs_f64() * 1e3,
            js.len() + c.len()
        );
        println!(
            "round {round}: json {:.2} ms ({bytes} B), values {:.2} ms",
            read.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
