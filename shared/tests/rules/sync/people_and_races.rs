//! state-sync: people and races (the pull request's ownership rules). A lost race for the branch is
//! redone on a fresh read; twenty concurrent syncs of one cell make one pull request; a reviewer's
//! commit survives the next update (cellbridge's commit changes its own file only); a head cellbridge
//! did not write gets its status computed on its content; a base that moved is merged in, never
//! reset; a conflict leaves the branch, sets the status and comments once; cellbridge's own close is
//! told from a person's and a merged pull request is never rewritten; a run that read an older base
//! writes nothing.

use crate::support::sync::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::pure::fleet::Keep;

#[tokio::test]
async fn a_lost_race_for_the_branch_is_redone_on_a_fresh_read() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    apply(&bed, "eu-c1", 2, "vpc-2");
    // Another writer moves the cell's branch just before cellbridge's fast-forward.
    bed.fleet.race(
        &ops::GIT_UPDATE_REF,
        &branch("eu-c1"),
        &[("NOTES.md", "someone else\n")],
    );
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "updated", "{r}");
    assert_eq!(r["attempts"], 2, "one redo: {r}");
    let cm = &bed.fleet.files(&branch("eu-c1"))["clusters/eu-c1/cell-metadata.yaml"];
    assert!(cm.contains("vpc-2"), "{cm}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_syncs_of_one_cell_make_one_pull_request() {
    let bed = std::sync::Arc::new(bed());
    apply(&bed, "eu-c1", 1, "vpc-1");
    let runs: Vec<_> = (0..20)
        .map(|_| {
            let bed = bed.clone();
            tokio::spawn(async move { sync(&bed, "eu-c1").await })
        })
        .collect();
    for r in runs {
        let r = r.await.unwrap();
        assert!(
            ["opened", "unchanged", "updated"].contains(&r["action"].as_str().unwrap()),
            "{r}"
        );
    }
    let pulls = bed.fleet.pulls();
    assert_eq!(pulls.iter().filter(|p| p.open).count(), 1, "{pulls:?}");
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let cm = &bed.fleet.files(&branch("eu-c1"))["clusters/eu-c1/cell-metadata.yaml"];
    assert!(cm.contains("vpc-1"));
}

/// eu-c1's pull request open at serial 1, and a reviewer's commit on its branch.
async fn reviewed(bed: &Bed) -> String {
    apply(bed, "eu-c1", 1, "vpc-1");
    assert_eq!(sync(bed, "eu-c1").await["action"], "opened");
    let layers = bed.fleet.files(&branch("eu-c1"))[LAYERS].clone();
    bed.fleet.commit(
        &branch("eu-c1"),
        &[(LAYERS, &format!("# reviewed by the platform team\n{layers}"))],
        "a reviewer's fix",
    )
}

#[tokio::test]
async fn a_reviewers_commit_survives_the_next_update_which_writes_only_cellbridges_file() {
    let bed = bed();
    let reviewer = reviewed(&bed).await;
    apply(&bed, "eu-c1", 2, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "updated", "{r}");
    let files = bed.fleet.files(&branch("eu-c1"));
    assert!(
        files[LAYERS].starts_with("# reviewed by the platform team"),
        "the reviewer's change is kept"
    );
    assert!(files[CM].contains("vpc-2"));
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_eq!(bed.fleet.parents(&head), [reviewer], "built on the reviewer's head");
    assert_eq!(
        bed.fleet.changed_paths(&head),
        [CM],
        "cellbridge's commit writes its file only"
    );
}

#[tokio::test]
async fn a_head_cellbridge_did_not_write_gets_its_status_computed_on_its_content() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    // A reviewer breaks a layer: a variable cell-metadata does not hold.
    let layers = bed.fleet.files(&branch("eu-c1"))[LAYERS].clone();
    let broken = format!(
        "{layers}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: flux-system\ndata:\n  y: ${{no_such_var}}\n"
    );
    let head = bed
        .fleet
        .commit(&branch("eu-c1"), &[(LAYERS, &broken)], "a reviewer's push");
    assert!(bed.fleet.statuses(&head).is_empty());
    // The same state again: nothing to write, but the new head gets its status within one event.
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "unchanged", "{r}");
    assert_eq!(
        bed.fleet.head(&branch("eu-c1")).unwrap(),
        head,
        "no commit of cellbridge's"
    );
    let statuses = bed.fleet.statuses(&head);
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert_eq!(statuses[0].context, "cellbridge/strict-substitution");
    // The layer file is flux-managed only when listed by the cell; either way the verdict is
    // computed on the reviewer's content, not on cellbridge's last write.
    bed.fleet.clear_calls();
    assert_eq!(sync(&bed, "eu-c1").await["action"], "unchanged");
    assert_eq!(
        bed.fleet.writes(),
        0,
        "a status already posted is not posted again: {:?}",
        bed.fleet.calls()
    );
}

