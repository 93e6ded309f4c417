//! cluster-bootstrap: following a bootstrap after its invocation. A run still confirming queues
//! its next check on the function's own queue with a delay (never a visibility hand-back); each
//! re-check is one look under a fresh temporary access entry, deleted at its end, with no fleet
//! read; the chain backs off and stops at a final outcome, recorded on the cluster and counted.
//! At the deadline a reason that was only suspected is final. A re-check that fails is answered,
//! never handed back: a retryable failure queues the next check, a refused one ends the chain.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::MemSource;
use cellbridge::doubles::queue::MemQueue;
use cellbridge::pure::bootstrap::confirm::fixtures::{git_ready, kustomization_strict_unset, pod_untolerated_taint};
use cellbridge::pure::bootstrap::record::{FLUX_SINCE_TAG, FLUX_TAG, format_time};
use cellbridge::pure::events::bootstrap::Recheck;
use cellbridge::shell::metrics::{Captured, Metrics};
use serde_json::{Value, json};

type Svc = cellbridge::jobs::bootstrap::handler::BootstrapService<
    cellbridge::doubles::cluster::MemAws,
    cellbridge::doubles::cluster::MemKube,
    cellbridge::doubles::secrets::MemSecrets,
>;

fn queued(bed: Bed) -> (Svc, Arc<MemQueue>, MemSource) {
    let queue = Arc::new(MemQueue::default());
    let source = MemSource::new(fleet(&[])).on_branch("main");
    let mut svc = service(bed, source.clone());
    svc.rechecks = Some(queue.clone().into());
    (svc, queue, source)
}

/// What the queue holds, oldest first: (body, delay in seconds).
fn sent(queue: &MemQueue) -> Vec<(Value, u64)> {
    let bodies = queue.sent.lock().unwrap().clone();
    let delays = queue.delays.lock().unwrap().clone();
    bodies
        .iter()
        .zip(delays)
        .map(|(b, d)| (serde_json::from_str(b).unwrap(), d.as_secs()))
        .collect()
}

/// The cluster bootstrapped by its CreateCluster event, Flux ready at once (the double's
/// working cluster): the objects the re-checks read exist.
async fn bootstrapped(svc: &Svc) {
    let inv = crate::support::handle(svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["flux"]["outcome"], "ready", "{}", inv.response);
}

fn tag(bed: &Bed, key: &str) -> Option<String> {
    bed.accounts().cluster_tags(REGION, CLUSTER).get(key).cloned()
}

