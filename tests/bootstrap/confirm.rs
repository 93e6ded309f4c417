//! cluster-bootstrap end to end: confirming Flux took over, through kube-rs against the fake API
//! server. A bootstrapped cluster is read with GETs only; it is `ready` once the controllers are
//! Available and the GitRepository and Kustomization are Ready at the same revision, and
//! `image-pull` once a controller's container waits in ImagePullBackOff. The statuses are those
//! the cluster's controllers write, set through the fake's control API.

use crate::support::*;
use cellbridge::adapters::kube::Kubes;
use cellbridge::ports::cluster::kube::{ClusterAuth, Observe};
use cellbridge::ports::cluster::{KubeApi, KubeConnect};
use cellbridge::pure::bootstrap::confirm::{Outcome, Timing, classify};
use cellbridge::rules::bootstrap::report::BootstrapOutcome;
use cellbridge_tests::kube::KubeFake;
use serde_json::{Value, json};
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

fn at(elapsed: Duration) -> Timing {
    cellbridge::pure::bootstrap::confirm::fixtures::timing_at(elapsed)
}

/// The Deployments of the components the bootstrap applied: the controllers to wait for.
fn controllers() -> Vec<String> {
    let path = fixture_fleet().join("clusters/_template/flux-system/gotk-components.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    cellbridge::pure::bootstrap::plan::parse_objects(&text, "gotk-components.yaml")
        .unwrap()
        .into_iter()
        .filter(|(target, _)| target.kind == "Deployment")
        .map(|(target, _)| target.name)
        .collect()
}

/// kube-controller-manager's Available condition (`pkg/controller/deployment/util/
/// deployment_util.go`, as the Kubernetes "Deployments" page's status shows it).
fn available(kube: &KubeFake, name: &str, yes: bool) {
    let (status, reason, message) = if yes {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    kube.set_status(
        "apps/v1",
        "Deployment",
        Some("flux-system"),
        name,
        json!({"observedGeneration": 1, "replicas": 1,
               "conditions": [{"type": "Available", "status": status, "reason": reason, "message": message,
                               "lastTransitionTime": "2025-01-20T10:00:00Z", "lastUpdateTime": "2025-01-20T10:00:00Z"}]}),
    );
}

/// A controller's pod as the kubelet reports it: its `manager` container's state (core/v1
/// `ContainerStatus`, every required field present, as the API server sends them).
fn pod(kube: &KubeFake, name: &str, phase: &str, image: &str, state: Value) {
    let ready = phase == "Running";
    kube.put_object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "flux-system", "labels": {"app": name.split('-').next()}},
        "status": {"phase": phase, "qosClass": "Burstable",
                   "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-01-20T10:00:00Z"},
                                  {"type": "Ready", "status": if ready { "True" } else { "False" }}],
                   "containerStatuses": [{"name": "manager", "image": image, "imageID": "", "ready": ready,
                                          "restartCount": 0, "started": ready, "state": state}]}
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrapped_cluster_reads_ready_once_flux_reports_it_and_image_pull_when_an_image_is_not_pulled() {
    let bed = Bed::new("eks-confirm", &[("cellbridge.dev/cell", "staging-us")], None).await;
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let controllers = controllers();
    assert_eq!(controllers.len(), 4, "{controllers:?}");
    let what = Observe::flux_system(controllers.clone());
    // The bootstrap gave its access back: an operator's kubeconfig reads.
    let mut api = Kubes
        .connect(ClusterAuth::Kubeconfig(bed.kube.kubeconfig()), &tuning(), false)
        .await
        .unwrap();
    bed.kube.clear_requests();

    // As applied: no Node, no controller status, no pod; source-controller's answer (the fake's
    // auto-ready) is the GitRepository's only status.
    // The fake's source-controller answers 0.2 s after the GitRepository was written.
    let mut s = api.observe(&what).await.unwrap();
    for _ in 0..50 {
        if s.git_repository.as_ref().is_some_and(|g| g.revision.is_some()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        s = api.observe(&what).await.unwrap();
    }
    assert_eq!(s.nodes, 0);
    assert_eq!(s.deployments.len(), 4, "{s:?}");
    assert!(s.deployments.iter().all(|d| d.available.is_none()), "{s:?}");
    assert!(s.pods.is_empty());
    let revision = s.git_repository.as_ref().and_then(|g| g.revision.clone()).unwrap();
    let ks = s.kustomization.as_ref().unwrap();
    assert!(ks.ready.is_none() && ks.generation == Some(1), "{ks:?}");
    assert!(!s.operator && s.flux_instance.is_none());
    assert_eq!(classify(&s, &at(MIN)).outcome, Outcome::Confirming);
    for r in bed.kube.requests() {
        assert_eq!(r["method"], "GET", "reads only: {r}");
        assert_eq!(r["mutated"], false, "{r}");
    }

    // The controllers run and the Kustomization applied the revision the source fetched
    // (kustomize-controller `docs/spec/v1/kustomizations.md`, "Ready Kustomization").
    bed.kube.nodes(2);
    for name in &controllers {
        available(&bed.kube, name, true);
        let image = format!("ghcr.io/fluxcd/{name}:v1.5.0");
        let running = json!({"running": {"startedAt": "2025-01-20T10:00:05Z"}});
        pod(
            &bed.kube,
            &format!("{name}-6d8f7b9c4-x2x7k"),
            "Running",
            &image,
            running,
        );
    }
    let generation = flux_object(&bed.kube, "Kustomization")["metadata"]["generation"].clone();
    bed.kube.set_status(
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        Some("flux-system"),
        "flux-system",
        json!({"observedGeneration": generation, "lastAppliedRevision": revision,
               "lastAttemptedRevision": revision,
               "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                               "message": format!("Applied revision: {revision}"),
                               "observedGeneration": generation, "lastTransitionTime": "2025-01-20T10:01:00Z"}]}),
    );
    let s = api.observe(&what).await.unwrap();
    assert_eq!((s.nodes, s.pods.len()), (2, 4), "{s:?}");
    let v = classify(&s, &at(MIN));
    assert_eq!(v.outcome, Outcome::Ready, "{v:?}");
    assert!(v.sentence.contains(&revision), "{}", v.sentence);

    // A new source-controller pod whose image cannot be pulled (kubelet's ImagePullBackOff,
    // `pkg/kubelet/images/image_manager.go`'s "Back-off pulling image %q").
    let image = "ghcr.io/fluxcd/source-controller:v1.99.0";
    available(&bed.kube, "source-controller", false);
    let waiting =
        json!({"waiting": {"reason": "ImagePullBackOff", "message": format!("Back-off pulling image {image:?}")}});
    pod(
        &bed.kube,
        "source-controller-5b9c7d8f6-k2m4p",
        "Pending",
        image,
        waiting,
    );
    let s = api.observe(&what).await.unwrap();
    assert_eq!(classify(&s, &at(MIN)).suspect, Some(Outcome::ImagePull));
    let v = classify(&s, &at(6 * MIN));
    assert_eq!(v.outcome, Outcome::ImagePull, "{v:?}");
    assert!(
        v.sentence.contains("source-controller-5b9c7d8f6-k2m4p") && v.sentence.contains(image),
        "{}",
        v.sentence
    );

    // A large cluster listed without `remainingItemCount`, its continue token expiring once
    // (410 Gone after a compaction): the count starts over and is right; expiring again, the
    // reading fails and names it rather than counting half the Nodes.
    bed.kube.nodes(150);
    bed.kube.lists(false, 1);
    assert_eq!(api.observe(&what).await.unwrap().nodes, 150);
    bed.kube.lists(false, 2);
    let err = api.observe(&what).await.unwrap_err().to_string();
    assert!(err.contains("410") && err.contains("Nodes"), "{err}");
}

