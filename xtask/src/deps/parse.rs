//! Reading a Rust file for the module graph: its code without comments and literals, the paths
//! its `use` statements name (trees expanded), and the paths its code names. Pure.

/// `text` with comments, string, byte-string and char literals blanked (lengths kept), so that
/// what remains is code: a path in a doc comment or a string is not an import.
pub fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: &[u8]| {
        out.extend(from.iter().map(|&b| if b == b'\n' { b'\n' } else { b' ' }))
    };
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, 0usize);
            while j < rest.len() {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &rest[..j.min(rest.len())]);
            i += j.min(rest.len());
        } else if let Some(len) = raw_string_len(rest) {
            blank(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == b'"' || rest.starts_with(b"b\"") {
            let start = usize::from(rest[0] == b'b');
            let mut j = start + 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'\'' {
            // A char literal ('x', '\n', '\u{1F600}'), else a lifetime or label.
            let len = if rest.get(1) == Some(&b'\\') {
                rest[2..].iter().position(|&b| b == b'\'').map(|p| p + 3)
            } else {
                let width = std::str::from_utf8(&rest[1..rest.len().min(5)])
                    .ok()
                    .or_else(|| std::str::from_utf8(&rest[1..rest.len().min(2)]).ok())
                    .and_then(|s| s.chars().next())
                    .map_or(1, char::len_utf8);
                (rest.get(1 + width) == Some(&b'\'')).then_some(width + 2)
            };
            match len {
                Some(len) => {
                    blank(&mut out, &rest[..len]);
                    i += len;
                }
                None => {
                    out.push(b'\'');
                    i += 1;
                }
            }
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The length of a raw (byte) string literal at the start of `rest`: `r"…"`, `r#"…"#`, `br#"…"#`.
fn raw_string_len(rest: &[u8]) -> Option<usize> {
    let start = if rest.starts_with(b"br") {
        2
    } else if rest.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = rest[start..].iter().take_while(|&&b| b == b'#').count();
    if rest.get(start + hashes) != Some(&b'"') {
        return None;
    }
    let mut closing = vec![b'"'];
    closing.extend(std::iter::repeat_n(b'#', hashes));
    let body = start + hashes + 1;
    let end =
        rest[body..].windows(closing.len()).position(|window| window == closing.as_slice())?;
    Some(body + end + closing.len())
}

/// One `use` statement's paths, its tree expanded: `use a::{b, c::{d as e, self}};` gives
/// `a::b`, `a::c::d` (bound as `e`) and `a::c`. Each with the name it binds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsePath {
    pub segments: Vec<String>,
    /// The name it binds in the file (the last segment, or its `as`), `*` for a glob.
    pub bound: String,
    /// A `pub` (any visibility) `use`: a re-export.
    pub public: bool,
    /// Where its statement starts in the code.
    pub at: usize,
}

/// Every `use` statement of `code` (see [`code_only`]), expanded.
pub fn use_paths(code: &str) -> Vec<UsePath> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while let Some(found) = code[i..].find("use ") {
        let at = i + found;
        i = at + 4;
        let word_start = at == 0 || !is_ident_byte(bytes[at - 1]);
        if !word_start {
            continue;
        }
        let before = code[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        // A statement: `use` starts it (after `;`, `{`, `}`, an attribute or a visibility).
        let statement_start = before.is_empty()
            || before.ends_with(';')
            || before.ends_with('{')
            || before.ends_with('}')
            || before.ends_with(']')
            || public;
        if !statement_start {
            continue;
        }
        let Some(end) = code[i..].find(';') else {
            break;
        };
        let tree = normalize(&code[i..i + end]);
        let first = paths.len();
        expand(&tree, &mut Vec::new(), public, &mut paths);
        for path in &mut paths[first..] {
            path.at = at;
        }
        i += end;
    }
    paths
}

fn expand(tree: &str, prefix: &mut Vec<String>, public: bool, out: &mut Vec<UsePath>) {
    let tree = tree.trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head = &tree[..open];
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let pushed: Vec<String> =
            head.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
        let depth = prefix.len();
        prefix.extend(pushed);
        for part in split_top(inner) {
            if !part.is_empty() {
                expand(part, prefix, public, out);
            }
        }
        prefix.truncate(depth);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim().to_owned())),
        None => (tree, None),
    };
    let mut segments = prefix.clone();
    segments.extend(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned));
    if segments.last().is_some_and(|last| last == "self") {
        segments.pop();
    }
    let Some(last) = segments.last().cloned() else {
        return;
    };
    out.push(UsePath { bound: alias.unwrap_or(last), segments, public, at: 0 });
}

/// A `use` tree with its whitespace collapsed: single spaces, none around `::`, braces and
/// commas — so `as` is the only word with spaces around it.
fn normalize(tree: &str) -> String {
    let collapsed = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(collapsed.len());
    let chars: Vec<char> = collapsed.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        if c == ' ' {
            let before = index.checked_sub(1).map(|i| chars[i]);
            let after = chars.get(index + 1).copied();
            let glue = |c: Option<char>| matches!(c, Some(':' | '{' | '}' | ','));
            if glue(before) || glue(after) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// `a, b::{c, d}, e` at the top level of braces.
fn split_top(inner: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (index, byte) in inner.bytes().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&inner[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

fn is_ident_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Every path of two or more segments in `code` and where it starts: `a::b::c` (a type, a
/// function, a module) — the caller keeps those whose first segment it can resolve.
pub fn code_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident_byte(bytes[i])
            || (i > 0 && (is_ident_byte(bytes[i - 1]) || bytes[i - 1] == b':'))
        {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < bytes.len() && is_ident_byte(bytes[j]) {
                j += 1;
            }
            segments.push(code[start..j].to_owned());
            if code[j..].starts_with("::")
                && code[j + 2..].bytes().next().is_some_and(is_ident_byte)
            {
                j += 2;
            } else {
                break;
            }
        }
        if segments.len() >= 2 && segments[0] != "use" {
            paths.push((i, segments));
        }
        i = j.max(i + 1);
    }
    paths
}

/// The bodies of the inline modules of `code` (`mod tests { … }`), as byte ranges: in them a
/// path's first `super` is the file's own module.
pub fn inline_modules(code: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = code.as_bytes();
    let mut ranges = Vec::new();
    let mut i = 0;
    while let Some(found) = code[i..].find("mod ") {
        let at = i + found;
        i = at + 4;
        if at > 0 && is_ident_byte(bytes[at - 1]) {
            continue;
        }
        let name_end = i + code[i..].bytes().take_while(|&b| is_ident_byte(b)).count();
        let after = code[name_end..].trim_start();
        if name_end == i || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        for (offset, byte) in code[open..].bytes().enumerate() {
            match byte {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        ranges.push(open..open + offset);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    ranges
}

/// `path` as the file's module sees it, when it is named at `at` inside `depth` inline modules:
/// the first `depth` `super`s stay in the file (then it names the file's own items: `self`).
pub fn out_of_inline(path: &[String], depth: usize) -> Vec<String> {
    let supers = path.iter().take_while(|segment| *segment == "super").count();
    if depth == 0 || supers == 0 {
        return path.to_vec();
    }
    if supers <= depth {
        let mut own = vec!["self".to_owned()];
        own.extend(path[supers..].iter().cloned());
        return own;
    }
    path[depth..].to_vec()
}
