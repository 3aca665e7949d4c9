//! Cases over streamed appends read back at every cursor, snapshots, and producers' positions.

use super::*;

/// Groups as a streaming agent writes them, a second agent in the same groups, ids chained as
/// the writer chains them; deterministic. `mixed`: runs of text and thinking appends to two
/// messages (short, long, multi-byte, empty pieces) with tool calls and stream messages between
/// them; else one message's short text pieces. (Mixed: a third of the appends carry a raw
/// provider event.)
pub(super) fn streamed_groups(agents: [Uuid; 2], mixed: bool) -> Vec<Vec<AppendBatch>> {
    let mut chains = IdChains::default();
    let mut state = 7u64;
    let mut next = move |below: u64| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) % below
    };
    let messages = [Uuid::new_v4(), Uuid::new_v4()];
    let long = "long ".repeat(60);
    let pieces = if mixed {
        vec!["a", "bc ", "", "wörld ", "🙂", "\"q\"\n", &long]
    } else {
        vec!["a ", "bc ", "wörld ", "🙂", "the "]
    };
    let mut groups = Vec::new();
    let contents = [
        json!({"t": 1, "text": "a token"}),
        json!("a string with , and ] inside"),
        json!([1, [2, 3]]),
        json!(null),
        json!({"wörld": "🙂"}),
    ];
    for _ in 0..if mixed { 40 } else { 200 } {
        let mut group = Vec::new();
        for agent_id in agents {
            let mut drafts = Vec::new();
            let append = Uuid::now_v7();
            for _ in 0..next(12) {
                let mut draft = match (mixed, next(20)) {
                    (true, 0) => EventDraft::new(EventKind::ToolCall),
                    (true, 1 | 2) => EventDraft::new(EventKind::Thinking),
                    (true, 3..=7) => EventDraft::new(EventKind::StreamMessage),
                    _ => EventDraft::new(EventKind::Text),
                };
                if draft.kind == EventKind::StreamMessage {
                    // Messages of one append: one block (rows of messages, between the runs);
                    // or a message that is an append by itself, its block its own id (such
                    // appends of a log share rows as well).
                    draft.block_id = Some(if next(3) == 0 { draft.id } else { append });
                    // A stream message's content is its JSON text.
                    draft.content = serde_json::Value::String(
                        contents[next(contents.len() as u64) as usize].to_string(),
                    );
                } else if draft.kind != EventKind::ToolCall {
                    draft.message_id = Some(messages[(mixed && next(10) == 0) as usize]);
                    draft.delta = Some(json!(pieces[next(pieces.len() as u64) as usize]));
                    draft.delta_path = Some("text".into());
                    draft.delta_action = Some(app::DeltaAction::Append);
                    if mixed && next(3) == 0 {
                        draft.raw = Some(json!({"type": "delta", "n": next(1_000)}));
                    }
                }
                drafts.push(draft);
            }
            let mut batch = batch(agent_id, drafts);
            chains.assign(&mut batch);
            group.push(batch);
        }
        groups.push(group);
    }
    groups
}

/// Every seq of a streamed log reads back as it was committed, from every cursor, with every
/// limit, typed, as JSON, as contents alone, and by id.
pub(super) async fn streamed_appends_read_back_at_every_cursor(subject: &Subject) {
    let store = subject.store.as_ref();
    let agents = [
        store.create_agent(NewAgent::default()).await.unwrap().id,
        store.create_agent(NewAgent::default()).await.unwrap().id,
    ];
    let mut committed = vec![Vec::new(), Vec::new()];
    for group in streamed_groups(agents, true) {
        for (index, events) in store.append(&group).await.unwrap().into_iter().enumerate() {
            committed[index].extend(events);
        }
    }
    for (agent_id, committed) in agents.iter().zip(&committed) {
        assert!(committed.len() > 100, "{}", committed.len());
        for since in 0..=committed.len() as u64 {
            for limit in [1, 7, 1_000] {
                let read = store.read_events(*agent_id, since, limit).await.unwrap();
                let want: Vec<_> =
                    committed.iter().skip(since as usize).take(limit as usize).cloned().collect();
                assert_eq!(read, want, "since {since}, limit {limit}");
                // Contents alone (what a stream read serves), from rows of every shape.
                let contents = store.read_contents(*agent_id, since, limit).await.unwrap();
                let contents = contents.contents();
                let want: Vec<ContentJson> = want.iter().map(ContentJson::of).collect();
                assert_eq!(contents, want, "contents since {since}, limit {limit}");
                // A page of the same events (rows of every shape, cut anywhere): their JSON,
                // joined as one array, framed in its own buffer.
                let page = store.read_events_page(*agent_id, since, limit, 1).await.unwrap();
                let json: Vec<EventJson> = read.iter().map(EventJson::of).collect();
                assert_eq!(page.to_events(), json, "page since {since}, limit {limit}");
                let array: serde_json::Value =
                    serde_json::from_str(&page.into_framed("[", "]")).unwrap();
                assert_eq!(array, serde_json::to_value(&read).unwrap());
            }
        }
        let json = store.read_events_json(*agent_id, 0, 1_000).await.unwrap();
        assert_eq!(json, committed.iter().map(EventJson::of).collect::<Vec<_>>());
        let ids: Vec<Uuid> = committed.iter().map(|event| event.id).collect();
        let unique: std::collections::HashSet<Uuid> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "ids are unique");
        let mut found = store.events_by_id(&ids).await.unwrap();
        found.sort_by_key(|event| event.seq);
        assert_eq!(&found, committed);
    }
}

