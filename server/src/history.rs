//! The server's [`HistorySource`] for the pages: reads an agent's log from the store and folds it
//! with the shared timeline reducer.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use app::history::{AgentHistory, HistorySource};
use app::timeline::Timeline;
use app::EventKind;
use futures::future::BoxFuture;
use serde_json::Value;
use uuid::Uuid;

use crate::agent::TOOL_RESULT_CHARS_MAX;
use crate::provider::{ConversationMessage, ToolCall};
use crate::store::{Store, StoreError};

/// Events read per store page while folding a history page.
const HISTORY_PAGE_EVENTS: u32 = 1000;

pub struct StoreHistory {
    pub store: Arc<dyn Store>,
    pub snapshots: Arc<Snapshots>,
}

/// Agents whose folded timeline is kept in memory, at most (least recently used goes first).
/// Each costs what its folded conversation holds: the messages' merged content, not the deltas.
pub const TIMELINE_SNAPSHOTS_MAX: usize = 256;
/// Logs shorter than this are folded from the start each time; keeping them saves little.
pub const SNAPSHOT_EVENTS_MIN: u64 = 1_000;

/// Folded timelines of recently read logs: a snapshot at seq N is the fold of seqs 1..=N, and
/// as the log is append-only and seqs never change, it stays true; the next fold of the agent
/// starts from it and applies only what came after. The log stays the source of truth: a
/// snapshot is only ever made by folding the log, and is dropped with its agent.
#[derive(Default)]
pub struct Snapshots {
    kept: Mutex<Kept>,
}

/// By agent: the snapshot and when it was last used; then the use counter.
type Kept = (HashMap<Uuid, (Arc<Timeline>, u64)>, u64);

impl Snapshots {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The newest snapshot of the agent's log, if one is kept.
    pub fn get(&self, agent_id: Uuid) -> Option<Arc<Timeline>> {
        let mut kept = self.kept();
        let (map, clock) = &mut *kept;
        *clock += 1;
        let (timeline, used) = map.get_mut(&agent_id)?;
        *used = *clock;
        Some(timeline.clone())
    }

