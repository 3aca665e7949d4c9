//! Arbitrary event sequences (JSON lines of `AgentEvent`, seqs renumbered to be a log) through
//! the AI SDK, AG-UI and Responses mappings, as a run's feed gives them (the events of the first run that
//! starts), and through their history views (the fold of the whole log). Nothing may panic;
//! each stream keeps its protocol's ordering rules (`verify`) and its tags only go up.
#![no_main]

use agentstream_server::surfaces::ag_ui::mapping::EventMapper;
use agentstream_server::surfaces::ai_sdk::mapping::ChunkMapper;
use agentstream_server::surfaces::responses::mapping::ResponseMapper;
use agentstream_server::surfaces::{ag_ui, ai_sdk, responses};
use app::{AgentEvent, EventKind};
use libfuzzer_sys::fuzz_target;

mod event_log;

fuzz_target!(|data: &[u8]| {
    let events = event_log::log_of(data);
    let run = events
        .iter()
        .find(|event| event.kind == EventKind::RunStarted)
        .and_then(|event| event.run_id);
    let of_run: Vec<&AgentEvent> =
        events.iter().filter(|event| run.is_some() && event.run_id == run).collect();

    let mut chunks = ChunkMapper::new();
    let tagged: Vec<_> = of_run.iter().flat_map(|event| chunks.push(event)).collect();
    assert!(tagged.windows(2).all(|pair| pair[0].0 <= pair[1].0), "tags went back");
    let stream: Vec<_> = tagged.into_iter().map(|(_, chunk)| chunk).collect();
    if let Err(broken) = ai_sdk::verify::verify(&stream, chunks.ended()) {
        panic!("AI SDK stream: {broken}");
    }

    let mut mapper = EventMapper::new("thread".into(), "run".into());
    let tagged: Vec<_> = of_run.iter().flat_map(|event| mapper.push(event)).collect();
    assert!(tagged.windows(2).all(|pair| pair[0].0 <= pair[1].0), "tags went back");
    let stream: Vec<_> = tagged.into_iter().map(|(_, event)| event).collect();
    if let Err(broken) = ag_ui::verify::verify(&stream, mapper.ended()) {
        panic!("AG-UI stream: {broken}");
    }

    let mut mapper = ResponseMapper::new();
    let stream: Vec<_> = of_run.iter().flat_map(|event| mapper.push(event)).collect();
    if let Err(broken) = responses::verify::check(&stream, mapper.ended()) {
        panic!("Responses stream: {broken}");
    }

    let mut timeline = app::timeline::Timeline::new();
    timeline.apply_all(events.iter().cloned());
    if let Some(first) = events.first() {
        let _ = ai_sdk::history::ui_messages(first.agent_id, &timeline);
    }
    let _ = ag_ui::history::snapshot(&timeline);
});
