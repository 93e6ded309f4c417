//! The GitHub fault matrix over the in-memory GitHub: every kind of request a phase makes (a clean
//! open, an update, a decommission, auto-merge turned on, a merge by cellbridge, auto-merge taken
//! back from a reviewer's head, the dashboard) given GitHub's unhappy answers: a 5xx past the
//! retries; inside an answer of HTTP 200 an untyped error ("Something went wrong"), `FORBIDDEN` at
//! a path and an error of a type cellbridge does not know; 409 and 422. After each:
//!
//! - never a merge, nor cellbridge's auto-merge on a head it passed, of a head that changes more
//!   than the cell's `cell-metadata.yaml`;
//! - never a passing status on a head whose merge state cellbridge could not read;
//! - never a state reported refused for GitHub's failure;
//! - a clean run after the fault converges, and the one after it writes nothing.
//!
//! The kinds of request are not listed by hand: a clean run of the phase records them. `make
//! test` gives each kind one shape (the shapes taken in turn across the kinds);
//! `CELLBRIDGE_FAULT_SHAPES=all` (`make bench`) gives each kind every shape.

use std::collections::BTreeMap;

use cellbridge::adapters::github::operations::{self as ops, Operation};
use cellbridge::doubles::cluster::MemAws;
use cellbridge::doubles::github::{Fault, MemGithub, Protection, VIEWER};
use cellbridge::jobs::sync::ClusterAccess;
use cellbridge::ports::github::CheckState;
use serde_json::{Value, json};

use crate::support::sync::{BUCKET, Bed, LINEAGE, apply, bed, branch, deadline, sync};

const CELL: &str = "eu-c1";
const STRICT: &str = "cellbridge/strict-substitution";
const CI: &str = "ci/build";
const CM: &str = "clusters/eu-c1/cell-metadata.yaml";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Open,
    Update,
    Decommission,
    AutoMergeEnabled,
    AutoMergeMerged,
    AutoMergeTakenBack,
    Dashboard,
}

const PHASES: [Phase; 7] = [
    Phase::Open,
    Phase::Update,
    Phase::Decommission,
    Phase::AutoMergeEnabled,
    Phase::AutoMergeMerged,
    Phase::AutoMergeTakenBack,
    Phase::Dashboard,
];

/// The shapes a REST request is given, and a GraphQL one.
const REST_SHAPES: [Fault; 3] = [Fault::Transient, Fault::Status(409), Fault::Status(422)];
const GRAPHQL_SHAPES: [Fault; 4] = [
    Fault::Transient,
    Fault::Untyped,
    Fault::FieldRefused("repository.pullRequest"),
    Fault::UnknownType,
];

/// A bed whose EKS knows no cluster (a destroyed cell's is gone).
fn fresh() -> Bed {
    bed().with_clusters(ClusterAccess {
        probe: MemAws::new("arn:aws:iam::123456789012:role/cellbridge").into(),
        describe_roles: BTreeMap::new(),
    })
}

/// The world just before the phase's run: what it needs on GitHub and in S3.
async fn before(phase: Phase) -> Bed {
    let bed = fresh();
    apply(&bed, CELL, 1, "vpc-1");
    if phase == Phase::Open {
        return bed;
    }
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    let first = r["pull_request"]["number"].as_u64().unwrap();
    match phase {
        Phase::Update => apply(&bed, CELL, 2, "vpc-2"),
        Phase::Dashboard => {}
        Phase::Decommission => {
            bed.fleet.merge(first);
            let destroyed = json!({"version": 4, "terraform_version": "1.11.4", "serial": 2, "lineage": LINEAGE,
                                   "outputs": {}, "resources": []});
            bed.states.put(
                BUCKET,
                &format!("cells/{CELL}/terraform.tfstate"),
                destroyed.to_string(),
            );
        }
        Phase::AutoMergeEnabled | Phase::AutoMergeMerged | Phase::AutoMergeTakenBack => {
            bed.fleet.merge(first);
            bed.fleet.commit(
                "main",
                &[(".cellbridge/auto-merge.yaml", "cells: ['*']\n")],
                "opt cells in",
            );
            bed.fleet.allow_auto_merge(true);
            if phase != Phase::AutoMergeMerged {
                bed.fleet.protect_branch(
                    "main",
                    Some(Protection {
                        contexts: vec![STRICT.to_owned(), CI.to_owned()],
                        strict: false,
                        approvals: 0,
                    }),
                );
            }
            apply(&bed, CELL, 2, "vpc-2");
            if phase == Phase::AutoMergeTakenBack {
                let r = sync(&bed, CELL).await;
                assert_eq!(r["auto_merge"]["done"], "enabled", "{r}");
                let pushed = bed.fleet.commit(
                    &branch(CELL),
                    &[("clusters/eu-c1/extra-layer.yaml", "# a reviewer's layer\n")],
                    "a reviewer adds a layer",
                );
                bed.fleet.post_check(&pushed, CI, CheckState::Passed);
            }
        }
        Phase::Open => unreachable!("returned above"),
    }
    bed.fleet.clear_calls();
    bed
}

/// The phase's run: a sync of the cell, or the dashboard.
async fn run(phase: Phase, bed: &Bed) -> Value {
    if phase == Phase::Dashboard {
        let inv = crate::support::handle(bed, &json!({"action": "dashboard"}), deadline())
            .await
            .unwrap();
        return inv.response["dashboard"].clone();
    }
    sync(bed, CELL).await
}