/// A saved snapshot comes back as saved; an older one does not replace it, one of the same seq
/// does; it goes with its agent.
pub(super) async fn a_snapshot_is_kept_until_a_newer_one(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), None);
    let snapshot = |last_seq: u64, byte: u8| StoredSnapshot {
        last_seq,
        event_id: Uuid::new_v4(),
        body: vec![byte; 3_000],
    };
    let saved = snapshot(10, 1);
    store.save_snapshot(agent.id, &saved).await.unwrap();
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), Some(saved.clone()));
    store.save_snapshot(agent.id, &snapshot(9, 2)).await.unwrap();
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), Some(saved));
    let same_seq = snapshot(10, 3);
    store.save_snapshot(agent.id, &same_seq).await.unwrap();
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), Some(same_seq));
    let error = store.save_snapshot(Uuid::new_v4(), &snapshot(1, 4)).await.unwrap_err();
    assert!(matches!(error, StoreError::UnknownAgent(_)), "{error}");
    assert!(store.delete_agent(agent.id).await.unwrap());
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), None);
}

/// A producer's position commits with its batch, follows each batch, is per agent, goes with
/// its agent, and a new epoch forgets the agent's oldest producers past the bound.
pub(super) async fn a_producers_position_commits_with_its_batch(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let other = store.create_agent(NewAgent::default()).await.unwrap();
    assert_eq!(store.producer_position(agent.id, "p").await.unwrap(), None);
    // A batch of seq n is fenced against seq n − 1 (none before the first).
    let stamp = |epoch, seq: u64| ProducerStamp {
        producer_id: "p".into(),
        epoch,
        seq,
        run_id: None,
        fenced_at: seq.checked_sub(1).map(|previous| (epoch, previous)),
    };
    let at = |agent_id, producer: &'static str| async move {
        store
            .producer_position(agent_id, producer)
            .await
            .unwrap()
            .map(|position| (position.stamp.epoch, position.stamp.seq))
    };
    let with = |agent_id, stamp| AppendBatch { producer: Some(stamp), ..batch(agent_id, texts(2)) };
    store.append(&[with(agent.id, stamp(3, 0))]).await.unwrap();
    let before = chrono::Utc::now();
    store.append(&[with(agent.id, stamp(3, 1))]).await.unwrap();
    let position = store.producer_position(agent.id, "p").await.unwrap().unwrap();
    assert_eq!((position.stamp.epoch, position.stamp.seq), (3, 1));
    assert!(
        position.updated_at >= before - chrono::Duration::seconds(1),
        "the position's time is its last batch's: {}",
        position.updated_at
    );
    assert_eq!(at(other.id, "p").await, None);
    // A batch fenced against a position that moved since (another server took the same retry)
    // writes nothing.
    let head = store.head_seq(agent.id).await.unwrap();
    let raced = store.append(&[with(agent.id, stamp(3, 1))]).await;
    assert!(matches!(raced, Err(StoreError::ProducerMoved { .. })), "{raced:?}");
    let fresh = ProducerStamp { fenced_at: Some((3, 0)), ..stamp(9, 0) };
    let raced = store.append(&[with(other.id, fresh)]).await;
    assert!(
        matches!(raced, Err(StoreError::ProducerMoved { .. })),
        "a first batch fenced against a position that is not there: {raced:?}"
    );
    assert_eq!(store.head_seq(agent.id).await.unwrap(), head);
    assert_eq!(at(agent.id, "p").await, Some((3, 1)));
    // A batch that fails (an unknown agent beside it) leaves the position where it was.
    let failed =
        store.append(&[with(agent.id, stamp(3, 2)), batch(Uuid::new_v4(), texts(1))]).await;
    assert!(failed.is_err());
    assert_eq!(at(agent.id, "p").await, Some((3, 1)));
    // Past the bound, a producer's first batch forgets the least recently written others.
    let bound = agentstream_server::store::PRODUCERS_PER_AGENT_MAX as usize;
    for index in 0..bound {
        let stamp = ProducerStamp {
            producer_id: format!("q{index}"),
            epoch: 0,
            seq: 0,
            run_id: Some(Uuid::now_v7()),
            fenced_at: None,
        };
        store.append(&[with(other.id, stamp)]).await.unwrap();
    }
    store.append(&[with(other.id, stamp(0, 0))]).await.unwrap();
    assert_eq!(at(other.id, "q0").await, None);
    let newest =
        store.producer_position(other.id, &format!("q{}", bound - 1)).await.unwrap().unwrap();
    assert!(newest.stamp.run_id.is_some());
    assert!(store.delete_agent(agent.id).await.unwrap());
    assert_eq!(store.producer_position(agent.id, "p").await.unwrap(), None);
}
