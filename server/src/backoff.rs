//! Waiting before trying again: the one backoff every retry loop uses (the writer's commits,
//! a subscription's catch-up, the cluster's listener). At the bottom: any floor may use it.

use std::time::Duration;

/// Exponential backoff: `initial_ms` doubled per `attempt` (from 0), never above `max_ms`.
pub fn backoff(initial_ms: u64, max_ms: u64, attempt: u32) -> Duration {
    Duration::from_millis(initial_ms.saturating_mul(1 << attempt.min(20)).min(max_ms))
}
