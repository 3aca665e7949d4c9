//! One page of a list read oldest first, without holding the list: Letta's id cursors
//! (`after`, `before`, `limit`, `order`) over items that arrive as a log is read. Pure; the
//! page it picks is the one [`ListQuery::page`](super::params::ListQuery::page) picks from the
//! whole list, and it holds at most `limit` items whatever the list's length.

use std::collections::VecDeque;

/// Picks one page as items are offered oldest first.
#[derive(Debug)]
pub struct Pager<T> {
    /// The cursor whose item opens the range (excluded), in log order: `after` ascending,
    /// `before` descending.
    low: Option<String>,
    /// The cursor whose item closes the range (excluded).
    high: Option<String>,
    low_seen: bool,
    high_seen: bool,
    /// Keep the last `limit` items of the range (else the first `limit`).
    take_last: bool,
    /// Newest first: the page is reversed at the end.
    descending: bool,
    limit: usize,
    page: VecDeque<T>,
}

/// A cursor that named no item of the list.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownCursor {
    /// `after` or `before`.
    pub name: &'static str,
    pub cursor: String,
}

impl<T> Pager<T> {
    /// The page `after`/`before`/`limit` name in list order (newest first when `descending`).
    pub fn new(
        after: Option<String>,
        before: Option<String>,
        limit: usize,
        descending: bool,
    ) -> Pager<T> {
        // Paging backwards (only `before`) wants the items nearest the cursor: in log order
        // those are the last of the range ascending, the first descending.
        let backwards = before.is_some() && after.is_none();
        let (low, high) = if descending { (before, after) } else { (after, before) };
        Pager {
            low,
            high,
            low_seen: false,
            high_seen: false,
            take_last: backwards != descending,
            descending,
            limit,
            page: VecDeque::new(),
        }
    }

    /// Offers the next item in log order. Returns false once nothing after it can change the
    /// page (the caller may stop reading).
    pub fn offer(&mut self, id: &str, item: T) -> bool {
        let is_low = self.low.as_deref() == Some(id);
        let is_high = self.high.as_deref() == Some(id);
        self.low_seen |= is_low;
        self.high_seen |= is_high;
        if !is_low && !is_high && (self.low.is_none() || self.low_seen) && !self.high_seen {
            if self.take_last {
                self.page.push_back(item);
                if self.page.len() > self.limit {
                    self.page.pop_front();
                }
            } else if self.page.len() < self.limit {
                self.page.push_back(item);
            }
        }
        !self.done()
    }

    fn done(&self) -> bool {
        let low_settled = self.low.is_none() || self.low_seen;
        let high_settled = self.high.is_none() || self.high_seen;
        low_settled
            && high_settled
            && (self.high_seen || (!self.take_last && self.page.len() >= self.limit))
    }

    /// The page in list order, or the cursor that named nothing.
    pub fn finish(self) -> Result<Vec<T>, UnknownCursor> {
        let (after, before) = if self.descending {
            ((&self.high, self.high_seen), (&self.low, self.low_seen))
        } else {
            ((&self.low, self.low_seen), (&self.high, self.high_seen))
        };
        for (name, (cursor, seen)) in [("before", before), ("after", after)] {
            if let (Some(cursor), false) = (cursor, seen) {
                return Err(UnknownCursor { name, cursor: cursor.clone() });
            }
        }
        let mut page: Vec<T> = self.page.into();
        if self.descending {
            page.reverse();
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pager holds at most `limit` items, and stops the read once the page is settled.
    #[test]
    fn the_pager_holds_a_page_and_stops_early() {
        let mut newest = Pager::new(None, None, 3, true);
        for index in 0..10_000 {
            assert!(newest.offer(&index.to_string(), index));
            assert!(newest.page.len() <= 3);
        }
        assert_eq!(newest.finish().unwrap(), vec![9_999, 9_998, 9_997]);

        let mut oldest = Pager::new(None, None, 3, false);
        let offered =
            (0..10_000).take_while(|index| oldest.offer(&index.to_string(), *index)).count();
        assert_eq!(offered, 2, "the third item settles the page");
        assert_eq!(oldest.finish().unwrap(), vec![0, 1, 2]);
    }
}
