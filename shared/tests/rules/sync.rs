//! state-sync's orchestration rules over the in-memory ports (feature `test-support`): the
//! product's own orchestrator and pull request logic, GitHub's primitives and the state bucket in
//! memory. Each rule in milliseconds; the end-to-end tests in `tests/` run the same code against
//! moto, real Terraform and the HTTP fake GitHub.

use std::path::Path;
use std::time::{Duration, Instant};

use cellbridge::adapters::github::GithubConfig;
use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::{Fault, MemGithub};
use cellbridge::doubles::s3::MemStates;
use cellbridge::jobs::sync::{DEFAULT_KEY_PATTERN, KeyPattern, SyncConfig, Syncer};
use cellbridge::pure::fleet::Keep;
use serde_json::{Value, json};

pub(super) const BUCKET: &str = "tfstate";
pub(super) const LINEAGE: &str = "5f0c2b1e-0000-4000-8000-00000000cafe";

pub(super) type Bed = Syncer<MemStates, MemGithub>;

/// Every file of `examples/fleet/`, the fleet `make demo` shows.
fn example_fleet() -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/fleet");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out
}

pub(super) fn bed() -> Bed {
    bed_with(DEFAULT_KEY_PATTERN)
}

fn bed_with(key_pattern: &str) -> Bed {
    let config = SyncConfig {
        github: GithubConfig::checked(
            "acme".into(),
            "fleet".into(),
            None,
            "unused".into(),
            "https://api.github.com".into(),
        )
        .unwrap(),
        state_bucket: BUCKET.into(),
        key_pattern: KeyPattern::parse(key_pattern).unwrap(),
        flux_git_url: None,
        flux_git_branch: None,
    };
    Syncer::new(config, MemStates::new(), MemGithub::new("main", &example_fleet()))
}

/// A Terraform state of `cell` whose metadata passes the example fleet's strict check.
pub(super) fn state(cell: &str, serial: u64, vpc: &str) -> String {
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE,
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": {
            "cell_name": cell, "schema": "1", "aws_region": "eu-west-1", "cluster_name": cell,
            "dns_zone": "example.internal",
            "external_dns_role_arn": "arn:aws:iam::123456789012:role/external-dns",
            "karpenter_queue_name": "karpenter-q",
            "karpenter_role_arn": "arn:aws:iam::123456789012:role/karpenter",
            "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab", "podinfo_replicas": "2",
            "vpc_id": vpc,
        }}},
        "resources": [],
    })
    .to_string()
}

pub(super) fn apply(bed: &Bed, cell: &str, serial: u64, vpc: &str) {
    bed.states.put(
        BUCKET,
        &format!("cells/{cell}/terraform.tfstate"),
        state(cell, serial, vpc),
    );
}

pub(super) fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// The manual payload for one cell; the one result.
pub(super) async fn sync(bed: &Bed, cell: &str) -> Value {
    sync_until(bed, cell, deadline()).await
}

async fn sync_until(bed: &Bed, cell: &str, deadline: Instant) -> Value {
    let inv = super::handle(bed, &json!({"action": "sync", "cell": cell}), deadline)
        .await
        .unwrap();
    let cells = inv.response["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{}", inv.response);
    cells[0].clone()
}

pub(super) fn branch(cell: &str) -> String {
    format!("cellbridge/{cell}")
}

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

#[tokio::test]
async fn a_fault_worth_retrying_fails_retryably_and_the_next_run_converges() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.fleet.fail(&ops::PULLS_CREATE, 1, Fault::Transient);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert!(bed.fleet.pulls().is_empty());
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(bed.fleet.pulls().len(), 1);
    assert_eq!(
        bed.fleet.commits_ahead(&branch("eu-c1")),
        1,
        "the cut-off run's commit is reused"
    );
}

#[tokio::test]
async fn a_final_github_answer_fails_for_good() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.fleet.fail(&ops::GIT_CREATE_TREE, 1, Fault::Status(403));
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    assert!(r["error"].as_str().unwrap().contains("403"), "{r}");
}

#[tokio::test]
async fn too_little_time_left_starts_nothing() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync_until(&bed, "eu-c1", Instant::now() + Duration::from_millis(500)).await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert!(bed.fleet.calls().is_empty(), "{:?}", bed.fleet.calls());
    assert_eq!(bed.states.reads(), 0);
}

#[tokio::test]
async fn a_state_read_that_fails_is_retryable_and_touches_no_pull_request() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.states.fail_reads(1);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), 0);
}

#[tokio::test]
async fn a_refused_state_opens_nothing_and_names_the_key_not_the_value() {
    let bed = bed();
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let text = state("eu-c1", 1, "vpc-1").replace("\"podinfo_replicas\":\"2\"", &format!("\"api_token\":\"{secret}\""));
    assert!(text.contains(secret));
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", text);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "refused", "{r}");
    assert!(r["error"].as_str().unwrap().contains("api_token"), "{r}");
    assert!(!r.to_string().contains(secret));
    // Nothing of the cell is written: no branch, no pull request; only the report's issue.
    assert_eq!(bed.fleet.head(&branch("eu-c1")), None);
    assert!(bed.fleet.pulls().is_empty());
    assert_eq!(
        bed.fleet
            .calls()
            .iter()
            .filter(|c| **c == ops::ISSUES_CREATE.id)
            .count(),
        1
    );
    assert_eq!(bed.fleet.writes(), 1, "{:?}", bed.fleet.calls());
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

// People and races (the pull request's ownership rules).

const CM: &str = "clusters/eu-c1/cell-metadata.yaml";
const LAYERS: &str = "clusters/eu-c1/layers.yaml";

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
    let err = proposal::converge(&bed.fleet, &old, Proposal::Values(&plan), deadline())
        .await
        .unwrap_err();
    assert!(
        matches!(err, cellbridge::ports::github::GithubError::Conflict { .. }),
        "{err}"
    );
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
}

#[tokio::test]
async fn a_rule_refusing_the_branch_update_is_a_final_failure_naming_it() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    bed.fleet
        .protect(&branch("eu-c1"), "Commits must have verified signatures.");
    apply(&bed, "eu-c1", 2, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "failed", "{r}");
    assert_eq!(r["retryable"], false, "a rule is not a race: {r}");
    assert_eq!(r["attempts"], 1, "{r}");
    assert!(r["error"].as_str().unwrap().contains("verified signatures"), "{r}");
    // A final publishing failure is the team's to see, on its pull request.
    assert_eq!(r["reported"]["on"], "pull-request", "{r}");
    assert!(bed.fleet.pulls()[0].comments[0].contains("verified signatures"));
}

#[tokio::test]
async fn two_workspaces_claiming_one_cell_are_refused_naming_both_keys() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    let other = state("eu-c1", 9, "vpc-9").replace(LINEAGE, "0e0e0e0e-0000-4000-8000-00000000beef");
    let key = "env:/staging/cells/eu-c1/terraform.tfstate";
    bed.states.put(BUCKET, key, other);
    let inv = super::handle(
        &bed,
        &json!({"action": "sync", "bucket": BUCKET, "key": key}),
        deadline(),
    )
    .await
    .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "refused", "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(e.contains(key) && e.contains("cells/eu-c1/terraform.tfstate"), "{e}");
    assert!(
        bed.fleet.files(&branch("eu-c1"))[CM].contains("vpc-1"),
        "the pull request is not flipped"
    );
    // Told on the pull request: its head's contract status fails, one comment names the key.
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_eq!(r["reported"]["on"], "pull-request", "{r}");
    assert_eq!(contract_statuses(&bed, &head).last().map(|c| c.0), Some(false));
    assert!(
        bed.fleet.pulls()[0].comments[0].contains(key),
        "{:?}",
        bed.fleet.pulls()[0].comments
    );
    // The owner's state, synced again, holds what the pull request has: nothing is committed,
    // the contract status is back to success and the marker gone; said once.
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "unchanged", "{r}");
    assert_eq!(bed.fleet.head(&branch("eu-c1")).unwrap(), head);
    assert_eq!(contract_statuses(&bed, &head).last().map(|c| c.0), Some(true));
    assert!(!bed.fleet.pulls()[0].body.contains("refused="));
    let writes = bed.fleet.writes();
    sync(&bed, "eu-c1").await;
    assert_eq!(bed.fleet.writes(), writes);
}

