//! Syntax colours for the languages models write most, from a small lexer instead of grammars:
//! comments, strings, numbers and keywords, each a `<span class="tok-…">`, everything escaped.
//! Linear in the code's length; a few kilobytes of wasm instead of a grammar set's hundreds.

use super::escape::escape_into;

/// The languages with colours; the rest are shown plain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Rust,
    Python,
    /// JavaScript and TypeScript (and JSX/TSX).
    Script,
    Json,
    Shell,
    Sql,
    Plain,
}

impl Language {
    /// The language a fence names (`rust`, `py`, `tsx`, `bash`…), lower-case.
    pub fn of(name: &str) -> Language {
        match name {
            "rust" | "rs" => Language::Rust,
            "python" | "py" | "python3" => Language::Python,
            "javascript" | "js" | "jsx" | "mjs" | "cjs" | "typescript" | "ts" | "tsx" => {
                Language::Script
            }
            "json" | "jsonc" | "json5" => Language::Json,
            "sh" | "bash" | "shell" | "zsh" | "console" | "shellsession" => Language::Shell,
            "sql" | "postgresql" | "postgres" | "sqlite" | "mysql" => Language::Sql,
            _ => Language::Plain,
        }
    }

    fn line_comment(self) -> &'static [&'static str] {
        match self {
            Language::Rust | Language::Script | Language::Json => &["//"],
            Language::Python | Language::Shell => &["#"],
            Language::Sql => &["--"],
            Language::Plain => &[],
        }
    }

    fn block_comment(self) -> Option<(&'static str, &'static str)> {
        match self {
            Language::Rust | Language::Script | Language::Sql | Language::Json => {
                Some(("/*", "*/"))
            }
            _ => None,
        }
    }

    fn quotes(self) -> &'static [char] {
        match self {
            Language::Rust | Language::Json => &['"'],
            Language::Script => &['"', '\'', '`'],
            Language::Python | Language::Shell | Language::Sql => &['"', '\''],
            Language::Plain => &[],
        }
    }

    fn is_keyword(self, word: &str) -> bool {
        let list: &[&str] = match self {
            Language::Rust => &[
                "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else",
                "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match",
                "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct",
                "super", "trait", "true", "type", "unsafe", "use", "where", "while",
            ],
            Language::Python => &[
                "and", "as", "assert", "async", "await", "break", "class", "continue", "def",
                "del", "elif", "else", "except", "False", "finally", "for", "from", "global", "if",
                "import", "in", "is", "lambda", "None", "nonlocal", "not", "or", "pass", "raise",
                "return", "True", "try", "while", "with", "yield",
            ],
            Language::Script => &[
                "as",
                "async",
                "await",
                "break",
                "case",
                "catch",
                "class",
                "const",
                "continue",
                "default",
                "delete",
                "do",
                "else",
                "export",
                "extends",
                "false",
                "finally",
                "for",
                "from",
                "function",
                "if",
                "implements",
                "import",
                "in",
                "instanceof",
                "interface",
                "let",
                "new",
                "null",
                "of",
                "return",
                "static",
                "super",
                "switch",
                "this",
                "throw",
                "true",
                "try",
                "type",
                "typeof",
                "undefined",
                "var",
                "void",
                "while",
                "yield",
            ],
            Language::Json => &["true", "false", "null"],
            Language::Shell => &[
                "case", "do", "done", "elif", "else", "esac", "export", "fi", "for", "function",
                "if", "in", "local", "return", "then", "until", "while",
            ],
            Language::Sql => {
                return [
                    "select",
                    "from",
                    "where",
                    "insert",
                    "into",
                    "values",
                    "update",
                    "set",
                    "delete",
                    "create",
                    "table",
                    "index",
                    "drop",
                    "alter",
                    "join",
                    "left",
                    "right",
                    "inner",
                    "outer",
                    "on",
                    "and",
                    "or",
                    "not",
                    "null",
                    "is",
                    "in",
                    "as",
                    "group",
                    "by",
                    "order",
                    "having",
                    "limit",
                    "offset",
                    "primary",
                    "key",
                    "references",
                    "default",
                    "union",
                    "distinct",
                    "case",
                    "when",
                    "then",
                    "else",
                    "end",
                    "exists",
                    "begin",
                    "commit",
                    "returning",
                    "with",
                    "like",
                    "between",
                ]
                .iter()
                .any(|keyword| keyword.eq_ignore_ascii_case(word))
            }
            Language::Plain => &[],
        };
        list.contains(&word)
    }
}

/// `code` in `language`, escaped, with its tokens in `<span class="tok-comment|string|number|
/// keyword">` into `out`.
pub fn highlight(language: Language, code: &str, out: &mut String) {
    if language == Language::Plain {
        escape_into(out, code);
        return;
    }
    let bytes = code.as_bytes();
    let mut at = 0;
    let mut plain_from = 0;
    while at < code.len() {
        let rest = &code[at..];
        let token = if let Some(marker) =
            language.line_comment().iter().find(|marker| rest.starts_with(**marker))
        {
            // A shell `#` only starts a comment at a word's start (`a#b` is a word).
            let starts_word = at == 0 || bytes[at - 1].is_ascii_whitespace();
            (*marker != "#" || language != Language::Shell || starts_word)
                .then(|| ("comment", rest.find('\n').unwrap_or(rest.len())))
        } else if let Some((open, close)) =
            language.block_comment().filter(|(open, _)| rest.starts_with(open))
        {
            let end = rest[open.len()..]
                .find(close)
                .map_or(rest.len(), |end| open.len() + end + close.len());
            Some(("comment", end))
        } else if let Some(quote) = rest.chars().next().filter(|c| language.quotes().contains(c)) {
            Some(("string", string_length(rest, quote)))
        } else if rest.as_bytes()[0].is_ascii_digit() && (at == 0 || !is_word_byte(bytes[at - 1])) {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .unwrap_or(rest.len());
            Some(("number", end))
        } else if is_word_byte(rest.as_bytes()[0]) && (at == 0 || !is_word_byte(bytes[at - 1])) {
            let end =
                rest.find(|c: char| !c.is_ascii() || !is_word_byte(c as u8)).unwrap_or(rest.len());
            if language.is_keyword(&rest[..end]) {
                Some(("keyword", end))
            } else {
                // A plain word: skip it whole, so its inside is not read as numbers.
                at += end;
                continue;
            }
        } else {
            None
        };
        match token {
            Some((class, length)) if length > 0 => {
                escape_into(out, &code[plain_from..at]);
                out.push_str("<span class=\"tok-");
                out.push_str(class);
                out.push_str("\">");
                escape_into(out, &rest[..length]);
                out.push_str("</span>");
                at += length;
                plain_from = at;
            }
            _ => at += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    escape_into(out, &code[plain_from..]);
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The length of the string literal at the start of `text`, opened by `quote`: to its closing
/// quote (a backslash escapes the next character), or to the line's end when it is not closed
/// (a template literal may span lines).
fn string_length(text: &str, quote: char) -> usize {
    let mut escaped = false;
    for (index, c) in text.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return index + 1;
        } else if c == '\n' && quote != '`' {
            return index;
        }
    }
    text.len()
}
