//! cluster-bootstrap end to end: the Lambda handler. The fleet is read from GitHub as the Lambda
//! reads it; a retryable failure is reported to Lambda as retryable; SQS batches are answered record
//! by record.

use crate::support::*;
use cellbridge::pure::fleet::LocalFleet;
use cellbridge::{rules::bootstrap::Bootstrapper, rules::bootstrap::config::Settings};
use cellbridge_tests::leak;
use serde_json::{Value, json};
use std::time::Duration;

fn sqs_of(events: &[(&str, Value)]) -> Value {
    let records: Vec<Value> = events
        .iter()
        .map(|(id, body)| json!({"messageId": id, "receiptHandle": "h", "body": body.to_string(), "attributes": {}, "messageAttributes": {},
            "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:cellbridge-bootstrap", "awsRegion": REGION}))
        .collect();
    json!({"Records": records})
}

/// The cluster-bootstrap service as the Lambda builds it, its fleet repo on a fake GitHub
/// seeded with the fixture fleet, the token in Secrets Manager.
async fn github_fleet_service(
    bed: &Bed,
) -> (
    cellbridge_tests::github::FakeGithub,
    cellbridge::jobs::bootstrap::handler::BootstrapService,
) {
    use cellbridge::adapters::github::GithubConfig;
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, GithubSource};
    use cellbridge_tests::github::{FakeGithub, TOKEN, fleet_files};
    let gh = FakeGithub::start();
    // As a merged cell's metadata does: it names the cell's cluster.
    let files: Vec<(String, String)> = fleet_files(&fixture_fleet())
        .into_iter()
        .map(|(p, t)| {
            let t = if p == "clusters/prod-eu/cell-metadata.yaml" {
                t.replace("\"eks-prod-eu\"", &format!("\"{}\"", bed.cluster))
            } else {
                t
            };
            (p, t)
        })
        .collect();
    gh.seed_files("acme/fleet", &files);
    leak::secret("bootstrap: GitHub token", TOKEN);
    let secret = format!("{}-github", bed.cluster);
    aws_sdk_secretsmanager::Client::new(&bed.aws)
        .create_secret()
        .name(&secret)
        .secret_string(json!({ "token": TOKEN }).to_string())
        .send()
        .await
        .unwrap();
    let github = GithubConfig::checked("acme".into(), "fleet".into(), None, secret, gh.url()).unwrap();
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings(&bed.secret)),
        fleets: GithubSource::new(github, &bed.aws).into(),
        rechecks: None,
    };
    (gh, service)
}

/// The Lambda's way to the fleet: the base branch's archive from GitHub (the fake, which checks
/// every request against GitHub's description), with credentials from Secrets Manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_is_read_from_github_as_the_lambda_reads_it() {
    let bed = Bed::new("eks-gh-fleet", &[("cellbridge.dev/cell", "prod-eu")], None).await;
    let (gh, service) = github_fleet_service(&bed).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let inv = cellbridge_tests::handle(&service, &create_cluster_event("eks-gh-fleet"), deadline)
        .await
        .unwrap();
    leak::capture("bootstrap from the GitHub fleet", &inv.response.to_string());
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(inv.response["outcome"], "bootstrapped", "{}", inv.response);
    assert_eq!(
        inv.response["components_file"], "clusters/prod-eu/flux-system/gotk-components.yaml",
        "{}",
        inv.response
    );
    assert_eq!(bed.kube.objects(Some("Kustomization")).len(), 1);
    // Bootstrap only reads the fleet: the repository, its tarball and the download, once (the
    // cell whose metadata names the cluster kept in the same pass as the index).
    let log = gh.requests();
    assert_eq!(log["writes"], 0, "{log}");
    let paths: Vec<&str> = log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert_eq!(gh.conformance()["operations"]["repos/download-tarball-archive"], 1);
}