/// The controllers running and the Kustomization having applied what the source fetched: what a
/// cluster whose Flux took over shows (kustomize-controller `docs/spec/v1/kustomizations.md`).
fn flux_took_over(kube: &KubeFake) {
    kube.nodes(2);
    for name in controllers() {
        available(kube, &name, true);
    }
    let repo = flux_object(kube, "GitRepository");
    let revision = repo["status"]["artifact"]["revision"].as_str().unwrap().to_owned();
    let generation = flux_object(kube, "Kustomization")["metadata"]["generation"].clone();
    kube.set_status(
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        Some("flux-system"),
        "flux-system",
        json!({"observedGeneration": generation, "lastAppliedRevision": revision,
               "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                               "message": format!("Applied revision: {revision}"),
                               "observedGeneration": generation, "lastTransitionTime": "2025-01-20T10:01:00Z"}]}),
    );
}

/// The whole follow-up through AWS as deployed: the bootstrap's own check finds Flux not there
/// yet and sends its re-check to the function's SQS queue with a delay (invisible until then);
/// the re-check, delivered from the queue, takes a fresh access entry, finds Flux ready, writes
/// the outcome on the EKS cluster's tags, gives the entry back and queues nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_is_followed_through_its_sqs_queue_until_flux_is_ready() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    use cellbridge::pure::fleet::LocalFleet;
    use cellbridge::rules::bootstrap::Bootstrapper;
    let bed = Bed::new("eks-followed", &[("cellbridge.dev/cell", "staging-us")], None).await;
    let sqs = aws_sdk_sqs::Client::new(&bed.aws);
    let (url, _) = cellbridge_tests::moto::queue(&sqs, "cellbridge-bootstrap-followed", &[]).await;
    let mut settings = settings(&bed.secret);
    // A short deadline: the re-check is due at it, a few seconds after the apply (long enough
    // that a loaded machine still looks for it before it is due).
    settings.confirm.deadline = Duration::from_secs(5);
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
        rechecks: Some(cellbridge::jobs::queue::SqsQueue::new(&bed.aws, url.clone()).into()),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let inv = cellbridge_tests::handle(&service, &create_cluster_event("eks-followed"), deadline)
        .await
        .unwrap();
    assert_eq!(inv.response["flux"]["outcome"], "confirming", "{}", inv.response);
    assert_eq!(
        cluster_tags(&bed.aws, "eks-followed")
            .await
            .get("cellbridge.dev/flux")
            .map(String::as_str),
        Some("confirming")
    );
    // Delayed: not there at once.
    let now = sqs.receive_message().queue_url(&url).send().await.unwrap();
    assert!(now.messages().is_empty(), "a re-check is delayed, not visible at once");

    flux_took_over(&bed.kube);
    let got = sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(15)
        .send()
        .await
        .unwrap();
    let message = &got.messages()[0];
    let body: Value = serde_json::from_str(message.body().unwrap()).unwrap();
    assert_eq!(
        (body["action"].as_str(), body["check"].as_u64()),
        (Some("confirm"), Some(2))
    );
    let event = json!({"Records": [{"messageId": message.message_id().unwrap(), "receiptHandle": "h",
        "body": message.body().unwrap(), "attributes": {}, "messageAttributes": {}, "md5OfBody": "",
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:cellbridge-bootstrap-followed",
        "awsRegion": REGION}]});
    let inv = cellbridge_tests::handle(&service, &event, deadline).await.unwrap();
    assert_eq!(inv.response, json!({"batchItemFailures": []}));
    let tags = cluster_tags(&bed.aws, "eks-followed").await;
    assert_eq!(tags.get("cellbridge.dev/flux").map(String::as_str), Some("ready"));
    assert_eq!(
        tags.get("cellbridge.dev/flux-since").map(String::as_str),
        body["since"].as_str()
    );
    assert_eq!(
        access_log("eks-followed"),
        [
            "CreateAccessEntry",
            "AssociateAccessPolicy",
            "DeleteAccessEntry",
            "CreateAccessEntry",
            "AssociateAccessPolicy",
            "DeleteAccessEntry"
        ],
        "each check its own entry, none left"
    );
    assert!(access_entries(&bed.aws, "eks-followed").await.is_empty());
    let later = sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(3)
        .send()
        .await
        .unwrap();
    assert!(later.messages().is_empty(), "ready: nothing more queued");
}