/// A tiny deterministic generator for the schedules below (xorshift64).
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}

/// What people did in one schedule, to check that none of it was lost.
#[derive(Default)]
struct Done {
    /// Files a person committed on main (and did not rewrite away since).
    on_main: Vec<(String, String)>,
    /// Files a reviewer committed on a pull request's branch: (pull request, path, text).
    on_branch: Vec<(u64, String, String)>,
    /// Binary files a reviewer committed on a pull request's branch: (pull request, path).
    binary_on_branch: Vec<(u64, String)>,
    /// Files a reviewer deleted on a pull request's branch: (pull request, path).
    deleted_on_branch: Vec<(u64, String)>,
    /// Files someone pushed to the cell's branch while no pull request was open.
    pushed_without_pull: Vec<(String, String)>,
    /// Pull requests a person merged, with their title and body as merged.
    merged: Vec<(u64, String, String)>,
    /// EKS deleted the cell's cluster.
    cluster_deleted: bool,
    /// Commits a person rewrote away from main's history: (commit, the file it added).
    rewritten_away: Vec<(String, String)>,
}

/// What a schedule's world is: the cell's account, and whether it is opted into auto-merge.
#[derive(Clone, Copy)]
struct World {
    /// The cell's cluster is in another account, which no role reaches.
    other_account: bool,
    auto_merge: bool,
    /// main requires the strict check and branches up to date (GitHub reads a head that lacks
    /// main's newest commit `BEHIND`).
    strict: bool,
}

const HOME: &str = "arn:aws:iam::123456789012:role/cellbridge";
const OTHER_ACCOUNT: &str = "210987654321";

