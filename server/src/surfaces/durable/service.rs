//! General durable streams over the log engine: a stream's messages are events of its own log
//! (`store::streams`), appended through the writer (group commit, the hub's fan-out, PostgreSQL's
//! notices) and read through the store's readers. One writer per path at a time in this
//! process: `Stream-Seq`, the producer fence and the close are checked and written under it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use app::EventKind;
use tokio::sync::watch;

use super::messages::Tails;
use rows::Rows;
pub use rows::STREAM_ROWS_KEPT_MAX;

mod append;
mod read;
mod rows;
use super::protocol::{self, Message, ProducerHeaders, Settings};
use super::refusal::Refusal;
use crate::delivery::writer::Writer;
use crate::store::{streams, EventDraft, Store, StoreError, StreamRow};

/// Messages one read returns at most (a longer stream is read page by page: `Stream-Up-To-Date`
/// says when the reader is at the tail). A catch-up of 10 000 small messages is one answer.
pub const READ_MESSAGES_MAX: u32 = 10_000;
/// A read stops adding messages once its body is this large (bytes), past one message.
pub const READ_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Messages one append may hold (a JSON array's elements).
pub const APPEND_MESSAGES_MAX: usize = 10_000;

/// What an append or a close did.
#[derive(Clone, Debug, PartialEq)]
pub struct Appended {
    /// The stream's tail after it.
    pub tail: u64,
    pub closed: bool,
    /// A producer's retry: nothing was written.
    pub duplicate: bool,
    /// The producer's last accepted seq (what `Producer-Seq` answers).
    pub producer_seq: Option<u64>,
}

/// An append's request.
#[derive(Clone)]
pub struct Append<'a> {
    pub body: &'a [u8],
    pub content_type: Option<&'a str>,
    pub stream_seq: Option<&'a str>,
    pub producer: Option<ProducerHeaders>,
    pub close: bool,
}

/// One path's writer lock, and a counter of its closes and deletes (waiting readers watch it).
struct PathState {
    writing: tokio::sync::Mutex<()>,
    changed: watch::Sender<u64>,
}

impl Default for PathState {
    fn default() -> PathState {
        PathState { writing: tokio::sync::Mutex::new(()), changed: watch::channel(0).0 }
    }
}

impl PathState {
    fn bump(&self) {
        self.changed.send_modify(|count| *count += 1);
    }
}

/// The streams of this server.
pub struct Service {
    store: Arc<dyn Store>,
    writer: Writer,
    paths: Mutex<HashMap<String, Arc<PathState>>>,
    /// The newest committed messages of the streams this server appends to (`messages`).
    tails: Mutex<Tails>,
    /// Stream rows kept in memory, when this server is the only one on its database (SQLite):
    /// every change to a row goes through this service, which forgets its copy after writing.
    /// With a shared database (PostgreSQL) another server may change a row: `None`, each use
    /// reads it.
    rows: Option<Mutex<Rows>>,
}

