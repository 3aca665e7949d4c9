//! The producer's faults: a crash mid-batch (resumed at the same epoch or restarted with a new
//! one), a late batch from a process that is gone, vanishing mid-run, and a streamed body cut
//! mid-line.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use serde_json::json;
use tokio::time::{sleep, timeout, Instant};
use uuid::Uuid;

use super::{Batch, Producer, CRASH_PAUSE_MS_MAX, CRASH_PAUSE_MS_MIN, LEASE_SLACK_MS};
use crate::produced::{End, ProducedRun};

impl Producer {
    /// The process crashes while `batch` is in flight, and a new one comes up: it reads where
    /// the producer stands — whether `batch` was committed — and goes on with the same epoch
    /// or (`new_epoch`) a higher one at seq 0. Returns whether `batch` was committed and
    /// whether the run is still open (a cancel may have ended it while the producer was down);
    /// `None` on a failure.
    pub(super) async fn crash(&mut self, batch: &Batch, new_epoch: bool) -> Option<(bool, bool)> {
        let within = self.random.millis(0, 4);
        let _ = timeout(within, self.send(self.epoch, self.next_seq, &batch.events)).await;
        self.http = agentstream_server::http_client::client();
        sleep(self.random.millis(CRASH_PAUSE_MS_MIN, CRASH_PAUSE_MS_MAX)).await;
        let Some(position) = self.position().await? else {
            self.fail("its position is unknown after a crash mid-run".into());
            return None;
        };
        if position.epoch != self.epoch
            || !(self.next_seq.saturating_sub(1)..=self.next_seq).contains(&position.seq)
        {
            self.fail(format!(
                "after a crash at epoch {} seq {} its position is epoch {} seq {}",
                self.epoch, self.next_seq, position.epoch, position.seq
            ));
            return None;
        }
        let committed = position.seq == self.next_seq;
        if new_epoch {
            self.counts.restarts_new_epoch.fetch_add(1, Relaxed);
            self.epoch += 1;
            self.next_seq = 0;
        } else {
            self.counts.crashes_resumed.fetch_add(1, Relaxed);
            self.next_seq = position.seq + 1;
        }
        Some((committed, position.run_open))
    }

    /// A late batch from a process that is no more (an older epoch, or a vanished producer):
    /// it must get `expected` and write nothing.
    pub(super) async fn zombie(&mut self, epoch: u64, expected: u16) {
        let late = json!([{ "kind": "text", "message_id": Uuid::now_v7(), "delta": "zombie ", "delta_action": "append" }]);
        let response = self
            .http
            .post(format!("{}/v1/agents/{}/produce", self.base, self.agent_id))
            .header("Producer-Id", &self.id)
            .header("Producer-Epoch", epoch.to_string())
            .header("Producer-Seq", self.next_seq.to_string())
            .json(&late)
            .send()
            .await;
        match response {
            Ok(response) if response.status() == expected => {
                self.counts.zombies_fenced.fetch_add(1, Relaxed);
            }
            Ok(response) => {
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                self.fail(format!(
                    "a late batch (epoch {epoch}) answered {status}, not {expected}: {body}"
                ));
            }
            Err(error) => self.fail(format!("a late batch failed: {error}")),
        }
    }

    /// The producer stops sending mid-run: its run must end at its lease (or by a cancel),
    /// and a late batch of its must be refused.
    pub(super) async fn vanish(
        &mut self,
        mut run: ProducedRun,
        lease_ms: u64,
    ) -> Option<ProducedRun> {
        run.end = End::Vanished;
        let gone = self.last_answer;
        let deadline = gone + Duration::from_millis(lease_ms + LEASE_SLACK_MS);
        loop {
            let Some(position) = self.position().await? else {
                self.fail("its position is unknown after it vanished mid-run".into());
                return None;
            };
            if !position.run_open {
                let past_lease = gone.elapsed().as_millis() as u64;
                self.counts
                    .lease_overrun_ms_max
                    .fetch_max(past_lease.saturating_sub(lease_ms), Relaxed);
                run.run_id = run.run_id.or(position.run_id);
                break;
            }
            if Instant::now() > deadline {
                self.fail(format!(
                    "its run stayed open {} ms past its lease of {lease_ms} ms",
                    LEASE_SLACK_MS
                ));
                return None;
            }
            sleep(Duration::from_millis(100)).await;
        }
        self.zombie(self.epoch, 409).await;
        Some(run)
    }

    /// The batches from `batches[0]` on as one streamed NDJSON body, a line every few ms; in
    /// half the runs the body is cut mid-line (the connection breaks). Returns how many
    /// batches were committed (read from the position afterwards) and whether the run is
    /// still open.
    pub(super) async fn stream(&mut self, batches: &[Batch]) -> Option<(usize, bool)> {
        self.counts.streamed.fetch_add(1, Relaxed);
        let cut_after =
            (self.random.below(2) == 0).then(|| self.random.below(batches.len() as u64) as usize);
        let (lines, receiver) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(4);
        let body = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|line| (line, receiver))
        });
        let request = self
            .http
            .post(format!("{}/v1/agents/{}/produce", self.base, self.agent_id))
            .header("Producer-Id", &self.id)
            .header("Producer-Epoch", self.epoch.to_string())
            .header("Producer-Seq", self.next_seq.to_string())
            .header("Content-Type", "application/x-ndjson")
            .body(reqwest::Body::wrap_stream(body))
            .send();
        let answer = tokio::spawn(request);
        for (number, batch) in batches.iter().enumerate() {
            if cut_after == Some(number) {
                // Half a line, then the connection breaks.
                let half = batch.events.to_string();
                let _ = lines.send(Ok(half[..half.len() / 2].to_owned())).await;
                let _ = lines.send(Err(std::io::Error::other("the producer crashed"))).await;
                break;
            }
            if lines.send(Ok(format!("{}\n", batch.events))).await.is_err() {
                break;
            }
            sleep(self.random.millis(2, 40)).await;
        }
        drop(lines);
        let status = match answer.await {
            Ok(Ok(response)) => Some(response.status().as_u16()),
            _ => None,
        };
        match (cut_after, status) {
            (Some(_), _) => {
                self.counts.streams_cut.fetch_add(1, Relaxed);
            }
            (None, Some(200 | 409)) => {}
            (None, other) => self.fail(format!("a whole streamed body answered {other:?}")),
        }
        let Some(position) = self.position().await? else {
            self.fail("its position is unknown after a streamed body".into());
            return None;
        };
        let committed = (position.seq + 1).saturating_sub(self.next_seq) as usize;
        if position.epoch != self.epoch || committed > batches.len() {
            self.fail(format!(
                "after a streamed body from seq {} its position is epoch {} seq {}",
                self.next_seq, position.epoch, position.seq
            ));
            return None;
        }
        self.next_seq += committed as u64;
        Some((committed, position.run_open))
    }
}