/// The cell's state at `serial`: `vpc`, or destroyed (`None`: no outputs, no resources).
fn schedule_state(world: World, serial: u64, vpc: Option<&str>) -> String {
    let Some(vpc) = vpc else {
        return json!({"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE, "outputs": {}, "resources": []})
            .to_string();
    };
    let mut s: Value = serde_json::from_str(&state("eu-c1", serial, vpc)).unwrap();
    if world.other_account {
        s["outputs"]["cell_metadata"]["value"]["aws_account_id"] = json!(OTHER_ACCOUNT);
    }
    s.to_string()
}

/// One schedule: Terraform applies (then, in some, destroys and applies again) and duplicate
/// deliveries race with reviewers pushing to and deleting files on the pull request, people
/// pushing to main, rewriting its history, merging, closing and updating the branch, someone
/// pushing to the cell's branch with no pull request, EKS deleting the cluster, and GitHub's
/// auto-merge; every GitHub call of cellbridge yields a `seed`-drawn number of times, so the seed
/// is the interleaving.
async fn one_schedule(seed: u64) -> (Bed, Done, Vec<Value>, cellbridge::doubles::cluster::MemAws, World) {
    use cellbridge::doubles::cluster::{MemAws, MemCluster};
    let mut dice = Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let world = World {
        other_account: dice.roll(4) == 0,
        auto_merge: dice.roll(2) == 0,
        strict: dice.roll(2) == 0,
    };
    let destroys = dice.roll(2) == 0;
    let aws = MemAws::new(HOME);
    let cluster = MemCluster::active("eu-c1", "eu-west-1");
    aws.add_cluster(if world.other_account {
        cluster.in_account(OTHER_ACCOUNT)
    } else {
        cluster
    });
    let bed = bed().with_clusters(cellbridge::jobs::sync::ClusterAccess {
        probe: aws.clone().into(),
        account_roles: Default::default(),
    });
    if world.auto_merge {
        bed.fleet.commit(
            "main",
            &[(".cellbridge/auto-merge.yaml", "cells: ['*']\n")],
            "opt cells in",
        );
        bed.fleet.allow_auto_merge(true);
    }
    if world.strict {
        bed.fleet.protect_branch(
            "main",
            Some(cellbridge::doubles::github::Protection {
                contexts: vec![cellbridge::pure::plan::STATUS_CONTEXT.to_owned()],
                strict: true,
                approvals: 0,
            }),
        );
    }
    bed.fleet.jitter(seed);
    let done = std::cell::RefCell::new(Done::default());
    let results = std::cell::RefCell::new(Vec::new());
    let terraform = async {
        let mut serials: Vec<(u64, Option<&str>)> = vec![
            (1, Some("vpc-1")),
            (2, Some("vpc-2")),
            (3, Some("vpc-2")),
            (4, Some("vpc-3")),
        ];
        if destroys {
            // `terraform destroy`, then (the cell back) an apply.
            serials.extend([(5, None), (6, Some("vpc-3"))]);
        }
        for (serial, vpc) in serials {
            bed.states.put(
                BUCKET,
                "cells/eu-c1/terraform.tfstate",
                schedule_state(world, serial, vpc),
            );
            let (a, b) = tokio::join!(sync(&bed, "eu-c1"), sync(&bed, "eu-c1"));
            results.borrow_mut().extend([a, b]);
        }
    };
    let people = async {
        let mut dice = Dice(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        // The person's own commits on main, newest last, to rewrite away.
        let mut theirs_on_main: Vec<(String, String)> = Vec::new();
        for step in 0..10 {
            for _ in 0..dice.roll(6) {
                tokio::task::yield_now().await;
            }
            let open = bed.fleet.pulls().into_iter().find(|p| p.open).map(|p| p.number);
            match (dice.roll(15), open) {
                (0..=2, _) => {
                    let (path, text) = (format!("docs/main-{step}.md"), format!("seed {seed} step {step}\n"));
                    let c = bed.fleet.commit("main", &[(&path, &text)], "a person on main");
                    bed.fleet.note(format!("PERSON main {path} -> {}", &c[..7]));
                    done.borrow_mut().on_main.push((path.clone(), text));
                    theirs_on_main.push((c, path));
                }
                (3..=4, Some(n)) => {
                    let (path, text) = (
                        format!("clusters/eu-c1/review-{step}.yaml"),
                        format!("# seed {seed} step {step}\n"),
                    );
                    let c = bed.fleet.commit(&branch("eu-c1"), &[(&path, &text)], "a reviewer");
                    bed.fleet.note(format!("PERSON #{n} {path} -> {}", &c[..7]));
                    done.borrow_mut().on_branch.push((n, path, text));
                }
                (5, Some(n)) => {
                    // A reviewer deletes a file of the cell's directory on the pull request.
                    let files = bed.fleet.files(&branch("eu-c1"));
                    let Some(path) = files
                        .keys()
                        .find(|p| p.ends_with("/kustomization.yaml") && p.starts_with("clusters/eu-c1/"))
                        .cloned()
                    else {
                        continue;
                    };
                    let c = bed
                        .fleet
                        .delete_files(&branch("eu-c1"), &[&path], "a reviewer deletes a file");
                    bed.fleet.note(format!("PERSON #{n} delete {path} -> {}", &c[..7]));
                    let mut d = done.borrow_mut();
                    d.on_branch.retain(|(m, p, _)| !(*m == n && *p == path));
                    d.deleted_on_branch.push((n, path));
                }
                (6, Some(n)) => {
                    let r = bed.fleet.try_merge(n);
                    bed.fleet.note(format!("PERSON merge #{n}: {r:?}"));
                    if r.is_ok() {
                        let p = bed.fleet.pulls().into_iter().find(|p| p.number == n).unwrap();
                        done.borrow_mut().merged.push((n, p.title, p.body));
                    }
                }
                (7, Some(n)) => {
                    let r = bed.fleet.update_branch(n);
                    bed.fleet.note(format!("PERSON update-branch #{n}: {r:?}"));
                }
                (8, Some(n)) if dice.roll(3) == 0 => {
                    bed.fleet.close(n);
                    bed.fleet.note(format!("PERSON close #{n}"));
                }
                (9, _) if destroys => {
                    let account = world.other_account.then_some(OTHER_ACCOUNT);
                    aws.remove_cluster(account, "eu-west-1", "eu-c1");
                    bed.fleet.note("EKS DeleteCluster eu-c1".into());
                    done.borrow_mut().cluster_deleted = true;
                }
                (10, None) if dice.roll(4) == 0 => {
                    let (path, text) = (format!("clusters/eu-c1/own-{step}.md"), format!("seed {seed}\n"));
                    let c = bed
                        .fleet
                        .commit(&branch("eu-c1"), &[(&path, &text)], "someone's own work");
                    bed.fleet.note(format!(
                        "PERSON push cellbridge/eu-c1 without a pull request {path} -> {}",
                        &c[..7]
                    ));
                    done.borrow_mut().pushed_without_pull.push((path, text));
                }
                (12, Some(n)) => {
                    // A reviewer's image: bytes that are not UTF-8.
                    let path = format!("clusters/eu-c1/diagram-{step}.png");
                    let c = bed.fleet.commit_bytes(
                        &branch("eu-c1"),
                        &path,
                        &[0x89, b'P', b'N', b'G', 0xff, 0xfe, step as u8],
                        "a reviewer's diagram",
                    );
                    bed.fleet.note(format!("PERSON #{n} binary {path} -> {}", &c[..7]));
                    done.borrow_mut().binary_on_branch.push((n, path));
                }
                (11, _) => {
                    // History rewritten: main's last commit, when it is the person's own, dropped.
                    let head = bed.fleet.head("main");
                    if let Some((sha, path)) = theirs_on_main.pop()
                        && head.as_deref() == Some(sha.as_str())
                    {
                        let parent = bed.fleet.parents(&sha)[0].clone();
                        bed.fleet.force_push("main", &parent);
                        bed.fleet
                            .note(format!("PERSON force-push main {} -> {}", &sha[..7], &parent[..7]));
                        let mut d = done.borrow_mut();
                        d.on_main.retain(|(p, _)| *p != path);
                        d.rewritten_away.push((sha, path));
                    }
                }
                _ => {}
            }
        }
    };
    tokio::join!(terraform, people);
    // Quiet again: the last state delivered once more.
    let last = sync(&bed, "eu-c1").await;
    results.borrow_mut().push(last);
    (bed, done.into_inner(), results.into_inner(), aws, world)
}

#[test]
fn in_thousands_of_interleavings_no_persons_change_is_lost_and_cellbridge_writes_only_its_file() {
    let seeds: u64 = std::env::var("CELLBRIDGE_RACE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    // The schedules are independent: spread them over the machine's cores, each thread with a
    // single-threaded runtime (a seed's interleaving depends on that).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let outcomes: Vec<std::collections::BTreeMap<String, usize>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || check_schedules((1..=seeds).filter(|s| s % threads == t))))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut total: std::collections::BTreeMap<String, usize> = Default::default();
    for (k, v) in outcomes.into_iter().flatten() {
        *total.entry(k).or_default() += v;
    }
    println!("{seeds} schedules; outcomes: {total:?}");
}

/// The keys of a `cell-metadata.yaml`'s `data`.
fn data_keys(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .skip_while(|l| *l != "data:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k.to_owned()))
        .collect()
}

/// Runs the schedules of these seeds and checks what people and cellbridge did in each; the
/// outcomes seen, counted.
fn check_schedules(seeds: impl Iterator<Item = u64>) -> std::collections::BTreeMap<String, usize> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for seed in seeds {
        let (bed, done, results, aws, world) = rt.block_on(one_schedule(seed));
        let gh = &bed.fleet;
        let why = |what: &str| {
            let pulls: Vec<String> = gh
                .pulls()
                .iter()
                .map(|p| {
                    format!(
                        "#{} open={} merged={} closed_by={:?}",
                        p.number, p.open, p.merged, p.closed_by
                    )
                })
                .collect();
            let actions: Vec<String> = results
                .iter()
                .map(|r| format!("{}:{}", r["action"], r["attempts"]))
                .collect();
            let mut log = Vec::new();
            let mut c = gh.head(&branch("eu-c1"));
            while let Some(sha) = c {
                let parents = gh.parents(&sha);
                log.push(format!(
                    "{} parents={:?} changed={:?}",
                    &sha[..7],
                    parents.iter().map(|p| &p[..7]).collect::<Vec<_>>(),
                    gh.changed_paths(&sha)
                ));
                c = parents.first().cloned();
                if log.len() > 12 {
                    break;
                }
            }
            format!(
                "seed {seed} (other account: {}, auto-merge: {}, strict: {}): {what}\n  results: {actions:?}\n  pulls: {pulls:?}\n  branch log: {log:#?}\n  created: {:?}\n  journal: {:#?}",
                world.other_account,
                world.auto_merge,
                world.strict,
                gh.created_commits().iter().map(|c| &c[..7]).collect::<Vec<_>>(),
                gh.journal()
            )
        };
        for r in &results {
            let foreign = r["error"]
                .as_str()
                .is_some_and(|e| e.contains("a commit cellbridge did not write"));
            let key = if foreign {
                "failed: foreign branch"
            } else {
                r["action"].as_str().unwrap()
            };
            *outcomes.entry(key.to_owned()).or_default() += 1;
            // The one final failure people can cause: someone's commit on the cell's branch that
            // no pull request shows, which cellbridge neither builds on nor deletes.
            assert!(
                r["action"] != "failed" || r["retryable"] == true || foreign,
                "{}",
                why(&format!("a final failure: {r}"))
            );
            if foreign {
                let files = gh.files(&branch("eu-c1"));
                let theirs = done.on_branch.iter().map(|(_, p, t)| (p, t));
                let pushed = done.pushed_without_pull.iter().map(|(p, t)| (p, t));
                // A commit main no longer has (its history rewritten) that the branch had when
                // it was read is someone else's on the branch too (the refusal names it).
                let error = r["error"].as_str().unwrap_or_default();
                let rewritten = done.rewritten_away.iter().any(|(sha, _)| error.contains(&sha[..12]));
                assert!(
                    rewritten || theirs.chain(pushed).any(|(p, t)| files.get(p) == Some(t)),
                    "{}",
                    why(&format!(
                        "a foreign branch reported, but no person's commit is on it: {r}"
                    ))
                );
            }
            // A decommission opens, and a destroyed new cell's pull request is closed, only once
            // EKS, asked in the cell's own account, no longer knows the cluster.
            if r["action"] == "decommission-opened" || !r["decommission"]["closed"].is_null() {
                assert!(
                    !world.other_account && done.cluster_deleted,
                    "{}",
                    why(&format!("a decommission without EKS's confirmation: {r}"))
                );
                assert!(
                    aws.calls_in("123456789012")
                        .iter()
                        .any(|c| c.starts_with("DescribeCluster")),
                    "{}",
                    why("a decommission, but EKS was never asked in the cell's account")
                );
            }
        }
        let last = results.last().unwrap();
        let last_foreign = last["error"]
            .as_str()
            .is_some_and(|e| e.contains("a commit cellbridge did not write"));
        assert!(
            last["action"] != "failed" || last_foreign,
            "{}",
            why(&format!("quiet again, the last delivery still fails: {last}"))
        );
        let pulls = gh.pulls();
        assert!(
            pulls.iter().filter(|p| p.open).count() <= 1,
            "{}",
            why("two open pull requests")
        );
        let main = gh.files("main");
        for (path, text) in &done.on_main {
            assert_eq!(main.get(path), Some(text), "{}", why(&format!("main lost {path}")));
        }
        for (n, path, text) in &done.on_branch {
            let pr = &pulls[*n as usize - 1];
            if pr.merged {
                assert_eq!(
                    main.get(path),
                    Some(text),
                    "{}",
                    why(&format!("merging #{n} lost {path}"))
                );
            } else if pr.open {
                // A branch holding a person's commit is never deleted or reset while its pull
                // request is open (a closed one keeps its commits on GitHub).
                let files = gh.files(&branch("eu-c1"));
                assert_eq!(
                    files.get(path),
                    Some(text),
                    "{}",
                    why(&format!("#{n}'s branch lost {path}"))
                );
            }
        }
        for (n, path) in &done.binary_on_branch {
            let pr = &pulls[*n as usize - 1];
            let (on, held) = if pr.merged {
                ("main", main.contains_key(path))
            } else {
                ("its branch", !pr.open || gh.files(&branch("eu-c1")).contains_key(path))
            };
            assert!(held, "{}", why(&format!("#{n}'s binary file {path} is gone from {on}")));
        }
        for (n, path) in &done.deleted_on_branch {
            if pulls[*n as usize - 1].open {
                assert!(
                    !gh.files(&branch("eu-c1")).contains_key(path),
                    "{}",
                    why(&format!("#{n}: the reviewer's deletion of {path} was undone"))
                );
            }
        }
        if !pulls.iter().any(|p| p.open) {
            let files = gh.files(&branch("eu-c1"));
            for (path, text) in &done.pushed_without_pull {
                if !files.is_empty() && files.get(path) != Some(text) && !main.contains_key(path) {
                    panic!("{}", why(&format!("someone's push of {path} was deleted or reset")));
                }
            }
        }
        for (n, title, body) in &done.merged {
            let p = &pulls[*n as usize - 1];
            assert_eq!(
                (&p.title, &p.body),
                (title, body),
                "{}",
                why(&format!("merged #{n}'s text was rewritten"))
            );
        }
        // What cellbridge merged (itself, or by the auto-merge it enabled) was eligible at its
        // head, computed here from what the merge brought to main: only the cell's
        // `cell-metadata.yaml`, with the same keys.
        for m in gh
            .merges()
            .iter()
            .filter(|m| m.by == cellbridge::doubles::github::VIEWER)
        {
            let (before, after) = (gh.files_at(&m.base_before), gh.files_at(&m.commit));
            let changed: Vec<&String> = before
                .keys()
                .chain(after.keys())
                .filter(|p| before.get(*p) != after.get(*p))
                .collect();
            assert!(
                changed.iter().all(|p| **p == CM),
                "{}",
                why(&format!("cellbridge merged #{} changing {changed:?}", m.number))
            );
            let keys = |files: &std::collections::BTreeMap<String, String>| files.get(CM).map(|t| data_keys(t));
            assert_eq!(
                keys(&before),
                keys(&after),
                "{}",
                why(&format!("cellbridge merged #{}, which changed the key set", m.number))
            );
        }
        let main_head = gh.head("main").unwrap();
        for c in gh.created_commits() {
            let parents = gh.parents(&c);
            let was_main = |c: &str| {
                gh.is_ancestor(c, &main_head) || done.rewritten_away.iter().any(|(r, _)| gh.is_ancestor(c, r))
            };
            let first_commit = parents.len() == 1 && was_main(&parents[0]);
            let changed = gh.changed_paths(&c);
            if first_commit || parents.len() == 2 {
                // A pull request's first commit (or a cut-off run's branch made whole again):
                // the cell's directory.
                assert!(
                    changed.iter().all(|p| p.starts_with("clusters/eu-c1/")),
                    "{}",
                    why(&format!("{c} wrote {changed:?}"))
                );
            } else {
                // An update: cellbridge's file; a decommission's update: what is left of the
                // cell's directory.
                assert!(
                    changed.iter().all(|p| p == CM
                        || (p.starts_with("clusters/eu-c1/")
                            && gh.message(&c).contains("Cellbridge-Kind: decommission"))),
                    "{}",
                    why(&format!("{c}, an update, wrote {changed:?}"))
                );
            }
        }
    }
    outcomes
}

#[tokio::test]
async fn with_workspace_in_the_key_pattern_each_workspace_is_a_cell_of_its_own() {
    let bed = bed_with("env:/{workspace}/stacks/eks/terraform.tfstate");
    for cell in ["eu-c1", "eu-c2"] {
        let key = format!("env:/{cell}/stacks/eks/terraform.tfstate");
        bed.states.put(BUCKET, &key, state(cell, 1, "vpc-1"));
    }
    let inv = super::handle(&bed, &json!({"action": "sync-all"}), deadline())
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

// The pause switch and the outcome metrics.

pub(super) fn paused_by_env() -> Option<cellbridge::shell::pause::Pause> {
    Some(cellbridge::shell::pause::Pause {
        by: cellbridge::shell::pause::ENV,
        reason: Some("maintenance".into()),
    })
}

#[tokio::test]
async fn paused_by_the_environment_nothing_is_read_or_written_and_nothing_is_redelivered() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let inv = super::handle_with(
        &bed,
        &json!({"action": "sync", "cell": "eu-c1"}),
        deadline(),
        paused_by_env(),
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(inv.class, None, "paused is a success: {}", inv.response);
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "paused", "{r}");
    assert_eq!(r["cell"], "eu-c1");
    assert_eq!(r["paused"], json!({"by": "CELLBRIDGE_PAUSED", "reason": "maintenance"}));
    assert_eq!(inv.response["paused"]["by"], "CELLBRIDGE_PAUSED");
    assert!(bed.fleet.calls().is_empty(), "not even read: {:?}", bed.fleet.calls());
    assert!(bed.fleet.pulls().is_empty());

    // sync-all lists nothing; an SQS batch has nothing to redeliver.
    let inv = super::handle_with(
        &bed,
        &json!({"action": "sync-all"}),
        deadline(),
        paused_by_env(),
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(inv.response["cells"], json!([]), "{}", inv.response);
    assert_eq!(inv.response["paused"]["by"], "CELLBRIDGE_PAUSED");
    let event = json!({"Records": [{"messageId": "m1", "eventSource": "aws:sqs", "body": json!({
        "source": "aws.s3", "detail-type": "Object Created",
        "detail": {"bucket": {"name": BUCKET}, "object": {"key": "cells/eu-c1/terraform.tfstate"}},
    }).to_string()}]});
    let inv = super::handle_with(&bed, &event, deadline(), paused_by_env(), &metrics)
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert_eq!(
        captured.outcomes().into_iter().map(|(o, _)| o).collect::<Vec<_>>(),
        ["paused"; 3],
        "{:?}",
        captured.records()
    );
}

#[tokio::test]
async fn the_fleet_repos_settings_on_the_base_branch_pause_every_write() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    bed.fleet.commit(
        "main",
        &[(".cellbridge/settings.yaml", "paused: true\nreason: fleet freeze\n")],
        "pause cellbridge",
    );
    let before = bed.fleet.writes();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let inv = super::handle_with(
        &bed,
        &json!({"action": "sync", "cell": "eu-c1"}),
        deadline(),
        None,
        &metrics,
    )
    .await
    .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "paused", "{r}");
    assert_eq!(
        r["paused"],
        json!({"by": ".cellbridge/settings.yaml", "reason": "fleet freeze"})
    );
    assert_eq!(inv.class, None);
    assert_eq!(bed.fleet.writes(), before, "{:?}", bed.fleet.calls());
    assert!(bed.fleet.pulls().is_empty());
    assert_eq!(captured.outcomes(), [("paused".to_owned(), Some("eu-c1".to_owned()))]);

    // A file people got wrong fails the cell for good, naming the file, and writes nothing.
    bed.fleet.commit(
        "main",
        &[(".cellbridge/settings.yaml", "paused: true\nfreeze: yes\n")],
        "typo",
    );
    let before = bed.fleet.writes();
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "failed", "{r}");
    assert_eq!(r["retryable"], false);
    assert!(
        r["error"].as_str().unwrap().contains(".cellbridge/settings.yaml"),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), before);

    // Unpaused, the same state opens its pull request.
    bed.fleet
        .commit("main", &[(".cellbridge/settings.yaml", "paused: false\n")], "unpause");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
}

#[tokio::test]
async fn every_cell_result_is_one_metric_record_with_the_cell_as_a_property() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let run = |cell: &'static str| {
        let (bed, metrics) = (&bed, &metrics);
        async move {
            super::handle_with(bed, &json!({"action": "sync", "cell": cell}), deadline(), None, metrics)
                .await
                .unwrap()
        }
    };
    apply(&bed, "eu-c1", 1, "vpc-1");
    run("eu-c1").await;
    run("eu-c1").await;
    bed.states
        .put(BUCKET, "cells/eu-c2/terraform.tfstate", state("eu-c9", 1, "vpc-2"));
    run("eu-c2").await;
    assert_eq!(
        captured.outcomes(),
        [
            ("synced".to_owned(), Some("eu-c1".to_owned())),
            ("unchanged".to_owned(), Some("eu-c1".to_owned())),
            ("refused".to_owned(), Some("eu-c2".to_owned())),
        ]
    );
    for r in captured.records() {
        assert_eq!(r["Function"], "state-sync");
        assert_eq!(r["Count"], 1);
        assert_eq!(
            r["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function", "Outcome"]])
        );
        assert!(!r.to_string().contains("vpc-"), "no value in a record: {r}");
    }
}

