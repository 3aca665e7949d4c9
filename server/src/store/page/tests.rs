use super::*;

fn event(seq: u64, text: &str) -> EventJson {
    EventJson { seq, json: format!("{{\"seq\":{seq},\"t\":{text:?}}}").into() }
}

/// A page framed by any head is the frame written around its events joined, whether the head
/// fits the room (in place) or not (copied); events come back one by one as they went in.
#[test]
fn a_page_frames_its_events_in_place_or_copied() {
    let events = vec![event(7, "a"), event(8, "é, \"quoted\""), event(9, "")];
    let joined = events.iter().map(|event| &*event.json).collect::<Vec<_>>().join(",");
    let cases: &[(usize, &str, &str)] = &[
        (1, "[", "]"),
        (0, "[", "]"),
        (5, "[", "]"),
        (12, "{\"events\":[", "]}"),
        (11, "{\"events\":[", "]}"),
    ];
    for &(room, head, tail) in cases {
        let page = JsonPage::from_events(room, &events);
        assert_eq!(page.len(), 3);
        assert_eq!(page.last_seq(), Some(9));
        assert_eq!(page.seqs().collect::<Vec<_>>(), vec![7, 8, 9]);
        assert_eq!(page.to_events(), events, "room {room}");
        assert_eq!(page.joined(), joined);
        assert_eq!(page.into_framed(head, tail), format!("{head}{joined}{tail}"), "room {room}");
    }
    let empty = JsonPage::from_events(1, &[]);
    assert!(empty.is_empty());
    assert_eq!(empty.last_seq(), None);
    assert_eq!(empty.into_framed("[", "]"), "[]");
}

/// A page written row by row and pages appended (a branch read crossing logs) hold each event
/// where its seq says, the later page's room left out.
#[test]
fn pages_written_and_appended_keep_each_event_whole() {
    let mut first = PageText::new(3, 10);
    let mut later = PageText::new(4, 10);
    let write = |text: &'static str| {
        move |_: &EventRow<'_>, out: &mut Text| -> StoreResult<()> {
            out.push_str(text);
            Ok(())
        }
    };
    let row = |seq| EventRow {
        id: uuid::Uuid::nil(),
        agent_id: uuid::Uuid::nil(),
        seq,
        run_id: None,
        thread_id: None,
        block_id: None,
        message_id: None,
        kind: "text",
        delta: None,
        delta_path: None,
        delta_action: None,
        content: "null",
        raw: None,
        metadata: "null",
        created_at: chrono::DateTime::UNIX_EPOCH,
    };
    first.add(&row(1), write("{\"a\":1}")).unwrap();
    first.add(&row(2), write("{\"b\":\"ü\"}")).unwrap();
    later.add(&row(3), write("{\"c\":3}")).unwrap();
    first.append(later);
    first.append(PageText::default());
    let page = first.done().unwrap();
    let events: Vec<(u64, &str)> = page.events().collect();
    assert_eq!(events, vec![(1, "{\"a\":1}"), (2, "{\"b\":\"ü\"}"), (3, "{\"c\":3}")]);
    assert_eq!(page.into_framed("[[[", "]"), "[[[{\"a\":1},{\"b\":\"ü\"},{\"c\":3}]");

    let mut empty = PageText::default();
    let mut only = PageText::new(2, 1);
    only.add(&row(5), write("5")).unwrap();
    empty.append(only);
    let page = empty.done().unwrap();
    assert_eq!(page.events().collect::<Vec<_>>(), vec![(5, "5")]);
    assert_eq!(page.into_framed("", ""), "5");
}
