//! pulldown-cmark's events to the chat's HTML: every tag written here, every text escaped.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::escape::escape_into;
use super::highlight::{highlight, Language};

/// Lists, block quotes and inline spans nest at most this deep in the rendered HTML; what is
/// deeper is rendered flat. Popular JavaScript renderers overflow their stack near 2 000 levels;
/// a chat never needs more than a handful.
pub const NESTING_DEPTH_MAX: usize = 24;

/// A code block's language name is kept (for its label and class) up to this many characters
/// of `[A-Za-z0-9_+#.-]`; anything else is no language.
pub const CODE_LANGUAGE_CHARS_MAX: usize = 32;

/// What the parser reads beyond CommonMark: what models emit.
pub(super) fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// `text` as the chat's HTML (see the module's rules).
pub fn to_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4 + 16);
    let mut renderer = Renderer {
        out: &mut out,
        open: Vec::new(),
        code: None,
        image: None,
        table: Vec::new(),
        cell: 0,
        in_head: false,
        in_link: 0,
        text: String::new(),
    };
    for event in Parser::new_ext(text, options()) {
        renderer.event(event);
    }
    renderer.flush_text();
    out
}

/// True when `url` may be a link's address: `http:`, `https:`, `mailto:`, or no scheme (a path,
/// query or fragment). The scheme is read as a browser reads it: ASCII whitespace
/// and control characters inside it are dropped, and case does not matter.
pub fn url_is_safe(url: &str) -> bool {
    let cleaned: String = url
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && !c.is_ascii_control())
        .collect::<String>()
        .to_ascii_lowercase();
    match cleaned.find([':', '/', '?', '#']) {
        Some(at) if cleaned[at..].starts_with(':') => {
            let scheme = &cleaned[..at];
            matches!(scheme, "http" | "https" | "mailto")
        }
        // No scheme: a path, query or fragment (`//host/…` takes this page's scheme, http or
        // https).
        _ => true,
    }
}

/// A code block being collected: its language and its text.
struct Code {
    language: String,
    text: String,
}

/// An image being collected: its address and its alt text.
struct Image {
    url: String,
    alt: String,
}

struct Renderer<'o> {
    out: &'o mut String,
    /// The closing tag of each open element, `""` where the opening was not written (too deep,
    /// or an element the chat does not draw).
    open: Vec<&'static str>,
    code: Option<Code>,
    image: Option<Image>,
    /// The open table's column alignments, the cell being written and whether it is the head.
    table: Vec<Alignment>,
    cell: usize,
    in_head: bool,
    /// Inside a link: bare URLs in its text are not links again.
    in_link: usize,
    /// Text not yet written: the parser may cut one run of text into several events (at a
    /// `_` that opens nothing, say), and a bare address must be found across them.
    text: String,
}