/// A path's state, held while it is used; the map forgets a path nobody holds.
struct Held<'a> {
    service: &'a Service,
    path: String,
    state: Arc<PathState>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut paths = self.service.paths.lock().expect("paths");
        // Ours and the map's: nobody else holds it.
        if Arc::strong_count(&self.state) == 2 {
            paths.remove(&self.path);
        }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Service {
    /// `shared`: other servers use the same database (rows are read at each use).
    pub fn new(store: Arc<dyn Store>, writer: Writer, shared: bool) -> Service {
        Service {
            store,
            writer,
            paths: Mutex::new(HashMap::new()),
            tails: Mutex::new(Tails::default()),
            rows: (!shared).then(|| Mutex::new(Rows::default())),
        }
    }

    /// The in-process state of the stream at `path` (made on first use).
    fn path_state(&self, path: &str) -> Arc<PathState> {
        let mut paths = self.paths.lock().expect("paths");
        paths.entry(path.to_owned()).or_default().clone()
    }

    fn hold(&self, path: &str) -> Held<'_> {
        let state = self.path_state(path);
        Held { service: self, path: path.to_owned(), state }
    }

    /// Paths held now (by writers and waiting readers): what `/v1/stats` watches.
    pub fn paths_held(&self) -> usize {
        self.paths.lock().expect("paths").len()
    }

    /// The stream at `path`, soft-deleted ones too; an expired one is deleted (soft-deleted
    /// while forks read it).
    pub async fn get(&self, path: &str) -> Result<Option<StreamRow>, StoreError> {
        let Some(mut row) = self.stored_row(path).await? else {
            return Ok(None);
        };
        let now = now_ms();
        let expired =
            protocol::expired(row.ttl_seconds, row.expires_at.as_deref(), row.accessed_at, now);
        if expired && !row.soft_deleted {
            if self.store.forks_of(path).await? > 0 {
                row.soft_deleted = true;
                let written = self.store.soft_delete_stream(path, row.log_id).await;
                self.forget_row(path);
                written?;
            } else {
                self.remove(&row).await?;
                return Ok(None);
            }
        }
        Ok(Some(row))
    }

    /// The row at `path` as stored (soft-deleted and expired ones too): what forks read through.
    pub(super) async fn store_stream(&self, path: &str) -> Result<Option<StreamRow>, StoreError> {
        self.stored_row(path).await
    }

    /// The stream at `path` for a reader or a writer: 404 when there is none, 410 when it was
    /// deleted while forks read it.
    pub async fn live(&self, path: &str) -> Result<StreamRow, Refusal> {
        match self.get(path).await? {
            None => Err(Refusal::NotFound),
            Some(row) if row.soft_deleted => Err(Refusal::Gone),
            Some(row) => Ok(row),
        }
    }

    /// Streams with a resident tail, and the bytes those hold.
    pub fn tails_held(&self) -> (usize, usize) {
        self.tails.lock().expect("tails").held()
    }

    /// Deletes `row`'s stream and log, then each soft-deleted source it was the last fork of.
    async fn remove(&self, row: &StreamRow) -> Result<(), StoreError> {
        self.tails.lock().expect("tails").forget(row.log_id);
        let deleted = self.store.delete_stream(&row.path).await;
        self.forget_row(&row.path);
        deleted?;
        let mut parent = row.forked_from.clone();
        while let Some(path) = parent.take() {
            let Some(source) = self.stored_row(&path).await? else {
                break;
            };
            if source.soft_deleted && self.store.forks_of(&path).await? == 0 {
                let deleted = self.store.delete_stream(&path).await;
                self.forget_row(&path);
                deleted?;
                parent = source.forked_from.clone();
            }
        }
        Ok(())
    }

    /// Notes a read (a TTL counts from the last read or append). Only the access time is
    /// written: the reader holds no writer lock, and its snapshot of the row may be older than
    /// a close or a `Stream-Seq` committed meanwhile.
    pub async fn touch(&self, row: &mut StreamRow) -> Result<(), StoreError> {
        if row.ttl_seconds.is_some() {
            row.accessed_at = now_ms();
            let written = self.store.touch_stream(&row.path, row.log_id, row.accessed_at).await;
            self.forget_row(&row.path);
            written?;
        }
        Ok(())
    }

    /// The stream's tail seq.
    pub async fn tail(&self, row: &StreamRow) -> Result<u64, StoreError> {
        Ok(row.base_offset + self.store.head_seq(row.log_id).await?.unwrap_or(0))
    }

    /// Creates the stream (with `body` as its first messages), or finds the same one: true when
    /// this call made it. A fork (`settings.fork`) reads its source up to the fork's offset,
    /// then its own messages.
    pub async fn create(
        &self,
        path: &str,
        settings: Settings,
        body: &[u8],
    ) -> Result<(StreamRow, bool), Refusal> {
        let held = self.hold(path);
        let _writing = held.state.writing.lock().await;
        if let Some(existing) = self.get(path).await? {
            if existing.soft_deleted {
                return Err(Refusal::Conflict(
                    "stream was deleted but still has active forks — path cannot be reused until all forks are removed",
                ));
            }
            if !protocol::same_settings(&existing, &settings) {
                return Err(Refusal::Conflict(
                    "Stream already exists with different configuration",
                ));
            }
            return Ok((existing, false));
        }
        let now = now_ms();
        let mut row = StreamRow {
            path: path.to_owned(),
            log_id: uuid::Uuid::nil(),
            content_type: settings
                .content_type
                .clone()
                .unwrap_or_else(|| "application/octet-stream".to_owned()),
            ttl_seconds: settings.ttl_seconds,
            expires_at: settings.expires_at.clone(),
            closed: false,
            closed_by: None,
            stream_seq: None,
            created_at: now,
            accessed_at: now,
            forked_from: None,
            fork_offset: None,
            fork_sub_offset: None,
            base_offset: 0,
            soft_deleted: false,
        };
        let mut prefix = Vec::new();
        if let Some(fork) = &settings.fork {
            prefix = super::fork::plan(self, fork, &settings, &mut row).await?;
        }
        let messages =
            if body.is_empty() { Vec::new() } else { messages_of(&row.content_type, body, true)? };
        let created = streams::create_stream(self.store.as_ref(), row).await;
        self.forget_row(path);
        let (mut row, made) = created?;
        if made {
            let mut drafts_made = drafts(prefix);
            drafts_made.extend(drafts(messages));
            if !drafts_made.is_empty() {
                self.writer.append(row.log_id, drafts_made).await?;
            }
        }
        if made && settings.closed {
            row.closed = true;
            let written = self.store.update_stream(&row).await;
            self.forget_row(path);
            written?;
        }
        Ok((row, made))
    }

    /// Watches the stream at `path` for a close or a delete in this process (from now on).
    pub fn watch(self: &Arc<Self>, path: &str) -> PathWatch {
        let state = self.path_state(path);
        let changes = state.changed.subscribe();
        PathWatch { service: self.clone(), path: path.to_owned(), state, changes }
    }

    /// Deletes the stream — soft, while forks still read it.
    pub async fn delete(&self, path: &str) -> Result<(), Refusal> {
        let held = self.hold(path);
        let _writing = held.state.writing.lock().await;
        let mut row = self.live(path).await?;
        if self.store.forks_of(path).await? > 0 {
            row.soft_deleted = true;
            let written = self.store.update_stream(&row).await;
            self.forget_row(path);
            written?;
        } else {
            self.remove(&row).await?;
        }
        held.state.bump();
        Ok(())
    }
}

