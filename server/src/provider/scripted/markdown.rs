//! `/markdown`'s reply: a deterministic Markdown answer of about the configured length, shaped
//! like what models write — headings, paragraphs with bold, inline code and links, bullet and
//! numbered lists, task lists, tables and fenced code in the languages models emit most — and
//! streamed in word-sized tokens, so fences, tables and emphasis arrive half-open on the way.
//! It shows the live view's renderer offline and is the load of the browser bench's Markdown
//! round.

use super::words::{echo_tokens, Random, WORDS};

/// Fenced blocks a `/markdown` reply draws from: (language, lines).
const CODE_BLOCKS: &[(&str, &[&str])] = &[
    (
        "rust",
        &[
            "fn resume(log: &Log, since: u64) -> Vec<Event> {",
            "    // Every event after the cursor, in order.",
            "    log.read(since, 1_000).unwrap_or_default()",
            "}",
        ],
    ),
    (
        "python",
        &[
            "def resume(log, since):",
            "    \"\"\"Every event after the cursor, in order.\"\"\"",
            "    return [e for e in log if e.seq > since]",
        ],
    ),
    (
        "typescript",
        &[
            "const events = await fetch(`/v1/agents/${id}/events?since=${since}`);",
            "for (const event of (await events.json()).events) render(event);",
        ],
    ),
    ("json", &["{", "  \"kind\": \"text\",", "  \"seq\": 42,", "  \"delta\": \"hello\"", "}"]),
    ("sh", &["curl -N \"$BASE/v1/agents/$ID/events/stream?since=0\" | head -n 20"]),
    ("sql", &["SELECT seq, kind FROM events", "WHERE agent_id = ?1 AND seq > ?2", "ORDER BY seq;"]),
];

/// About `count` tokens of Markdown (the block that reaches `count` is finished, so the answer
/// never ends inside a fence or a table).
pub(super) fn markdown_tokens(random: &mut Random, count: u32) -> Vec<String> {
    let mut text = String::new();
    let mut tokens = 0usize;
    while tokens < count as usize {
        let block = block(random, text.is_empty());
        // The blank line after a block goes out with the next block's first word.
        tokens += echo_tokens(block.trim_end()).len();
        text.push_str(&block);
    }
    echo_tokens(text.trim_end())
}

/// One block and the blank line after it.
fn block(random: &mut Random, first: bool) -> String {
    let choice = if first { 0 } else { random.below(8) };
    let mut out = match choice {
        0 => format!("## {}", title(random)),
        1 => list(random, |_| "- ".to_owned()),
        2 => list(random, |n| format!("{n}. ")),
        3 => list(random, |_| "- [x] ".to_owned()),
        4 => table(random),
        5 => code(random),
        _ => paragraph(random),
    };
    out.push_str("\n\n");
    out
}

fn word(random: &mut Random) -> &'static str {
    WORDS[random.below(WORDS.len() as u64) as usize]
}

fn words(random: &mut Random, count: u64) -> String {
    (0..count).map(|_| word(random)).collect::<Vec<_>>().join(" ")
}

fn title(random: &mut Random) -> String {
    let count = 2 + random.below(4);
    let mut title = words(random, count);
    title[..1].make_ascii_uppercase();
    title
}

/// A sentence with, now and then, **bold**, `code`, _emphasis_ or a link.
fn sentence(random: &mut Random) -> String {
    let count = 6 + random.below(10);
    let mut parts: Vec<String> = Vec::new();
    for _ in 0..count {
        let plain = word(random);
        parts.push(match random.below(12) {
            0 => format!("**{plain}**"),
            1 => format!("`{plain}()`"),
            2 => format!("_{plain}_"),
            3 => format!("[{plain}](https://example.com/{plain})"),
            _ => plain.to_owned(),
        });
    }
    let mut sentence = parts.join(" ");
    if let Some(first) = sentence.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    sentence.push('.');
    sentence
}

fn paragraph(random: &mut Random) -> String {
    let count = 2 + random.below(3);
    (0..count).map(|_| sentence(random)).collect::<Vec<_>>().join(" ")
}

/// A list of 2 to 5 items, each after the marker `marker(n)` gives the n-th (from 1).
fn list(random: &mut Random, marker: impl Fn(u64) -> String) -> String {
    let count = 2 + random.below(4);
    (1..=count)
        .map(|n| {
            let length = 3 + random.below(6);
            format!("{}{}", marker(n), words(random, length))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn table(random: &mut Random) -> String {
    let rows = 2 + random.below(4);
    let mut out = String::from("| name | seq | note |\n|---|---:|---|");
    for _ in 0..rows {
        let (name, seq, note) = (word(random), random.below(10_000), words(random, 3));
        out.push_str(&format!("\n| `{name}` | {seq} | {note} |"));
    }
    out
}

fn code(random: &mut Random) -> String {
    let (language, lines) = CODE_BLOCKS[random.below(CODE_BLOCKS.len() as u64) as usize];
    format!("```{language}\n{}\n```", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_markdown_reply_is_about_as_long_as_asked_and_closes_what_it_opens() {
        for (seed, count) in [(1, 1), (7, 60), (42, 2_000), (9, 20_000)] {
            let tokens = markdown_tokens(&mut Random(seed), count);
            assert!(tokens.len() >= count as usize, "{seed}: {} tokens", tokens.len());
            assert!(
                tokens.len() < count as usize + 200,
                "{seed}: {} tokens for {count}",
                tokens.len()
            );
            let text = tokens.concat();
            assert!(text.starts_with("## "), "{seed}: {text:.40}");
            assert_eq!(text.matches("```").count() % 2, 0, "{seed}: a fence left open");
            assert_eq!(text, text.trim_end(), "{seed}: trailing blank lines");
        }
    }

    #[test]
    fn a_long_markdown_reply_holds_every_kind_of_block() {
        let text = markdown_tokens(&mut Random(7), 2_000).concat();
        for wanted in ["\n## ", "\n- ", "\n1. ", "- [x] ", "|---|", "```rust", "**", "](https://"] {
            assert!(text.contains(wanted), "no {wanted:?} in the reply");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_reply() {
        let once = markdown_tokens(&mut Random(3), 500);
        assert_eq!(once, markdown_tokens(&mut Random(3), 500));
        assert_ne!(once, markdown_tokens(&mut Random(4), 500));
    }
}
