//! Reading requests: path ids, query parameters, optional JSON bodies, cursors — each bad value
//! answered with a sentence that names it.

use super::pager::Pager;
use axum::http::StatusCode;
use serde::Deserialize;
use uuid::Uuid;

use super::error::ApiError;
use crate::store::EventLog;

/// Parses a path id, with an error that says which id was wrong.
pub fn parse_agent_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| {
        ApiError::bad_request("invalid_id", format!("agent id {text:?} is not a UUID"))
    })
}

/// Parses a non-negative integer query parameter, naming it in the error.
fn parse_count(name: &str, text: Option<&str>) -> Result<Option<u64>, ApiError> {
    let Some(text) = text else { return Ok(None) };
    text.parse::<u64>().map(Some).map_err(|_| {
        ApiError::bad_request(
            "invalid_query",
            format!("{name}={text:?} is not a non-negative integer"),
        )
    })
}

/// Query parameters are taken as text and parsed here, so every bad value gets a sentence that
/// names it.
#[derive(Debug, Deserialize)]
pub struct CountQuery {
    since: Option<String>,
    limit: Option<String>,
    coalesce: Option<String>,
}

impl CountQuery {
    /// `since`, parsed, if given.
    pub fn since_value(&self) -> Result<Option<u64>, ApiError> {
        parse_count("since", self.since.as_deref())
    }

    /// `limit`, parsed and checked against `max`; `default` when absent.
    pub fn limit_value(&self, default: u32, max: u32) -> Result<u32, ApiError> {
        page_limit(self.limit.as_deref(), default, max)
    }

    /// `coalesce=true|false` (also `1|0`): merge runs of token appends ([`app::coalesce`]).
    /// Off when absent.
    pub fn coalesce_value(&self) -> Result<bool, ApiError> {
        match self.coalesce.as_deref() {
            None | Some("false" | "0") => Ok(false),
            Some("true" | "1") => Ok(true),
            Some(other) => Err(ApiError::bad_request(
                "invalid_query",
                format!("coalesce={other:?} is not true or false"),
            )),
        }
    }
}

fn page_limit(text: Option<&str>, default: u32, max: u32) -> Result<u32, ApiError> {
    match parse_count("limit", text)? {
        // A server configured with a smaller maximum than the default page serves its maximum.
        None => Ok(default.min(max)),
        Some(0) => Err(ApiError::bad_request("invalid_query", "limit must be at least 1")),
        Some(limit) if limit > max as u64 => Err(ApiError::bad_request(
            "limit_too_large",
            format!("limit={limit} is over the maximum of {max}"),
        )),
        Some(limit) => Ok(limit as u32),
    }
}

/// `GET /v1/agents` takes Letta's list parameters; others Letta has (filters by project,
/// template, tags …) are accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    limit: Option<String>,
    after: Option<String>,
    before: Option<String>,
    order: Option<String>,
}

impl ListQuery {
    #[cfg(test)]
    pub(crate) fn new(
        after: Option<String>,
        before: Option<String>,
        limit: usize,
        descending: bool,
    ) -> ListQuery {
        ListQuery {
            limit: Some(limit.to_string()),
            after,
            before,
            order: Some(if descending { "desc" } else { "asc" }.to_owned()),
        }
    }

    /// A [`Pager`] for this query: the same page as [`ListQuery::page`], picked as the items
    /// come oldest first, holding at most `limit` of them.
    pub fn pager<T>(&self, default: u32, max: u32) -> Result<Pager<T>, ApiError> {
        let limit = page_limit(self.limit.as_deref(), default, max)? as usize;
        Ok(Pager::new(self.after.clone(), self.before.clone(), limit, self.descending()?))
    }

    /// True for newest first: Letta's default.
    pub fn descending(&self) -> Result<bool, ApiError> {
        match self.order.as_deref() {
            None | Some("desc") => Ok(true),
            Some("asc") => Ok(false),
            Some(other) => Err(ApiError::bad_request(
                "invalid_query",
                format!("order={other:?}: use asc or desc"),
            )),
        }
    }

    /// One page of `items` (in list order): after the item `after`, before the item `before`,
    /// at most `limit` — Letta's id cursors.
    pub fn page<T>(
        &self,
        mut items: Vec<T>,
        id: impl Fn(&T) -> String,
        default: u32,
        max: u32,
    ) -> Result<Vec<T>, ApiError> {
        let limit = page_limit(self.limit.as_deref(), default, max)? as usize;
        let position = |cursor: &str, name: &str| {
            items.iter().position(|item| id(item) == cursor).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_cursor",
                    format!("{name}={cursor:?} is not in this list"),
                )
            })
        };
        let end = match &self.before {
            Some(before) => position(before, "before")?,
            None => items.len(),
        };
        let start = match &self.after {
            Some(after) => position(after, "after")? + 1,
            None => 0,
        };
        items.truncate(end);
        let mut page: Vec<T> = items.into_iter().skip(start).collect();
        if self.before.is_some() && self.after.is_none() {
            // Paging backwards: the `limit` items nearest the cursor.
            let skip = page.len().saturating_sub(limit);
            page.drain(..skip);
        }
        page.truncate(limit);
        Ok(page)
    }
}

