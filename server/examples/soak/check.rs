//! What the soak checks, apart from the sockets: one subscriber's record of what it was sent,
//! compared with the log; percentiles; whether a series stayed flat after warm-up.

use uuid::Uuid;

/// What one subscriber received of one agent's log, across all its connections. Every
/// connection resumes from the last seq it holds, so the whole is seqs 1, 2, 3 … exactly once.
#[derive(Debug, Default)]
pub struct Record {
    /// `ids[n]` is the id received for seq n + 1.
    ids: Vec<Uuid>,
    /// Events that came again (seq at or below the cursor).
    pub duplicated: u64,
    /// Events that came after a hole (seq above the cursor + 1): something was skipped.
    pub skipped: u64,
}

impl Record {
    /// The cursor to resume from.
    pub fn last_seq(&self) -> u64 {
        self.ids.len() as u64
    }

    /// Takes one delivered event; returns false when it was not the next seq.
    pub fn receive(&mut self, seq: u64, id: Uuid) -> bool {
        let next = self.last_seq() + 1;
        if seq < next {
            self.duplicated += 1;
            return false;
        }
        if seq > next {
            // Counted, and the record is left behind at its cursor: the check then finds the
            // seqs that never came.
            self.skipped += 1;
            return false;
        }
        self.ids.push(id);
        true
    }

    /// Compares the record with the log's ids (`log[n]` for seq n + 1).
    pub fn compare(&self, log: &[Uuid]) -> Verdict {
        let matching =
            self.ids.iter().zip(log).take_while(|(received, logged)| received == logged).count();
        Verdict {
            lost: log.len().saturating_sub(matching) as u64,
            wrong: (self.ids.len() - matching) as u64,
            duplicated: self.duplicated,
            skipped: self.skipped,
        }
    }
}

/// One subscriber's record against the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Log events the subscriber never got (or got only after a wrong one).
    pub lost: u64,
    /// Events received that are not the log's event at that seq.
    pub wrong: u64,
    pub duplicated: u64,
    pub skipped: u64,
}

impl Verdict {
    pub fn add(&mut self, other: Verdict) {
        self.lost += other.lost;
        self.wrong += other.wrong;
        self.duplicated += other.duplicated;
        self.skipped += other.skipped;
    }

    pub fn clean(&self) -> bool {
        *self == Verdict::default()
    }
}

/// The value at quantile `q` (0 ..= 1) of `samples`, 0 when there are none.
pub fn quantile(samples: &mut [f64], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}

/// How far a series strayed after warm-up: the largest deviation, up or down, of a minute in
/// `series[warm_up..]` from those minutes' median, in percent of the median; None when nothing
/// is left after warm-up. (The median, not the first minute after warm-up: one odd minute must
/// not decide the verdict.)
pub fn drift_percent(series: &[f64], warm_up: usize) -> Option<f64> {
    let after = series.get(warm_up..).filter(|after| !after.is_empty())?;
    let median = quantile(&mut after.to_vec(), 0.5);
    if median == 0.0 {
        return Some(if after.iter().all(|&value| value == 0.0) { 0.0 } else { f64::INFINITY });
    }
    Some(after.iter().map(|value| (value - median).abs() / median * 100.0).fold(0.0, f64::max))
}

/// The growth from the first third of the minutes after warm-up to the last third, in percent
/// of the first: a leak shows here as a steady rise. None with fewer than three minutes.
pub fn trend_percent(series: &[f64], warm_up: usize) -> Option<f64> {
    let after = series.get(warm_up..)?;
    let third = after.len() / 3;
    if third == 0 {
        return None;
    }
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    let (first, last) = (mean(&after[..third]), mean(&after[after.len() - third..]));
    (first != 0.0).then(|| (last - first) / first * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(count: u128) -> Vec<Uuid> {
        (1..=count).map(Uuid::from_u128).collect()
    }

    #[test]
    fn records_find_lost_duplicated_skipped_and_wrong_events() {
        let log = ids(5);
        let cases: &[(&[(u64, u128)], Verdict)] = &[
            (&[(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)], Verdict::default()),
            (
                &[(1, 1), (2, 2), (2, 2), (3, 3), (4, 4), (5, 5)],
                Verdict { duplicated: 1, ..Verdict::default() },
            ),
            (
                &[(1, 1), (2, 2), (4, 4), (5, 5)],
                Verdict { lost: 3, skipped: 2, ..Verdict::default() },
            ),
            (
                &[(1, 1), (2, 2), (3, 9), (4, 4), (5, 5)],
                Verdict { lost: 3, wrong: 3, ..Verdict::default() },
            ),
            (&[(1, 1), (2, 2)], Verdict { lost: 3, ..Verdict::default() }),
        ];
        for (received, expected) in cases {
            let mut record = Record::default();
            for &(seq, id) in *received {
                record.receive(seq, Uuid::from_u128(id));
            }
            assert_eq!(record.compare(&log), *expected, "{received:?}");
        }
    }

    #[test]
    fn drift_and_trend_are_measured_after_warm_up() {
        assert_eq!(drift_percent(&[10.0, 100.0, 100.0, 105.0, 95.0], 1), Some(5.0));
        assert_eq!(drift_percent(&[10.0, 100.0, 100.0, 120.0], 1), Some(20.0));
        assert_eq!(drift_percent(&[10.0], 1), None);
        assert_eq!(trend_percent(&[10.0, 100.0, 100.0, 110.0, 120.0, 120.0, 120.0], 1), Some(20.0));
        assert_eq!(trend_percent(&[10.0, 100.0, 100.0], 1), None);
        assert_eq!(quantile(&mut [3.0, 1.0, 2.0], 0.5), 2.0);
    }
}