/// A re-check message of a bootstrap whose apply finished `ago`.
fn recheck(ago: Duration, check: u32) -> Value {
    let body = Recheck {
        cluster: CLUSTER.into(),
        region: REGION.into(),
        account: None,
        cell: CELL.into(),
        role: None,
        since: format_time(SystemTime::now() - ago),
        check,
        controllers: vec!["source-controller".into()],
        flux_instance: None,
        sync: None,
        git_secret: Some("flux-system".into()),
    }
    .to_body();
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn a_bootstrap_still_confirming_is_rechecked_from_its_queue_until_flux_is_ready() {
    let (svc, queue, source) = queued(bed());
    // source-controller has fetched nothing yet: Flux has not taken over.
    svc.bootstrapper
        .kube()
        .git_repository_status(cellbridge::pure::bootstrap::confirm::FluxObject::default());
    let inv = crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    // Invoked directly, the answer is the first check's: confirming, the re-check queued.
    assert_eq!(inv.response["flux"]["outcome"], "confirming", "{}", inv.response);
    assert_eq!(inv.response["flux"]["next_check_secs"], 30);
    let queued = sent(&queue);
    assert_eq!(queued.len(), 1);
    let (message, delay) = &queued[0];
    assert_eq!(
        (message["action"].as_str(), message["check"].as_u64(), *delay),
        (Some("confirm"), Some(2), 30)
    );
    assert_eq!(tag(&svc.bootstrapper, FLUX_TAG).as_deref(), Some("confirming"));
    let reads = source.reads().len();
    let creates_before = create_entries(&svc.bootstrapper);

    // The re-check arrives (from SQS): one look under a fresh entry, deleted after; not ready
    // yet, so the next one is queued, later.
    let inv = crate::support::handle(&svc, &sqs(std::slice::from_ref(message)), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(
        create_entries(&svc.bootstrapper),
        creates_before + 1,
        "a fresh access entry"
    );
    assert!(entries(&svc.bootstrapper).is_empty(), "and none left behind");
    let queued = sent(&queue);
    assert_eq!(
        (queued.len(), queued[1].0["check"].as_u64(), queued[1].1),
        (2, Some(3), 60)
    );
    assert_eq!(queued[1].0["since"], message["since"], "the clock is the apply's");

    // Flux takes over: the next re-check is the last.
    svc.bootstrapper
        .kube()
        .git_repository_status(git_ready(cellbridge::doubles::cluster::SYNCED_REVISION));
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let inv = crate::support::handle_with(&svc, &sqs(&[queued[1].0.clone()]), deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]));
    assert_eq!(sent(&queue).len(), 2, "nothing more to check");
    assert_eq!(tag(&svc.bootstrapper, FLUX_TAG).as_deref(), Some("ready"));
    assert_eq!(
        tag(&svc.bootstrapper, FLUX_SINCE_TAG),
        message["since"].as_str().map(str::to_owned)
    );
    let flux: Vec<(String, u64)> = captured
        .records()
        .iter()
        .filter_map(|r| Some((r["Flux"].as_str()?.to_owned(), r["FluxStuck"].as_u64()?)))
        .collect();
    assert_eq!(flux, [("ready".to_owned(), 0)]);
    assert_eq!(
        source.reads().len(),
        reads,
        "a re-check reads nothing from the fleet repo"
    );
    assert!(entries(&svc.bootstrapper).is_empty());
}

#[tokio::test]
async fn pods_no_node_tolerates_are_unschedulable_only_at_the_deadline_and_then_count_as_stuck() {
    let (svc, queue, _) = queued(bed());
    bootstrapped(&svc).await;
    svc.bootstrapper.kube().pods(
        "source-controller",
        vec![pod_untolerated_taint("source-controller-6d8f7b9c4-x2x7k")],
    );
    svc.bootstrapper
        .kube()
        .deployment_status(cellbridge::pure::bootstrap::confirm::fixtures::deployment_unavailable(
            "source-controller",
        ));
    // Ten minutes in: on Auto Mode or Karpenter a node may still come.
    let inv = crate::support::handle(&svc, &sqs(&[recheck(Duration::from_secs(600), 4)]), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]));
    assert_eq!(tag(&svc.bootstrapper, FLUX_TAG).as_deref(), Some("confirming"));
    assert_eq!(sent(&queue)[0].1, 240);
    // At the deadline it is the outcome, with the scheduler's words; no re-check follows.
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    crate::support::handle_with(
        &svc,
        &sqs(&[recheck(Duration::from_secs(1200), 9)]),
        deadline(),
        None,
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(tag(&svc.bootstrapper, FLUX_TAG).as_deref(), Some("unschedulable"));
    assert_eq!(sent(&queue).len(), 1, "the chain ends");
    let stuck: Vec<Value> = captured
        .records()
        .into_iter()
        .filter(|r| r.get("Flux").is_some())
        .collect();
    assert_eq!(
        (stuck.len(), stuck[0]["Flux"].as_str(), stuck[0]["FluxStuck"].as_u64()),
        (1, Some("unschedulable"), Some(1))
    );
    assert!(entries(&svc.bootstrapper).is_empty());
}