/// An SQS record naming one state (EventBridge's `Object Created` in the body).
fn sqs_record(id: &str, cell: &str) -> Value {
    json!({"messageId": id, "eventSource": "aws:sqs", "body": json!({
        "source": "aws.s3", "detail-type": "Object Created",
        "detail": {"bucket": {"name": BUCKET}, "object": {"key": format!("cells/{cell}/terraform.tfstate")}},
    }).to_string()})
}

/// A state whose outputs look like a secret: refused, for good.
fn refused_state(bed: &Bed, cell: &str) {
    let text = state(cell, 1, "vpc-1").replace(
        "\"podinfo_replicas\":\"2\"",
        "\"api_token\":\"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\"",
    );
    bed.states.put(BUCKET, &format!("cells/{cell}/terraform.tfstate"), text);
}

#[tokio::test]
async fn on_sqs_only_a_retryable_failure_is_redelivered_and_a_final_or_unreadable_record_is_counted_and_dropped() {
    use cellbridge::shell::error::Class;
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    refused_state(&bed, "eu-c1");
    apply(&bed, "eu-c2", 1, "vpc-1");
    bed.fleet.fail(&ops::PULLS_CREATE, 1, Fault::Transient);
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let mut event = json!({"Records": [sqs_record("m1", "eu-c1"), sqs_record("m2", "eu-c2")]});
    event["Records"]
        .as_array_mut()
        .unwrap()
        .push(json!({"messageId": "m3", "eventSource": "aws:sqs", "body": "not JSON"}));
    let inv = super::handle_with(&bed, &event, deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "m2"}]),
        "{}",
        inv.response
    );
    assert_eq!(inv.class, Some(Class::Final), "{}", inv.response);
    assert_eq!(
        captured.outcomes().into_iter().map(|(o, _)| o).collect::<Vec<_>>(),
        ["refused", "retried", "refused"],
        "{:?}",
        captured.records()
    );
    // The redelivered record converges; the refused one was never to come back.
    let inv = super::handle_with(
        &bed,
        &json!({"Records": [sqs_record("m2", "eu-c2")]}),
        deadline(),
        None,
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(inv.response["cells"][0]["action"], "opened", "{}", inv.response);
}