impl Renderer<'_> {
    fn event(&mut self, event: Event<'_>) {
        if let Some(code) = &mut self.code {
            match event {
                Event::Text(text) => code.text.push_str(&text),
                Event::End(TagEnd::CodeBlock) => self.end_code(),
                _ => {}
            }
            return;
        }
        if let Some(image) = &mut self.image {
            match event {
                Event::Text(text) | Event::Code(text) => image.alt.push_str(&text),
                Event::End(TagEnd::Image) => self.end_image(),
                _ => {}
            }
            return;
        }
        if let Event::Text(text) = &event {
            self.text.push_str(text);
            return;
        }
        self.flush_text();
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(end) => self.end(end),
            Event::Text(_) => {}
            Event::Code(code) => {
                self.out.push_str("<code>");
                escape_into(self.out, &code);
                self.out.push_str("</code>");
            }
            // Raw HTML is text: shown, never parsed into the page.
            Event::Html(html) | Event::InlineHtml(html) => escape_into(self.out, &html),
            // A chat keeps the writer's line breaks (as GitHub's comments do), where a document
            // would join the lines.
            Event::SoftBreak => self.out.push_str("<br>"),
            Event::HardBreak => self.out.push_str("<br>"),
            Event::Rule => self.out.push_str("<hr>"),
            Event::TaskListMarker(checked) => self.out.push_str(if checked {
                "<input type=\"checkbox\" disabled checked> "
            } else {
                "<input type=\"checkbox\" disabled> "
            }),
            Event::FootnoteReference(label) => {
                self.out.push('[');
                escape_into(self.out, &label);
                self.out.push(']');
            }
            Event::InlineMath(math) | Event::DisplayMath(math) => escape_into(self.out, &math),
        }
    }

    fn flush_text(&mut self) {
        if self.text.is_empty() {
            return;
        }
        if self.in_link > 0 {
            escape_into(self.out, &self.text);
        } else {
            linkify_into(self.out, &self.text);
        }
        self.text.clear();
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::CodeBlock(kind) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => language_of(&info),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(Code { language, text: String::new() });
            }
            Tag::Image { dest_url, .. } => {
                self.image = Some(Image { url: dest_url.into_string(), alt: String::new() });
            }
            Tag::Link { dest_url, title, .. } => {
                self.in_link += 1;
                if url_is_safe(&dest_url) && self.room() {
                    self.out.push_str("<a href=\"");
                    escape_into(self.out, &dest_url);
                    self.out.push('"');
                    if !title.is_empty() {
                        self.out.push_str(" title=\"");
                        escape_into(self.out, &title);
                        self.out.push('"');
                    }
                    self.out.push_str(" rel=\"noopener noreferrer nofollow\" target=\"_blank\">");
                    self.open.push("</a>");
                } else {
                    self.open.push("");
                }
            }
            Tag::Table(alignments) => {
                self.table = alignments;
                self.open_tag("<div class=\"table\"><table>", "</tbody></table></div>");
            }
            Tag::TableHead => {
                self.in_head = true;
                self.cell = 0;
                self.open_tag("<thead><tr>", "</tr></thead><tbody>");
            }
            Tag::TableRow => {
                self.cell = 0;
                self.open_tag("<tr>", "</tr>");
            }
            Tag::TableCell => {
                let (open, close) = match (self.in_head, self.table.get(self.cell)) {
                    (true, Some(Alignment::Left)) => ("<th class=\"left\">", "</th>"),
                    (true, Some(Alignment::Center)) => ("<th class=\"center\">", "</th>"),
                    (true, Some(Alignment::Right)) => ("<th class=\"right\">", "</th>"),
                    (true, _) => ("<th>", "</th>"),
                    (false, Some(Alignment::Left)) => ("<td class=\"left\">", "</td>"),
                    (false, Some(Alignment::Center)) => ("<td class=\"center\">", "</td>"),
                    (false, Some(Alignment::Right)) => ("<td class=\"right\">", "</td>"),
                    (false, _) => ("<td>", "</td>"),
                };
                self.cell += 1;
                self.open_tag(open, close);
            }
            Tag::Paragraph => self.open_tag("<p>", "</p>"),
            Tag::Heading { level, .. } => {
                let (open, close) = match level as usize {
                    1 => ("<h1>", "</h1>"),
                    2 => ("<h2>", "</h2>"),
                    3 => ("<h3>", "</h3>"),
                    4 => ("<h4>", "</h4>"),
                    5 => ("<h5>", "</h5>"),
                    _ => ("<h6>", "</h6>"),
                };
                self.open_tag(open, close);
            }
            Tag::BlockQuote(_) => self.open_tag("<blockquote>", "</blockquote>"),
            Tag::HtmlBlock => self.open_tag("<p class=\"raw-html\">", "</p>"),
            Tag::List(Some(1)) => self.open_tag("<ol>", "</ol>"),
            Tag::List(Some(start)) => {
                if self.room() {
                    self.out.push_str(&format!("<ol start=\"{start}\">"));
                    self.open.push("</ol>");
                } else {
                    self.open.push("");
                }
            }
            Tag::List(None) => self.open_tag("<ul>", "</ul>"),
            Tag::Item => self.open_tag("<li>", "</li>"),
            Tag::Emphasis => self.open_tag("<em>", "</em>"),
            Tag::Strong => self.open_tag("<strong>", "</strong>"),
            Tag::Strikethrough => self.open_tag("<del>", "</del>"),
            // Not enabled; if they ever come, their text shows without a tag.
            _ => self.open.push(""),
        }
    }

    fn end(&mut self, end: TagEnd) {
        match end {
            TagEnd::Link => self.in_link = self.in_link.saturating_sub(1),
            TagEnd::TableHead => self.in_head = false,
            _ => {}
        }
        if let Some(close) = self.open.pop() {
            self.out.push_str(close);
        }
    }

    /// Whether another element may open (the nesting cap).
    fn room(&self) -> bool {
        self.open.iter().filter(|close| !close.is_empty()).count() < NESTING_DEPTH_MAX
    }

    fn open_tag(&mut self, open: &'static str, close: &'static str) {
        if self.room() {
            self.out.push_str(open);
            self.open.push(close);
        } else {
            self.open.push("");
        }
    }

    fn end_code(&mut self) {
        let Some(code) = self.code.take() else { return };
        self.out
            .push_str("<div class=\"code\"><div class=\"code-bar\"><span class=\"code-language\">");
        escape_into(self.out, &code.language);
        self.out.push_str(
            "</span><button type=\"button\" class=\"copy-code\" title=\"Copy the code\">Copy</button></div><pre><code",
        );
        if !code.language.is_empty() {
            self.out.push_str(" class=\"language-");
            escape_into(self.out, &code.language);
            self.out.push('"');
        }
        self.out.push('>');
        highlight(Language::of(&code.language), &code.text, self.out);
        self.out.push_str("</code></pre></div>");
    }

    fn end_image(&mut self) {
        let Some(image) = self.image.take() else {
            return;
        };
        // Never an <img>: reading an answer must not fetch anything. The alt text and, where
        // the address may be a link, a link to open it deliberately.
        self.out.push_str("<span class=\"image\">");
        let alt = if image.alt.trim().is_empty() { "image" } else { image.alt.trim() };
        escape_into(self.out, alt);
        if url_is_safe(&image.url) && !image.url.is_empty() {
            self.out.push_str(" <a href=\"");
            escape_into(self.out, &image.url);
            self.out.push_str("\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">");
            escape_into(self.out, &image.url);
            self.out.push_str("</a>");
        }
        self.out.push_str("</span>");
    }
}

