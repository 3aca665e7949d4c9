use super::*;
use crate::store::sqlite::testing::{open, seqs};
use crate::store::{Agents, EventDraft, EventLog, NewAgent};

/// A group of one event of `kind` for each of `agents`.
fn group(agents: &[Uuid], kind: app::EventKind) -> Vec<AppendBatch> {
    agents.iter().map(|agent_id| AppendBatch::new(*agent_id, vec![EventDraft::new(kind)])).collect()
}

/// A second connection to the store's file, with this process's view of `recent` caught up
/// (appends on it note what they commit in the store's maps, as its append thread's do).
fn beside(path: &std::path::Path, recent: Recent) -> (Connection, Recent) {
    let connection = Connection::open(path).unwrap();
    let mut recent = recent;
    recent.catch_up(&connection).unwrap();
    (connection, recent)
}

#[tokio::test]
async fn a_group_nobody_waits_for_is_not_committed() {
    let (_directory, path, store) = open().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
    let group = || group(&[agent], app::EventKind::Text);
    let (mut connection, mut open) = beside(&path, Recent::new(RecentIndex::default()));
    let sent = group();
    let refused = append(&mut connection, sent.clone(), || true, &mut open, &store.known);
    assert_eq!(refused.unwrap_err().batches, sent, "given back as it was sent");
    assert_eq!(store.head_seq(agent).await.unwrap(), Some(0));
    assert_eq!(store.read_events(agent, 0, 10).await.unwrap().len(), 0);
    assert!(append(&mut connection, group(), || false, &mut open, &store.known).is_ok());
    assert_eq!(store.head_seq(agent).await.unwrap(), Some(1));
}

/// A group refused after its events were numbered and written (its second batch is a
/// producer's, fenced at a position that is not the stored one) writes nothing and comes back
/// as it was sent: the writer tries those batches again without having kept a copy.
#[tokio::test]
async fn a_group_refused_midway_comes_back_as_it_was_sent() {
    let (_directory, path, store) = open().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
    let mut sent = group(&[agent, agent], app::EventKind::Text);
    sent[0].drafts[0].content = serde_json::json!("first");
    sent[1].producer = Some(crate::store::ProducerStamp {
        producer_id: "p".into(),
        epoch: 1,
        seq: 0,
        run_id: None,
        fenced_at: Some((1, 5)),
    });
    let (mut connection, mut recent) = beside(&path, Recent::new(RecentIndex::default()));
    let refused =
        append(&mut connection, sent.clone(), || false, &mut recent, &store.known).unwrap_err();
    assert!(matches!(refused.error, StoreError::ProducerMoved { .. }), "{:?}", refused.error);
    assert_eq!(refused.batches, sent);
    assert_eq!(store.head_seq(agent).await.unwrap(), Some(0));
    sent[1].producer = None;
    let committed = append(&mut connection, sent, || false, &mut recent, &store.known).unwrap();
    let seqs: Vec<Vec<u64>> =
        committed.iter().map(|events| events.iter().map(|event| event.seq).collect()).collect();
    assert_eq!(seqs, [vec![1], vec![2]]);
    assert_eq!(committed[0][0].content, serde_json::json!("first"));
}

/// A group that did not commit left its rows' `n`s in the thread's list; another process then
/// gave those same `n`s to rows of its own. Listed twice, a step moved the other's row as this
/// one's, then again as its own (a duplicate key in the log: every later step failed). The rows
/// of a commit that failed are forgotten when the next commit catches up.
#[tokio::test]
async fn the_rows_of_a_failed_commit_are_forgotten_before_another_process_reuses_their_n() {
    let (_directory, path, store) = open().await;
    let (mine, theirs) = (
        store.create_agent(NewAgent::default()).await.unwrap().id,
        store.create_agent(NewAgent::default()).await.unwrap().id,
    );
    let group = |agent_id| group(&[agent_id], app::EventKind::Text);
    let (mut connection, mut recent) = beside(&path, Recent::new(RecentIndex::default()));
    assert!(append(&mut connection, group(mine), || true, &mut recent, &store.known).is_err());
    store.append(&group(theirs)[..]).await.unwrap();
    append(&mut connection, group(mine), || false, &mut recent, &store.known).unwrap();
    while recent.any() {
        let transaction = connection.transaction().unwrap();
        let step = recent.step(&transaction, FOLD_STEP_ROWS_MAX).unwrap();
        transaction.commit().unwrap();
        recent.moved(step);
    }
    for agent_id in [mine, theirs] {
        assert_eq!(seqs(&store, agent_id, 10).await, vec![1]);
    }
}

/// While steps keep failing, `recent` grows only to its hard bound: past it appends are refused
/// with a reason and write nothing, and the first step that succeeds lets them in again. Before,
/// nothing bounded the table or the thread's lists while steps failed.
#[tokio::test]
async fn appends_are_refused_at_the_hard_bound_while_steps_fail_and_resume_after() {
    let (_directory, path, store) = open().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
    let group = || group(&[agent], app::EventKind::Usage);
    let index = RecentIndex::default();
    let (mut connection, mut recent) = beside(&path, Recent::full_at(index.clone(), 8));
    connection
        .execute_batch(
            "CREATE TRIGGER refuse_moves BEFORE INSERT ON events \
             BEGIN SELECT RAISE(ABORT, 'no room for moved rows'); END;",
        )
        .unwrap();
    for _ in 0..8 {
        append(&mut connection, group(), || false, &mut recent, &store.known).unwrap();
    }
    for _ in 0..3 {
        let refused =
            append(&mut connection, group(), || false, &mut recent, &store.known).unwrap_err();
        let error = refused.error;
        assert!(error.to_string().contains("cannot be moved"), "{error}");
    }
    assert_eq!(store.head_seq(agent).await.unwrap(), Some(8));
    assert_eq!(index.live_rows(), 8, "the backlog the metrics show");
    connection.execute_batch("DROP TRIGGER refuse_moves").unwrap();
    append(&mut connection, group(), || false, &mut recent, &store.known).unwrap();
    assert_eq!(seqs(&store, agent, 20).await, (1..=9).collect::<Vec<u64>>());
    assert!(index.live_rows() < 8, "{} rows left", index.live_rows());
}

