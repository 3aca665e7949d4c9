use super::*;
use serde_json::json;

#[test]
fn offsets_read_and_sort_as_the_seqs_they_name() {
    let cases: &[(&str, Result<Offset, &str>)] = &[
        ("-1", Ok(Offset::Start)),
        ("now", Ok(Offset::Now)),
        ("0000000000000000_0000000000000042", Ok(Offset::After(42))),
        ("0_7", Ok(Offset::After(7))),
        ("", Err("Empty offset parameter")),
        ("abc", Err("Invalid offset format")),
        ("1_2_3", Err("Invalid offset format")),
        ("_5", Err("Invalid offset format")),
        ("0000000000000001_0000000000000000", Err("Invalid offset format")),
        ("0_99999999999999999999999", Err("Invalid offset format")),
        ("-2", Err("Invalid offset format")),
        ("../etc", Err("Invalid offset format")),
    ];
    for (text, expected) in cases {
        assert_eq!(Offset::parse(text), *expected, "{text:?}");
    }
    assert_eq!(format_offset(42), "0000000000000000_0000000000000042");
    assert_eq!(
        Offset::parse(&format_offset(u64::from(u32::MAX))),
        Ok(Offset::After(u64::from(u32::MAX)))
    );
    let mut offsets: Vec<String> = [10, 9, 100, 0, 11].into_iter().map(format_offset).collect();
    offsets.sort();
    assert_eq!(offsets, [0, 9, 10, 11, 100].map(format_offset));
}

#[test]
fn headers_are_taken_or_refused_with_the_reason() {
    for (text, expected) in [
        ("0", Ok(0)),
        ("3600", Ok(3600)),
        ("01", Err(())),
        ("+1", Err(())),
        ("1.5", Err(())),
        (" 1", Err(())),
        ("", Err(())),
        ("0x10", Err(())),
        // Past what a row's milliseconds hold: refused, not wrapped.
        ("9223372036854775", Ok(STREAM_TTL_SECONDS_MAX)),
        ("9223372036854776", Err(())),
        ("18446744073709551615", Err(())),
        ("99999999999999999999999", Err(())),
    ] {
        assert_eq!(parse_ttl(text).map_err(|_| ()), expected, "{text:?}");
    }
    assert!(parse_expires_at("2099-01-01T00:00:00Z").is_ok());
    assert!(parse_expires_at("2099-01-01T00:00:00.123+02:00").is_ok());
    assert!(parse_expires_at("tomorrow").is_err());
    let headers =
        |id: Option<&str>, epoch: Option<&str>, seq: Option<&str>| producer_headers(id, epoch, seq);
    assert_eq!(headers(None, None, None), Ok(None));
    assert_eq!(
        headers(Some("p"), Some("1"), Some("2")),
        Ok(Some(ProducerHeaders { id: "p".into(), epoch: 1, seq: 2 }))
    );
    let refused = [
        (Some("p"), Some("1"), None, "All producer headers"),
        (Some(""), Some("1"), Some("2"), "Invalid Producer-Id"),
        (Some("p"), Some("1e3"), Some("2"), "Invalid Producer-Epoch"),
        (Some("p"), Some("1"), Some("-1"), "Invalid Producer-Seq"),
        (Some("p"), Some("9007199254740992"), Some("0"), "Invalid Producer-Epoch"),
    ];
    for (id, epoch, seq, reason) in refused {
        let error = headers(id, epoch, seq).unwrap_err();
        assert!(error.starts_with(reason), "{error}");
    }
    let types = [
        (Some("text/plain"), Some("text/plain")),
        (Some("application/json; charset=utf-8"), Some("application/json; charset=utf-8")),
        (Some(""), None),
        (Some("nonsense"), None),
        (None, None),
    ];
    for (given, expected) in types {
        assert_eq!(create_content_type(given).as_deref(), expected, "{given:?}");
    }
    assert!(is_json("Application/JSON; charset=utf-8"));
    assert!(is_text("text/markdown") && !is_text("application/octet-stream"));
}

