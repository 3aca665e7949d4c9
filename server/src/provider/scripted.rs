//! The scripted provider: deterministic, offline, and realistic enough to demo and test with.
//!
//! For a given seed and user message it always produces the same thinking, the same words and
//! the same usage. `token_delay_ms` paces tokens like a real model (0 = as fast as it can go,
//! for tests and benchmarks); `reply_tokens` sets the reply length.

use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};

use super::{Provider, ProviderError, ProviderEvent, ProviderRequest};

#[derive(Clone, Debug)]
pub struct ScriptedConfig {
    pub seed: u64,
    pub token_delay_ms: u64,
    pub reply_tokens: u32,
}

impl Default for ScriptedConfig {
    fn default() -> ScriptedConfig {
        ScriptedConfig {
            seed: 7,
            token_delay_ms: 30,
            reply_tokens: 60,
        }
    }
}

/// Reply lengths above this are clamped: a typo in an environment variable must not make one run
/// write millions of rows.
pub const SCRIPTED_REPLY_TOKENS_MAX: u32 = 100_000;
/// Thinking is a short preamble, this many words.
const SCRIPTED_THINKING_TOKENS: u32 = 12;

pub struct ScriptedProvider {
    config: ScriptedConfig,
}

impl ScriptedProvider {
    pub fn new(config: ScriptedConfig) -> ScriptedProvider {
        ScriptedProvider { config }
    }
}

const WORDS: &[&str] = &[
    "the", "stream", "event", "log", "agent", "token", "every", "client", "resumes", "from",
    "its", "cursor", "and", "nothing", "is", "lost", "on", "the", "way", "a", "gap", "fills",
    "itself", "sequence", "numbers", "only", "go", "up", "commit", "first", "broadcast",
    "second", "browser", "server", "history", "reply", "tool", "result", "thinking", "quietly",
    "durable", "ordered", "live", "view", "keeps", "up", "with", "words", "as", "they", "arrive",
];

/// splitmix64: a tiny, well-known deterministic generator; no dependency for a demo script.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// FNV-1a, to fold the user's message into the seed.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ byte as u64).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The words of a sentence-like text: capitals after a full stop, full stops every 6 to 14 words.
fn sentence_tokens(random: &mut Random, count: u32) -> Vec<String> {
    let mut tokens = Vec::with_capacity(count as usize);
    let mut words_left_in_sentence = 0;
    for index in 0..count {
        let start_sentence = words_left_in_sentence == 0;
        if start_sentence {
            words_left_in_sentence = 6 + random.below(9);
        }
        let mut word = WORDS[random.below(WORDS.len() as u64) as usize].to_owned();
        if start_sentence {
            word[..1].make_ascii_uppercase();
        }
        words_left_in_sentence -= 1;
        let last = index + 1 == count;
        if words_left_in_sentence == 0 || last {
            word.push('.');
            words_left_in_sentence = 0;
        }
        if index > 0 {
            word.insert(0, ' ');
        }
        tokens.push(word);
    }
    tokens
}

/// A user message starting with this makes the reply exactly the rest of the message, streamed
/// word by word: a deterministic way to put any text (markup included) into a reply.
pub const ECHO_COMMAND: &str = "/echo ";

/// Splits `text` into word tokens that concatenate back to `text` exactly.
fn echo_tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    for character in text.chars() {
        if character.is_whitespace() && !current.trim().is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
        current.push(character);
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// The whole script for one request, before pacing.
pub fn script(config: &ScriptedConfig, request: &ProviderRequest) -> Vec<ProviderEvent> {
    let mut random = Random(config.seed ^ fnv1a(&request.user_message));
    let reply_tokens = config.reply_tokens.min(SCRIPTED_REPLY_TOKENS_MAX);
    let mut events = Vec::with_capacity(reply_tokens as usize + 16);
    events.extend(
        sentence_tokens(&mut random, SCRIPTED_THINKING_TOKENS)
            .into_iter()
            .map(ProviderEvent::ThinkingDelta),
    );
    let reply = match request.user_message.strip_prefix(ECHO_COMMAND) {
        Some(echoed) => echo_tokens(echoed),
        None => sentence_tokens(&mut random, reply_tokens),
    };
    let reply_tokens = reply.len() as u32;
    events.extend(reply.into_iter().map(ProviderEvent::TextDelta));
    events.push(ProviderEvent::Usage {
        input_tokens: request.user_message.split_whitespace().count() as u64
            + request.system.as_deref().map_or(0, |system| system.split_whitespace().count())
                as u64,
        output_tokens: (SCRIPTED_THINKING_TOKENS + reply_tokens) as u64,
    });
    events.push(ProviderEvent::Stop {
        reason: "end_turn".to_owned(),
    });
    events
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let delay = Duration::from_millis(self.config.token_delay_ms);
        let events = script(&self.config, &request);
        stream::iter(events)
            .then(move |event| async move {
                let is_token = matches!(
                    event,
                    ProviderEvent::TextDelta(_) | ProviderEvent::ThinkingDelta(_)
                );
                if is_token && !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok(event)
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> ProviderRequest {
        ProviderRequest {
            system: None,
            model: None,
            user_message: text.to_owned(),
        }
    }

    fn reply_text(events: &[ProviderEvent]) -> String {
        events
            .iter()
            .filter_map(|event| match event {
                ProviderEvent::TextDelta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn echo_replies_with_exactly_the_rest_of_the_message() {
        let config = ScriptedConfig::default();
        let text = "<script>alert(1)</script>  two  spaces\nand a line";
        let events = script(&config, &request(&format!("{ECHO_COMMAND}{text}")));
        assert_eq!(reply_text(&events), text);
        let tokens = events
            .iter()
            .filter(|event| matches!(event, ProviderEvent::TextDelta(_)))
            .count();
        assert_eq!(tokens, 6);
    }

    #[test]
    fn same_seed_same_script_and_requested_length() {
        let config = ScriptedConfig {
            seed: 42,
            token_delay_ms: 0,
            reply_tokens: 25,
        };
        let first = script(&config, &request("hello"));
        assert_eq!(first, script(&config, &request("hello")));
        assert_ne!(reply_text(&first), reply_text(&script(&config, &request("other"))));
        let tokens = first
            .iter()
            .filter(|event| matches!(event, ProviderEvent::TextDelta(_)))
            .count();
        assert_eq!(tokens, 25);
        let text = reply_text(&first);
        assert!(text.ends_with('.'), "{text}");
        assert!(text.chars().next().unwrap().is_uppercase(), "{text}");
        assert_eq!(
            first.last(),
            Some(&ProviderEvent::Stop { reason: "end_turn".into() })
        );
    }
}