/// Groups of thousands of rows (a bulk import, a bench) keep `recent` near its bound: each
/// commit past it moves at least as many rows as it added. One step of `FOLD_STEP_ROWS_MAX` per
/// commit fell behind such groups, `recent` grew until appends paused (and with the hard bound,
/// the 14th group of 5 000 rows was refused though no step had failed).
#[tokio::test]
async fn groups_of_thousands_of_rows_keep_recent_near_its_bound() {
    use crate::limits::{RECENT_ROWS_HARD_MAX, RECENT_ROWS_MAX};
    const GROUP_ROWS: usize = 5_000;
    let (_directory, path, store) = open().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
    let group = || {
        vec![AppendBatch {
            agent_id: agent,
            drafts: (0..GROUP_ROWS).map(|_| EventDraft::new(app::EventKind::Usage)).collect(),
            producer: None,
        }]
    };
    let (mut connection, mut recent) = beside(&path, Recent::new(RecentIndex::default()));
    let groups = RECENT_ROWS_HARD_MAX / GROUP_ROWS + 1;
    for _ in 0..groups {
        append(&mut connection, group(), || false, &mut recent, &store.known).unwrap();
        assert!(
            recent.live_rows() <= RECENT_ROWS_MAX + GROUP_ROWS,
            "{} rows live in recent",
            recent.live_rows()
        );
    }
    let total = (groups * GROUP_ROWS) as u64;
    assert_eq!(store.head_seq(agent).await.unwrap(), Some(total));
    let tail = store.read_events(agent, total - 10, 20).await.unwrap();
    assert_eq!(tail.len(), 10);
}

fn commit_rows(connection: &Connection, rows: usize) {
    connection.execute_batch("BEGIN IMMEDIATE").unwrap();
    for _ in 0..rows {
        connection.execute("INSERT INTO t (body) VALUES (?1)", [&"x".repeat(300)]).unwrap();
    }
    connection.execute_batch("COMMIT").unwrap();
}

/// Under steady writes the WAL must not grow without end: once checkpointed, a restart makes
/// the next commits overwrite the WAL from its start instead of appending to it.
#[test]
fn a_restarted_wal_is_written_from_its_start() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("wal.db");
    let connection = Connection::open(&path).unwrap();
    connection
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 0; \
             CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
        )
        .unwrap();
    let checkpointer = Connection::open(&path).unwrap();
    let reader = Connection::open(&path).unwrap();
    let wal_bytes = || std::fs::metadata(directory.path().join("wal.db-wal")).unwrap().len();

    // Steady writes: a reader's snapshot (or the next commit) is always a little ahead of
    // each passive checkpoint, so no write ever begins with the whole WAL checkpointed and
    // SQLite keeps appending.
    let mut pages = Vec::new();
    for _ in 0..5 {
        reader.execute_batch("BEGIN; SELECT COUNT(*) FROM t;").unwrap();
        commit_rows(&connection, 20);
        pages.push(passive_checkpoint(&checkpointer).unwrap());
        reader.execute_batch("COMMIT").unwrap();
        commit_rows(&connection, 20);
    }
    assert!(pages.windows(2).all(|pair| pair[1] > pair[0]), "the WAL grows: {pages:?}");
    // Once more, and the checkpoint is again behind when the next write would begin.
    reader.execute_batch("BEGIN; SELECT COUNT(*) FROM t;").unwrap();
    commit_rows(&connection, 20);
    let pages_before = passive_checkpoint(&checkpointer).unwrap();
    reader.execute_batch("COMMIT").unwrap();
    let grown = wal_bytes();

    restart_wal(&connection, Duration::from_secs(1));
    commit_rows(&connection, 20);
    let pages_after = passive_checkpoint(&checkpointer).unwrap();
    assert!(
        pages_after < pages_before / 2,
        "{pages_after} pages after the restart, {pages_before} before"
    );
    assert_eq!(wal_bytes(), grown, "the restarted WAL is overwritten, not extended");
    let rows: i64 = connection.query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0)).unwrap();
    assert_eq!(rows, 12 * 20);
}

/// An idle step commits without a sync of its own and leaves the connection syncing every
/// commit again: the next group is acknowledged only once on disk, and its sync covers the step.
#[tokio::test]
async fn an_idle_step_moves_rows_and_leaves_commits_synced() {
    let (_directory, path, store) = open().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap().id;
    let (mut connection, mut recent) = beside(&path, Recent::new(RecentIndex::default()));
    set_synchronous(&connection, "FULL").unwrap();
    append(
        &mut connection,
        group(&[agent], app::EventKind::Text),
        || false,
        &mut recent,
        &store.known,
    )
    .unwrap();
    assert!(recent.any());
    let mut unsynced = false;
    while recent.any() {
        assert!(idle_fold_step(&mut recent, &mut connection, &mut unsynced));
    }
    assert!(!unsynced);
    let level: i64 = connection.query_row("PRAGMA synchronous", [], |row| row.get(0)).unwrap();
    assert_eq!(level, 2, "FULL again after the step");
    assert_eq!(seqs(&store, agent, 10).await, vec![1]);
}
