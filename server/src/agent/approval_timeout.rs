//! Approval requests nobody answers: after the timeout they are answered as denied, durably.
//!
//! A request waits in the log (`open_approvals` in the store, kept by each append), not in
//! memory. Every [`APPROVAL_SWEEP_INTERVAL_MS`] the server asks the store for the requests past
//! their agent's timeout (`metadata.approval_timeout_ms`, else `AGENTSTREAM_APPROVAL_TIMEOUT_MS`),
//! selected by deadline in the query — requests that never time out cannot fill the page — and
//! answers them exactly as a person's denial would be answered: the
//! answer claims the request's key, the continuation run writes the `approval_response` with a
//! reason saying it timed out, and the model reads the denial. The deadline counts from the
//! request's own time, so a request whose time ran out while the server was down is answered
//! at the next start; a person's late answer finds the key taken (409 `already_answered`). With
//! several servers each sweeps; the key lets one answer win.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::approval::ApprovalDecision;
use super::registry::{RunOptions, StartRunError};
use super::start::{StartError, Starter};
use crate::limits::APPROVAL_TIMEOUT_MS_MAX;
use crate::store::{DueApprovals, OpenApproval};

/// How often open approval requests are checked against their timeout.
pub const APPROVAL_SWEEP_INTERVAL_MS: u64 = 500;
/// Due requests read per page, earliest deadline first.
pub const OPEN_APPROVALS_PER_SWEEP_MAX: u32 = 1_000;
/// Pages one sweep reads at most while every request on them was given up.
pub const DUE_APPROVAL_PAGES_PER_SWEEP_MAX: u32 = 10;
/// Requests whose timeout's answer was refused for good (answered meanwhile, not in the log)
/// remembered so they are not tried again every sweep; past this the memory starts over.
pub const APPROVALS_GIVEN_UP_MAX: usize = 10_000;
/// The metadata field that sets an agent's timeout (milliseconds; 0 = wait for ever).
pub const AGENT_TIMEOUT_FIELD: &str = "approval_timeout_ms";

/// The timeout of an agent's requests: its own (`metadata.approval_timeout_ms`, 0 = none) or
/// the server's. `None`: they wait until someone answers.
pub fn timeout_of(metadata: &Value, server: Option<Duration>) -> Option<Duration> {
    match metadata.get(AGENT_TIMEOUT_FIELD).and_then(Value::as_u64) {
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms.min(APPROVAL_TIMEOUT_MS_MAX))),
        None => server,
    }
}

/// Why an agent's `metadata.approval_timeout_ms` cannot be taken.
pub fn check_agent_timeout(metadata: &Value) -> Result<(), String> {
    match metadata.get(AGENT_TIMEOUT_FIELD) {
        None => Ok(()),
        Some(value) if value.as_u64().is_some_and(|ms| ms <= APPROVAL_TIMEOUT_MS_MAX) => Ok(()),
        Some(_) => Err(format!(
            "metadata.{AGENT_TIMEOUT_FIELD} must be a whole number of milliseconds from 0 (never) \
             to {APPROVAL_TIMEOUT_MS_MAX}"
        )),
    }
}

/// The reason the timeout's denial carries (the model reads it, and so does a person).
pub fn timeout_reason(timeout: Duration) -> String {
    format!("timed out: nobody answered within {}", humane(timeout.as_millis()))
}

fn humane(ms: u128) -> String {
    match ms {
        ms if ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{} s", ms / 1_000),
        ms => format!("{ms} ms"),
    }
}

/// The requests of `open` past their agent's timeout at `now`, grouped by agent (in the order
/// `open` has them), each with the timeout that passed. `timeout` gives an agent's timeout.
pub fn due(
    open: &[OpenApproval],
    now: DateTime<Utc>,
    mut timeout: impl FnMut(Uuid) -> Option<Duration>,
) -> Vec<(Uuid, Duration, Vec<String>)> {
    let mut by_agent: BTreeMap<Uuid, (usize, Duration, Vec<String>)> = BTreeMap::new();
    for (position, request) in open.iter().enumerate() {
        let Some(limit) = timeout(request.agent_id) else {
            continue;
        };
        let waited = (now - request.requested_at).to_std().unwrap_or_default();
        if waited < limit {
            continue;
        }
        by_agent
            .entry(request.agent_id)
            .or_insert_with(|| (position, limit, Vec::new()))
            .2
            .push(request.tool_call_id.clone());
    }
    let mut due: Vec<_> = by_agent.into_iter().collect();
    due.sort_by_key(|(_, (position, _, _))| *position);
    due.into_iter().map(|(agent_id, (_, limit, calls))| (agent_id, limit, calls)).collect()
}

/// Answers expired requests until `stop`.
pub async fn expire_approvals(starter: Starter, server: Option<Duration>, stop: CancellationToken) {
    let mut given_up: HashSet<(Uuid, String)> = HashSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(APPROVAL_SWEEP_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(error) = sweep(&starter, server, &mut given_up, &stop).await {
            tracing::warn!(%error, "could not check approval requests for their timeout");
        }
    }
}

