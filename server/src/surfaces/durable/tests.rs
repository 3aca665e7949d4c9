use super::*;

#[test]
fn read_queries_are_taken_or_refused_with_the_reason() {
    let ok = [
        (None, ReadQuery::default()),
        (
            Some("offset=-1"),
            ReadQuery {
                offset: Some(Offset::Start),
                offset_text: Some("-1".into()),
                ..ReadQuery::default()
            },
        ),
        (
            Some("offset=0000000000000000_0000000000000003&live=long-poll&cursor=12"),
            ReadQuery {
                offset: Some(Offset::After(3)),
                offset_text: Some("0000000000000000_0000000000000003".into()),
                live: Some(Live::LongPoll),
                cursor: Some("12".into()),
            },
        ),
        (
            Some("offset=now&live=sse"),
            ReadQuery {
                offset: Some(Offset::Now),
                offset_text: Some("now".into()),
                live: Some(Live::Sse),
                cursor: None,
            },
        ),
    ];
    for (query, expected) in ok {
        assert_eq!(read_query(query), Ok(expected), "{query:?}");
    }
    let refused = [
        (
            "offset=-1&offset=now",
            "Multiple offset parameters not allowed",
        ),
        ("offset=", "Empty offset parameter"),
        ("offset=abc", "Invalid offset format"),
        ("live=sse", "SSE requires offset parameter"),
        ("live=long-poll", "Long-poll requires offset parameter"),
        (
            "offset=-1&live=websocket",
            "Invalid live parameter: use long-poll or sse",
        ),
    ];
    for (query, reason) in refused {
        assert_eq!(read_query(Some(query)), Err(reason), "{query}");
    }
    assert_eq!(
        agent::agent_of("agents/00000000-0000-0000-0000-000000000007"),
        Some(uuid::Uuid::from_u128(7))
    );
    assert_eq!(agent::agent_of("agents/x"), None);
    assert_eq!(agent::agent_of("v1/stream/agents"), None);
}
