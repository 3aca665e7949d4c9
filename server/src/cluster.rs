//! Several server processes on one PostgreSQL database.
//!
//! Each process runs two tasks beside its writer:
//!
//! - **Notices** ([`listen_loop`]): a dedicated connection `LISTEN`s for commit notices
//!   (`agent first last`, sent by every append in its transaction) and cancel requests. For an
//!   agent with subscribers here, the committed range is read from the log and handed to the
//!   hub, exactly as the local writer hands over its own commits; the hub cuts what it already
//!   has. A lost connection (an error, or a ping that fails after a quiet spell) is reported,
//!   re-made with backoff, and then *every* room here is caught up from the log before notices
//!   are trusted again, so a room is never silently stale.
//! - **Leases** ([`lease_loop`]): renews the leases of the runs this process executes, and ends
//!   runs whose process is gone (lease ran out) as interrupted — the same code start-up recovery
//!   runs ([`crate::agent::recovery::recover`]).
//!
//! Subscribers need nothing new: a batch that skips seqs is a gap they fill from the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::Runs;
use crate::delivery::hub::Hub;
use crate::delivery::writer::Writer;
use crate::store::{ClusterStore, EventLog, Notice, Notices, Store, StoreError};

/// Events read from the log for one commit notice (or one room's catch-up) at most. A room
/// further behind gets the newest this many; its subscribers fill the rest from the store.
pub const NOTICE_FETCH_EVENTS_MAX: u32 = 500;
/// A listener connection quiet this long is pinged; a failed ping counts as a lost connection.
pub const LISTENER_IDLE_PING_MS: u64 = 2_000;
/// The first wait before listening again after a lost connection; doubled per failure.
pub const LISTENER_RECONNECT_DELAY_INITIAL_MS: u64 = 50;
/// The longest wait between attempts to listen again.
pub const LISTENER_RECONNECT_DELAY_MAX_MS: u64 = 2_000;

/// This process's view of the cluster.
pub struct Cluster {
    pub store: Arc<dyn ClusterStore>,
    /// True while the notice connection is up and the rooms are caught up (for the logs and the
    /// reconnect backoff).
    listening: AtomicBool,
}

impl Cluster {
    /// Whether the notice connection is up and this server's rooms are caught up: without it,
    /// subscribers here do not see what other servers commit.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    /// Starts the notice and lease tasks; they stop when `shutdown` is cancelled.
    pub fn spawn(
        cluster_store: Arc<dyn ClusterStore>,
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        runs: Arc<Runs>,
        writer: Writer,
        shutdown: CancellationToken,
    ) -> Arc<Cluster> {
        let cluster = Arc::new(Cluster { store: cluster_store, listening: AtomicBool::new(false) });
        tokio::spawn({
            let cluster = cluster.clone();
            let store = store.clone();
            let runs = runs.clone();
            let shutdown = shutdown.clone();
            async move {
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = listen_loop(&cluster, store.as_ref(), &hub, &runs) => {}
                }
            }
        });
        tokio::spawn({
            let cluster = cluster.clone();
            async move {
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = lease_loop(&cluster, store.as_ref(), &runs, &writer) => {}
                }
            }
        });
        cluster
    }
}

/// Listens, catches up, follows notices; on a lost connection, starts over.
async fn listen_loop(cluster: &Cluster, store: &dyn EventLog, hub: &Hub, runs: &Runs) {
    let mut failures = 0;
    loop {
        match follow_notices(cluster, store, hub, runs).await {
            Ok(never) => match never {},
            Err(error) => {
                // A connection that was up starts the backoff over.
                if cluster.listening.swap(false, Ordering::Relaxed) {
                    failures = 0;
                }
                let delay = crate::backoff::backoff(
                    LISTENER_RECONNECT_DELAY_INITIAL_MS,
                    LISTENER_RECONNECT_DELAY_MAX_MS,
                    failures,
                );
                tracing::warn!(%error, ?delay, "lost the PostgreSQL notice connection; listening again");
                tokio::time::sleep(delay).await;
                failures += 1;
            }
        }
    }
}

async fn follow_notices(
    cluster: &Cluster,
    store: &dyn EventLog,
    hub: &Hub,
    runs: &Runs,
) -> Result<std::convert::Infallible, StoreError> {
    let mut notices: Box<dyn Notices> = cluster.store.listen().await?;
    // Listening first, then reading the log: whatever commits after this read is noticed.
    for (agent_id, published) in hub.rooms_published() {
        catch_up_room(store, hub, agent_id, published, None).await?;
    }
    if !cluster.listening.swap(true, Ordering::Relaxed) {
        tracing::info!(node_id = %cluster.store.node_id(), "following the other servers' commits");
    }
    loop {
        let notice = match tokio::time::timeout(
            Duration::from_millis(LISTENER_IDLE_PING_MS),
            notices.next(),
        )
        .await
        {
            Ok(notice) => notice?,
            Err(_quiet) => {
                notices.ping().await?;
                continue;
            }
        };
        match notice {
            Notice::Committed { agent_id, first_seq, last_seq } => {
                let Some(published) = hub.published(agent_id) else {
                    continue;
                };
                if last_seq <= published {
                    continue; // this process's own commit, or one already fetched
                }
                catch_up_room(store, hub, agent_id, published, Some((first_seq, last_seq))).await?;
            }
            Notice::Cancel { agent_id, run_id } => {
                if runs.cancel(agent_id, Some(&[run_id])).is_some() {
                    tracing::info!(%agent_id, %run_id, "cancelling a run at another server's request");
                }
            }
        }
    }
}

/// Hands the room what the log holds beyond `published`: the committed range of a notice, or
/// (after a reconnect) up to the head. At most [`NOTICE_FETCH_EVENTS_MAX`] of the newest.
async fn catch_up_room(
    store: &dyn EventLog,
    hub: &Hub,
    agent_id: Uuid,
    published: u64,
    committed: Option<(u64, u64)>,
) -> Result<(), StoreError> {
    let (first, last) = match committed {
        Some(range) => range,
        None => match store.head_seq(agent_id).await? {
            Some(head) if head > published => (published + 1, head),
            _ => return Ok(()),
        },
    };
    // A fresh room (nothing published yet) only needs what was committed now: its subscribers
    // read the log themselves when they joined.
    let from = if published == 0 { first } else { published + 1 }
        .max(last.saturating_sub(u64::from(NOTICE_FETCH_EVENTS_MAX)) + 1);
    let events = store.read_events(agent_id, from - 1, (last + 1 - from) as u32).await?;
    if !events.is_empty() {
        hub.publish(agent_id, events);
    }
    Ok(())
}

/// Renews this process's run leases and ends the runs of processes that are gone.
async fn lease_loop(cluster: &Cluster, store: &dyn Store, runs: &Runs, writer: &Writer) {
    let lease_ms = cluster.store.run_lease_ms();
    // Renewed three times per lease: two renewals may fail (a database restart) before the
    // lease runs out.
    let mut tick = tokio::time::interval(Duration::from_millis((lease_ms / 3).max(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let alive = runs.active_run_ids();
        if let Err(error) = cluster.store.renew_leases(&alive).await {
            tracing::warn!(%error, "could not renew the leases of this server's runs");
        }
        match crate::agent::recovery::recover(store, writer, &alive).await {
            Ok(recovered) if recovered != crate::agent::recovery::Recovered::default() => {
                tracing::warn!(?recovered, "ended runs whose server is gone");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "could not look for runs whose server is gone"),
        }
    }
}
