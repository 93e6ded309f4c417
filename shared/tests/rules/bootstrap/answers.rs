//! cluster-bootstrap: what Lambda and SQS are answered. A per-cluster failure is retryable for
//! Lambda and listed for SQS; a GitHub outage reading the fleet is retryable, not invalid input; a
//! cluster EKS does not know is a final error naming it; on SQS a final failure is dropped and counted
//! and only a retryable one comes back; invoked directly, a final failure is a handled answer and only
//! a retryable one a Lambda error.

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::{MemAws, MemCluster, MemKube, MemSource};
use cellbridge::doubles::secrets::MemSecrets;
use cellbridge::jobs::bootstrap::handler::BootstrapService;
use cellbridge::ports::github::GithubError;
use cellbridge::shell::error::{Class, Classify};
use cellbridge::{rules::bootstrap::Request, rules::bootstrap::Target};
use serde_json::{Value, json};

#[tokio::test]
async fn a_per_cluster_failure_is_retryable_for_lambda_and_listed_for_sqs() {
    let svc = service(bed(), MemSource::new(fleet(&[])).on_branch("main"));
    svc.bootstrapper.kube().fail("apply", "Deployment", 100, 503);
    let inv = crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    assert_eq!(inv.class, Some(Class::Retryable), "{}", inv.response);
    assert_eq!(inv.class.unwrap().error_type(), "cellbridge.Retryable");

    // Two clusters in one batch: only the one that failed comes back.
    let b = bed();
    b.accounts().add_cluster(MemCluster::active("other", REGION));
    let svc = service(b, MemSource::new(fleet(&[])).on_branch("main"));
    svc.bootstrapper.kube().fail("apply", "Deployment", 100, 503);
    let inv = crate::support::handle(&svc, &sqs(&[created("other"), created(CLUSTER)]), deadline())
        .await
        .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "m1"}]),
        "{}",
        inv.response
    );
    assert_eq!(inv.class, Some(Class::Retryable));
}

#[tokio::test]
async fn a_github_outage_while_reading_the_fleet_is_retryable_not_invalid_input() {
    let transient = || GithubError::Transient {
        what: "GET /repos/acme/fleet/tarball/main".into(),
        detail: "HTTP 502".into(),
    };
    let svc = service(bed(), MemSource::failing(transient));
    let err = crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap_err();
    assert_eq!(err.class(), Class::Retryable, "{err}");
    assert_eq!(err.class().exit_code(), 3);

    let svc = service(bed(), MemSource::failing(transient));
    let inv = crate::support::handle(&svc, &sqs(&[created(CLUSTER)]), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([{"itemIdentifier": "m0"}]));
    assert_eq!(inv.class, Some(Class::Retryable));
}

#[tokio::test]
async fn a_cluster_eks_does_not_know_is_a_final_error_naming_it() {
    let bed = bed();
    let err = bed
        .run(
            &fleet(&[]),
            &Request {
                cluster: "never-made".into(),
                cell: Some(CELL.into()),
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap_err();
    assert_eq!(err.class(), Class::Final);
    assert!(err.to_string().contains("never-made not found in eu-west-1"), "{err}");
    assert!(bed.kube().applied().is_empty());
}

#[tokio::test]
async fn on_sqs_a_final_failure_is_dropped_and_counted_and_only_a_retryable_one_comes_back() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let svc = service(bed(), MemSource::new(fleet(&[])).on_branch("main"));
    svc.bootstrapper.kube().fail("apply", "Deployment", 100, 503);
    // m0: EKS knows no such cluster (final); m1: the cluster answers 503 (retryable); m2: a body
    // that is no event at all (invalid input).
    let mut event = sqs(&[created("never-made"), created(CLUSTER)]);
    event["Records"]
        .as_array_mut()
        .unwrap()
        .push(json!({"messageId": "m2", "body": "not JSON", "eventSource": "aws:sqs"}));
    let inv = crate::support::handle_with(&svc, &event, deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "m1"}]),
        "{}",
        inv.response
    );
    assert_eq!(inv.class, Some(Class::Final), "{}", inv.response);
    assert_eq!(
        captured.outcomes().into_iter().map(|(o, _)| o).collect::<Vec<_>>(),
        ["failed_final", "retried", "refused"]
    );
    // The access entry of the retryable run is gone: nothing is left for the redelivery to find.
    assert!(svc.bootstrapper.accounts().entries(REGION, CLUSTER).is_empty());

    // A batch of final failures only: nothing comes back.
    // m1: a CONFIG_MAP-only cluster, which no access entry can reach.
    let b = bed();
    b.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).authentication_mode("CONFIG_MAP"));
    let svc = service(b, MemSource::new(fleet(&[])).on_branch("main"));
    let inv = crate::support::handle(&svc, &sqs(&[created("never-made"), created(CLUSTER)]), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(inv.class, Some(Class::Final));

    // The fleet repo cannot be read for good (GitHub refuses): no record comes back.
    let refused = || GithubError::Api {
        what: "GET /repos/acme/fleet/tarball/main".into(),
        status: 404,
        message: "Not Found".into(),
    };
    let svc = service(bed(), MemSource::failing(refused));
    let inv = crate::support::handle(&svc, &sqs(&[created(CLUSTER)]), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(inv.class, Some(Class::Final));
}

async fn direct(
    svc: &BootstrapService<MemAws, MemKube, MemSecrets>,
    event: Value,
) -> Result<Value, lambda_runtime::Diagnostic> {
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 600_000;
    crate::support::lambda_handler(svc, lambda_runtime::LambdaEvent::new(event, ctx)).await
}

#[tokio::test]
async fn directly_invoked_a_final_failure_is_a_handled_answer_and_only_a_retryable_one_a_lambda_error() {
    let svc = service(bed(), MemSource::new(fleet(&[])).on_branch("main"));
    // Final: answered (Lambda retries a returned error of an asynchronous invocation).
    let ok = direct(&svc, created("never-made")).await.unwrap();
    assert_eq!(ok["class"], "final", "{ok}");
    assert!(ok["error"].as_str().unwrap().contains("never-made"), "{ok}");
    // Invalid input: the same.
    let ok = direct(&svc, json!({"hello": "world"})).await.unwrap();
    assert_eq!(ok["class"], "invalid_input", "{ok}");
    // Retryable: a Lambda error, retried by EventBridge and asynchronous invocation.
    svc.bootstrapper.kube().fail("apply", "Deployment", 100, 503);
    let err = direct(&svc, created(CLUSTER)).await.unwrap_err();
    assert_eq!(err.error_type, "cellbridge.Retryable", "{}", err.error_message);
    assert!(err.error_message.contains("503"), "{}", err.error_message);
    assert!(!err.error_message.contains(PASSWORD));
    assert!(svc.bootstrapper.accounts().entries(REGION, CLUSTER).is_empty());
}