async fn direct(bed: &Bed, event: Value) -> Result<Value, lambda_runtime::Diagnostic> {
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 60_000;
    super::lambda_handler(bed, lambda_runtime::LambdaEvent::new(event, ctx)).await
}

#[tokio::test]
async fn directly_invoked_a_final_failure_is_a_handled_answer_and_only_a_retryable_one_a_lambda_error() {
    let bed = bed();
    refused_state(&bed, "eu-c1");
    apply(&bed, "eu-c2", 1, "vpc-1");
    // Final: answered, not an error, so the asynchronous invocation does not run it again.
    let ok = direct(&bed, json!({"action": "sync", "cell": "eu-c1"})).await.unwrap();
    assert_eq!(ok["class"], "final", "{ok}");
    assert_eq!(ok["cells"][0]["action"], "refused", "{ok}");
    assert!(ok["error"].is_string(), "{ok}");
    assert!(!ok.to_string().contains("ghp_"), "the value leaked: {ok}");
    // An event of no known shape: invalid input, answered the same way.
    let ok = direct(&bed, json!({"hello": "world"})).await.unwrap();
    assert_eq!(ok["class"], "invalid_input", "{ok}");
    assert!(ok["error"].as_str().unwrap().contains("event"), "{ok}");
    // Retryable: a Lambda error of its class, which asynchronous invocation retries.
    bed.states.fail_reads(1);
    let err = direct(&bed, json!({"action": "sync", "cell": "eu-c2"}))
        .await
        .unwrap_err();
    assert_eq!(err.error_type, "cellbridge.Retryable", "{}", err.error_message);
    assert!(err.error_message.contains("(retryable)"), "{}", err.error_message);
    assert!(bed.fleet.pulls().is_empty());
}

// Failures told where the cell's team works.

/// A state of `cell` that carries a secret-looking value under `api_token`: refused.
pub(super) fn secret_state(cell: &str, serial: u64) -> (String, &'static str) {
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let text =
        state(cell, serial, "vpc-1").replace("\"podinfo_replicas\":\"2\"", &format!("\"api_token\":\"{secret}\""));
    (text, secret)
}

fn contract_statuses(bed: &Bed, commit: &str) -> Vec<(bool, String)> {
    bed.fleet
        .statuses(commit)
        .into_iter()
        .filter(|s| s.context == cellbridge::rules::report::CONTRACT_CONTEXT)
        .map(|s| (s.success, s.description))
        .collect()
}

