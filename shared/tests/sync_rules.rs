//! state-sync's orchestration rules over the in-memory ports (feature `test-support`): the
//! product's own orchestrator and pull request logic, GitHub's primitives and the state bucket in
//! memory. Each rule in milliseconds; the end-to-end tests in `tests/` run the same code against
//! moto, real Terraform and the HTTP fake GitHub.

use std::path::Path;
use std::time::{Duration, Instant};

use cellbridge::github::GithubConfig;
use cellbridge::github::memory::{Fault, MemGithub};
use cellbridge::github::operations as ops;
use cellbridge::s3::memory::MemStates;
use cellbridge::sync::{DEFAULT_KEY_PATTERN, KeyPattern, SyncConfig, Syncer};
use serde_json::{Value, json};

const BUCKET: &str = "tfstate";
const LINEAGE: &str = "5f0c2b1e-0000-4000-8000-00000000cafe";

type Bed = Syncer<MemStates, MemGithub>;

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

fn bed() -> Bed {
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
        key_pattern: KeyPattern::parse(DEFAULT_KEY_PATTERN).unwrap(),
        flux_git_url: None,
    };
    Syncer::new(config, MemStates::new(), MemGithub::new("main", &example_fleet()))
}

/// A Terraform state of `cell` whose metadata passes the example fleet's strict check.
fn state(cell: &str, serial: u64, vpc: &str) -> String {
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

fn apply(bed: &Bed, cell: &str, serial: u64, vpc: &str) {
    bed.states.put(
        BUCKET,
        &format!("cells/{cell}/terraform.tfstate"),
        state(cell, serial, vpc),
    );
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// The manual payload for one cell; the one result.
async fn sync(bed: &Bed, cell: &str) -> Value {
    sync_until(bed, cell, deadline()).await
}

async fn sync_until(bed: &Bed, cell: &str, deadline: Instant) -> Value {
    let inv = bed
        .handle(&json!({"action": "sync", "cell": cell}), deadline)
        .await
        .unwrap();
    let cells = inv.response["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{}", inv.response);
    cells[0].clone()
}

fn branch(cell: &str) -> String {
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
    assert_eq!(bed.fleet.writes(), 0);
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
