//! What of a failure's text may reach clients: every event of the log is read by every client
//! of the agent, so an address in an error (an MCP server's URL may carry a key, a provider's
//! base URL a token) is cut to its scheme and host before it is written there. The operator's
//! log keeps the whole text.

/// `text` with every `http://…` / `https://…` address cut to `scheme://host[:port]/…` (a user
/// and password before the host go too).
pub fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = ["http://", "https://", "ws://", "wss://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme).map(|at| (at, scheme.len())))
        .min()
    {
        let (at, scheme_len) = start;
        out.push_str(&rest[..at]);
        let address = &rest[at..];
        let end = address
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | ','))
            .unwrap_or(address.len());
        let (scheme, after) = address[..end].split_at(scheme_len);
        let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let authority = &after[..authority_end];
        let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        out.push_str(scheme);
        out.push_str(host);
        if authority_end < after.len() || authority.len() != host.len() {
            out.push_str("/…");
        }
        rest = &address[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses_keep_only_their_host() {
        let cases = [
            ("no address here", "no address here"),
            (
                "error sending request for url (https://api.example.com/v1/messages?key=sk-1)",
                "error sending request for url (https://api.example.com/…)",
            ),
            (
                "the MCP handshake with http://user:pw@10.0.0.5:3001/mcp/abc failed: eof",
                "the MCP handshake with http://10.0.0.5:3001/… failed: eof",
            ),
            ("http://host", "http://host"),
            ("a http://a/x and wss://b/y?t=1", "a http://a/… and wss://b/…"),
        ];
        for (text, expected) in cases {
            assert_eq!(super::urls(text), expected, "{text}");
        }
    }
}