#[tokio::test]
async fn a_refused_state_fails_the_open_pull_requests_contract_status_and_comments_once_per_reason() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
    let (text, secret) = secret_state("eu-c1", 2);
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", text);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "refused", "{r}");
    assert_eq!(r["reported"]["on"], "pull-request", "{r}");
    assert_eq!(r["reported"]["number"], 1, "{r}");
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    let contract = contract_statuses(&bed, &head);
    assert_eq!(contract.len(), 1, "{contract:?}");
    assert!(!contract[0].0 && contract[0].1.contains("api_token"), "{contract:?}");
    let pr = &bed.fleet.pulls()[0];
    assert_eq!(pr.comments.len(), 1);
    assert!(
        pr.comments[0].contains("api_token") && pr.comments[0].contains("eu-c1"),
        "{}",
        pr.comments[0]
    );
    for told in [&pr.comments[0], &pr.body, &contract[0].1] {
        assert!(!told.contains(secret), "a value reached GitHub: {told}");
    }
    assert!(
        bed.fleet.files(&branch("eu-c1"))[CM].contains("vpc-1"),
        "the values stay"
    );
    assert_eq!(
        bed.fleet.head(&branch("eu-c1")).unwrap(),
        head,
        "no commit for a refused state"
    );

    // The same event again: everything is already said.
    let writes = bed.fleet.writes();
    assert_eq!(sync(&bed, "eu-c1").await["action"], "refused");
    assert_eq!(bed.fleet.writes(), writes, "{:?}", bed.fleet.calls());

    // Another reason: one more comment, the status says the new reason.
    let other = state("eu-c1", 3, "vpc-1").replace("\"cell_name\":\"eu-c1\"", "\"cell_name\":\"eu-c2\"");
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", other);
    assert_eq!(sync(&bed, "eu-c1").await["action"], "refused");
    assert_eq!(bed.fleet.pulls()[0].comments.len(), 2);
    assert!(contract_statuses(&bed, &head).last().unwrap().1.contains("cell_name"));

    // A good state: the pull request is updated and its new head's contract status succeeds.
    apply(&bed, "eu-c1", 4, "vpc-4");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "updated", "{r}");
    let new_head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_eq!(
        contract_statuses(&bed, &new_head),
        [(true, cellbridge::rules::pull_request::CONTRACT_KEPT.to_owned())]
    );
    let pr = &bed.fleet.pulls()[0];
    assert_eq!(pr.comments.len(), 2, "a good state adds no comment");
    assert!(!pr.body.contains("refused="), "{}", pr.body);
    // And from then on it is as any pull request: the same state writes nothing.
    let writes = bed.fleet.writes();
    assert_eq!(sync(&bed, "eu-c1").await["action"], "unchanged");
    assert_eq!(bed.fleet.writes(), writes);
}

#[tokio::test]
async fn a_refused_cell_without_a_pull_request_gets_one_issue_updated_in_place_and_closed_by_the_next_good_state() {
    use cellbridge::rules::report::LABEL_REFUSED;
    let bed = bed();
    let (text, secret) = secret_state("eu-c1", 1);
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", text);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["reported"]["on"], "issue", "{r}");
    assert_eq!(r["reported"]["created"], true, "{r}");
    let issues = bed.fleet.issues();
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].labels, [LABEL_REFUSED]);
    assert!(
        issues[0].title.contains("eu-c1") && issues[0].body.contains("api_token"),
        "{:?}",
        issues[0]
    );
    assert!(issues[0].body.contains("cells/eu-c1/terraform.tfstate"));
    assert!(!issues[0].body.contains(secret));

    // Replayed: nothing written. Another reason: the same issue, its body rewritten.
    let writes = bed.fleet.writes();
    assert_eq!(sync(&bed, "eu-c1").await["reported"]["created"], false);
    assert_eq!(bed.fleet.writes(), writes);
    let other = state("eu-c1", 2, "vpc-1").replace("\"cell_name\":\"eu-c1\"", "\"cell_name\":\"eu-c2\"");
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", other);
    sync(&bed, "eu-c1").await;
    let issues = bed.fleet.issues();
    assert_eq!(issues.len(), 1, "updated in place");
    assert!(
        issues[0].body.contains("cell_name") && !issues[0].body.contains("api_token"),
        "{}",
        issues[0].body
    );

    // Another cell's refusal has an issue of its own, which this cell's good state leaves open.
    bed.states
        .put(BUCKET, "cells/eu-c2/terraform.tfstate", secret_state("eu-c2", 1).0);
    sync(&bed, "eu-c2").await;
    apply(&bed, "eu-c1", 3, "vpc-3");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    let first = bed.fleet.issues()[0].number;
    assert_eq!(r["resolved_issues"], json!([first]), "{r}");
    let issues = bed.fleet.issues();
    assert_eq!(
        issues
            .iter()
            .map(|i| (i.open, i.title.contains("eu-c2")))
            .collect::<Vec<_>>(),
        [(false, false), (true, true)]
    );
    assert_eq!(bed.fleet.pulls().len(), 1);
    assert_ne!(
        bed.fleet.pulls()[0].number,
        first,
        "issues and pull requests share numbers"
    );
}

#[tokio::test]
async fn a_duplicate_refused_issue_left_by_a_race_is_closed() {
    use cellbridge::ports::github::Issues as _;
    let bed = bed();
    bed.states
        .put(BUCKET, "cells/eu-c1/terraform.tfstate", secret_state("eu-c1", 1).0);
    sync(&bed, "eu-c1").await;
    let body = bed.fleet.issues()[0].body.clone();
    // What a second run, racing the first, would have opened.
    bed.fleet
        .create_issue("dup", &body, &["cellbridge-refused".into()], deadline())
        .await
        .unwrap();
    sync(&bed, "eu-c1").await;
    let issues = bed.fleet.issues();
    assert_eq!(issues.iter().map(|i| i.open).collect::<Vec<_>>(), [true, false]);
    assert!(issues[1].body.contains(&format!("Duplicate of #{}", issues[0].number)));
    // Closed as GitHub's "duplicate", not "completed": the refusal it reported still stands.
    assert_eq!(bed.fleet.issue_state_reason(issues[1].number), Some("duplicate"));
    // The next good state closes the one kept as resolved.
    apply(&bed, "eu-c1", 2, "vpc-1");
    sync(&bed, "eu-c1").await;
    assert_eq!(bed.fleet.issue_state_reason(issues[0].number), Some("completed"));
}

/// GitHub refusing cellbridge's access (a 403 "Resource not accessible", a 401, a 404) is a
/// metric, not a report: GitHub would refuse the report too.
#[tokio::test]
async fn githubs_refusal_of_access_is_not_reported_on_github() {
    for status in [401, 403, 404] {
        let bed = bed();
        apply(&bed, "eu-c1", 1, "vpc-1");
        bed.fleet.fail(&ops::GIT_CREATE_TREE, 1, Fault::Status(status));
        let r = sync(&bed, "eu-c1").await;
        assert_eq!(
            (r["action"].as_str(), r["retryable"].as_bool()),
            (Some("failed"), Some(false)),
            "{r}"
        );
        assert!(r.get("reported").is_none(), "{r}");
        assert!(bed.fleet.issues().is_empty() && bed.fleet.pulls().is_empty());
    }
}

