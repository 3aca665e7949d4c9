//! The fuzzer's bytes as an agent's log, for the targets that map logs (a module of each, not a
//! target of its own).

use app::AgentEvent;

/// The lines of `data` that parse as events, their seqs renumbered 1, 2, 3… to form a log.
pub fn log_of(data: &[u8]) -> Vec<AgentEvent> {
    let text = String::from_utf8_lossy(data);
    let mut events: Vec<AgentEvent> =
        text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    for (index, event) in events.iter_mut().enumerate() {
        event.seq = index as u64 + 1;
    }
    events
}
