use super::*;

fn texts(messages: &Messages) -> Vec<(u64, String)> {
    messages.iter().map(|(offset, text)| (offset, text.to_owned())).collect()
}

fn log() -> Uuid {
    Uuid::from_u128(7)
}

#[test]
fn a_page_is_one_array_of_the_texts_as_kept() {
    let mut messages = Messages::default();
    assert_eq!(messages.json_array(), b"[]");
    messages.push(3, r#"{"a":1}"#);
    messages.push(4, r#""two""#);
    assert_eq!(messages.json_array(), br#"[{"a":1},"two"]"#);
    assert_eq!(texts(&messages), [(3, r#"{"a":1}"#.to_owned()), (4, r#""two""#.to_owned())]);
    assert_eq!(messages.last_offset(), Some(4));
    // Made in place, the same bytes.
    assert_eq!(Messages::default().into_json_array(), b"[]");
    assert_eq!(messages.into_json_array(), br#"[{"a":1},"two"]"#);
}

#[test]
fn a_tail_serves_only_ranges_it_holds_up_to_the_head() {
    let mut tails = Tails::default();
    tails.committed(log(), 5, ["5", "6", "7"]);
    // Seqs 5..=7 are held: reads from 4 (after seq 4) up to a head of 7 come from it.
    let read = |since, head| tails.read(log(), since, head, 100, 1000, 1 << 20).map(|m| texts(&m));
    assert_eq!(read(4, 7), Some(vec![(105, "5".into()), (106, "6".into()), (107, "7".into())]));
    assert_eq!(read(6, 7), Some(vec![(107, "7".into())]));
    // A head below the tail's end (read before a later commit): up to the head only.
    assert_eq!(read(4, 5), Some(vec![(105, "5".into())]));
    // Before the tail's start, past its end, or nothing to read: the database's.
    assert_eq!(read(3, 7), None);
    assert_eq!(read(4, 8), None);
    assert_eq!(read(7, 7), None);
    assert_eq!(tails.read(Uuid::nil(), 4, 7, 0, 1000, 1 << 20), None);
}

#[test]
fn commits_that_do_not_follow_the_tail_start_it_over() {
    let mut tails = Tails::default();
    tails.committed(log(), 1, ["1", "2"]);
    tails.committed(log(), 3, ["3"]);
    assert_eq!(tails.read(log(), 0, 3, 0, 10, 1 << 20).map(|m| m.len()), Some(3));
    // Seq 4 was written elsewhere (another server, or an append whose answer was lost).
    tails.committed(log(), 5, ["5"]);
    assert_eq!(tails.read(log(), 0, 5, 0, 10, 1 << 20), None);
    assert_eq!(tails.read(log(), 4, 5, 0, 10, 1 << 20).map(|m| m.len()), Some(1));
    tails.forget(log());
    assert_eq!(tails.held(), (0, 0));
}

#[test]
fn limits_cut_a_page_but_never_below_one_message() {
    let mut tails = Tails::default();
    tails.committed(log(), 1, ["aaaa", "bbbb", "cccc", "dddd"]);
    let page = tails.read(log(), 0, 4, 0, 2, 1 << 20).unwrap();
    assert_eq!(page.json_array(), b"[aaaa,bbbb]");
    // Each text is 4 bytes and a comma: 10 bytes fit two.
    let page = tails.read(log(), 0, 4, 0, 10, 10).unwrap();
    assert_eq!(page.len(), 2);
    let page = tails.read(log(), 1, 4, 0, 10, 1).unwrap();
    assert_eq!(page.json_array(), b"[bbbb]");
    // A page from the middle of a tail, made into a body in place.
    let page = tails.read(log(), 1, 3, 0, 10, 1 << 20).unwrap();
    assert_eq!(page.into_json_array(), b"[bbbb,cccc]");
}

#[test]
fn a_tail_keeps_its_newest_half_past_its_bound_and_all_tails_stay_bounded() {
    let mut tails = Tails::default();
    let text = "x".repeat(1000);
    for seq in 1..=5_000u64 {
        tails.committed(log(), seq, [text.as_str()]);
    }
    let (streams, bytes) = tails.held();
    assert_eq!(streams, 1);
    assert!(bytes <= TAIL_STREAM_BYTES_MAX, "{bytes}");
    assert!(bytes >= TAIL_STREAM_BYTES_MAX / 2 - 1001, "{bytes}");
    // The newest messages are the ones kept, at their seqs.
    let page = tails.read(log(), 4_999, 5_000, 0, 10, 1 << 20).unwrap();
    assert_eq!(page.last_offset(), Some(5_000));
    assert_eq!(tails.read(log(), 0, 5_000, 0, 10, 1 << 20), None);
    // Many streams: the total stays under its bound, the least recently appended go first.
    let mut tails = Tails::default();
    let big = "y".repeat(TAIL_STREAM_BYTES_MAX / 2);
    for stream in 0..300u128 {
        tails.committed(Uuid::from_u128(stream), 1, [big.as_str()]);
    }
    let (_, bytes) = tails.held();
    assert!(bytes <= TAILS_BYTES_MAX, "{bytes}");
    assert!(tails.read(Uuid::from_u128(299), 0, 1, 0, 1, 1 << 20).is_some());
    assert!(tails.read(Uuid::from_u128(0), 0, 1, 0, 1, 1 << 20).is_none());
}

fn page(messages: &[(u64, &str)]) -> Messages {
    let mut page = Messages::default();
    for (offset, text) in messages {
        page.push(*offset, text);
    }
    page
}

#[test]
fn a_read_that_reaches_the_head_fills_the_tail_and_only_then() {
    let mut tails = Tails::default();
    // Short of the head (a later page is still to come): nothing is kept.
    tails.read_back(log(), 4, 100, &page(&[(101, "1"), (102, "2")]));
    assert_eq!(tails.read(log(), 0, 2, 100, 1000, 1 << 20), None);
    assert!(!tails.reaches(log(), 2));
    // Not contiguous (a damaged page): nothing is kept.
    tails.read_back(log(), 3, 100, &page(&[(101, "1"), (103, "3")]));
    assert_eq!(tails.held(), (0, 0));
    // A fork's source's messages (at or before the base) are left out; the own ones up to the
    // head become the tail, and the next read of that range is served from it.
    tails.read_back(log(), 2, 100, &page(&[(99, "s"), (100, "t"), (101, "1"), (102, "2")]));
    assert_eq!(
        tails.read(log(), 0, 2, 100, 1000, 1 << 20).map(|m| texts(&m)),
        Some(vec![(101, "1".into()), (102, "2".into())])
    );
    assert!(tails.reaches(log(), 2) && !tails.reaches(log(), 3));
    // A commit that follows extends it as usual.
    tails.committed(log(), 3, ["3"]);
    assert_eq!(
        tails.read(log(), 1, 3, 100, 1000, 1 << 20).map(|m| texts(&m)),
        Some(vec![(102, "2".into()), (103, "3".into())])
    );
}

#[test]
fn a_read_never_replaces_a_tail_that_reaches_as_far() {
    let mut tails = Tails::default();
    // A commit landed after the read took the head (2): the tail already holds seq 3.
    tails.committed(log(), 3, ["3"]);
    tails.read_back(log(), 2, 0, &page(&[(1, "1"), (2, "2")]));
    assert_eq!(
        tails.read(log(), 2, 3, 0, 1000, 1 << 20).map(|m| texts(&m)),
        Some(vec![(3, "3".into())])
    );
    assert_eq!(tails.read(log(), 0, 3, 0, 1000, 1 << 20), None);
    // A tail that ends short of the head is of no use to a read up to it: the read's follows
    // it (extends it) or starts it over.
    tails.read_back(log(), 5, 0, &page(&[(4, "4"), (5, "5")]));
    assert_eq!(
        tails.read(log(), 2, 5, 0, 1000, 1 << 20).map(|m| texts(&m)),
        Some(vec![(3, "3".into()), (4, "4".into()), (5, "5".into())])
    );
    tails.read_back(log(), 9, 0, &page(&[(8, "8"), (9, "9")]));
    assert_eq!(
        tails.read(log(), 7, 9, 0, 1000, 1 << 20).map(|m| texts(&m)),
        Some(vec![(8, "8".into()), (9, "9".into())])
    );
    assert_eq!(tails.read(log(), 6, 9, 0, 1000, 1 << 20), None);
}

/// A page read from the log is taken up to the first event that is not a stream message, past
/// the cap, or past the bytes (one at least), as taking each in turn would: into empty messages
/// (its buffers moved) and after messages already read (a fork's source first).
#[test]
fn a_page_from_the_log_is_taken_as_far_as_its_bounds() {
    let mut page = ContentPage::default();
    for (seq, message, text) in [(1, true, "11"), (2, true, "222"), (3, true, "3"), (4, false, "4")]
    {
        page.push(seq, message, text);
    }
    let before = |count: usize| {
        let mut messages = Messages::default();
        for k in 0..count {
            messages.push(100 + k as u64, "xx");
        }
        messages
    };
    for already in [0, 2] {
        for cap in [None, Some(10), Some(11), Some(12), Some(13), Some(14)] {
            for bytes_max in [0, 1, 2, 3, 6, 7, 9, 10, 100] {
                let mut want = before(already);
                for (seq, message, text) in page.iter() {
                    let offset = 10 + seq;
                    if cap.is_some_and(|cap| offset > cap) || !message {
                        break;
                    }
                    if want.bytes() + text.len() > bytes_max && !want.is_empty() {
                        break;
                    }
                    want.push(offset, text);
                }
                let mut got = before(already);
                got.extend_page(10, cap, bytes_max, page.clone());
                let case = format!("already {already}, cap {cap:?}, bytes {bytes_max}");
                assert_eq!(texts(&got), texts(&want), "{case}");
                assert_eq!(got.json_array(), want.json_array(), "{case}");
            }
        }
    }
}
