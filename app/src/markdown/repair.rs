//! The open block of a streaming answer, made whole for drawing: what a token cut in half would
//! otherwise flash as raw syntax until the next token completes it. Only the drawing changes;
//! the text itself is never touched, and a finished answer is rendered as it is.
//!
//! - an odd `` ` ``, `**`, `__`, `~~`, `*` or `_` in the last paragraph is closed at its end;
//! - a link whose address is still coming shows its text only;
//! - a table whose delimiter row is not complete gets one, so its head row draws as a table;
//! - a fence line still being typed (`` `` ``, `` ``` `` without its newline) is held back.
//!
//! An unclosed code fence needs nothing: CommonMark runs it to the end of the text.

use std::borrow::Cow;

/// `tail` (the open block of a streaming message) as it should be drawn now.
pub fn repair(tail: &str) -> Cow<'_, str> {
    let (head, last) = match tail.rfind('\n') {
        Some(at) => tail.split_at(at + 1),
        None => ("", tail),
    };
    // A fence line being typed (opening or closing): held back until its line ends.
    if fence_being_typed(last) {
        return Cow::Owned(head.to_owned());
    }
    if in_open_fence(tail) {
        return Cow::Borrowed(tail);
    }
    if let Some(table) = table_head(tail) {
        return Cow::Owned(table);
    }
    let paragraph_start = tail.rfind("\n\n").map_or(0, |at| at + 2);
    let mut fixed = String::with_capacity(tail.len() + 4);
    fixed.push_str(&tail[..paragraph_start]);
    let paragraph = without_open_link(&tail[paragraph_start..]);
    let paragraph = without_dangling_opener(&paragraph);
    fixed.push_str(paragraph);
    close_spans(paragraph, &mut fixed);
    if fixed == tail {
        Cow::Borrowed(tail)
    } else {
        Cow::Owned(fixed)
    }
}

/// True when `line` (the last, unfinished line) may be a code fence still being typed: a run
/// of backticks (or of three tildes) and at most a language name after it.
fn fence_being_typed(line: &str) -> bool {
    let trimmed = line.trim_start_matches(' ');
    let Some(fence) = trimmed.chars().next().filter(|c| *c == '`' || *c == '~') else {
        return false;
    };
    let run = trimmed.chars().take_while(|c| *c == fence).count();
    let info = &trimmed[run..];
    let name_only =
        info.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '#' | '.' | '-'));
    match fence {
        '`' => name_only && (run >= 3 || info.is_empty()),
        _ => name_only && run >= 3,
    }
}

/// True when `text` is inside a fenced code block that has not closed.
fn in_open_fence(text: &str) -> bool {
    let mut open: Option<(char, usize)> = None;
    for line in text.split_inclusive('\n') {
        if !line.ends_with('\n') {
            break;
        }
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() > 3 {
            continue;
        }
        let Some(fence) = trimmed.chars().next().filter(|c| *c == '`' || *c == '~') else {
            continue;
        };
        let run = trimmed.chars().take_while(|c| *c == fence).count();
        if run < 3 {
            continue;
        }
        open = match open {
            None => Some((fence, run)),
            Some((open_fence, open_run))
                if open_fence == fence
                    && run >= open_run
                    && trimmed.trim_end()[run..].is_empty() =>
            {
                None
            }
            still => still,
        };
    }
    open.is_some()
}

/// The paragraph without a link that is still coming: `[text](http://exa` shows `text`, a `[`
/// whose `]` has not come shows nothing from the `[` on. A complete link is left as it is.
fn without_open_link(paragraph: &str) -> Cow<'_, str> {
    let Some(open) = paragraph.rfind('[') else {
        return Cow::Borrowed(paragraph);
    };
    let after = &paragraph[open..];
    match after.find("](") {
        Some(middle) if after[middle..].contains(')') => Cow::Borrowed(paragraph),
        Some(middle) => Cow::Owned(format!("{}{}", &paragraph[..open], &after[1..middle])),
        None if after.contains(']') => Cow::Borrowed(paragraph),
        None => Cow::Borrowed(&paragraph[..open]),
    }
}

/// The paragraph without markers at its end that open a span with nothing in it yet (`a **`):
/// closing them would draw `****`.
fn without_dangling_opener(paragraph: &str) -> &str {
    let trimmed = paragraph.trim_end_matches(['*', '_', '~', '`']);
    let opens = trimmed.is_empty() || trimmed.ends_with(char::is_whitespace);
    if trimmed.len() < paragraph.len() && opens {
        trimmed
    } else {
        paragraph
    }
}

/// Closes the inline spans `paragraph` left open, into `out`: a code span first (inside it
/// nothing else counts), then strikethrough, strong and emphasis markers with odd counts.
fn close_spans(paragraph: &str, out: &mut String) {
    // The text outside code spans, and whether one is open at the end.
    let mut outside = String::with_capacity(paragraph.len());
    let mut in_code = false;
    for (index, part) in paragraph.split('`').enumerate() {
        if index > 0 {
            in_code = !in_code;
        }
        if !in_code {
            outside.push_str(part);
        }
    }
    if in_code {
        out.push('`');
        return;
    }
    for marker in ["~~", "**", "__"] {
        if outside.matches(marker).count() % 2 == 1 {
            out.push_str(marker);
        }
    }
    // Single `*`: those not in a `**`, not a list item's bullet, and not between spaces
    // (`2 * 3` is arithmetic, not emphasis).
    let stars: usize = outside
        .split('\n')
        .map(|line| {
            let line = line.trim_start();
            let line = line.strip_prefix("* ").unwrap_or(line);
            line.replace("**", "").replace(" * ", "  ").matches('*').count()
        })
        .sum();
    if stars % 2 == 1 {
        out.push('*');
    }
    if count_edge_underscores(&outside.replace("__", "")) % 2 == 1 {
        out.push('_');
    }
}

/// `_` that could open or close emphasis: not between two word characters.
fn count_edge_underscores(text: &str) -> usize {
    let chars: Vec<char> = text.chars().collect();
    (0..chars.len())
        .filter(|&index| {
            chars[index] == '_'
                && !(index > 0
                    && chars[index - 1].is_alphanumeric()
                    && chars.get(index + 1).is_some_and(|c| c.is_alphanumeric()))
        })
        .count()
}

/// A table being streamed whose delimiter row is not complete: its head row and a delimiter
/// row for it, so the head draws as a table instead of a line of pipes.
fn table_head(tail: &str) -> Option<String> {
    let mut lines = tail.split('\n');
    let head = lines.next()?;
    let delimiter = lines.next().unwrap_or("");
    if lines.next().is_some() || !head.trim_start().starts_with('|') {
        return None;
    }
    let cells = |row: &str| -> Vec<String> {
        let row = row.trim();
        let row = row.strip_prefix('|').unwrap_or(row);
        let row = row.strip_suffix('|').unwrap_or(row);
        row.split('|').map(|cell| cell.trim().to_owned()).collect()
    };
    let columns = cells(head).len();
    let delimiter_cells = cells(delimiter);
    let complete = delimiter_cells.len() == columns
        && delimiter_cells.iter().all(|cell| {
            let dashes = cell.trim_start_matches(':').trim_end_matches(':');
            !dashes.is_empty() && dashes.chars().all(|c| c == '-')
        });
    let partial = delimiter.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '));
    (!complete && partial).then(|| format!("{head}\n|{}", "---|".repeat(columns)))
}