#[tokio::test]
async fn an_installation_missing_a_permission_is_refused_before_any_write_naming_it() {
    let bed = bed();
    bed.fleet.grant(&[
        ("metadata", "read"),
        ("contents", "write"),
        ("pull_requests", "write"),
        ("issues", "write"),
        ("statuses", "read"),
    ]);
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    let e = r["error"].as_str().unwrap();
    assert!(e.contains("statuses=write") && e.contains("statuses=read"), "{e}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert!(r.get("reported").is_none());

    // Granted: the next event opens the pull request.
    bed.fleet.grant(&[
        ("metadata", "read"),
        ("contents", "write"),
        ("pull_requests", "write"),
        ("issues", "write"),
        ("statuses", "write"),
    ]);
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
}

#[tokio::test]
async fn a_permission_revoked_after_the_check_is_named_by_the_403() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    // A token (GitHub cannot tell its permissions beforehand) that lost statuses=write.
    bed.fleet.fail(&ops::REPOS_CREATE_COMMIT_STATUS, 1, Fault::Status(403));
    apply(&bed, "eu-c1", 2, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["retryable"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("403"), "{r}");
    // The next event, the permission back, completes the update without another commit (the
    // commit was already the pull request's head, so nothing is "updated" by this run).
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_eq!(sync(&bed, "eu-c1").await["action"], "unchanged");
    assert_eq!(
        bed.fleet.head(&branch("eu-c1")).unwrap(),
        head,
        "no second commit for one change"
    );
    assert!(
        bed.fleet.statuses(&head).iter().any(|s| s.success),
        "the status is there now"
    );
    assert!(bed.fleet.pulls()[0].body.contains(&format!("head={head}")));
}

#[tokio::test]
async fn paused_from_the_fleet_repo_a_refusal_is_not_reported() {
    let bed = bed();
    bed.fleet
        .commit("main", &[(".cellbridge/settings.yaml", "paused: true\n")], "pause");
    bed.states
        .put(BUCKET, "cells/eu-c1/terraform.tfstate", secret_state("eu-c1", 1).0);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "refused", "{r}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
}

// One snapshot of the base per invocation.

fn archive_reads(bed: &Bed) -> usize {
    bed.fleet
        .calls()
        .iter()
        .filter(|c| **c == ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE.id)
        .count()
}

/// Twelve cells in one invocation (two groups of states), each refused, then each in sync: the
/// open `cellbridge-refused` issues are listed once per invocation, not once per cell.
#[tokio::test]
async fn the_refused_issues_are_listed_once_per_invocation_whatever_the_number_of_cells() {
    let bed = bed();
    let cells: Vec<String> = (1..=12).map(|i| format!("eu-c{i}")).collect();
    for c in &cells {
        let mut s: Value = serde_json::from_str(&state(c, 1, "vpc-1")).unwrap();
        s["outputs"]["cell_metadata"]["value"]["api_token"] = json!("ghp_0123456789abcdefghijklmnopqrstuvwxyzAB");
        bed.states
            .put(BUCKET, &format!("cells/{c}/terraform.tfstate"), s.to_string());
    }
    let listings = |bed: &Bed| {
        bed.fleet
            .calls()
            .iter()
            .filter(|c| **c == ops::ISSUES_LIST_FOR_REPO.id)
            .count()
    };
    let inv = super::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    let reported = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reported"]["on"] == "issue")
        .count();
    assert_eq!(reported, 12, "{}", inv.response);
    let refused = |bed: &Bed| {
        bed.fleet
            .issues()
            .iter()
            .filter(|i| i.open && i.labels.iter().any(|l| l == "cellbridge-refused"))
            .count()
    };
    assert_eq!(refused(&bed), 12);
    // One listing for the refusals, one for the fleet dashboard a sync-all rebuilds.
    assert_eq!(listings(&bed), 2, "{:?}", bed.fleet.calls());
    // The next states keep the contract: each opens its pull request and closes its issue.
    bed.fleet.clear_calls();
    for c in &cells {
        apply(&bed, c, 2, "vpc-1");
    }
    let inv = super::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    assert_eq!(refused(&bed), 0, "{}", inv.response);
    assert_eq!(listings(&bed), 2, "{:?}", bed.fleet.calls());
}

/// An SQS batch naming several cells' states.
fn sqs_batch(cells: &[&str]) -> Value {
    let records: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": json!({
                "source": "aws.s3", "detail-type": "Object Created",
                "detail": {"bucket": {"name": BUCKET}, "object": {"key": format!("cells/{cell}/terraform.tfstate")}},
            }).to_string()})
        })
        .collect();
    json!({ "Records": records })
}

#[tokio::test]
async fn a_batch_of_states_reads_the_base_once_and_again_only_after_a_lost_race() {
    let bed = bed();
    let cells = ["eu-c1", "eu-c2", "eu-c3", "eu-c4", "eu-c5", "eu-c6"];
    for c in cells {
        apply(&bed, c, 1, "vpc-1");
    }
    let inv = super::handle(&bed, &sqs_batch(&cells), deadline()).await.unwrap();
    let actions: Vec<&str> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["opened"; 6], "{}", inv.response);
    assert_eq!(
        archive_reads(&bed),
        1,
        "one snapshot for the batch: {:?}",
        bed.fleet.calls()
    );

    // A lost race shows the snapshot old: the state that lost reads a fresh one, once.
    bed.fleet.clear_calls();
    for c in cells {
        apply(&bed, c, 2, "vpc-2");
    }
    // (One cell: which state's branch update the race hits is then certain.)
    bed.fleet.race(
        &ops::GIT_UPDATE_REF,
        &branch("eu-c3"),
        &[("NOTES.md", "someone else\n")],
    );
    let inv = super::handle(&bed, &sqs_batch(&["eu-c3"]), deadline()).await.unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(
        (r["action"].as_str(), r["attempts"].as_u64()),
        (Some("updated"), Some(2)),
        "{r}"
    );
    assert_eq!(archive_reads(&bed), 2, "{:?}", bed.fleet.calls());
    // The rest of the batch, on one snapshot again.
    bed.fleet.clear_calls();
    let inv = super::handle(&bed, &sqs_batch(&cells), deadline()).await.unwrap();
    let results = inv.response["cells"].as_array().unwrap();
    assert_eq!(
        results.iter().filter(|c| c["action"] == "updated").count(),
        5,
        "{}",
        inv.response
    );
    assert_eq!(archive_reads(&bed), 1, "{:?}", bed.fleet.calls());
}

// Never the whole repository.

/// The layer a `layers.yaml` adds when it builds `path` (a Flux Kustomization).
fn layer(name: &str, path: &str) -> String {
    format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cell-metadata\n"
    )
}

#[tokio::test]
async fn a_state_keeps_only_its_cell_and_a_layer_in_another_cells_directory_is_read_again_not_missed() {
    let bed = bed();
    // Merged cells whose directories the sync of eu-c1 must not need, and one (eu-shared) whose
    // directory holds a layer eu-c1 will build.
    for c in ["eu-c8", "eu-c9"] {
        apply(&bed, c, 1, "vpc-1");
        assert_eq!(sync(&bed, c).await["action"], "opened");
    }
    let open: Vec<u64> = bed.fleet.pulls().iter().filter(|p| p.open).map(|p| p.number).collect();
    for number in open {
        bed.fleet.merge(number);
    }
    bed.fleet.commit(
        "main",
        &[(
            "clusters/eu-shared/extra/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: default\ndata:\n  vpc: ${vpc_id}\n  typo: ${vcp_id}\n",
        )],
        "a layer kept in another cell's directory",
    );
    bed.fleet.clear_calls();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(archive_reads(&bed), 1, "nothing else needed: {:?}", bed.fleet.calls());

    // The template gains a layer in eu-shared/: eu-c2's plan needs that directory, which the
    // first read kept out. It is read again keeping it, and the check sees the typo there.
    let template = bed.fleet.files("main")["clusters/_template/layers.yaml"].clone();
    bed.fleet.commit(
        "main",
        &[(
            "clusters/_template/layers.yaml",
            &format!("{template}{}", layer("extra", "./clusters/eu-shared/extra")),
        )],
        "every new cell builds the shared extra layer",
    );
    bed.fleet.clear_calls();
    apply(&bed, "eu-c2", 1, "vpc-1");
    let r = sync(&bed, "eu-c2").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(
        archive_reads(&bed),
        2,
        "read again keeping eu-shared: {:?}",
        bed.fleet.calls()
    );
    let pull = bed
        .fleet
        .pulls()
        .into_iter()
        .find(|p| p.open && p.head == branch("eu-c2"))
        .unwrap();
    assert!(
        pull.body.contains("vcp_id") && pull.body.contains("clusters/eu-shared/extra/configmap.yaml"),
        "the check ran on the layer in the other cell's directory: {}",
        pull.body
    );
}

