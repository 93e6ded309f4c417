//! A destroyed cell's decommission on both GitHubs: one pull request removing exactly its directory,
//! a replay writes nothing, a re-apply closes it; it stays one after a refusal; a cut-off
//! decommission's branch is never built on; a metadata pull request people committed to is left open;
//! a cell of another account without a role is never taken for gone; a replay after main moved writes
//! nothing; a cell larger than a comparison lists is brought up to date; a never-merged cell's pull
//! request is closed once its cluster is gone.

use super::support::*;
use cellbridge::adapters::github::operations::{self as ops};
use serde_json::json;

/// A destroyed stack whose cluster EKS no longer knows gets
/// one pull request removing exactly its directory, built on main, labelled `decommission`; a
/// replay writes nothing; a re-apply closes it as cellbridge's own close.
async fn a_destroyed_cell_whose_cluster_is_gone_gets_one_decommission_and_a_reapply_closes_it<B: Bed>() {
    let aws = cellbridge::doubles::cluster::MemAws::new("arn:aws:iam::123456789012:role/cellbridge");
    let w = World::<B>::start().with_eks(&aws);
    w.apply(CELL, 1, "vpc-1");
    let opened = w.deliver(CELL).await;
    w.bed
        .merge(w.repo(), opened["pull_request"]["number"].as_u64().unwrap())
        .unwrap();
    let main = w.bed.files(w.repo(), "main");
    let dir = format!("clusters/{CELL}/");
    assert!(main.keys().any(|p| p.starts_with(&dir)));

    w.put_state(CELL, destroyed_state(2));
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "decommission-opened", "{r}");
    let pr = w.pulls().into_iter().find(|p| p.open).expect("one open pull request");
    assert_eq!(
        (pr.head.as_str(), pr.labels.clone()),
        (
            branch(CELL).as_str(),
            vec!["cellbridge".to_owned(), "decommission".to_owned()]
        )
    );
    let mut expected = main.clone();
    expected.retain(|p, _| !p.starts_with(&dir));
    assert_eq!(w.bed.files(w.repo(), &branch(CELL)), expected);
    assert_eq!(w.bed.commits_ahead(w.repo(), &branch(CELL)), 1);
    let head = w.bed.head(w.repo(), &branch(CELL)).unwrap();
    assert!(w.bed.statuses(w.repo(), &head).iter().all(|s| s.success));

    let before = w.bed.writes(w.repo());
    assert_eq!(action(&w.deliver(CELL).await), "decommission-unchanged");
    assert_eq!(w.bed.writes(w.repo()), before, "a replay writes nothing");

    w.apply(CELL, 3, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "closed", "{r}");
    assert!(w.pulls().iter().all(|p| !p.open && !p.merged || p.number == 1));
    assert_eq!(w.bed.head(w.repo(), &branch(CELL)), None, "its branch is deleted");
}

fn home_aws() -> cellbridge::doubles::cluster::MemAws {
    cellbridge::doubles::cluster::MemAws::new("arn:aws:iam::123456789012:role/cellbridge")
}

/// A decommission pull request stays one when a field is recorded in its body after it was
/// opened (a refused state reported on it): a later apply that brings the cell back closes it,
/// rather than rewriting it in place as a values change whose diff still deletes the directory.
async fn a_decommission_stays_one_after_a_refusal_and_a_reapply_still_closes_it<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.put_state(CELL, destroyed_state(2));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-opened");
    let mut meta = metadata(CELL, "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(3, meta));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["reported"]["on"].as_str()),
        ("refused", Some("pull-request")),
        "{r}"
    );
    let pr = w.open_pulls().remove(0);
    assert!(pr.body.contains("refused="), "the refusal is recorded: {}", pr.body);

    w.put_state(CELL, destroyed_state(4));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-unchanged");
    w.apply(CELL, 5, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!(
        action(&r),
        "closed",
        "the cell is back: its decommission is withdrawn: {r}"
    );
    assert!(w.open_pulls().is_empty(), "{:?}", w.open_pulls());
    assert_eq!(
        w.cell_dir("main").len(),
        expected_cell_dir(CELL).len(),
        "main keeps the cell"
    );
}

