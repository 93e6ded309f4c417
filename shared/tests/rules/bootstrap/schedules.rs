//! cluster-bootstrap: seeded schedules (`CELLBRIDGE_RACE_SEEDS` sets how many) of everything that
//! touches one cluster's bootstrap: EventBridge delivering `CreateCluster` (directly, through SQS,
//! twice), the re-checks the function queued delivered late, out of order or twice, the daily
//! sweep's catch-up (a sweep retried at once queues nothing twice), the pause switch, and the
//! cluster itself changing under them (no nodes yet,
//! credentials refused, the network not there yet, Flux taking over), and someone putting
//! corrected credentials in Secrets Manager. Every other seed is a Flux Operator cell; every third
//! one's fleet also holds a cell of an account no role reaches whose merged metadata names a
//! cluster of the same name (never applied to this one: the sweep reports it unreachable). In every
//! schedule, after every step: no access entry is left, no re-check is ever handed back to SQS,
//! Flux is applied at most once (create-if-missing), the Git secret at most once more (when it
//! changed), and the record on the cluster is the last check's verdict of a state the cluster
//! was in. Once the cluster works and the queue and the sweep have run, every schedule ends
//! `ready`.

use std::sync::Arc;

use crate::support::Dice;
use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::{MemSource, SYNCED_REVISION};
use cellbridge::doubles::queue::MemQueue;
use cellbridge::pure::bootstrap::confirm::FluxObject;
use cellbridge::pure::bootstrap::confirm::fixtures::{git_no_such_host, git_ready};
use cellbridge::pure::bootstrap::record::{CATCH_UP_TAG, FLUX_TAG, format_time};
use cellbridge::shell::metrics::{Captured, Metrics};
use serde_json::{Value, json};

/// What the cluster reports, as its controllers would write it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cluster {
    Works,
    NoNodes,
    KeyRefused,
    NoRoute,
    NotFetched,
}

/// The credentials the Git server takes while the key is refused; someone puts them in Secrets
/// Manager at some step.
const CORRECTED: &str = "corrected-token-do-not-log";

impl Cluster {
    fn set(self, bed: &Bed) {
        let kube = bed.kube();
        kube.nodes(if self == Cluster::NoNodes { 0 } else { 2 });
        // The key refused: the Git server takes the corrected credentials only.
        kube.git_accepts((self == Cluster::KeyRefused).then_some(CORRECTED));
        kube.git_repository_status(match self {
            Cluster::Works | Cluster::NoNodes | Cluster::KeyRefused => git_ready(SYNCED_REVISION),
            Cluster::NoRoute => git_no_such_host(),
            Cluster::NotFetched => FluxObject::default(),
        });
    }

    /// The outcomes a check of this state may record: the grace is zero here, so a refused key
    /// is final at once (or, the corrected credentials in Secrets Manager, applied and `ready`);
    /// the node and network reasons wait for the deadline.
    fn may_record(self, corrected: bool) -> &'static [&'static str] {
        match self {
            Cluster::Works => &["ready"],
            Cluster::KeyRefused if corrected => &["git-auth", "ready"],
            Cluster::KeyRefused => &["git-auth"],
            // With no Node the controllers' pods would not run; the double keeps them
            // Available, so the cluster reads ready: what matters is that no reason is made up.
            Cluster::NoNodes => &["ready", "confirming"],
            Cluster::NoRoute | Cluster::NotFetched => &["confirming"],
        }
    }
}

fn tag(bed: &Bed) -> Option<String> {
    bed.accounts().cluster_tags(REGION, CLUSTER).get(FLUX_TAG).cloned()
}

fn sqs_one(body: &Value, id: usize) -> Value {
    json!({"Records": [{"messageId": format!("m{id}"), "body": body.to_string(), "eventSource": "aws:sqs"}]})
}

