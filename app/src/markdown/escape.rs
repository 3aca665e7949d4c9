//! Text made safe inside HTML: the one escape every renderer's text goes through.

/// `text` with `&`, `<`, `>`, `"` and `'` as entities: safe in element content and in a
/// double-quoted attribute.
pub(super) fn escape_into(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
        out.push_str(&rest[..at]);
        out.push_str(match rest.as_bytes()[at] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}