    /// Keeps `timeline` unless a snapshot at least as new is kept already.
    pub fn put(&self, agent_id: Uuid, timeline: Arc<Timeline>) {
        let mut kept = self.kept();
        let (map, clock) = &mut *kept;
        *clock += 1;
        if map
            .get(&agent_id)
            .is_some_and(|(held, _)| held.last_seq() >= timeline.last_seq())
        {
            return;
        }
        if !map.contains_key(&agent_id) && map.len() >= TIMELINE_SNAPSHOTS_MAX {
            let oldest = map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        map.insert(agent_id, (timeline, *clock));
    }

    /// Forgets a deleted agent's snapshot.
    pub fn remove(&self, agent_id: Uuid) {
        self.kept().0.remove(&agent_id);
    }

    /// How many snapshots are kept.
    pub fn len(&self) -> usize {
        self.kept().0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Folds the log of `agent_id` with the shared reducer: from the agent's snapshot when one is
/// kept (only the events after it are read), from the start otherwise; keeps the result as the
/// new snapshot once the log is long enough to be worth it.
pub async fn fold_log(
    store: &dyn Store,
    snapshots: &Snapshots,
    agent_id: Uuid,
) -> Result<Timeline, StoreError> {
    let start = snapshots.get(agent_id);
    let from = start.as_ref().map_or(0, |snapshot| snapshot.last_seq());
    let mut timeline = start
        .map(|snapshot| (*snapshot).clone())
        .unwrap_or_default();
    loop {
        let events = store
            .read_events(agent_id, timeline.last_seq(), HISTORY_PAGE_EVENTS)
            .await?;
        let full_page = events.len() as u32 == HISTORY_PAGE_EVENTS;
        timeline.apply_all(events);
        if !full_page {
            break;
        }
    }
    if timeline.last_seq() >= SNAPSHOT_EVENTS_MIN && timeline.last_seq() > from {
        let timeline = Arc::new(timeline);
        snapshots.put(agent_id, timeline.clone());
        return Ok(Arc::unwrap_or_clone(timeline));
    }
    Ok(timeline)
}

impl HistorySource for StoreHistory {
    fn load(&self, agent_id: Uuid) -> BoxFuture<'static, Result<Option<AgentHistory>, String>> {
        let store = self.store.clone();
        let snapshots = self.snapshots.clone();
        Box::pin(async move {
            let failed = |error: StoreError| {
                tracing::error!(%agent_id, %error, "history could not be read");
                "the server failed to read this history".to_owned()
            };
            let Some(agent) = store.get_agent(agent_id).await.map_err(failed)? else {
                return Ok(None);
            };
            let timeline = fold_log(store.as_ref(), &snapshots, agent_id)
                .await
                .map_err(failed)?;
            Ok(Some(AgentHistory { agent, timeline }))
        })
    }
}

/// Tool results carried into the next turn at most; older ones are dropped first. Keeps a long
/// tool-heavy conversation from growing the prompt without bound.
pub const HISTORY_TOOL_RESULTS_MAX: usize = 100;

/// The conversation so far, rebuilt from the folded log for the next LLM call.
///
/// Tool calls are paired with their results by `tool_call_id`: a call without a result, a result
/// without a call, a second result for a call, or a call whose stored content is unusable is
/// dropped and reported in the returned warnings instead of failing the run. Results are cut to
/// [`TOOL_RESULT_CHARS_MAX`] characters and at most [`HISTORY_TOOL_RESULTS_MAX`] are kept.
pub fn conversation_from_timeline(timeline: &Timeline) -> (Vec<ConversationMessage>, Vec<String>) {
    let mut warnings = Vec::new();
    // First pass: which calls have (exactly one usable) result.
    let mut result_of: HashMap<String, (String, bool)> = HashMap::new();
    let mut call_ids: HashSet<String> = HashSet::new();
    for message in timeline.messages() {
        match message.kind {
            EventKind::ToolCall => {
                if let Some(id) = message.content.get("tool_call_id").and_then(Value::as_str) {
                    call_ids.insert(id.to_owned());
                }
            }
            EventKind::ToolResult => {
                let Some(id) = message.content.get("tool_call_id").and_then(Value::as_str) else {
                    warnings.push(format!(
                        "a tool result without a call id (seq {})",
                        message.first_seq
                    ));
                    continue;
                };
                let content = match message.content.get("result") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                let content = if content.chars().count() > TOOL_RESULT_CHARS_MAX {
                    content
                        .chars()
                        .take(TOOL_RESULT_CHARS_MAX)
                        .collect::<String>()
                        + " … [cut]"
                } else {
                    content
                };
                let is_error =
                    message.content.get("is_error").and_then(Value::as_bool) == Some(true);
                if result_of.contains_key(id) {
                    warnings.push(format!("a second result for tool call {id} was dropped"));
                } else {
                    result_of.insert(id.to_owned(), (content, is_error));
                }
            }
            _ => {}
        }
    }
    for id in result_of.keys() {
        if !call_ids.contains(id) {
            warnings.push(format!("the result of unknown tool call {id} was dropped"));
        }
    }

    let mut conversation: Vec<ConversationMessage> = Vec::new();
    let mut results_kept = 0usize;
    for message in timeline.messages() {
        match message.kind {
            EventKind::User => conversation.push(ConversationMessage::User {
                text: message.text().to_owned(),
            }),
            EventKind::Text => match conversation.last_mut() {
                Some(ConversationMessage::Assistant { text, tool_calls })
                    if tool_calls.is_empty() =>
                {
                    text.push_str(message.text())
                }
                _ => conversation.push(ConversationMessage::Assistant {
                    text: message.text().to_owned(),
                    tool_calls: Vec::new(),
                }),
            },
            EventKind::ToolCall => {
                let id = message.content.get("tool_call_id").and_then(Value::as_str);
                let name = message.content.get("name").and_then(Value::as_str);
                let (Some(id), Some(name)) = (id, name) else {
                    warnings.push(format!(
                        "an unusable tool call was dropped (seq {})",
                        message.first_seq
                    ));
                    continue;
                };
                if !result_of.contains_key(id) {
                    warnings.push(format!("tool call {id} has no result and was dropped"));
                    continue;
                }
                let input = message
                    .content
                    .get("input")
                    .cloned()
                    .unwrap_or(Value::Object(Default::default()));
                let call = ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    input,
                };
                match conversation.last_mut() {
                    Some(ConversationMessage::Assistant { tool_calls, .. }) => {
                        tool_calls.push(call)
                    }
                    _ => conversation.push(ConversationMessage::Assistant {
                        text: String::new(),
                        tool_calls: vec![call],
                    }),
                }
            }
            EventKind::ToolResult => {
                let Some(id) = message.content.get("tool_call_id").and_then(Value::as_str) else {
                    continue;
                };
                if !call_ids.contains(id) {
                    continue;
                }
                let Some((content, is_error)) = result_of.remove(id) else {
                    continue;
                };
                results_kept += 1;
                conversation.push(ConversationMessage::ToolResult {
                    tool_call_id: id.to_owned(),
                    content,
                    is_error,
                });
            }
            _ => {}
        }
    }
    // Keep the newest results only: drop the oldest steps' calls and results together.
    while results_kept > HISTORY_TOOL_RESULTS_MAX {
        let Some(first_result) = conversation
            .iter()
            .position(|message| matches!(message, ConversationMessage::ToolResult { .. }))
        else {
            break;
        };
        let ConversationMessage::ToolResult { tool_call_id, .. } =
            conversation.remove(first_result)
        else {
            unreachable!("found a tool result at this position");
        };
        for message in &mut conversation {
            if let ConversationMessage::Assistant { tool_calls, .. } = message {
                tool_calls.retain(|call| call.id != tool_call_id);
            }
        }
        results_kept -= 1;
    }
    (conversation, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::AgentEvent;
    use serde_json::json;

    fn event(seq: u64, kind: EventKind, message: u128, content: Value) -> AgentEvent {
        AgentEvent {
            id: Uuid::from_u128(1000 + seq as u128),
            agent_id: Uuid::from_u128(1),
            seq,
            coalesced_from: None,
            run_id: Some(Uuid::from_u128(2)),
            thread_id: None,
            block_id: None,
            message_id: Some(Uuid::from_u128(message)),
            kind,
            delta: None,
            delta_path: None,
            delta_action: None,
            content,
            raw: None,
            metadata: Value::Null,
            created_at: Default::default(),
        }
    }

    #[test]
    fn calls_pair_with_results_and_orphans_are_dropped_with_a_warning() {
        let mut timeline = Timeline::new();
        timeline.apply_all([
            event(1, EventKind::User, 1, json!({"text": "hi"})),
            event(2, EventKind::Text, 2, json!({"text": "Let me check."})),
            event(
                3,
                EventKind::ToolCall,
                3,
                json!({"tool_call_id": "a", "name": "clock", "input": {}}),
            ),
            event(
                4,
                EventKind::ToolCall,
                4,
                json!({"tool_call_id": "b", "name": "clock"}),
            ),
            event(5, EventKind::ToolCall, 5, json!({"garbage": true})),
            event(
                6,
                EventKind::ToolResult,
                6,
                json!({"tool_call_id": "a", "result": "noon"}),
            ),
            event(
                7,
                EventKind::ToolResult,
                7,
                json!({"tool_call_id": "a", "result": "again"}),
            ),
            event(
                8,
                EventKind::ToolResult,
                8,
                json!({"tool_call_id": "zzz", "result": "?"}),
            ),
            event(9, EventKind::Text, 9, json!({"text": "It is noon."})),
        ]);
        let (conversation, warnings) = conversation_from_timeline(&timeline);
        assert_eq!(
            conversation,
            vec![
                ConversationMessage::User { text: "hi".into() },
                ConversationMessage::Assistant {
                    text: "Let me check.".into(),
                    tool_calls: vec![ToolCall {
                        id: "a".into(),
                        name: "clock".into(),
                        input: json!({})
                    }],
                },
                ConversationMessage::ToolResult {
                    tool_call_id: "a".into(),
                    content: "noon".into(),
                    is_error: false,
                },
                ConversationMessage::Assistant {
                    text: "It is noon.".into(),
                    tool_calls: vec![]
                },
            ]
        );
        let warnings = warnings.join("\n");
        assert!(warnings.contains("tool call b has no result"), "{warnings}");
        assert!(warnings.contains("unusable tool call"), "{warnings}");
        assert!(
            warnings.contains("second result for tool call a"),
            "{warnings}"
        );
        assert!(warnings.contains("unknown tool call zzz"), "{warnings}");
    }

    #[test]
    fn results_are_bounded_in_count_and_size() {
        let mut timeline = Timeline::new();
        let mut seq = 0;
        let mut next = || {
            seq += 1;
            seq
        };
        let mut events = vec![event(next(), EventKind::User, 1, json!({"text": "go"}))];
        for call in 0..(HISTORY_TOOL_RESULTS_MAX + 5) {
            let id = format!("c{call}");
            events.push(event(
                next(),
                EventKind::ToolCall,
                10_000 + call as u128,
                json!({"tool_call_id": id, "name": "clock"}),
            ));
            events.push(event(
                next(),
                EventKind::ToolResult,
                20_000 + call as u128,
                json!({"tool_call_id": id, "result": "x".repeat(TOOL_RESULT_CHARS_MAX + 10)}),
            ));
        }
        timeline.apply_all(events);
        let (conversation, _) = conversation_from_timeline(&timeline);
        let results: Vec<_> = conversation
            .iter()
            .filter_map(|message| match message {
                ConversationMessage::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } => Some((tool_call_id, content)),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), HISTORY_TOOL_RESULTS_MAX);
        assert_eq!(results[0].0, "c5", "the oldest results go first");
        assert!(results[0].1.ends_with("[cut]"));
        let calls: usize = conversation
            .iter()
            .map(|message| match message {
                ConversationMessage::Assistant { tool_calls, .. } => tool_calls.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(
            calls, HISTORY_TOOL_RESULTS_MAX,
            "calls and results stay paired"
        );
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{AppendBatch, EventDraft, NewAgent};
    use app::DeltaAction;

    /// `count` text deltas to `message`, each its own word.
    fn deltas(message: Uuid, from: usize, count: usize) -> Vec<EventDraft> {
        (from..from + count)
            .map(|index| {
                let mut draft = EventDraft::new(EventKind::Text);
                draft.message_id = Some(message);
                draft.block_id = Some(message);
                draft.delta = Some(Value::String(format!("w{index} ")));
                draft.delta_path = Some("text".into());
                draft.delta_action = Some(DeltaAction::Append);
                draft
            })
            .collect()
    }

    /// A second fold starts from the snapshot the first one kept and reads only what came after:
    /// with the log's first events gone from the table, a fold from the start fails (the store
    /// finds the hole) while the fold from the snapshot succeeds, and it equals the fold the
    /// first events and the new ones make together.
    #[tokio::test]
    async fn a_fold_starts_from_the_snapshot_and_equals_the_whole_fold() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("s.db").display());
        let store = SqliteStore::open(&url).await.unwrap();
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
        store
            .append(&[AppendBatch {
                agent_id: agent.id,
                drafts: deltas(first, 0, 1_200),
            }])
            .await
            .unwrap();
        let snapshots = Snapshots::default();
        let folded = fold_log(&store, &snapshots, agent.id).await.unwrap();
        assert_eq!(folded.last_seq(), 1_200);
        assert_eq!(snapshots.len(), 1);

        let mut more = deltas(first, 1_200, 30);
        more.extend(deltas(second, 0, 20));
        store
            .append(&[AppendBatch {
                agent_id: agent.id,
                drafts: more,
            }])
            .await
            .unwrap();
        let whole = fold_log(&store, &Snapshots::default(), agent.id)
            .await
            .unwrap();

        sqlx::query("DELETE FROM agent_events WHERE seq <= 600")
            .execute(store.pool())
            .await
            .unwrap();
        assert!(fold_log(&store, &Snapshots::default(), agent.id)
            .await
            .is_err());
        let from_snapshot = fold_log(&store, &snapshots, agent.id).await.unwrap();
        assert_eq!(from_snapshot, whole);
        assert_eq!(from_snapshot.last_seq(), 1_250);
        assert_eq!(snapshots.get(agent.id).unwrap().last_seq(), 1_250);
        let text = from_snapshot.messages()[0].content["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            text.starts_with("w0 w1 ") && text.ends_with("w1228 w1229 "),
            "{text:.40}"
        );
    }

    /// The kept snapshots are bounded; the least recently used goes first, and a snapshot never
    /// goes back to an older fold.
    #[test]
    fn snapshots_are_bounded_and_only_move_forward() {
        let snapshots = Snapshots::default();
        let agents: Vec<Uuid> = (0..=TIMELINE_SNAPSHOTS_MAX as u128)
            .map(Uuid::from_u128)
            .collect();
        let folded = |seq: u64| {
            let mut timeline = Timeline::new();
            for seq in 1..=seq {
                let mut draft = EventDraft::new(EventKind::Text);
                draft.message_id = Some(Uuid::from_u128(7));
                timeline.apply(draft.into_event(Uuid::nil(), seq));
            }
            Arc::new(timeline)
        };
        for &agent in &agents[..TIMELINE_SNAPSHOTS_MAX] {
            snapshots.put(agent, folded(2));
        }
        assert!(snapshots.get(agents[0]).is_some()); // agents[1] is now the least recently used
        snapshots.put(agents[TIMELINE_SNAPSHOTS_MAX], folded(1));
        assert_eq!(snapshots.len(), TIMELINE_SNAPSHOTS_MAX);
        assert!(snapshots.get(agents[1]).is_none());
        assert!(snapshots.get(agents[0]).is_some());

        snapshots.put(agents[0], folded(1));
        assert_eq!(snapshots.get(agents[0]).unwrap().last_seq(), 2);
        snapshots.put(agents[0], folded(3));
        assert_eq!(snapshots.get(agents[0]).unwrap().last_seq(), 3);
        snapshots.remove(agents[0]);
        assert!(snapshots.get(agents[0]).is_none());
    }
}
