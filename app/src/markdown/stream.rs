//! A message's rendered blocks, kept from one token to the next: a top-level block is finished
//! once the next one has begun on a finished line (nothing after it can change it, in
//! CommonMark, but a link reference defined later — those links stay text), rendered once, and
//! kept; only the open block at the end is rendered again. A token's cost is the open block's size, not the
//! message's.

use std::sync::Arc;

use pulldown_cmark::{Event, Parser};

use super::render::{options, to_html};
use super::repair::repair;

/// One top-level block, rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Where it starts in the message's text; with `revision`, its key among the message's
    /// blocks: a finished block keeps both, the open block gets a new revision per render.
    pub start: usize,
    pub revision: u64,
    pub html: Arc<str>,
}

/// How many bytes before the finished part's end are compared to notice a text that changed
/// instead of growing (then everything is rendered again).
const CHECKED_TAIL_BYTES: usize = 64;

/// The blocks of one message as its text grows.
#[derive(Clone, Debug, Default)]
pub struct Blocks {
    done: Vec<Block>,
    /// The text's bytes the finished blocks cover.
    done_until: usize,
    /// The last [`CHECKED_TAIL_BYTES`] of the finished part, as they were.
    done_tail: String,
    open: Option<Block>,
    revision: u64,
}

impl Blocks {
    /// The blocks of `text`, all rendered at once (a finished message, the history page).
    pub fn of(text: &str) -> Blocks {
        let mut blocks = Blocks::default();
        blocks.update(text, true);
        blocks
    }

    /// Brings the blocks up to `text`, which is expected to extend the last text (otherwise
    /// all is rendered again). `finished`: no more text will come, so the open block is drawn
    /// as it is instead of [`repair`]ed.
    pub fn update(&mut self, text: &str, finished: bool) {
        if !self.extends(text) {
            *self = Blocks::default();
        }
        let tail = &text[self.done_until..];
        // A block begins for good only on a finished line: `#` or `***` alone interrupt a
        // paragraph, `#tag` and `***bold***` continue it.
        let settled = if finished { tail.len() } else { tail.rfind('\n').map_or(0, |at| at + 1) };
        let starts: Vec<usize> = block_starts(tail)
            .into_iter()
            .enumerate()
            .filter(|&(index, start)| index == 0 || start < settled)
            .map(|(_, start)| start)
            .collect();
        // Every block but the last is finished.
        let mut from = 0;
        for &start in starts.iter().skip(1) {
            self.revision += 1;
            self.done.push(Block {
                start: self.done_until + from,
                revision: self.revision,
                html: to_html(&tail[from..start]).into(),
            });
            from = start;
        }
        self.done_until += from;
        let keep_from =
            floor_char_boundary(text, self.done_until.saturating_sub(CHECKED_TAIL_BYTES));
        self.done_tail = text[keep_from..self.done_until].to_owned();
        let open = &text[self.done_until..];
        self.revision += 1;
        self.open = (!open.trim().is_empty()).then(|| Block {
            start: self.done_until,
            revision: self.revision,
            html: if finished { to_html(open) } else { to_html(&repair(open)) }.into(),
        });
    }

    /// The blocks in order: the finished ones, then the open one.
    pub fn list(&self) -> Vec<Block> {
        self.done.iter().chain(self.open.as_ref()).cloned().collect()
    }

    /// The whole rendered message (the blocks' HTML, each in a `<div class="block">`), as the
    /// views draw it.
    pub fn html(&self) -> String {
        let mut out = String::new();
        for block in self.done.iter().chain(self.open.as_ref()) {
            out.push_str("<div class=\"block\">");
            out.push_str(&block.html);
            out.push_str("</div>");
        }
        out
    }

    fn extends(&self, text: &str) -> bool {
        text.len() >= self.done_until
            && text.is_char_boundary(self.done_until)
            && text[..self.done_until].ends_with(self.done_tail.as_str())
    }
}

/// Where each top-level block of `text` starts (the first at 0 even after blank lines).
fn block_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(_) => {
                if depth == 0 {
                    starts.push(range.start);
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            _ if depth == 0 => starts.push(range.start),
            _ => {}
        }
    }
    if let Some(first) = starts.first_mut() {
        *first = 0;
    }
    starts
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
