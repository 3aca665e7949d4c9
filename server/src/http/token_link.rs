//! A page opened with `?token=`: whether the browser starts acting as the link's identity at
//! once, or first shows who the link signs in as and asks. A link from another site must not
//! swap who the page acts as behind the person's back (the victim would type into the
//! attacker's agent), and a cookie already there must not silently beat a fresh link (a shared
//! browser would show one person another's agents). Pure: the decision and the page.

use super::caller::Caller;

/// What to do with a page request that carries `?token=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkDecision {
    /// Keep the link's token in the cookie and redirect to the page without it.
    Keep,
    /// Show who the link signs in as (and who the browser is now) and ask to continue.
    Ask,
}

/// The query parameter the confirmation page's Continue link adds.
pub const CONTINUE_QUERY: &str = "continue";

/// `site` is the request's `Sec-Fetch-Site` (`None`: not sent — not a browser, or an old one),
/// `confirmed` whether it carries `continue=1`, `current` the identity of the cookie already
/// there (if a valid one), `linked` the link's identity.
pub fn decide(
    site: Option<&str>,
    confirmed: bool,
    current: Option<&str>,
    linked: &str,
) -> LinkDecision {
    // A navigation this site made (its own Continue link), or one no browser marked.
    let from_here = matches!(site, None | Some("same-origin"));
    if confirmed && from_here {
        return LinkDecision::Keep;
    }
    // Opened by the person (typed, a bookmark) or from this site, with nobody else signed in.
    let opened_here = from_here || site == Some("none");
    let swaps = current.is_some_and(|current| current != linked);
    if opened_here && !swaps {
        LinkDecision::Keep
    } else {
        LinkDecision::Ask
    }
}

/// Who a caller is, in words a person recognizes (and compares).
pub fn identity(caller: &Caller) -> String {
    match caller {
        Caller::Operator => "the operator".to_owned(),
        Caller::User(grant, _) => format!("user {}", grant.sub),
    }
}

/// The confirmation page: the link's identity and what it reaches, the current one if any, and
/// a Continue link back to the same address (a navigation from this site).
pub fn confirm_page(continue_url: &str, linked: &Caller, current: Option<&Caller>) -> String {
    let what = match linked {
        Caller::Operator => "every agent, with every operation".to_owned(),
        Caller::User(grant, _) => format!(
            "{} ({}), until {}",
            grant.agents.join(", "),
            grant.scopes,
            chrono::DateTime::from_timestamp(grant.expires_at, 0)
                .map_or_else(|| grant.expires_at.to_string(), |time| time.to_rfc3339())
        ),
    };
    let now = match current {
        Some(current) => format!(
            "<p>This browser is signed in as <strong>{}</strong> now; continuing replaces it.</p>",
            escape(&identity(current))
        ),
        None => String::new(),
    };
    let linked_name = escape(&identity(linked));
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>agentstream: open \
         as {linked_name}?</title></head><body><main><h1>Open agentstream as {linked_name}?</h1>\
         <p>This link signs this browser in as <strong>{linked_name}</strong>: {}.</p>{now}\
         <p><a class=\"continue\" href=\"{}\">Continue as {linked_name}</a> · \
         <a href=\"/\">Stay as I am</a></p></main></body></html>",
        escape(&what),
        escape(continue_url),
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use LinkDecision::{Ask, Keep};

    #[test]
    fn a_link_swaps_identity_only_when_the_person_opened_it_or_confirmed() {
        // (Sec-Fetch-Site, continue=1, the cookie's identity, decision)
        let cases = [
            (Some("none"), false, None, Keep),
            (Some("same-origin"), false, None, Keep),
            (None, false, None, Keep),
            (Some("cross-site"), false, None, Ask),
            (Some("same-site"), false, None, Ask),
            // Signed in as someone else: always asked, however it was opened.
            (Some("none"), false, Some("user a"), Ask),
            (Some("same-origin"), false, Some("user a"), Ask),
            (None, false, Some("user a"), Ask),
            // The same identity (a fresh token of the same user): no question.
            (Some("none"), false, Some("user b"), Keep),
            // The Continue link (a navigation of this site) is the person's yes…
            (Some("same-origin"), true, Some("user a"), Keep),
            (None, true, Some("user a"), Keep),
            // …which another site cannot forge.
            (Some("cross-site"), true, Some("user a"), Ask),
            (Some("cross-site"), true, None, Ask),
            (Some("none"), true, Some("user a"), Ask),
        ];
        for (site, confirmed, current, expected) in cases {
            assert_eq!(
                decide(site, confirmed, current, "user b"),
                expected,
                "{site:?} continue={confirmed} current={current:?}"
            );
        }
    }

    #[test]
    fn the_page_names_both_identities_and_escapes_them() {
        let page = confirm_page("/?token=x&amp;continue=1\"", &Caller::Operator, None);
        assert!(page.contains("Open agentstream as the operator?"), "{page}");
        assert!(!page.contains("continue=1\""), "the address is escaped: {page}");
        assert!(!page.contains("signed in as"), "{page}");
    }
}