/// The agent's head seq, after checking that `since` can be resumed from: the agent exists and
/// the cursor is not beyond its log (a cursor from another log, or a reset database).
pub async fn head_for_cursor(
    store: &dyn EventLog,
    agent_id: Uuid,
    since: u64,
) -> Result<u64, ApiError> {
    let head_seq =
        store.head_seq(agent_id).await?.ok_or_else(|| ApiError::unknown_agent(agent_id))?;
    if since > head_seq {
        return Err(ApiError::bad_request(
            "since_beyond_head",
            format!("since={since} is beyond the newest event of this agent (seq {head_seq})"),
        ));
    }
    Ok(head_seq)
}

/// A JSON body that may be left out (empty or blank = all defaults), with the same errors as
/// [`ApiJson`] for what is there.
pub fn optional_json_body<T: serde::de::DeserializeOwned + Default>(
    body: &[u8],
    what: &str,
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|error| body_error(&error, what))
}

/// The answer to a JSON body that did not parse: 400 when it is not JSON, 422 when it is JSON of
/// the wrong shape — the same as [`ApiJson`]'s.
pub fn body_error(error: &serde_json::Error, what: &str) -> ApiError {
    let (status, code) = if error.is_data() {
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body")
    } else {
        (StatusCode::BAD_REQUEST, "malformed_json")
    };
    ApiError::new(status, code, format!("cannot read the {what}: {error}"))
}

/// Characters of a chat or thread id that is not an agent's id, at most.
pub const CHAT_ID_CHARS_MAX: usize = 128;

/// Which conversation a chat id names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatId {
    /// An existing agent's id.
    Agent(Uuid),
    /// Any other id: the agent it was given on first use (`store::agent_for_chat`).
    Named(String),
}

impl std::fmt::Display for ChatId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatId::Agent(agent_id) => write!(formatter, "{agent_id}"),
            ChatId::Named(name) => write!(formatter, "{name}"),
        }
    }
}

/// Reads a chat id: an agent's UUID, or 1–128 characters of `[A-Za-z0-9_-]`.
pub fn chat_id(text: &str) -> Result<ChatId, ApiError> {
    if let Ok(agent_id) = Uuid::parse_str(text) {
        return Ok(ChatId::Agent(agent_id));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if text.is_empty() || text.chars().count() > CHAT_ID_CHARS_MAX || !text.chars().all(allowed) {
        return Err(ApiError::bad_request(
            "invalid_chat_id",
            format!("chat id {text:?}: use an agent id or 1–{CHAT_ID_CHARS_MAX} characters of A–Z, a–z, 0–9, _ and -"),
        ));
    }
    Ok(ChatId::Named(text.to_owned()))
}

/// The 404 of a chat id that was never used — and of one a scoped token does not reach, which
/// looks the same (a token cannot probe for chats).
pub fn unknown_chat(name: &str) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "unknown_chat",
        format!("chat {name:?} does not exist"),
    )
}

#[cfg(test)]
mod tests {
    use super::page_limit;
    use super::ListQuery;
    use crate::http::pager::Pager;

    /// Every cursor pair, limit and order over short lists: the pager picks what the whole-list
    /// page picks, and says so when a cursor names nothing.
    #[test]
    fn the_pager_picks_the_page_the_whole_list_gives() {
        for length in 0..6usize {
            let log: Vec<String> = (0..length).map(|index| format!("m{index}")).collect();
            let mut cursors: Vec<Option<String>> = vec![None, Some("missing".into())];
            cursors.extend(log.iter().cloned().map(Some));
            for descending in [false, true] {
                for limit in 1..5usize {
                    for after in &cursors {
                        for before in &cursors {
                            let query =
                                ListQuery::new(after.clone(), before.clone(), limit, descending);
                            let mut list = log.clone();
                            if descending {
                                list.reverse();
                            }
                            let whole = query.page(list, String::clone, 100, 100).ok();
                            let mut pager =
                                Pager::new(after.clone(), before.clone(), limit, descending);
                            for item in &log {
                                if !pager.offer(item, item.clone()) {
                                    break;
                                }
                            }
                            let streamed = pager.finish().ok();
                            assert_eq!(
                                streamed, whole,
                                "{length} items, after {after:?}, before {before:?}, limit {limit}, descending {descending}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_page_limit_is_the_asked_one_the_default_or_refused() {
        // (limit given, default, max, the limit used or None for a 400)
        let cases = [
            (None, 100, 1000, Some(100)),
            (None, 100, 5, Some(5)),
            (Some("7"), 100, 1000, Some(7)),
            (Some("1000"), 100, 1000, Some(1000)),
            (Some("1001"), 100, 1000, None),
            (Some("0"), 100, 1000, None),
            (Some("-1"), 100, 1000, None),
            (Some("x"), 100, 1000, None),
        ];
        for (text, default, max, expected) in cases {
            let got = page_limit(text, default, max).ok();
            assert_eq!(got, expected, "limit={text:?} default {default} max {max}");
        }
    }
}
