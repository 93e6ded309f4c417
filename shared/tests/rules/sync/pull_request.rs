//! state-sync: the cell's branch and pull request. A new cell is one pull request with its whole
//! directory in one commit; the same state again writes nothing; a changed value updates the same
//! pull request in place; a merged state is in sync and a revert to it closes the newer pull request;
//! an older serial than the one proposed is ignored; with the workspace in the key pattern each
//! workspace is a cell; a previous release's pull request is carried on; back in sync, a pull request
//! people changed stays open with its head checked.

use crate::support::sync::*;
use serde_json::json;

#[tokio::test]
async fn a_new_cell_opens_one_pull_request_with_its_whole_directory_in_one_commit() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    let pulls = bed.fleet.pulls();
    assert_eq!(pulls.len(), 1);
    assert!(pulls[0].open);
    assert_eq!(pulls[0].labels, ["cellbridge", "new-cell"]);
    let files = bed.fleet.files(&branch("eu-c1"));
    for f in [
        "cell-metadata.yaml",
        "kustomization.yaml",
        "layers.yaml",
        "flux-system/gotk-sync.yaml",
    ] {
        assert!(files.contains_key(&format!("clusters/eu-c1/{f}")), "{f} missing");
    }
    assert!(files["clusters/eu-c1/cell-metadata.yaml"].contains("vpc-1"));
    assert_eq!(
        bed.fleet.commits_ahead(&branch("eu-c1")),
        1,
        "one commit for the directory"
    );
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    let statuses = bed.fleet.statuses(&head);
    assert_eq!(statuses.len(), 1);
    assert!(statuses[0].success, "{statuses:?}");
}

#[tokio::test]
async fn the_same_state_again_writes_nothing() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    bed.fleet.clear_calls();
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "unchanged", "{r}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
}

#[tokio::test]
async fn a_changed_value_updates_the_same_pull_request_in_place() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let first = sync(&bed, "eu-c1").await;
    apply(&bed, "eu-c1", 2, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "updated", "{r}");
    assert_eq!(r["pull_request"]["number"], first["pull_request"]["number"]);
    assert_eq!(bed.fleet.pulls().len(), 1);
    let cm = &bed.fleet.files(&branch("eu-c1"))["clusters/eu-c1/cell-metadata.yaml"];
    assert!(cm.contains("vpc-2") && !cm.contains("vpc-1"), "{cm}");
    assert!(bed.fleet.pulls()[0].body.contains("vpc-2"));
}

#[tokio::test]
async fn a_merged_state_is_in_sync_and_a_revert_to_it_closes_the_new_pull_request() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    bed.fleet.merge(1);
    assert_eq!(sync(&bed, "eu-c1").await["action"], "in-sync");
    apply(&bed, "eu-c1", 2, "vpc-2");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
    apply(&bed, "eu-c1", 3, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "closed", "{r}");
    assert!(bed.fleet.pulls().iter().all(|p| !p.open));
    assert_eq!(bed.fleet.head(&branch("eu-c1")), None, "the branch is deleted");
}

#[tokio::test]
async fn an_older_serial_than_the_one_proposed_is_ignored() {
    let bed = bed();
    apply(&bed, "eu-c1", 5, "vpc-5");
    sync(&bed, "eu-c1").await;
    // A delayed event whose state is older: the bucket's latest version is serial 4 (a
    // workspace restored from a backup, say).
    apply(&bed, "eu-c1", 4, "vpc-4");
    bed.fleet.clear_calls();
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "stale", "{r}");
    assert_eq!(bed.fleet.writes(), 0);
    assert!(bed.fleet.files(&branch("eu-c1"))["clusters/eu-c1/cell-metadata.yaml"].contains("vpc-5"));
}

#[tokio::test]
async fn with_workspace_in_the_key_pattern_each_workspace_is_a_cell_of_its_own() {
    let bed = bed_with("env:/{workspace}/stacks/eks/terraform.tfstate");
    for cell in ["eu-c1", "eu-c2"] {
        let key = format!("env:/{cell}/stacks/eks/terraform.tfstate");
        bed.states.put(BUCKET, &key, state(cell, 1, "vpc-1"));
    }
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    let cells: Vec<&str> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["action"].as_str().unwrap())
        .collect();
    assert_eq!(cells, ["opened", "opened"], "{}", inv.response);
    assert_eq!(bed.fleet.pulls().len(), 2);
    assert!(bed.fleet.files(&branch("eu-c2"))["clusters/eu-c2/cell-metadata.yaml"].contains("eu-c2"));
    // A manual sync of one cell finds its key from the pattern.
    assert_eq!(sync(&bed, "eu-c1").await["action"], "unchanged");
}

#[tokio::test]
async fn a_pull_request_of_the_previous_release_is_carried_on() {
    use cellbridge::ports::github::Pulls as _;
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    // The previous release's marker line: digest and base only, no kind.
    let mut pr = bed.fleet.pulls()[0].clone();
    pr.body = pr
        .body
        .replace("<!-- cellbridge:kind=metadata digest=", "<!-- cellbridge:digest=");
    let line_start = pr.body.rfind("<!-- cellbridge:digest=").unwrap();
    let old_line: String = pr.body[line_start..]
        .split_whitespace()
        .filter(|w| !["head=", "values=", "key="].iter().any(|f| w.starts_with(f)))
        .collect::<Vec<_>>()
        .join(" ");
    let old_body = format!("{}{old_line}\n", &pr.body[..line_start]);
    assert!(!old_body.contains("head="), "{old_body}");
    bed.fleet
        .update_pull_text(1, &pr.title, &old_body, &pr.labels, deadline())
        .await
        .unwrap();
    let head = bed.fleet.head(&branch("eu-c1"));
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "unchanged", "read and carried on, not rewritten: {r}");
    assert_eq!(bed.fleet.head(&branch("eu-c1")), head);
    assert_eq!(bed.fleet.pulls().len(), 1);
    assert!(
        bed.fleet.pulls()[0].body.contains("head="),
        "the markers are brought up to date"
    );
    apply(&bed, "eu-c1", 2, "vpc-2");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "updated");
}

#[tokio::test]
async fn back_in_sync_a_pull_request_people_changed_stays_open_and_its_head_is_checked() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    bed.fleet.merge(1);
    apply(&bed, "eu-c1", 2, "vpc-2");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
    let head = bed.fleet.commit(
        &branch("eu-c1"),
        &[("clusters/eu-c1/NOTES.md", "why\n")],
        "a reviewer's note",
    );
    // The values go back to what main holds: the reviewer's work is not closed away.
    apply(&bed, "eu-c1", 3, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "unchanged", "{r}");
    assert!(bed.fleet.pulls()[1].open);
    assert_eq!(bed.fleet.head(&branch("eu-c1")).as_deref(), Some(head.as_str()));
    assert_eq!(bed.fleet.statuses(&head).len(), 1, "the reviewer's head is checked");
}
