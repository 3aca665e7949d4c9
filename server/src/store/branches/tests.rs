//! Reads along a chain, against logs kept in memory: every cursor and every limit reads
//! exactly the seqs a branch has, each from the log that holds it.

use crate::store::StoreResult;
use std::collections::HashMap;

use uuid::Uuid;

use super::{read_along, Segment};
use crate::store::gathered::Sequenced;
use crate::store::StoreError;

#[derive(Debug, PartialEq)]
struct Read {
    log: Uuid,
    seq: u64,
}

impl Sequenced for Read {
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// Logs by id, each holding seqs `from..=to`.
fn logs(spans: &[(Uuid, u64, u64)]) -> HashMap<Uuid, (u64, u64)> {
    spans.iter().map(|&(log, from, to)| (log, (from, to))).collect()
}

async fn read(
    logs: &HashMap<Uuid, (u64, u64)>,
    chain: &[Segment],
    log: Uuid,
    since: u64,
    limit: u32,
) -> StoreResult<Vec<Read>> {
    read_along(chain, log, since, limit, |at, since, limit| {
        let (from, to) = logs[&at];
        let first = (since + 1).max(from);
        let reads: Vec<Read> =
            (first..=to).take(limit as usize).map(|seq| Read { log: at, seq }).collect();
        async move { Ok(reads) }
    })
    .await
}

#[tokio::test]
async fn every_cursor_and_limit_reads_the_branch_path() {
    let (root, middle, leaf) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    // root holds 1..=10; middle forked root after 4 and holds 5..=7; leaf forked middle after 6
    // and holds 7..=9.
    let logs = logs(&[(root, 1, 10), (middle, 5, 7), (leaf, 7, 9)]);
    let chain = [Segment { log: root, upto: 4 }, Segment { log: middle, upto: 6 }];
    let owner = |seq: u64| match seq {
        1..=4 => root,
        5..=6 => middle,
        _ => leaf,
    };
    for since in 0..=9 {
        for limit in 0..=10u32 {
            let got = read(&logs, &chain, leaf, since, limit).await.unwrap();
            let want: Vec<Read> = (since + 1..=9)
                .take(limit as usize)
                .map(|seq| Read { log: owner(seq), seq })
                .collect();
            assert_eq!(got, want, "since {since}, limit {limit}");
        }
    }
}

#[tokio::test]
async fn a_log_that_is_no_branch_is_read_alone() {
    let root = Uuid::new_v4();
    let logs = logs(&[(root, 1, 3)]);
    let got = read(&logs, &[], root, 1, 10).await.unwrap();
    assert_eq!(got.iter().map(|read| read.seq).collect::<Vec<_>>(), [2, 3]);
}

#[tokio::test]
async fn a_parent_short_of_the_fork_is_a_corrupt_store() {
    let (root, branch) = (Uuid::new_v4(), Uuid::new_v4());
    let logs = logs(&[(root, 1, 2), (branch, 6, 6)]);
    let chain = [Segment { log: root, upto: 5 }];
    let error = read(&logs, &chain, branch, 0, 10).await.unwrap_err();
    assert!(matches!(error, StoreError::Corrupt(_)), "{error:?}");
}
