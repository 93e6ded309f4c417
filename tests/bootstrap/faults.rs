//! cluster-bootstrap end to end: faults of the outside calls. Injected Kubernetes API faults are
//! retried to success; a persistent fault is a clean retryable error and the next run converges; the
//! EKS token is renewed when it gets old; AWS calls that fail, throttle or hang are retried; a run
//! whose CreateAccessEntry's answer was lost tells its own entry on the retry and deletes it.
//! (Every call's matrix is `tests/bootstrap_faults.rs`.)

use crate::support::*;
use cellbridge::shell::error::Classify;
use cellbridge::{
    ports::cluster::kube::Tuning, rules::bootstrap::Bootstrapper, rules::bootstrap::Target,
    rules::bootstrap::config::Settings, rules::bootstrap::report::BootstrapOutcome,
};
use cellbridge_tests::kube::{KubeFake, http_json};
use cellbridge_tests::moto;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_api_faults_are_retried_to_success() {
    let bed = Bed::new("eks-faults", &[("cellbridge.dev/cell", "faults")], None).await;
    let k = &bed.kube;
    k.fault(
        json!({"method": "PATCH", "path": "/customresourcedefinitions/gitrepositories", "status": 503, "count": 2}),
    );
    k.fault(json!({"method": "PATCH", "path": "/deployments/source-controller", "status": 500, "count": 1}));
    k.fault(json!({"method": "PATCH", "path": "/secrets/flux-system", "status": 409, "count": 1}));
    k.fault(json!({"method": "PATCH", "path": "/services/", "sleep": 3, "count": 1}));
    k.fault(json!({"method": "GET", "path": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions$", "status": 429, "count": 1}));
    k.fault(json!({"method": "GET", "path": "/apis/source.toolkit.fluxcd.io/v1$", "status": 503, "count": 1}));
    // A new access entry takes a moment to reach the API server: the first answers are 401.
    k.fault(json!({"method": "GET", "path": "/kustomizations/flux-system$", "status": 401, "count": 2}));
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let faults: Vec<Value> = k.requests().into_iter().filter(|r| !r["fault"].is_null()).collect();
    assert_eq!(faults.len(), 9, "every injected fault was hit: {faults:?}");
    assert_eq!(k.objects(Some("Deployment")).len(), 4);
    assert_eq!(k.objects(Some("Service")).len(), 3);
    assert_eq!(k.objects(Some("Kustomization")).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_fault_is_a_clean_retryable_error_and_the_next_run_converges() {
    let bed = Bed::new("eks-down", &[("cellbridge.dev/cell", "down")], None).await;
    bed.kube
        .fault(json!({"method": "PATCH", "path": "/deployments/", "status": 503, "count": 1000}));
    let err = bed.run(&bed.request()).await.unwrap_err();
    let msg = err.to_string();
    assert!(err.retryable(), "{err:?}");
    assert!(
        msg.contains("Deployment flux-system/helm-controller") && msg.contains("503"),
        "{msg}"
    );
    let tries = bed
        .kube
        .requests()
        .iter()
        .filter(|r| r["path"].as_str().unwrap().contains("/deployments/"))
        .count();
    assert_eq!(tries, 5, "bounded retries");
    assert!(
        bed.kube.objects(Some("Kustomization")).is_empty(),
        "no sync objects after a failure"
    );
    assert!(
        access_entries(&bed.aws, &bed.cluster).await.is_empty(),
        "access given back after a failure too"
    );

    bed.kube.clear_faults();
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(bed.kube.objects(Some("Deployment")).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eks_token_is_renewed_when_it_gets_old() {
    // CRDs Established 1.5 s after they are written: the run spans more than one second, so
    // tokens signed anew carry different dates.
    let eks_auth = format!("{},{REGION},eks-token", moto::endpoint());
    let kube = KubeFake::start_with(&["--crd-delay", "1.5", "--eks-auth", &eks_auth]);
    let bed = Bed::with_server("eks-token", &[("cellbridge.dev/cell", "token")], None, kube).await;
    // Renew on every request: each one then carries a token signed anew (one-second dates).
    let s = Settings {
        tuning: Tuning {
            token_refresh: Duration::ZERO,
            ..tuning()
        },
        ..settings(&bed.secret)
    };
    let report = bed.run_with(&bed.request(), s).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let ids: BTreeSet<String> = bed
        .kube
        .requests()
        .iter()
        .filter_map(|r| r["auth_id"].as_str().map(str::to_owned))
        .collect();
    assert!(ids.len() >= 2, "expected renewed tokens, saw {} distinct", ids.len());

    // With the default (14 minutes) one token serves the whole run.
    let bed2 = Bed::new("eks-token-once", &[("cellbridge.dev/cell", "token-once")], None).await;
    bed2.run(&bed2.request()).await.unwrap();
    let ids: BTreeSet<String> = bed2
        .kube
        .requests()
        .iter()
        .filter_map(|r| r["auth_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 1);
}

fn moto_fault(f: Value) {
    moto_control("/_cellbridge/faults", f);
}

fn access_key(aws: &aws_config::SdkConfig) -> String {
    use aws_credential_types::provider::ProvideCredentials;
    let provider = aws.credentials_provider().unwrap();
    block_on(provider.provide_credentials())
        .unwrap()
        .access_key_id()
        .to_owned()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_calls_that_fail_throttle_or_hang_are_retried() {
    let bed = Bed::new("eks-awsfaults", &[("cellbridge.dev/cell", "awsfaults")], None).await;
    // Short attempt timeouts, so that a hung call is abandoned and retried quickly.
    let t = aws_config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(1))
        .build();
    let aws = bed.aws.to_builder().timeout_config(t).build();
    let key = access_key(&aws);
    let c = &bed.cluster;
    moto_fault(json!({"service": "eks", "operation": format!("^GET /clusters/{c}$"), "kind": "throttle", "count": 1}));
    moto_fault(
        json!({"service": "eks", "operation": format!("^POST /clusters/{c}/access-entries$"), "kind": "5xx", "count": 1}),
    );
    moto_fault(
        json!({"service": "eks", "operation": format!("^DELETE /clusters/{c}/access-entries/"), "kind": "5xx", "count": 1}),
    );
    moto_fault(
        json!({"service": "secretsmanager", "operation": "GetSecretValue", "body_contains": bed.secret, "kind": "timeout", "sleep": 3, "count": 1}),
    );
    moto_fault(
        json!({"service": "sts", "operation": "GetCallerIdentity", "access_key": key, "kind": "5xx", "count": 1}),
    );
    let report = Bootstrapper::new(aws.clone(), settings(&bed.secret))
        .run(&bed.fleet, &bed.request(), Target::Eks)
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert!(report.access_entry.as_ref().unwrap().removed);
    assert!(access_entries(&bed.aws, c).await.is_empty());
    let (_, faults) = http_json("GET", &format!("{}/_cellbridge/faults", moto::endpoint()), None);
    let mine: Vec<&Value> = faults
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            let s = f.to_string();
            s.contains(c.as_str()) || s.contains(&bed.secret) || s.contains(&key)
        })
        .collect();
    assert_eq!(mine.len(), 5);
    assert!(
        mine.iter().all(|f| f["hits"] == 1),
        "every fault was hit once: {mine:?}"
    );

    // A call that keeps failing ends in a clean, retryable error naming the call.
    moto_fault(json!({"service": "eks", "operation": format!("^GET /clusters/{c}$"), "kind": "5xx", "count": 50}));
    let err = Bootstrapper::new(aws, settings(&bed.secret))
        .run(&bed.fleet, &bed.request(), Target::Eks)
        .await
        .unwrap_err();
    assert!(err.retryable(), "{err:?}");
    assert!(err.to_string().contains("DescribeCluster"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_create_answer_was_lost_deletes_its_own_entry() {
    let bed = Bed::new("eks-lostcreate", &[("cellbridge.dev/cell", "lostcreate")], None).await;
    let t = aws_config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(1))
        .build();
    let aws = bed.aws.to_builder().timeout_config(t).build();
    let c = &bed.cluster;
    // The entry is made, its answer never arrives: the SDK's retry meets ResourceInUseException.
    moto_fault(
        json!({"service": "eks", "operation": format!("^POST /clusters/{c}/access-entries$"),
                      "kind": "timeout", "sleep": 2, "land": true, "count": 1}),
    );
    let report = Bootstrapper::new(aws, settings(&bed.secret))
        .run(&bed.fleet, &bed.request(), Target::Eks)
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    // Young as it is, the entry bears this run's mark: its own, not another run's to leave.
    let access = report.access_entry.unwrap();
    assert!(access.temporary && access.removed && !access.adopted, "{access:?}");
    assert!(access_entries(&bed.aws, c).await.is_empty());
}
