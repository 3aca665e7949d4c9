//! What processes sharing one PostgreSQL database agree on: one run per agent cluster-wide (a
//! row in `active_runs` with its owner and lease), cancel requests, and the notices that tell each
//! process what the others committed (`LISTEN`/`NOTIFY`).

use crate::store::StoreResult;
use async_trait::async_trait;
use sqlx::postgres::PgListener;
use sqlx::Executor;
use uuid::Uuid;

use super::{PgStore, CLAIM_ATTEMPTS_MAX, CONTROL_CHANNEL, EVENTS_CHANNEL};
use crate::store::error::unknown_agent_or;
use crate::store::{ClusterStore, Notice, Notices, StoreError};

#[async_trait]
impl ClusterStore for PgStore {
    fn node_id(&self) -> Uuid {
        self.node_id
    }

    fn run_lease_ms(&self) -> u64 {
        self.run_lease_ms
    }

    async fn claim_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<Option<Uuid>> {
        // The holder may end between the insert and the look-up; then the slot is tried again.
        for _ in 0..CLAIM_ATTEMPTS_MAX {
            let claimed = self
                .write_slot(
                    "INSERT INTO active_runs (agent_id, run_id, owner_id, lease_until) \
                     VALUES ($1, $2, $3, now() + make_interval(secs => $4)) \
                     ON CONFLICT (agent_id) DO NOTHING RETURNING run_id",
                    agent_id,
                    run_id,
                )
                .await?;
            if claimed.is_some() {
                return Ok(None);
            }
            if let Some(holder) = self.active_run(agent_id).await? {
                return Ok(Some(holder));
            }
        }
        Err(StoreError::Unavailable(format!(
            "the run slot of agent {agent_id} kept changing hands"
        )))
    }