/// A failed bootstrap tells Lambda what to do about it: a fault worth retrying is
/// `cellbridge.Retryable` (EventBridge and asynchronous invocation retry it), whether it hit the
/// cluster or the reading of the fleet repo from GitHub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_is_reported_to_lambda_as_retryable() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    use cellbridge_tests::lambda_handler;
    let bed = Bed::new("eks-lambda-class", &[("cellbridge.dev/cell", "prod-eu")], None).await;
    let invoke = |service: BootstrapService, secs: u64| async move {
        let ctx = cellbridge_tests::lambda_context(secs);
        let event = lambda_runtime::LambdaEvent::new(create_cluster_event("eks-lambda-class"), ctx);
        let err = lambda_handler(&service, event).await.unwrap_err();
        leak::capture("bootstrap lambda error", &err.error_message);
        err
    };

    // The cluster answers 503 to every write.
    bed.kube
        .fault(json!({"method": "PATCH", "path": "/deployments/", "status": 503, "count": 1000}));
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings(&bed.secret)),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
        rechecks: None,
    };
    let err = invoke(service, 120).await;
    assert_eq!(err.error_type, "cellbridge.Retryable", "{}", err.error_message);
    assert!(err.error_message.contains("503"), "{}", err.error_message);
    bed.kube.clear_faults();

    // GitHub answers 502 to the archive, for longer than the invocation lasts.
    let (gh, service) = github_fleet_service(&bed).await;
    gh.fault(json!({"match": "GET /repos/*/tarball/*", "status": 502, "times": 1000}));
    let err = invoke(service, 6).await;
    assert_eq!(err.error_type, "cellbridge.Retryable", "{}", err.error_message);
    assert!(err.error_message.contains("fleet repo"), "{}", err.error_message);
    assert!(bed.kube.objects(Some("Kustomization")).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_answers_sqs_batches_record_by_record() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    let ready = Bed::new("eks-sqs-ready", &[("cellbridge.dev/cell", "sqs-ready")], None).await;
    let creating = Bed::new("eks-sqs-creating", &[("cellbridge.dev/cell", "sqs-creating")], None).await;
    moto_control(
        "/_cellbridge/eks/clusters/eks-sqs-creating",
        json!({"region": REGION, "active_after": 600}),
    );
    // One secret serves both clusters here.
    let s = Settings {
        cluster_wait: Duration::from_millis(300),
        ..settings(&ready.secret)
    };
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(ready.aws.clone(), s),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
        rechecks: None,
    };
    let mut other = create_cluster_event("x");
    other["detail"]["eventName"] = json!("UpdateClusterConfig");
    let event = sqs_of(&[
        ("m-ready", create_cluster_event("eks-sqs-ready")),
        ("m-creating", create_cluster_event("eks-sqs-creating")),
        ("m-other", other),
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let inv = cellbridge_tests::handle(&service, &event, deadline).await.unwrap();
    assert_eq!(
        inv.response,
        json!({"batchItemFailures": [{"itemIdentifier": "m-creating"}]})
    );
    assert_eq!(ready.kube.objects(Some("Kustomization")).len(), 1);
    assert!(calls(&creating.kube).is_empty());

    // Delivered directly by EventBridge, a cluster still CREATING fails the invocation (so that
    // EventBridge retries it), and says why.
    let inv = cellbridge_tests::handle(&service, &create_cluster_event("eks-sqs-creating"), deadline)
        .await
        .unwrap();
    assert!(inv.failed());
    assert!(
        inv.response["error"].as_str().unwrap().contains("still CREATING"),
        "{}",
        inv.response
    );

    // The manual payload through the same handler: a dry run answers with the plan.
    let manual = json!({"action": "bootstrap", "cluster": "eks-sqs-ready", "region": REGION, "dry_run": true});
    let inv = cellbridge_tests::handle(&service, &manual, deadline).await.unwrap();
    assert!(!inv.failed());
    assert_eq!(inv.response["outcome"], "planned");
    assert_eq!(inv.response["objects"].as_array().unwrap().len(), 34);
}
