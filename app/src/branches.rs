//! A conversation's branches as the pages draw them, pure: where the line on screen could have
//! gone another way (a fork point, with every line that goes on from it), and which turn a
//! message belongs to (where a branch that replaces that turn forks, and what it asked).
//!
//! A fork is flattened by the server: a branch made at seq `p` of any line hangs from the log
//! that holds seq `p` of that line, its *owner*. So the lines going on from `p`, seen from the
//! shown line, are that owner (when it has events past `p`) and its branches forked at `p`.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use crate::event::EventKind;
use crate::protocol::{Agent, BranchList};
use crate::timeline::Timeline;

/// Logs a chain is walked through at most (the server nests branches no deeper).
const CHAIN_LOGS_MAX: usize = 64;

/// One point of the shown line where lines part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkPoint {
    /// The lines that go on from here, the older first: the owner's own, then its branches.
    pub lines: Vec<Uuid>,
    /// Which of them is the shown line.
    pub shown: usize,
}

/// The fork points along `shown` (a log of the conversation `list` describes), by the seq they
/// follow; only those with more than one line.
pub fn fork_points(list: &BranchList, shown: Uuid) -> BTreeMap<u64, ForkPoint> {
    let logs: HashMap<Uuid, &Agent> =
        std::iter::once(&list.agent).chain(&list.branches).map(|agent| (agent.id, agent)).collect();
    // The shown line's stretches, oldest first: (log, last seq it holds of the line).
    let mut stretches = vec![(shown, u64::MAX)];
    let mut at = shown;
    while let Some(origin) = logs.get(&at).and_then(|agent| agent.branch) {
        if stretches.len() > CHAIN_LOGS_MAX {
            break;
        }
        stretches.push((origin.parent, origin.fork_seq));
        at = origin.parent;
    }
    stretches.reverse();
    let owner =
        |seq: u64| stretches.iter().find(|(_, upto)| seq <= *upto).map_or(shown, |(log, _)| *log);
    let mut points: BTreeMap<u64, Vec<Uuid>> = BTreeMap::new();
    for branch in &list.branches {
        let Some(origin) = branch.branch else {
            continue;
        };
        if owner(origin.fork_seq) == origin.parent {
            points.entry(origin.fork_seq).or_default().push(branch.id);
        }
    }
    points
        .into_iter()
        .filter_map(|(seq, branches)| {
            let here = owner(seq);
            let goes_on = logs.get(&here).is_some_and(|agent| agent.head_seq > seq);
            let lines: Vec<Uuid> = goes_on.then_some(here).into_iter().chain(branches).collect();
            let shown = lines.iter().position(|line| *line == owner(seq + 1))?;
            (lines.len() > 1).then_some((seq, ForkPoint { lines, shown }))
        })
        .collect()
}

/// The turn a message belongs to: the seq before the turn's first run (where a branch that
/// replaces the turn forks) and the turn's user text. `None` for a message of no turn.
pub fn turn_of(timeline: &Timeline, message_id: Uuid) -> Option<(u64, String)> {
    let run_id = timeline.message(message_id)?.run_id?;
    let runs = timeline.runs();
    let run = runs.iter().find(|run| run.run_id == run_id)?;
    let first = match run.continues {
        Some(root) => runs.iter().find(|run| run.run_id == root)?,
        None => run,
    };
    let user = timeline
        .messages()
        .iter()
        .find(|message| message.run_id == Some(first.run_id) && message.kind == EventKind::User)?;
    Some((first.first_seq.saturating_sub(1), user.text().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::BranchOrigin;

    fn log(id: u128, head_seq: u64, origin: Option<(u128, u64)>) -> Agent {
        Agent {
            id: Uuid::from_u128(id),
            name: String::new(),
            system: None,
            description: None,
            model: None,
            metadata: serde_json::Value::Null,
            tags: Vec::new(),
            head_seq,
            created_at: Default::default(),
            owner: None,
            branch: origin.map(|(parent, fork_seq)| BranchOrigin {
                root: Uuid::from_u128(1),
                parent: Uuid::from_u128(parent),
                fork_seq,
            }),
            current_branch: None,
        }
    }

    fn ids(ids: &[u128]) -> Vec<Uuid> {
        ids.iter().copied().map(Uuid::from_u128).collect()
    }

    #[test]
    fn each_line_sees_the_points_where_it_could_have_gone_another_way() {
        // The main line 1 holds 1..=20; 2 and 3 fork it after 5, 4 forks 2 after 9, 5 forks
        // the main line after 12, 6 forks the main line after 20 (its end).
        let list = BranchList {
            agent: log(1, 20, None),
            current_branch: Uuid::from_u128(1),
            branches: vec![
                log(2, 11, Some((1, 5))),
                log(3, 7, Some((1, 5))),
                log(4, 10, Some((2, 9))),
                log(5, 13, Some((1, 12))),
                log(6, 22, Some((1, 20))),
            ],
        };
        let point = |lines: &[u128], shown| ForkPoint { lines: ids(lines), shown };
        let cases: [(u128, Vec<(u64, ForkPoint)>); 4] = [
            (
                1,
                // Nothing of the main line follows 20: no choice to offer there.
                vec![(5, point(&[1, 2, 3], 0)), (12, point(&[1, 5], 0))],
            ),
            (2, vec![(5, point(&[1, 2, 3], 1)), (9, point(&[2, 4], 0))]),
            (4, vec![(5, point(&[1, 2, 3], 1)), (9, point(&[2, 4], 1))]),
            (6, vec![(5, point(&[1, 2, 3], 0)), (12, point(&[1, 5], 0))]),
        ];
        for (shown, want) in cases {
            let got: Vec<(u64, ForkPoint)> =
                fork_points(&list, Uuid::from_u128(shown)).into_iter().collect();
            assert_eq!(got, want, "seen from line {shown}");
        }
    }

    #[test]
    fn a_conversation_without_branches_has_no_fork_points() {
        let list = BranchList {
            agent: log(1, 9, None),
            current_branch: Uuid::from_u128(1),
            branches: Vec::new(),
        };
        assert!(fork_points(&list, Uuid::from_u128(1)).is_empty());
    }
}