#[tokio::test]
async fn a_sync_all_without_a_queue_reads_the_base_once_per_ten_cells_keeping_only_those() {
    let bed = bed();
    let cells: Vec<String> = (1..=12).map(|i| format!("eu-c{i:02}")).collect();
    for c in &cells {
        apply(&bed, c, 1, "vpc-1");
    }
    let inv = super::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    let results = inv.response["cells"].as_array().unwrap();
    assert_eq!(
        results.iter().filter(|c| c["action"] == "opened").count(),
        12,
        "{}",
        inv.response
    );
    // Two for the twelve cells; one more for the fleet dashboard rebuilt after them, which
    // sees the pull requests just opened.
    assert_eq!(archive_reads(&bed), 3, "{:?}", bed.fleet.calls());
    assert_eq!(inv.response["dashboard"]["action"], "created", "{}", inv.response);
    assert_eq!(inv.response["dashboard"]["summary"]["pending"], 12, "{}", inv.response);
}

#[tokio::test]
async fn a_new_cell_builds_its_tree_on_the_tree_github_gives_not_one_computed_from_the_archive() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    let calls = bed.fleet.calls();
    let read_commit = calls.iter().position(|c| *c == ops::GIT_GET_COMMIT.id);
    let create_tree = calls.iter().position(|c| *c == ops::GIT_CREATE_TREE.id);
    assert!(
        matches!((read_commit, create_tree), (Some(a), Some(b)) if a < b),
        "the base commit's tree is read from GitHub before the tree is built on it: {calls:?}"
    );
    // Every file of the base is still on the pull request's branch.
    let base = bed.fleet.files("main");
    let head = bed.fleet.files(&branch("eu-c1"));
    assert!(base.keys().all(|p| head.contains_key(p)), "nothing of the base deleted");
}

// sync-all fans out.

pub(super) fn queued_bed() -> (Bed, std::sync::Arc<cellbridge::doubles::queue::MemQueue>) {
    use cellbridge::doubles::queue::MemQueue;
    let q = std::sync::Arc::new(MemQueue::default());
    (bed().with_queue(q.clone()), q)
}

/// SQS records whose bodies are `bodies`.
pub(super) fn sqs_bodies(bodies: &[String]) -> Value {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| json!({"messageId": format!("q{i}"), "eventSource": "aws:sqs", "body": b}))
        .collect();
    json!({ "Records": records })
}

#[tokio::test]
async fn sync_all_sends_one_message_per_cell_and_each_is_synced_and_retried_on_its_own() {
    let (bed, queue) = queued_bed();
    for c in ["eu-c1", "eu-c2", "eu-c3"] {
        apply(&bed, c, 1, "vpc-1");
    }
    bed.states
        .put(BUCKET, "cells/eu-c2/terraform.tfstate", secret_state("eu-c2", 2).0);
    let inv = super::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(inv.response["enqueued"], 3, "{}", inv.response);
    let cells: Vec<(&str, &str)> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell"].as_str().unwrap(), c["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cells,
        [("eu-c1", "enqueued"), ("eu-c2", "enqueued"), ("eu-c3", "enqueued")]
    );
    // Nothing synced in the sync-all itself: GitHub saw the dashboard's reads and its issue.
    assert_eq!(
        bed.fleet.calls(),
        [
            ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE.id,
            ops::PULLS_LIST.id,
            ops::PULLS_LIST.id,
            ops::PULLS_LIST.id,
            ops::ISSUES_LIST_FOR_REPO.id,
            ops::ISSUES_CREATE.id,
        ],
        "nothing synced in the sync-all itself"
    );
    assert_eq!(inv.response["dashboard"]["action"], "created", "{}", inv.response);
    bed.fleet.clear_calls();
    let sent = queue.sent.lock().unwrap().clone();
    assert_eq!(
        serde_json::from_str::<Value>(&sent[0]).unwrap(),
        json!({"action": "sync", "bucket": BUCKET, "key": "cells/eu-c1/terraform.tfstate"})
    );

    // The messages come back one per record; the refused cell's record alone is dropped, and
    // a retryable failure hands back only its own record.
    bed.fleet.fail(&ops::GIT_CREATE_TREE, 1, Fault::Transient);
    let inv = super::handle(&bed, &sqs_bodies(&sent), deadline()).await.unwrap();
    let by_cell: std::collections::BTreeMap<&str, &str> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell"].as_str().unwrap(), c["action"].as_str().unwrap()))
        .collect();
    assert_eq!(by_cell["eu-c2"], "refused", "{}", inv.response);
    let failed: Vec<&str> = inv.response["batchItemFailures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap())
        .collect();
    let opened = by_cell.values().filter(|a| **a == "opened").count();
    assert_eq!(
        (opened, failed.len()),
        (1, 1),
        "one opened, one handed back: {}",
        inv.response
    );
    assert_ne!(failed[0], "q1", "the refused cell's record is not redelivered");
}

#[tokio::test]
async fn every_payload_survives_a_dead_letter_redrive() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    apply(&bed, "eu-c2", 1, "vpc-1");
    let bodies = [
        json!({"action": "sync", "cell": "eu-c1"}).to_string(),
        json!({"action": "sync-all"}).to_string(),
        json!({"action": "sync", "cell": "eu-c2", "dry_run": true}).to_string(),
        json!({"action": "sync", "cell": "Not A Label"}).to_string(),
    ];
    let inv = super::handle(&bed, &sqs_bodies(&bodies), deadline()).await.unwrap();
    let cells = inv.response["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{}", inv.response);
    assert_eq!(
        (cells[0]["cell"].as_str(), cells[0]["action"].as_str()),
        (Some("eu-c1"), Some("opened"))
    );
    assert_eq!(
        queue.sent.lock().unwrap().len(),
        2,
        "the redriven sync-all fanned out again"
    );
    // A dry run or a bad cell cannot succeed later: not redelivered.
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);

    // A queue that refuses: the direct sync-all fails retryably, a queued one is handed back.
    queue.fail.store(true, std::sync::atomic::Ordering::Relaxed);
    let err = super::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ThrottlingException"), "{err}");
    assert_eq!(
        cellbridge::shell::error::Classify::class(&err),
        cellbridge::shell::error::Class::Retryable
    );
    let inv = super::handle(
        &bed,
        &sqs_bodies(&[json!({"action": "sync-all"}).to_string()]),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "q0"}]),
        "{}",
        inv.response
    );
}

#[tokio::test]
async fn a_dry_run_sync_all_plans_every_cell_in_place_and_sends_nothing() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let inv = super::handle(&bed, &json!({"action": "sync-all", "dry_run": true}), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["cells"][0]["action"], "planned", "{}", inv.response);
    assert!(queue.sent.lock().unwrap().is_empty());
    assert_eq!(bed.fleet.writes(), 0);
}

/// A person who names a cell (or a key) with no state behind it gets a final failure that says
/// what to check, and nothing is written; a delivered event whose object was deleted since is
/// still ignored (a deleted state proves nothing).
#[tokio::test]
async fn a_manual_sync_of_a_cell_with_no_state_is_a_final_failure_naming_what_to_check() {
    let bed = bed();
    let inv = super::handle(&bed, &json!({"action": "sync", "cell": "eu-typo"}), deadline())
        .await
        .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("no state at s3://tfstate/cells/eu-typo/terraform.tfstate")
            && error.contains("check the cell name or CELLBRIDGE_STATE_KEY_PATTERN"),
        "{error}"
    );
    assert_eq!(
        inv.class,
        Some(cellbridge::shell::error::Class::Final),
        "{}",
        inv.response
    );
    let inv = super::handle(
        &bed,
        &json!({"action": "sync", "bucket": BUCKET, "key": "elsewhere/eu-c1.tfstate"}),
        deadline(),
    )
    .await
    .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "failed", "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("CELLBRIDGE_STATE_KEY_PATTERN"),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), 0);

    // The same absence reached by an event: ignored, as ever.
    let event = json!({"Records": [sqs_record("m1", "eu-typo")]});
    let inv = super::handle(&bed, &event, deadline()).await.unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(inv.class, None, "{}", inv.response);
}
