//! Branches in the store: a fork shares its parent's events without copying them, reads along
//! its chain from every cursor, and its deletion leaves parent and siblings whole.

use agentstream_server::store::{fork, BranchDeletion, ForkRefusal, NewAgent};
use app::protocol::BranchOrigin;
use uuid::Uuid;

use super::{batch, texts, Subject};

/// Every page of `log` from every cursor, as (log that wrote it, seq, id).
async fn read_all(subject: &Subject, log: Uuid, head: u64) -> Vec<(Uuid, u64, Uuid)> {
    let store = subject.store.as_ref();
    let whole: Vec<(Uuid, u64, Uuid)> = store
        .read_events(log, 0, 1_000)
        .await
        .unwrap()
        .iter()
        .map(|event| (event.agent_id, event.seq, event.id))
        .collect();
    assert_eq!(whole.len() as u64, head, "{log} reads 1..={head}");
    for since in 0..=head {
        for limit in 1..=3u32 {
            let page = store.read_events(log, since, limit).await.unwrap();
            let seqs: Vec<u64> = page.iter().map(|event| event.seq).collect();
            let want: Vec<u64> = (since + 1..=head).take(limit as usize).collect();
            assert_eq!(seqs, want, "{log}: since {since}, limit {limit}");
            let json = store.read_events_json(log, since, limit).await.unwrap();
            assert_eq!(json.iter().map(|event| event.seq).collect::<Vec<_>>(), want);
            // A page crossing from the parent's log into the branch's holds the same events.
            let page = store.read_events_page(log, since, limit, 2).await.unwrap();
            assert_eq!(page.to_events(), json, "{log}: page since {since}, limit {limit}");
            let contents = store.read_contents(log, since, limit).await.unwrap();
            assert_eq!(contents.iter().map(|(seq, _, _)| seq).collect::<Vec<_>>(), want);
        }
    }
    whole
}

/// The branch `root`'s conversation follows now.
async fn current_branch(subject: &Subject, root: Uuid) -> Option<Uuid> {
    let agent = subject.store.get_agent(root).await.unwrap();
    agent.expect("the root agent").current_branch
}

pub async fn branches_share_their_prefix_and_delete_alone(subject: &Subject) {
    let store = subject.store.as_ref();
    let root = store
        .create_agent(NewAgent { name: "branching".into(), ..NewAgent::default() })
        .await
        .unwrap();
    store.append(&[batch(root.id, texts(10))]).await.unwrap();
    let main = read_all(subject, root.id, 10).await;

    let b = fork(store, root.id, 4).await.unwrap().unwrap();
    let origin = |parent, fork_seq| Some(BranchOrigin { root: root.id, parent, fork_seq });
    assert_eq!(b.branch, origin(root.id, 4));
    assert_eq!(b.head_seq, 4);
    assert_eq!(store.get_agent(b.id).await.unwrap(), Some(b.clone()));
    assert!(
        !store.list_agents(None, 1_000).await.unwrap().iter().any(|agent| agent.id == b.id),
        "a branch lists under its conversation, not as an agent"
    );
    // Before it writes anything, a branch is its parent's prefix, event for event.
    assert_eq!(read_all(subject, b.id, 4).await, main[..4]);
    let written = store.append(&[batch(b.id, texts(3))]).await.unwrap();
    assert_eq!(written[0].iter().map(|e| e.seq).collect::<Vec<_>>(), [5, 6, 7]);
    let b_path = read_all(subject, b.id, 7).await;
    assert_eq!(b_path[..4], main[..4]);
    assert!(b_path[4..].iter().all(|(log, ..)| *log == b.id));
    // The parent never sees the branch's events.
    assert_eq!(read_all(subject, root.id, 10).await, main);

    // A fork of a branch after its own fork point chains; at or before it, it forks the parent.
    let c = fork(store, b.id, 6).await.unwrap().unwrap();
    assert_eq!(c.branch, origin(b.id, 6));
    let flattened = fork(store, b.id, 3).await.unwrap().unwrap();
    assert_eq!(flattened.branch, origin(root.id, 3));
    store.append(&[batch(c.id, texts(2))]).await.unwrap();
    let c_path = read_all(subject, c.id, 8).await;
    assert_eq!(c_path[..6], b_path[..6]);
    assert!(c_path[6..].iter().all(|(log, ..)| *log == c.id));
    assert_eq!(
        fork(store, root.id, 11).await.unwrap(),
        Err(ForkRefusal::PastHead { head_seq: 10 })
    );
    assert_eq!(fork(store, Uuid::new_v4(), 0).await.unwrap(), Err(ForkRefusal::UnknownLog));
    let listed: Vec<Uuid> =
        store.list_branches(root.id).await.unwrap().iter().map(|agent| agent.id).collect();
    assert_eq!(listed, [b.id, c.id, flattened.id]);

    // The current branch: one of the conversation's, or its own log.
    assert!(store.set_current_branch(root.id, Some(c.id)).await.unwrap());
    assert_eq!(current_branch(subject, root.id).await, Some(c.id));
    assert!(!store.set_current_branch(root.id, Some(Uuid::new_v4())).await.unwrap());
    assert!(!store.set_current_branch(b.id, None).await.unwrap(), "a branch is no conversation");

    // Deleting: refused while a branch reads it; the current branch falls back to the parent.
    assert_eq!(store.delete_branch(b.id).await.unwrap(), BranchDeletion::HasBranches);
    assert_eq!(store.head_seq(c.id).await.unwrap(), Some(8));
    assert_eq!(store.delete_branch(c.id).await.unwrap(), BranchDeletion::Deleted);
    assert_eq!(current_branch(subject, root.id).await, Some(b.id));
    assert_eq!(store.get_agent(c.id).await.unwrap(), None);
    assert_eq!(store.head_seq(c.id).await.unwrap(), None, "a deleted branch has no head");
    assert_eq!(read_all(subject, b.id, 7).await, b_path);
    assert_eq!(store.delete_branch(b.id).await.unwrap(), BranchDeletion::Deleted);
    assert_eq!(current_branch(subject, root.id).await, None);
    assert_eq!(store.delete_branch(root.id).await.unwrap(), BranchDeletion::Unknown);
    assert_eq!(read_all(subject, root.id, 10).await, main);
    assert_eq!(read_all(subject, flattened.id, 3).await, main[..3]);

    // Deleting the conversation deletes its branches (their heads too, though only the
    // conversation was named).
    assert_eq!(store.head_seq(flattened.id).await.unwrap(), Some(3));
    assert!(store.delete_agent(root.id).await.unwrap());
    assert_eq!(store.get_agent(flattened.id).await.unwrap(), None);
    assert_eq!(store.head_seq(flattened.id).await.unwrap(), None);
    assert_eq!(store.head_seq(root.id).await.unwrap(), None);
}
