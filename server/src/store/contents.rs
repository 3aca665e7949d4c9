//! A page of events' contents as JSON texts in one buffer: what a Durable Streams read serves,
//! read without an allocation per event.
//!
//! **Why.** A read of a 10 000-message stream made a `String` per message (with a `Vec` of them)
//! and copied each into the page it served: 10 000 allocations and ~1 MB of fresh memory, whose
//! first touch (a page fault per 4 KiB) cost more than the copying. The reader writes each
//! content straight into one string, the shape the surface serves ([`ContentPage::into_parts`]
//! hands over its buffers as they are).

use super::gathered::Gathered;
use super::records::ContentJson;

/// Consecutive events' contents: each one's JSON text followed by a comma, with its seq, where
/// its text ends and whether the event is a stream message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentPage {
    seqs: Vec<u64>,
    /// Where each text ends in `joined` (its comma is at that index).
    ends: Vec<usize>,
    stream_messages: Vec<bool>,
    joined: String,
}

impl ContentPage {
    /// An empty page with room for `count` events of about `bytes` in all.
    pub fn with_capacity(count: usize, bytes: usize) -> ContentPage {
        ContentPage {
            seqs: Vec::with_capacity(count),
            ends: Vec::with_capacity(count),
            stream_messages: Vec::with_capacity(count),
            joined: String::with_capacity(bytes + count + 1),
        }
    }

    /// Room for `count` more events of `bytes` in all.
    pub fn reserve(&mut self, count: usize, bytes: usize) {
        self.seqs.reserve(count);
        self.ends.reserve(count);
        self.stream_messages.reserve(count);
        self.joined.reserve(bytes + count + 1);
    }

    pub fn push(&mut self, seq: u64, stream_message: bool, text: &str) {
        self.joined.push_str(text);
        self.ends.push(self.joined.len());
        self.joined.push(',');
        self.seqs.push(seq);
        self.stream_messages.push(stream_message);
    }

    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Bytes of the texts (and their commas).
    pub fn bytes(&self) -> usize {
        self.joined.len()
    }

    /// Each event as `(seq, is a stream message, JSON text)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, bool, &str)> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|end| end + 1));
        self.seqs
            .iter()
            .zip(&self.stream_messages)
            .zip(starts.zip(&self.ends))
            .map(|((seq, message), (start, end))| (*seq, *message, &self.joined[start..*end]))
    }

    /// Where the `index`-th text ends in [`ContentPage::into_parts`]'s buffer.
    pub fn end(&self, index: usize) -> usize {
        self.ends[index]
    }

    pub fn is_stream_message(&self, index: usize) -> bool {
        self.stream_messages[index]
    }

    pub fn seq(&self, index: usize) -> u64 {
        self.seqs[index]
    }

    /// The first `count` events (all, when there are fewer).
    pub fn truncate(&mut self, count: usize) {
        if count >= self.len() {
            return;
        }
        self.joined.truncate(if count == 0 { 0 } else { self.ends[count - 1] + 1 });
        self.seqs.truncate(count);
        self.ends.truncate(count);
        self.stream_messages.truncate(count);
    }

    /// The buffers as they are: the seqs, where each text ends, and the texts each followed by a
    /// comma.
    pub fn into_parts(self) -> (Vec<u64>, Vec<usize>, String) {
        (self.seqs, self.ends, self.joined)
    }

    /// Each event as a [`ContentJson`] of its own (tests, and comparing stores).
    pub fn contents(&self) -> Vec<ContentJson> {
        self.iter()
            .map(|(seq, stream_message, json)| ContentJson {
                seq,
                stream_message,
                json: json.into(),
            })
            .collect()
    }
}

impl Gathered for ContentPage {
    fn count(&self) -> usize {
        self.len()
    }

    fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.seqs.iter().copied()
    }

    fn append(&mut self, later: ContentPage) {
        if self.is_empty() {
            *self = later;
            return;
        }
        let shift = self.joined.len();
        self.joined.push_str(&later.joined);
        self.ends.extend(later.ends.iter().map(|end| end + shift));
        self.seqs.extend(later.seqs);
        self.stream_messages.extend(later.stream_messages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(texts: &[(u64, bool, &str)]) -> ContentPage {
        let mut page = ContentPage::default();
        for (seq, message, text) in texts {
            page.push(*seq, *message, text);
        }
        page
    }

    #[test]
    fn a_page_gives_back_each_text_cut_and_joined_anywhere() {
        let texts = [(4, true, r#"{"a":1}"#), (5, false, "null"), (6, true, r#""x,y""#)];
        let whole = page(&texts);
        assert_eq!(whole.iter().collect::<Vec<_>>(), texts);
        assert_eq!(Gathered::seqs(&whole).collect::<Vec<_>>(), [4, 5, 6]);
        for cut in 0..=texts.len() {
            let mut first = page(&texts[..cut]);
            first.append(page(&texts[cut..]));
            assert_eq!(first, whole, "joined at {cut}");
            let mut truncated = whole.clone();
            truncated.truncate(cut);
            assert_eq!(truncated, page(&texts[..cut]), "truncated to {cut}");
        }
        let (seqs, ends, joined) = whole.clone().into_parts();
        assert_eq!((seqs, ends), (vec![4, 5, 6], vec![7, 12, 18]));
        assert_eq!(joined, r#"{"a":1},null,"x,y","#);
        assert_eq!(whole.contents()[2].json.as_ref(), r#""x,y""#);
    }
}
