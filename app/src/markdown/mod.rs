//! Markdown as the chat shows it: user text and model output rendered to a small, fixed set of
//! HTML elements — the same string on the server (the history page, no script needed) and in the
//! browser (the live view), so both draw one DOM. Pure.
//!
//! The text is hostile input. The renderer writes every tag and attribute itself from
//! pulldown-cmark's events (CommonMark plus tables, strikethrough and task lists) and escapes all
//! text, so nothing in a message becomes markup it did not choose:
//! - raw HTML (blocks and inline) is shown as text;
//! - a link is a link only to `http:`, `https:`, `mailto:` or a path of this site; `javascript:`,
//!   `data:`, `vbscript:` and any other scheme stay text;
//! - links open a new tab with `rel="noopener noreferrer nofollow"`;
//! - images are never fetched: an image is shown as its alt text and a link to its address,
//!   so an answer cannot ping a third party by being read;
//! - containers nest at most [`NESTING_DEPTH_MAX`] deep; deeper markers still show their text
//!   (the parser itself is iterative, and so is the renderer: no input overflows a stack).
//!
//! A streamed answer is cut into its top-level blocks ([`Blocks`]): finished blocks are rendered
//! once and kept, and only the open block at the end is rendered again for each token, after
//! [`repair`] closes what a token cut in half (a lone `**`, a link without its address, a table
//! without its delimiter row).

mod escape;
mod highlight;
mod render;
mod repair;
mod stream;

pub use highlight::{highlight, Language};
pub use render::{to_html, url_is_safe, CODE_LANGUAGE_CHARS_MAX, NESTING_DEPTH_MAX};
pub use repair::repair;
pub use stream::{Block, Blocks};

#[cfg(test)]
mod tests;