    async fn release_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<()> {
        sqlx::query("DELETE FROM active_runs WHERE agent_id = $1 AND run_id = $2")
            .bind(agent_id)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn adopt_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<Option<Uuid>> {
        // An update only: the claim of an open run stays until the run ends (recovery ends a
        // run whose claim ran out), so a missing row means the run ended — and an insert
        // racing the end's commit could bring its claim back for a run that is over.
        let adopted = self
            .write_slot(
                "UPDATE active_runs SET owner_id = $3, \
                     lease_until = now() + make_interval(secs => $4) \
                 WHERE agent_id = $1 AND run_id = $2 RETURNING run_id",
                agent_id,
                run_id,
            )
            .await?;
        if adopted.is_some() {
            return Ok(None);
        }
        // Another run holds the agent, or this one ended: either way it is not ours to go on.
        Ok(Some(self.active_run(agent_id).await?.unwrap_or(run_id)))
    }

    async fn active_run(&self, agent_id: Uuid) -> StoreResult<Option<Uuid>> {
        Ok(sqlx::query_scalar("SELECT run_id FROM active_runs WHERE agent_id = $1")
            .bind(agent_id)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn renew_leases(&self, run_ids: &[Uuid]) -> StoreResult<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE active_runs SET lease_until = now() + make_interval(secs => $3) \
             WHERE owner_id = $1 AND run_id = ANY($2)",
        )
        .bind(self.node_id)
        .bind(run_ids)
        .bind(self.run_lease_ms as f64 / 1000.0)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn send_cancel(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<()> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CONTROL_CHANNEL)
            .bind(format!("cancel {agent_id} {run_id}"))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn listen(&self) -> StoreResult<Box<dyn Notices>> {
        let mut listener = PgListener::connect(&self.url).await?;
        // A lost connection is reported, not silently re-made: the caller catches up from the
        // log before it trusts the notices again.
        listener.eager_reconnect(false);
        listener.listen_all([EVENTS_CHANNEL, CONTROL_CHANNEL]).await?;
        Ok(Box::new(PgNotices { listener }))
    }
}

struct PgNotices {
    listener: PgListener,
}

fn lost() -> StoreError {
    StoreError::Unavailable("the notice connection to PostgreSQL was lost".into())
}

#[async_trait]
impl Notices for PgNotices {
    async fn next(&mut self) -> StoreResult<Notice> {
        loop {
            let notification = self.listener.try_recv().await?.ok_or_else(lost)?;
            match parse_notice(notification.channel(), notification.payload()) {
                Some(notice) => return Ok(notice),
                None => tracing::warn!(
                    channel = notification.channel(),
                    payload = notification.payload(),
                    "ignoring a notice that is not ours"
                ),
            }
        }
    }

    async fn ping(&mut self) -> StoreResult<()> {
        (&mut self.listener).execute("SELECT 1").await?;
        Ok(())
    }
}

/// Reads a notice payload: `agent first last` on the events channel, `cancel agent run` on the
/// control channel.
fn parse_notice(channel: &str, payload: &str) -> Option<Notice> {
    let mut words = payload.split(' ');
    match channel {
        EVENTS_CHANNEL => {
            let agent_id = words.next()?.parse().ok()?;
            let first_seq: u64 = words.next()?.parse().ok()?;
            let last_seq: u64 = words.next()?.parse().ok()?;
            // Seqs start at 1 and a range goes up: anything else is not a commit of ours (and
            // its arithmetic would underflow further on).
            if first_seq == 0 || first_seq > last_seq || words.next().is_some() {
                return None;
            }
            Some(Notice::Committed { agent_id, first_seq, last_seq })
        }
        CONTROL_CHANNEL => {
            if words.next()? != "cancel" {
                return None;
            }
            let agent_id = words.next()?.parse().ok()?;
            let run_id = words.next()?.parse().ok()?;
            Some(Notice::Cancel { agent_id, run_id })
        }
        _ => None,
    }
}

impl PgStore {
    /// Writes `agent_id`'s run slot for `run_id` with `sql` (its parameters: the agent, the run,
    /// this process and the lease in seconds; it returns the run id when it wrote the row).
    async fn write_slot(
        &self,
        sql: &'static str,
        agent_id: Uuid,
        run_id: Uuid,
    ) -> StoreResult<Option<Uuid>> {
        sqlx::query_scalar(sql)
            .bind(agent_id)
            .bind(run_id)
            .bind(self.node_id)
            .bind(self.run_lease_ms as f64 / 1000.0)
            .fetch_optional(&self.pool)
            .await
            .map_err(unknown_agent_or(agent_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_parse_and_garbage_does_not() {
        let agent = Uuid::new_v4();
        let run = Uuid::new_v4();
        assert_eq!(
            parse_notice(EVENTS_CHANNEL, &format!("{agent} 3 7")),
            Some(Notice::Committed { agent_id: agent, first_seq: 3, last_seq: 7 })
        );
        assert_eq!(
            parse_notice(CONTROL_CHANNEL, &format!("cancel {agent} {run}")),
            Some(Notice::Cancel { agent_id: agent, run_id: run })
        );
        assert_eq!(parse_notice(EVENTS_CHANNEL, "x 1 2"), None);
        // Ranges that go down, start at 0 or carry more words are not ours.
        assert_eq!(parse_notice(EVENTS_CHANNEL, &format!("{agent} 7 3")), None);
        assert_eq!(parse_notice(EVENTS_CHANNEL, &format!("{agent} 0 3")), None);
        assert_eq!(parse_notice(EVENTS_CHANNEL, &format!("{agent} 1 3 9")), None);
        assert_eq!(parse_notice(EVENTS_CHANNEL, &format!("{agent} -1 3")), None);
        assert_eq!(parse_notice(EVENTS_CHANNEL, &format!("{agent} 1")), None);
        assert_eq!(parse_notice(CONTROL_CHANNEL, &format!("stop {agent} {run}")), None);
        assert_eq!(parse_notice("other", "anything"), None);
    }
}
