//! The faults a seed injects at the store's boundary: its rates, and the coin flips.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstream_server::store::{AppendBatch, StoreError};
use async_trait::async_trait;

use crate::common::hooked_store::{Hooks, Read};
use crate::common::rng::Rng;

/// Fault rates of one seed, and the source of the faults' coin flips.
pub(crate) struct Faults {
    pub(crate) append_fail_per_mille: u64,
    /// Appends that commit and then report a failure (the answer to COMMIT was lost).
    pub(crate) lost_ack_per_mille: u64,
    pub(crate) append_delay_max_us: u64,
    pub(crate) read_fail_per_mille: u64,
    pub(crate) rng: Mutex<Rng>,
    /// Off while the harness itself reads the log to check it.
    pub(crate) enabled: AtomicBool,
}

impl Faults {
    fn flip(&self, per_mille: u64) -> bool {
        self.enabled.load(Ordering::Relaxed) && self.rng.lock().unwrap().chance(per_mille)
    }
    fn delay(&self) -> Duration {
        if !self.enabled.load(Ordering::Relaxed) || self.append_delay_max_us == 0 {
            return Duration::ZERO;
        }
        Duration::from_micros(self.rng.lock().unwrap().below(self.append_delay_max_us))
    }
}

/// Groups the writers sent through the pipeline, over all seeds (the summary shows them).
pub(crate) static GROUPS_SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn injected(what: &str) -> StoreError {
    StoreError::Unavailable(format!("injected fault: {what}"))
}

/// Faults at the SQLite store's boundary. A failed append fails before the transaction
/// commits, as a full disk or a lost lock would.
#[async_trait]
impl Hooks for Arc<Faults> {
    fn before_read(&self, read: Read) -> Result<(), StoreError> {
        if self.flip(self.read_fail_per_mille) {
            return Err(injected(match read {
                Read::Head => "head read",
                Read::Log => "log read",
                Read::ById => "read by id",
            }));
        }
        Ok(())
    }
    async fn before_append(&self, _batches: &[AppendBatch]) -> Result<(), StoreError> {
        let delay = self.delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if self.flip(self.append_fail_per_mille) {
            return Err(injected("append"));
        }
        Ok(())
    }
    /// The writer's groups go ahead as on any SQLite store, and meet the same faults: a failed
    /// send, a slow answer, a lost one.
    fn pipelined(&self) -> bool {
        true
    }
    fn before_send(&self, _batches: &[AppendBatch]) -> Result<Duration, StoreError> {
        GROUPS_SENT.fetch_add(1, Ordering::Relaxed);
        if self.flip(self.append_fail_per_mille) {
            return Err(injected("append"));
        }
        Ok(self.delay())
    }
    fn after_commit(&self, _batches: &[AppendBatch]) -> Result<(), StoreError> {
        if self.flip(self.lost_ack_per_mille) {
            // Committed, but the answer never arrived (a connection that broke after COMMIT).
            return Err(injected("the commit's answer was lost"));
        }
        Ok(())
    }
}