/// Every kind of request a clean run of `phase` makes, each once, in order.
async fn kinds(phase: Phase) -> Vec<&'static str> {
    let bed = before(phase).await;
    let r = run(phase, &bed).await;
    let ok = match phase {
        Phase::Open => r["action"] == "opened",
        Phase::Update => r["action"] == "updated",
        Phase::Decommission => r["action"] == "decommission-opened",
        Phase::AutoMergeEnabled => r["auto_merge"]["done"] == "enabled",
        Phase::AutoMergeMerged => r["auto_merge"]["done"] == "merged",
        Phase::AutoMergeTakenBack => r["auto_merge"]["done"] == "disabled",
        Phase::Dashboard => r["action"] == "created",
    };
    assert!(ok, "a clean {phase:?}: {r}");
    let mut seen = Vec::new();
    for c in bed.fleet.calls() {
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen
}

fn operation(id: &str) -> Operation {
    ops::ALL
        .iter()
        .map(|o| Operation {
            method: o.method.clone(),
            id: o.id,
            path: o.path,
            permission: o.permission,
        })
        .chain(ops::GRAPHQL.iter().map(|g| g.as_operation()))
        .find(|o| o.id == id)
        .unwrap_or_else(|| panic!("no operation {id}"))
}

/// What a merge (or an auto-merge on) brings into main beyond the cell's metadata file.
fn beyond_metadata(gh: &MemGithub, base: &str, head: &str) -> Vec<String> {
    let (b, h) = (gh.files_at(base), gh.files_at(head));
    let mut paths: Vec<&String> = b.keys().chain(h.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|p| b.get(*p) != h.get(*p) && *p != CM)
        .cloned()
        .collect()
}

fn invariants(id: &str, bed: &Bed, r: &Value, fault_on_merge_state: bool) {
    let gh = &bed.fleet;
    // cellbridge's merges, and GitHub's on the auto-merge cellbridge enabled (a person's merge of
    // a new cell's first pull request is theirs).
    for m in gh.merges().into_iter().filter(|m| m.by == VIEWER) {
        let beyond = beyond_metadata(gh, &m.base_before, &m.head);
        assert!(beyond.is_empty(), "[{id}] #{} merged with {beyond:?}", m.number);
    }
    let main = gh.head("main").unwrap();
    for p in gh.pulls().into_iter().filter(|p| p.open && p.head == branch(CELL)) {
        let head = gh.head(&p.head).unwrap();
        // cellbridge's auto-merge may still be on a head a reviewer pushed that cellbridge has not
        // looked at yet: that head has no status of cellbridge's, so GitHub's auto-merge waits.
        // Once cellbridge passed it, its auto-merge must be off.
        let passed = gh.statuses(&head).iter().any(|s| s.context == STRICT && s.success);
        if passed && p.auto_merge.as_ref().is_some_and(|a| a.enabled_by == VIEWER) {
            let beyond = beyond_metadata(gh, &main, &head);
            assert!(
                beyond.is_empty(),
                "[{id}] cellbridge's auto-merge on a head bringing {beyond:?}"
            );
        }
        if fault_on_merge_state && r["action"] == "failed" {
            assert!(
                !gh.statuses(&head).iter().any(|s| s.context == STRICT && s.success),
                "[{id}] a passing status on a head whose merge state was not read: {r}"
            );
        }
    }
    let cells = r["cells"].as_array().cloned().unwrap_or_else(|| vec![r.clone()]);
    for c in cells {
        assert!(
            c["action"] != "refused" && c.get("reported").is_none(),
            "[{id}] refused: {c}"
        );
    }
    assert!(
        gh.issues()
            .iter()
            .all(|i| !i.labels.iter().any(|l| l == "cellbridge-refused")),
        "[{id}] a refused issue for GitHub's failure"
    );
}

async fn case(phase: Phase, kind: &'static str, fault: Fault) {
    let id = format!("{phase:?} {kind} {fault:?}");
    let bed = before(phase).await;
    let times = if fault == Fault::UnknownType { 3 } else { 1 };
    bed.fleet.fail(&operation(kind), times, fault);
    let r = run(phase, &bed).await;
    assert!(
        bed.fleet.calls().contains(&kind),
        "[{id}] the fault was never reached: {r}"
    );
    invariants(&id, &bed, &r, kind == ops::GRAPHQL_MERGE_STATE.id);

    // The clean run converges, and the next writes nothing.
    let r = run(phase, &bed).await;
    let action = r["action"].as_str().unwrap_or_default();
    assert!(
        !["failed", "refused"].contains(&action),
        "[{id}] the clean run after the fault: {r}"
    );
    invariants(&id, &bed, &r, false);
    let writes = bed.fleet.writes();
    let again = run(phase, &bed).await;
    assert_eq!(bed.fleet.writes(), writes, "[{id}] converged, yet wrote again: {again}");
}

#[tokio::test]
async fn every_request_of_every_phase_given_githubs_unhappy_answers_keeps_the_invariants() {
    let all = std::env::var("CELLBRIDGE_FAULT_SHAPES").as_deref() == Ok("all");
    let mut cases = 0;
    let mut turn = 0;
    for phase in PHASES {
        for kind in kinds(phase).await {
            let shapes: &[Fault] = if kind.starts_with("graphql/") {
                &GRAPHQL_SHAPES
            } else {
                &REST_SHAPES
            };
            let chosen: Vec<Fault> = if all {
                shapes.to_vec()
            } else {
                turn += 1;
                vec![shapes[turn % shapes.len()]]
            };
            for fault in chosen {
                case(phase, kind, fault).await;
                cases += 1;
            }
        }
    }
    println!("{cases} cases");
    assert!(cases > 40, "{cases}");
}