#[test]
fn json_mode_keeps_message_boundaries_and_flattens_arrays() {
    let texts = |texts: &[&str]| Ok(texts.iter().map(|text| text.to_string()).collect());
    assert_eq!(json_messages(br#"{"a":1}"#, false), texts(&[r#"{"a":1}"#]));
    assert_eq!(json_messages(b"[1,[2],3]", false), texts(&["1", "[2]", "3"]));
    // Each message exactly as the body has it, without the whitespace around it.
    assert_eq!(
        json_messages(b" \n[ {\"a\" : [1, 2]} ,\t\"x\" ]\n", false),
        texts(&[r#"{"a" : [1, 2]}"#, r#""x""#])
    );
    assert_eq!(json_messages(b" \"one\"\r\n", false), texts(&[r#""one""#]));
    for bad in [&b"[1,]"[..], b"[1] 2", b"{\"a\":}", b"", b"  ", b"[\"\xff\"]", b"01", b"[1"] {
        assert_eq!(json_messages(bad, false), Err("Invalid JSON"), "{bad:?}");
    }
    assert_eq!(json_messages(b"[]", true), Ok(vec![]));
    assert_eq!(json_messages(b"[]", false), Err("Empty arrays are not allowed"));
    assert_eq!(json_messages(b"{oops", false), Err("Invalid JSON"));
    let page = |contents: &[String]| {
        let mut messages = crate::surfaces::durable::messages::Messages::default();
        for (offset, text) in contents.iter().enumerate() {
            messages.push(offset as u64 + 1, text);
        }
        messages
    };
    let contents = [json!({"a": 1}).to_string(), json!("two").to_string()];
    assert_eq!(body("application/json", page(&contents)), br#"[{"a":1},"two"]"#);
    assert_eq!(body("application/json", page(&contents[..1])), br#"[{"a":1}]"#);
    assert_eq!(body("application/json", page(&[])), b"[]");
    let bytes =
        [stored(Message::Bytes(b"hello ".to_vec())), stored(Message::Bytes(vec![0, 255, 10]))];
    let bytes: Vec<String> = bytes.iter().map(|text| text.as_str().unwrap().to_owned()).collect();
    assert_eq!(body("text/plain", page(&bytes)), b"hello \x00\xff\n");
    assert_eq!(sse_payload("application/octet-stream", &page(&bytes[1..])), "AP8K");
    assert_eq!(sse_payload("application/octet-stream", &page(&bytes)), "aGVsbG8gAP8K");
    assert_eq!(sse_payload("text/plain", &page(&bytes[..1])), "hello ");
    assert_eq!(sse_payload("application/json", &page(&contents)), r#"[{"a":1},"two"]"#);
    // A damaged byte-mode content reads as no bytes, never a panic.
    assert_eq!(message_bytes("{\"bytes\": 7}"), b"");
    assert_eq!(message_bytes("not json"), b"");
}

#[test]
fn sse_events_cannot_be_split_by_a_payload() {
    assert_eq!(sse_event("data", "one"), "event: data\ndata:one\n\n");
    assert_eq!(
        sse_event("data", "a\r\nb\rc\nevent: fake"),
        "event: data\ndata:a\ndata:b\ndata:c\ndata:event: fake\n\n"
    );
    assert_eq!(sse_event("data", " lead"), "event: data\ndata: lead\n\n");
}

#[test]
fn etags_cursors_and_expiry() {
    assert_eq!(etag("s", "-1", "0_1", false), "\"cw==:-1:0_1\"");
    assert_eq!(etag("s", "-1", "0_1", true), "\"cw==:-1:0_1:c\"");
    let now = CURSOR_EPOCH_MS + 100 * CURSOR_INTERVAL_SECONDS * 1000 + 5;
    assert_eq!(response_cursor(now, None, 7), "100");
    assert_eq!(response_cursor(now, Some("90"), 7), "100");
    assert_eq!(response_cursor(now, Some("100"), 7), "107");
    assert_eq!(response_cursor(now, Some("x"), 7), "100");
    // A client's cursor near the top of i64 saturates instead of overflowing.
    let top = i64::MAX.to_string();
    assert_eq!(response_cursor(now, Some(&top), 7), top);
    let minute = 60_000;
    assert!(!expired(None, None, 0, minute));
    assert!(expired(Some(60), None, 0, minute));
    assert!(!expired(Some(61), None, 0, minute));
    assert!(expired(None, Some("2000-01-01T00:00:00Z"), 0, minute * 60 * 24 * 365 * 40));
    assert!(!expired(None, Some("2999-01-01T00:00:00Z"), 0, minute));
    // Arithmetic that would wrap means "never idle long enough".
    assert!(!expired(Some(u64::MAX), None, 0, minute));
    assert!(!expired(Some(STREAM_TTL_SECONDS_MAX), None, i64::MAX - 5, i64::MAX));
}

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
        ("offset=-1&offset=now", "Multiple offset parameters not allowed"),
        ("offset=", "Empty offset parameter"),
        ("offset=abc", "Invalid offset format"),
        ("live=sse", "SSE requires offset parameter"),
        ("live=long-poll", "Long-poll requires offset parameter"),
        ("offset=-1&live=websocket", "Invalid live parameter: use long-poll or sse"),
    ];
    for (query, reason) in refused {
        assert_eq!(read_query(Some(query)), Err(reason), "{query}");
    }
    assert_eq!(
        agent_of("agents/00000000-0000-0000-0000-000000000007"),
        Some(uuid::Uuid::from_u128(7))
    );
    assert_eq!(agent_of("agents/x"), None);
    assert_eq!(agent_of("v1/stream/agents"), None);
}