/// A waiting reader's watch on a path: wakes on a close or a delete; the map forgets the path
/// when the last holder lets go.
pub struct PathWatch {
    service: Arc<Service>,
    path: String,
    state: Arc<PathState>,
    changes: watch::Receiver<u64>,
}

impl PathWatch {
    /// Returns once the stream was closed or deleted since the watch began (or the last call).
    pub async fn changed(&mut self) {
        if self.changes.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for PathWatch {
    fn drop(&mut self) {
        let mut paths = self.service.paths.lock().expect("paths");
        if Arc::strong_count(&self.state) == 2 {
            paths.remove(&self.path);
        }
    }
}

/// An append's body as messages: JSON mode's values, or the bytes as one message.
fn messages_of(content_type: &str, body: &[u8], create: bool) -> Result<Vec<Message>, Refusal> {
    if protocol::is_json(content_type) {
        let texts = protocol::json_messages(body, create).map_err(Refusal::Bad)?;
        if texts.len() > APPEND_MESSAGES_MAX {
            return Err(Refusal::Bad("too many messages in one append"));
        }
        return Ok(texts.into_iter().map(Message::Json).collect());
    }
    Ok(vec![Message::Bytes(body.to_vec())])
}

/// One append's messages as drafts, sharing a block id: the batch they came in (a JSON fork's
/// sub-offset counts within it). Their ids follow the first's (as the writer would chain them:
/// one row of the log holds them), their time is one. A message that is a whole append by
/// itself is its own block (its id): the writer chains such appends of a stream, and the log
/// keeps them in shared rows (`store::chunk`).
fn drafts(messages: Vec<Message>) -> Vec<EventDraft> {
    let (first, now) = (uuid::Uuid::now_v7(), chrono::Utc::now());
    let batch = if messages.len() == 1 { first } else { uuid::Uuid::now_v7() };
    messages
        .into_iter()
        .enumerate()
        .map(|(k, message)| {
            let id =
                crate::store::chunk::nth_id(first, k as u64).unwrap_or_else(uuid::Uuid::now_v7);
            let mut draft = EventDraft::made(EventKind::StreamMessage, id, now);
            draft.block_id = Some(batch);
            draft.content = protocol::stored(message);
            draft
        })
        .collect()
}

impl Service {
    /// The row at `path` as stored: the kept copy, or the store's (then kept).
    pub(super) async fn stored_row(&self, path: &str) -> Result<Option<StreamRow>, StoreError> {
        let Some(rows) = &self.rows else {
            return self.store.stream(path).await;
        };
        let forgets = match rows.lock().expect("rows").get(path) {
            Ok(row) => return Ok(Some(row)),
            Err(forgets) => forgets,
        };
        let row = self.store.stream(path).await?;
        if let Some(row) = &row {
            rows.lock().expect("rows").keep(path, row, forgets);
        }
        Ok(row)
    }

    /// Forgets the kept row at `path`: called after every write to it (failed ones too).
    pub(super) fn forget_row(&self, path: &str) {
        if let Some(rows) = &self.rows {
            rows.lock().expect("rows").forget(path);
        }
    }
}

impl super::fork::Chain for Service {
    async fn get(&self, path: &str) -> Result<Option<StreamRow>, StoreError> {
        Service::get(self, path).await
    }

    async fn store_stream(&self, path: &str) -> Result<Option<StreamRow>, StoreError> {
        Service::store_stream(self, path).await
    }

    async fn tail(&self, row: &StreamRow) -> Result<u64, StoreError> {
        Service::tail(self, row).await
    }

    async fn first_batch(
        &self,
        row: &StreamRow,
        since: u64,
    ) -> Result<Vec<(Option<uuid::Uuid>, serde_json::Value)>, StoreError> {
        Service::first_batch(self, row, since).await
    }

    async fn read_own(
        &self,
        row: &StreamRow,
        since: u64,
        cap: Option<u64>,
        out: &mut super::messages::Messages,
    ) -> Result<(), StoreError> {
        Service::read_own(self, row, since, cap, out).await
    }
}