#[tokio::test]
async fn a_base_that_moved_is_merged_into_the_branch_never_reset() {
    let bed = bed();
    reviewed(&bed).await;
    let main = bed
        .fleet
        .commit("main", &[("NOTES.md", "main moved\n")], "someone on main");
    apply(&bed, "eu-c1", 2, "vpc-2");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "updated");
    let files = bed.fleet.files(&branch("eu-c1"));
    assert_eq!(files["NOTES.md"], "main moved\n", "main merged in");
    assert!(files[LAYERS].starts_with("# reviewed"), "the reviewer's change kept");
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    let merge = bed.fleet.parents(&head)[0].clone();
    assert!(
        bed.fleet.parents(&merge).contains(&main),
        "a merge of main, not a reset"
    );
    // Merging the pull request keeps both main's change and the reviewer's.
    bed.fleet.merge(1);
    let main = bed.fleet.files("main");
    assert!(main[LAYERS].starts_with("# reviewed") && main["NOTES.md"] == "main moved\n" && main[CM].contains("vpc-2"));
}

#[tokio::test]
async fn a_conflict_with_the_base_leaves_the_branch_sets_the_status_and_comments_once() {
    let bed = bed();
    reviewed(&bed).await;
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    // main changes the same file differently (the cell's directory merged by someone else).
    bed.fleet
        .commit("main", &[(LAYERS, "# main's own version\n")], "someone on main");
    apply(&bed, "eu-c1", 2, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "conflicted", "{r}");
    assert_eq!(
        bed.fleet.head(&branch("eu-c1")).unwrap(),
        head,
        "the branch is left as it is"
    );
    let st = bed.fleet.statuses(&head);
    assert!(!st[0].success && st[0].description.contains("Update branch"), "{st:?}");
    assert_eq!(bed.fleet.pulls()[0].comments.len(), 1);
    assert!(bed.fleet.pulls()[0].comments[0].contains("Update branch"));
    sync(&bed, "eu-c1").await;
    assert_eq!(bed.fleet.pulls()[0].comments.len(), 1, "one comment, not one per event");

    // The reviewer resolves it; the next event writes the values on the resolved head.
    bed.fleet
        .commit(&branch("eu-c1"), &[(LAYERS, "# main's own version\n")], "resolved");
    bed.fleet.update_branch(1).unwrap();
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "updated", "{r}");
    assert!(bed.fleet.files(&branch("eu-c1"))[CM].contains("vpc-2"));
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert!(
        bed.fleet.statuses(&head)[0].description.contains("layers"),
        "{:?}",
        bed.fleet.statuses(&head)
    );
}

#[tokio::test]
async fn cellbridges_own_close_is_not_a_persons_and_a_merged_pull_request_is_never_rewritten() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    bed.fleet.merge(1);
    apply(&bed, "eu-c1", 2, "vpc-2");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
    apply(&bed, "eu-c1", 3, "vpc-1");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "closed");
    assert_eq!(bed.fleet.pulls()[1].closed_by.as_deref(), Some("cellbridge"));
    // vpc-2 again: cellbridge closed #2 itself, so this is no "no" from a person.
    apply(&bed, "eu-c1", 4, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");

    // A squash merge leaves history a fast-forward cannot follow: the next change starts from
    // the new main on a recreated branch, and the merged pull request is not written to.
    let merged_head = bed.fleet.head(&branch("eu-c1")).unwrap();
    bed.fleet.squash_merge(3).unwrap();
    apply(&bed, "eu-c1", 5, "vpc-5");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(r["pull_request"]["number"], 4);
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_ne!(head, merged_head);
    assert_eq!(
        bed.fleet.parents(&head),
        [bed.fleet.head("main").unwrap()],
        "recreated from main"
    );
    assert!(bed.fleet.pulls()[3].body.contains("Follows #3 (merged)"));
}

#[tokio::test]
async fn a_run_that_read_an_older_base_than_the_pull_request_writes_nothing() {
    use cellbridge::ports::github::GitData as _;
    use cellbridge::rules::proposal::{self, Proposal};
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let old = bed.fleet.read_base(&Keep::all(), deadline()).await.unwrap();
    let meta_state = cellbridge::pure::tfstate::read_state(state("eu-c1", 1, "vpc-1").as_bytes(), "s").unwrap();
    let meta = cellbridge::pure::metadata::from_state(&meta_state).unwrap();
    // main moves, and a newer run writes the pull request from it.
    bed.fleet
        .commit("main", &[("NOTES.md", "merged meanwhile\n")], "someone on main");
    sync(&bed, "eu-c1").await;
    // The older run's plan, against the base it read: GitHub is not touched.
    let plan = cellbridge::pure::plan::plan(&meta, Default::default(), &old.fleet, &Default::default()).unwrap();
    bed.fleet.clear_calls();
    let err = proposal::converge(
        &bed.fleet,
        &old,
        Proposal::Values(&plan),
        &Default::default(),
        deadline(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, cellbridge::ports::github::GithubError::Conflict { .. }),
        "{err}"
    );
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
}