/// A run cut off between the decommission's branch and its pull request leaves a branch that
/// removes the cell's directory. A later apply's values are never built on it: the branch,
/// cellbridge's alone, is recreated from main, and what auto-merge merges keeps the directory.
async fn a_cut_off_decommissions_branch_is_never_built_on_by_the_next_values<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.bed
        .commit(w.repo(), "main", &[(OPT_IN, "cells: ['*']\n")], "opt cells in");
    w.bed.allow_auto_merge(w.repo(), true);
    w.put_state(CELL, destroyed_state(2));
    w.bed.refuse_once(w.repo(), &ops::PULLS_CREATE, 422);
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "failed", "{r}");
    assert!(w.open_pulls().is_empty());
    assert!(
        w.cell_dir(&branch(CELL)).is_empty(),
        "the cut-off run's branch removes the directory"
    );

    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(
        done(&r),
        "merged",
        "a value-only change, opted in, nothing to wait for: {r}"
    );
    let main = w.cell_dir("main");
    assert_eq!(main.len(), expected_cell_dir(CELL).len(), "{:?}", main.keys());
    assert!(main[&metadata_path(CELL)].contains("vpc-3"));
}

/// The cell's metadata pull request holds a reviewer's commit when its stack is destroyed and
/// its cluster gone: the decommission leaves it open and says so once; once a person closes it,
/// the decommission opens on a branch recreated from main.
async fn a_decommission_leaves_a_metadata_pull_request_people_committed_to<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(
        !pr.body.contains("Do not push"),
        "reviewers' commits are kept: {}",
        pr.body
    );
    let note = format!("clusters/{CELL}/NOTES.md");
    let pushed = w
        .bed
        .commit(w.repo(), &branch(CELL), &[(&note, "why\n")], "a reviewer's note");

    w.put_state(CELL, destroyed_state(3));
    for _ in 0..2 {
        let r = w.deliver(CELL).await;
        assert_eq!(
            (action(&r), r["decommission"]["proposed"].as_bool()),
            ("destroyed", Some(false)),
            "{r}"
        );
    }
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open, "left open for a person");
    assert_eq!(
        w.head(&branch(CELL)).as_deref(),
        Some(pushed.as_str()),
        "the branch is untouched"
    );
    assert_eq!(pr.comments.len(), 1, "said once: {:?}", pr.comments);
    assert!(pr.comments[0].contains("merge it or close it"), "{:?}", pr.comments);
    let writes = w.writes();
    w.deliver(CELL).await;
    assert_eq!(w.writes(), writes, "a replay writes nothing");

    w.bed.close(w.repo(), n);
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "decommission-opened", "{r}");
    assert!(w.cell_dir(&branch(CELL)).is_empty());
    assert_eq!(
        w.bed.commits_ahead(w.repo(), &branch(CELL)),
        1,
        "built on main, not on the reviewer's branch"
    );
}

/// A cell whose metadata names another account, which no role reaches: EKS's "not found" in
/// cellbridge's own account proves nothing there, so nothing is proposed and the result says why.
async fn a_cell_of_another_account_without_a_role_is_never_taken_for_gone<B: Bed>() {
    let mut meta = metadata(CELL, "vpc-1");
    meta["aws_account_id"] = json!("210987654321");
    let w = World::<B>::start()
        .with_eks(&home_aws())
        .merged(state_with(1, meta))
        .await;
    w.put_state(CELL, destroyed_state(2));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["decommission"]["proposed"].as_bool()),
        ("destroyed", Some(false)),
        "{r}"
    );
    let reason = r["decommission"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("210987654321") && reason.contains("CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES"),
        "{r}"
    );
    assert!(w.open_pulls().is_empty());
}

/// A decommission is replayed after people changed main outside the cell's directory: nothing is
/// written (no merge commit that would dismiss approvals, no status, no body); a change under
/// the directory is merged in and removed too.
async fn a_decommission_replayed_after_main_moved_elsewhere_writes_nothing<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.put_state(CELL, destroyed_state(2));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-opened");
    let head = w.head(&branch(CELL));
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "elsewhere");
    let writes = w.writes();
    assert_eq!(action(&w.deliver(CELL).await), "decommission-unchanged");
    assert_eq!(w.writes(), writes, "a replay writes nothing");
    assert_eq!(w.head(&branch(CELL)), head);

    let added = format!("clusters/{CELL}/added-on-main.yaml");
    w.bed
        .commit(w.repo(), "main", &[(&added, "# added\n")], "under the cell");
    assert_eq!(action(&w.deliver(CELL).await), "decommission-updated");
    assert!(w.cell_dir(&branch(CELL)).is_empty(), "{:?}", w.cell_dir(&branch(CELL)));
}