/// The language named by a fence's info string: its first word, if it is a plain name.
fn language_of(info: &str) -> String {
    let word = info.split_whitespace().next().unwrap_or_default();
    let plain = word.len() <= CODE_LANGUAGE_CHARS_MAX
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '#' | '.' | '-'));
    if plain {
        word.to_ascii_lowercase()
    } else {
        String::new()
    }
}

/// `text` escaped, with each bare `http://` or `https://` address made a link (what GFM calls
/// an extended autolink): models write addresses without angle brackets.
fn linkify_into(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = find_url(rest) {
        escape_into(out, &rest[..at]);
        let url = url_at(&rest[at..]);
        out.push_str("<a href=\"");
        escape_into(out, url);
        out.push_str("\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">");
        escape_into(out, url);
        out.push_str("</a>");
        rest = &rest[at + url.len()..];
    }
    escape_into(out, rest);
}

/// Where the next bare address starts: `http://` or `https://` at a word's start, with
/// something after it.
fn find_url(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find("http") {
        let at = from + found;
        let after = &text[at..];
        let starts_word = text[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let scheme = if after.starts_with("https://") {
            8
        } else if after.starts_with("http://") {
            7
        } else {
            0
        };
        if starts_word && scheme > 0 && url_at(after).len() > scheme {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// The address at the start of `text`: up to whitespace or `<`, without trailing punctuation
/// (a sentence's full stop, a closing parenthesis it did not open).
fn url_at(text: &str) -> &str {
    let end = text.find(|c: char| c.is_whitespace() || c == '<').unwrap_or(text.len());
    let mut url = &text[..end];
    loop {
        let trimmed = url.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '"', '*', '_']);
        let trimmed = if trimmed.ends_with(')')
            && trimmed.matches('(').count() < trimmed.matches(')').count()
        {
            &trimmed[..trimmed.len() - 1]
        } else {
            trimmed
        };
        if trimmed.len() == url.len() {
            return url;
        }
        url = trimmed;
    }
}