/// One pass: reads the open requests, answers those past their timeout.
async fn sweep(
    starter: &Starter,
    server: Option<Duration>,
    given_up: &mut HashSet<(Uuid, String)>,
    stop: &CancellationToken,
) -> Result<(), crate::store::StoreError> {
    // The due requests, earliest deadline first, past those given up (a page of given-up ones
    // must not hide the rest).
    let now = Utc::now();
    let server_ms = server.map(|timeout| timeout.as_millis().min(u128::from(u64::MAX)) as u64);
    let mut open = Vec::new();
    let mut timeouts: HashMap<Uuid, Option<Duration>> = HashMap::new();
    for page in 0..DUE_APPROVAL_PAGES_PER_SWEEP_MAX {
        let rows = starter
            .store
            .due_approvals(DueApprovals {
                now,
                server_timeout_ms: server_ms,
                timeout_ms_max: APPROVAL_TIMEOUT_MS_MAX,
                limit: OPEN_APPROVALS_PER_SWEEP_MAX,
                offset: page * OPEN_APPROVALS_PER_SWEEP_MAX,
            })
            .await?;
        let full = rows.len() == OPEN_APPROVALS_PER_SWEEP_MAX as usize;
        for (request, timeout_ms) in rows {
            if given_up.contains(&(request.agent_id, request.tool_call_id.clone())) {
                continue;
            }
            timeouts.insert(request.agent_id, Some(Duration::from_millis(timeout_ms)));
            open.push(request);
        }
        if !open.is_empty() || !full {
            break;
        }
    }
    if open.is_empty() {
        return Ok(());
    }
    for (agent_id, timeout, calls) in
        due(&open, now, |agent_id| timeouts.get(&agent_id).copied().flatten())
    {
        if stop.is_cancelled() {
            return Ok(());
        }
        let reason = timeout_reason(timeout);
        let decisions = calls
            .iter()
            .map(|call_id| ApprovalDecision {
                tool_call_id: call_id.clone(),
                approve: false,
                reason: Some(reason.clone()),
                output: None,
            })
            .collect();
        let options = RunOptions {
            background: true,
            answered_by_server: true,
            instructions: None,
            ..RunOptions::default()
        };
        match starter.answer_approvals(agent_id, decisions, options).await {
            Ok(started) => tracing::info!(
                %agent_id, run_id = %started.run_id, calls = calls.len(),
                "approval requests timed out: answered as denied"
            ),
            // The run that asked has not written its end yet: the next sweep tries again.
            Err(StartError::Run(StartRunError::RunInProgress { .. })) => {}
            Err(
                StartError::AlreadyAnswered { tool_call_id, .. }
                | StartError::UnknownApproval(tool_call_id),
            ) => {
                if given_up.len() >= APPROVALS_GIVEN_UP_MAX {
                    given_up.clear();
                }
                given_up.insert((agent_id, tool_call_id));
            }
            Err(error) => {
                tracing::warn!(%agent_id, %error, "could not answer timed-out approval requests");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn open(agent: u128, call: &str, seconds_ago: i64, now: DateTime<Utc>) -> OpenApproval {
        OpenApproval {
            agent_id: Uuid::from_u128(agent),
            tool_call_id: call.into(),
            requested_at: now - chrono::Duration::seconds(seconds_ago),
        }
    }

    #[test]
    fn an_agent_sets_its_own_timeout_or_takes_the_servers() {
        let server = Some(Duration::from_secs(60));
        let cases = [
            (json!({}), server, server),
            (json!({}), None, None),
            (json!({"approval_timeout_ms": 0}), server, None),
            (json!({"approval_timeout_ms": 1500}), None, Some(Duration::from_millis(1500))),
        ];
        for (metadata, server, expected) in cases {
            assert_eq!(timeout_of(&metadata, server), expected, "{metadata}");
        }
        let checks = [
            (json!({}), true),
            (json!({"approval_timeout_ms": 0}), true),
            (json!({"approval_timeout_ms": APPROVAL_TIMEOUT_MS_MAX}), true),
            (json!({"approval_timeout_ms": APPROVAL_TIMEOUT_MS_MAX + 1}), false),
            (json!({"approval_timeout_ms": -1}), false),
            (json!({"approval_timeout_ms": "60s"}), false),
            (json!({"approval_timeout_ms": 1.5}), false),
        ];
        for (metadata, ok) in checks {
            assert_eq!(check_agent_timeout(&metadata).is_ok(), ok, "{metadata}");
        }
    }

    #[test]
    fn requests_past_their_agents_timeout_are_due_together() {
        let now = Utc::now();
        let requests = [
            open(1, "a", 120, now),
            open(2, "b", 90, now),
            open(1, "c", 61, now),
            open(1, "d", 10, now),
            open(3, "e", 1000, now),
        ];
        let timeouts = |agent: Uuid| match agent.as_u128() {
            1 => Some(Duration::from_secs(60)),
            2 => Some(Duration::from_secs(100)),
            _ => None,
        };
        let due = due(&requests, now, timeouts);
        assert_eq!(
            due,
            [(Uuid::from_u128(1), Duration::from_secs(60), vec!["a".to_owned(), "c".to_owned()])]
        );
        // A request from the future (clocks apart) has waited nothing.
        let ahead = [open(1, "a", -30, now)];
        assert!(super::due(&ahead, now, |_| Some(Duration::ZERO)).len() == 1);
        assert!(super::due(&ahead, now, |_| Some(Duration::from_secs(1))).is_empty());
    }

    #[test]
    fn the_reason_says_how_long_it_waited() {
        let cases = [
            (Duration::from_millis(1500), "1500 ms"),
            (Duration::from_secs(30), "30 s"),
            (Duration::from_secs(600), "10 min"),
            (Duration::from_secs(7200), "2 h"),
        ];
        for (timeout, said) in cases {
            assert_eq!(
                timeout_reason(timeout),
                format!("timed out: nobody answered within {said}")
            );
        }
    }
}