/// A cell with more files than a comparison lists (GitHub's 300): its decommission, brought up to
/// date after a file is added under the cell on main, removes that file too, from the head's
/// whole tree, and never asks to remove a path already gone.
async fn a_decommission_of_a_cell_larger_than_a_comparison_lists_is_brought_up_to_date<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    let bulk: Vec<(String, String)> = (0..310)
        .map(|i| (format!("clusters/{CELL}/bulk/f{i:03}.yaml"), format!("# {i}\n")))
        .collect();
    let refs: Vec<(&str, &str)> = bulk.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    w.bed.commit(w.repo(), "main", &refs, "a large cell");
    w.put_state(CELL, destroyed_state(2));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-opened");
    let added = format!("clusters/{CELL}/late.yaml");
    w.bed.commit(w.repo(), "main", &[(&added, "# late\n")], "one more");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "decommission-updated", "{r}");
    assert!(
        w.cell_dir(&branch(CELL)).is_empty(),
        "{:?}",
        w.cell_dir(&branch(CELL)).keys().take(5).collect::<Vec<_>>()
    );
}

/// A new cell's first pull request, never merged, when its stack is destroyed: it stays open
/// while EKS still knows the cluster (and the dashboard lists the cell as needing attention,
/// linking it); once EKS confirms the cluster gone in the cell's account it is closed with a
/// comment, its branch deleted, and the dashboard calls the cell decommissioned.
async fn a_new_cells_unmerged_pull_request_is_closed_once_its_cluster_is_gone<B: Bed>() {
    use cellbridge::doubles::cluster::MemCluster;
    let aws = home_aws();
    aws.add_cluster(MemCluster::active(CELL, "eu-west-1"));
    let w = World::<B>::start().with_eks(&aws);
    w.apply(CELL, 1, "vpc-1");
    let n = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    w.put_state(CELL, destroyed_state(2));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["pull_request"]["number"].as_u64()),
        ("destroyed", Some(n)),
        "{r}"
    );
    assert!(w.pulls().iter().any(|p| p.number == n && p.open));
    w.dashboard().await;
    let board = w.dashboards().pop().expect("the dashboard issue").body;
    let row = board.lines().find(|l| l.contains(CELL)).unwrap_or_default();
    assert!(row.contains(&format!("#{n}")) && row.contains("still open"), "{board}");

    aws.remove_cluster(None, "eu-west-1", CELL);
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "closed", "{r}");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(!pr.open && !pr.merged, "{pr:?}");
    assert!(
        pr.comments
            .iter()
            .any(|c| c.contains("destroyed") && c.contains("is gone")),
        "{pr:?}"
    );
    assert_eq!(w.head(&branch(CELL)), None, "its branch held only cellbridge's commit");
    let writes = w.writes();
    assert_eq!(action(&w.deliver(CELL).await), "destroyed");
    assert_eq!(w.writes(), writes, "a replay writes nothing");
    w.dashboard().await;
    let board = w.dashboards().pop().unwrap().body;
    let row = board.lines().find(|l| l.contains(CELL)).unwrap_or_default();
    assert!(!row.contains("still open"), "{board}");
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        a_destroyed_cell_whose_cluster_is_gone_gets_one_decommission_and_a_reapply_closes_it,
        a_decommission_stays_one_after_a_refusal_and_a_reapply_still_closes_it,
        a_cut_off_decommissions_branch_is_never_built_on_by_the_next_values,
        a_decommission_leaves_a_metadata_pull_request_people_committed_to,
        a_cell_of_another_account_without_a_role_is_never_taken_for_gone,
        a_decommission_replayed_after_main_moved_elsewhere_writes_nothing,
        a_decommission_of_a_cell_larger_than_a_comparison_lists_is_brought_up_to_date,
        a_new_cells_unmerged_pull_request_is_closed_once_its_cluster_is_gone,
    ]
);
