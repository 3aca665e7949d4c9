//! The scripted provider's words: its vocabulary, its deterministic generator, and the two ways
//! it cuts text into tokens. Pure; shared by the replies (`scripted.rs`) and `/markdown`'s.

pub(super) const WORDS: &[&str] = &[
    "the",
    "stream",
    "event",
    "log",
    "agent",
    "token",
    "every",
    "client",
    "resumes",
    "from",
    "its",
    "cursor",
    "and",
    "nothing",
    "is",
    "lost",
    "on",
    "the",
    "way",
    "a",
    "gap",
    "fills",
    "itself",
    "sequence",
    "numbers",
    "only",
    "go",
    "up",
    "commit",
    "first",
    "broadcast",
    "second",
    "browser",
    "server",
    "history",
    "reply",
    "tool",
    "result",
    "thinking",
    "quietly",
    "durable",
    "ordered",
    "live",
    "view",
    "keeps",
    "up",
    "with",
    "words",
    "as",
    "they",
    "arrive",
];

/// splitmix64: a tiny, well-known deterministic generator; no dependency for a demo script.
pub(super) struct Random(pub(super) u64);

impl Random {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    pub(super) fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// The words of a sentence-like text: capitals after a full stop, full stops every 6 to 14 words.
pub(super) fn sentence_tokens(random: &mut Random, count: u32) -> Vec<String> {
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

/// Splits `text` into word tokens that concatenate back to `text` exactly.
pub(super) fn echo_tokens(text: &str) -> Vec<String> {
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