async fn schedule(seed: u64) {
    let mut s = settings();
    s.confirm.grace = std::time::Duration::ZERO;
    let bed = bed_with(s);
    let queue = Arc::new(MemQueue::default());
    let operator = seed.is_multiple_of(2);
    let cell = if operator {
        super::operator::operator_fleet(super::operator::INSTANCE)
    } else {
        fleet(&[])
    };
    // What says Flux was applied: the Kustomization, or the operator cell's FluxInstance.
    let owner = if operator { "FluxInstance" } else { "Kustomization" };
    let mut cell = cell;
    let unmapped = seed.is_multiple_of(3);
    if unmapped {
        bed.accounts()
            .add_cluster_tags(None, REGION, CLUSTER, &[("cellbridge.dev/cell", CELL)]);
        cell.insert(
            "clusters/other-account/cell-metadata.yaml",
            metadata("other-account", CLUSTER, &[("aws_account_id", "333333333333")]),
        );
    }
    let mut svc = service(bed, MemSource::new(cell).on_branch("main"));
    svc.rechecks = Some(queue.clone().into());
    let mut dice = Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut state = Cluster::NotFetched;
    state.set(&svc.bootstrapper);
    let mut paused = false;
    let mut corrected = false;
    let mut delivered = 0usize;
    let mut log: Vec<String> = Vec::new();
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let deadline = deadline();
    for step in 0..30 {
        let pause = paused.then(crate::support::sync::paused_by_env).flatten();
        // The state the cluster is in while this step runs: what a check in it may record.
        let during = state;
        let before = tag(&svc.bootstrapper);
        let what = match dice.roll(8) {
            0 => {
                let event = if dice.roll(2) == 0 {
                    created(CLUSTER)
                } else {
                    sqs(&[created(CLUSTER)])
                };
                crate::support::handle_with(&svc, &event, deadline, pause, &metrics)
                    .await
                    .unwrap();
                "CreateCluster".to_owned()
            }
            1 | 2 => {
                let sent = queue.sent.lock().unwrap().clone();
                if sent.is_empty() {
                    continue;
                }
                // The next message, else an old one again (SQS delivers at least once).
                let i = if delivered < sent.len() && dice.roll(3) != 0 {
                    delivered += 1;
                    delivered - 1
                } else {
                    dice.roll(sent.len() as u64) as usize
                };
                let body: Value = serde_json::from_str(&sent[i]).unwrap();
                let inv = crate::support::handle_with(&svc, &sqs_one(&body, i), deadline, pause, &metrics)
                    .await
                    .unwrap();
                if body["action"] == "confirm" {
                    assert_eq!(
                        inv.response["batchItemFailures"],
                        json!([]),
                        "seed {seed}: a re-check was handed back: {log:?}"
                    );
                }
                format!("deliver {} #{i}", body["action"])
            }
            3 => {
                let inv =
                    crate::support::handle_with(&svc, &json!({"action": "sweep"}), deadline, pause.clone(), &metrics)
                        .await
                        .unwrap();
                if unmapped {
                    let other: Vec<&Value> = inv.response["report"]["clusters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|c| c["cell"] == "other-account")
                        .collect();
                    assert_eq!(other.len(), 1, "seed {seed}: {}", inv.response);
                    assert_eq!(other[0]["result"], "unreachable", "seed {seed}");
                }
                // Retried (Lambda runs a failed sweep again): no catch-up is queued twice.
                if dice.roll(2) == 0 {
                    let catch_ups = || {
                        let sent = queue.sent.lock().unwrap();
                        sent.iter().filter(|b| b.contains("\"bootstrap\"")).count()
                    };
                    let before = catch_ups();
                    crate::support::handle_with(&svc, &json!({"action": "sweep"}), deadline, pause, &metrics)
                        .await
                        .unwrap();
                    assert_eq!(
                        catch_ups(),
                        before,
                        "seed {seed}: a retried sweep queued a catch-up again: {log:?}"
                    );
                    "sweep, retried".to_owned()
                } else {
                    "sweep".to_owned()
                }
            }
            4 | 5 => {
                state = [
                    Cluster::Works,
                    Cluster::NoNodes,
                    Cluster::KeyRefused,
                    Cluster::NoRoute,
                    Cluster::NotFetched,
                ][dice.roll(5) as usize];
                state.set(&svc.bootstrapper);
                format!("cluster {state:?}")
            }
            6 if !corrected && dice.roll(2) == 0 => {
                corrected = true;
                svc.bootstrapper.secrets().put(
                    GIT_SECRET,
                    json!({"username": "git", "password": CORRECTED}).to_string(),
                );
                "Git secret corrected".to_owned()
            }
            // Rarer: a schedule never paused is caught up by the sweep alone at its end.
            _ if dice.roll(4) == 0 => {
                paused = !paused;
                format!("paused {paused}")
            }
            _ => continue,
        };
        log.push(what);
        let b = &svc.bootstrapper;
        assert!(
            entries(b).is_empty(),
            "seed {seed}, step {step}: an access entry left: {log:?}"
        );
        let applied = b.kube().applied();
        assert!(
            !applied.iter().any(|a| a.contains("other-account")),
            "seed {seed}: another account's cell applied: {log:?}"
        );
        let owners = applied.iter().filter(|a| a.starts_with(owner)).count();
        assert!(owners <= 1, "seed {seed}: Flux applied twice: {log:?}");
        let secrets = applied.iter().filter(|a| a.starts_with("Secret")).count();
        assert!(
            secrets <= 1 + usize::from(corrected),
            "seed {seed}: the Git secret applied again unchanged: {applied:?} {log:?}"
        );
        let after = tag(b);
        if after != before {
            let recorded = after.unwrap_or_default();
            assert!(
                during.may_record(corrected).contains(&recorded.as_str()),
                "seed {seed}: recorded {recorded:?} of a cluster in state {during:?}: {log:?}"
            );
            assert!(!paused, "seed {seed}: recorded while paused: {log:?}");
        }
    }

    // The cluster works and the pause is lifted; no event comes: the queue is drained and the
    // daily sweep catches up (what was never bootstrapped, what was left stuck). A re-check
    // that arrived while paused was not made and its cluster is still `confirming` within its
    // deadline; after a pause the runbook has people bootstrap by hand what came meanwhile, and
    // so does this schedule.
    Cluster::Works.set(&svc.bootstrapper);
    if log.iter().any(|l| l == "paused true") {
        let manual = json!({"action": "bootstrap", "cluster": CLUSTER, "region": REGION});
        crate::support::handle(&svc, &manual, deadline).await.unwrap();
    }
    for round in 0..3 {
        // Each round's sweep is the next day's: a catch-up queued the day before is no longer
        // pending.
        let yesterday = format_time(std::time::SystemTime::now() - std::time::Duration::from_secs(86_400));
        svc.bootstrapper
            .accounts()
            .add_cluster_tags(None, REGION, CLUSTER, &[(CATCH_UP_TAG, &yesterday)]);
        let sent = queue.sent.lock().unwrap().clone();
        for (i, body) in sent.iter().enumerate().skip(delivered) {
            let body: Value = serde_json::from_str(body).unwrap();
            crate::support::handle(&svc, &sqs_one(&body, i), deadline)
                .await
                .unwrap();
        }
        delivered = sent.len();
        if round < 2 {
            crate::support::handle(&svc, &json!({"action": "sweep"}), deadline)
                .await
                .unwrap();
        }
    }
    let b = &svc.bootstrapper;
    assert_eq!(
        b.accounts()
            .cluster_tags(REGION, CLUSTER)
            .get(FLUX_TAG)
            .map(String::as_str),
        Some("ready"),
        "seed {seed}: {log:?}"
    );
    assert!(entries(b).is_empty());
    assert_eq!(
        b.kube().applied().iter().filter(|a| a.starts_with(owner)).count(),
        1,
        "seed {seed}: Flux applied once: {log:?}"
    );
    assert!(
        captured.records().iter().all(|r| !r.to_string().contains(PASSWORD)),
        "no secret in a metric record"
    );
}

#[tokio::test]
async fn every_schedule_of_events_rechecks_sweeps_pauses_and_cluster_changes_ends_ready_leaving_nothing_behind() {
    let seeds: u64 = std::env::var("CELLBRIDGE_RACE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    for seed in 1..=seeds {
        schedule(seed).await;
    }
}