#[tokio::test]
async fn a_strict_substitution_flux_refuses_is_build_failed_after_the_grace_and_said_to_disagree_with_the_check() {
    let (svc, queue, _) = queued(bed());
    bootstrapped(&svc).await;
    svc.bootstrapper
        .kube()
        .kustomization_status(kustomization_strict_unset());
    let inv = crate::support::handle(&svc, &recheck(Duration::from_secs(400), 5), deadline())
        .await
        .unwrap();
    // A direct invocation of a re-check answers with its check.
    assert_eq!(inv.response["flux"]["outcome"], "build-failed", "{}", inv.response);
    assert_eq!(inv.response["flux"]["strict_substitution"], true);
    assert_eq!(tag(&svc.bootstrapper, FLUX_TAG).as_deref(), Some("build-failed"));
    assert!(sent(&queue).is_empty());
}

#[tokio::test]
async fn a_recheck_that_fails_is_never_handed_back_a_retryable_one_is_checked_again_later() {
    let (svc, queue, _) = queued(bed());
    svc.bootstrapper.accounts().fail("DescribeCluster", 1, true);
    let inv = crate::support::handle(&svc, &sqs(&[recheck(Duration::from_secs(60), 2)]), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    let queued = sent(&queue);
    assert_eq!(
        (queued.len(), queued[0].0["check"].as_u64(), queued[0].1),
        (1, Some(3), 60)
    );

    // A role the configuration does not give for the cell's account: the chain ends, answered.
    let mut message = recheck(Duration::from_secs(60), 2);
    message["account"] = json!(ACCOUNT_B);
    message["role"] = json!("arn:aws:iam::333333333333:role/elsewhere");
    let inv = crate::support::handle(&svc, &sqs(&[message]), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(sent(&queue).len(), 1, "nothing more queued");
    assert!(entries(&svc.bootstrapper).is_empty());
}

#[tokio::test]
async fn paused_a_recheck_is_not_made_and_the_cluster_stays_recorded_confirming() {
    let (svc, queue, _) = queued(bed());
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let pause = crate::support::sync::paused_by_env();
    let inv = crate::support::handle_with(
        &svc,
        &sqs(&[recheck(Duration::from_secs(60), 2)]),
        deadline(),
        pause,
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]));
    assert!(sent(&queue).is_empty());
    assert_eq!(create_entries(&svc.bootstrapper), 0, "no access entry while paused");
}

fn create_entries(bed: &Bed) -> usize {
    bed.accounts()
        .calls()
        .iter()
        .filter(|c| c.starts_with("CreateAccessEntry"))
        .count()
}

#[tokio::test]
async fn the_command_line_makes_the_rechecks_itself_until_the_outcome_is_final() {
    let mut s = settings();
    s.confirm.deadline = Duration::from_secs(1);
    let bed = bed_with(s);
    bed.kube()
        .git_repository_status(cellbridge::pure::bootstrap::confirm::fixtures::git_no_such_host());
    let report = run(&bed, &fleet(&[])).await.unwrap();
    let flux = report.flux.as_ref().unwrap();
    // The network may still be on its way: suspected, not final before the deadline.
    assert_eq!(flux.outcome.as_str(), "confirming", "{flux:?}");
    let report = cellbridge::jobs::bootstrap::local::follow(&bed, report, cellbridge::rules::bootstrap::Target::Eks)
        .await
        .unwrap();
    let flux = report.flux.as_ref().unwrap();
    assert_eq!(
        (flux.outcome.as_str(), flux.outcome.exit_code()),
        ("git-unreachable", 3),
        "{flux:?}"
    );
    assert!(
        flux.sentence.contains("no such host"),
        "Flux's own words: {}",
        flux.sentence
    );
    assert_eq!(
        create_entries(&bed),
        2,
        "the bootstrap's entry, then the re-check's own"
    );
    assert!(entries(&bed).is_empty());
    assert_eq!(tag(&bed, FLUX_TAG).as_deref(), Some("git-unreachable"));
}
