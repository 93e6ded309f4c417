//! cluster-bootstrap's orchestration rules over the in-memory ports (feature `test-support`):
//! the product's own sequence ([`Bootstrapper`]) and handler, with EKS, STS, Secrets Manager and
//! the cluster's Kubernetes API in memory. Each rule in milliseconds; `tests/bootstrap.rs` runs
//! the same code against moto and the fake Kubernetes API server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cellbridge::bootstrap::handler::{BootstrapService, FleetSource};
use cellbridge::bootstrap::memory::{MemAws, MemCluster, MemKube};
use cellbridge::bootstrap::{
    BootstrapError, BootstrapOutcome, Bootstrapper, Phase, Report, Request, Settings, SourceStatus, Target, Tuning,
};
use cellbridge::error::{Class, Classify};
use cellbridge::fleet::{FleetRead, MemFleet};
use cellbridge::github::GithubError;
use cellbridge::secrets::memory::MemSecrets;
use futures::future::BoxFuture;
use serde_json::{Value, json};

const REGION: &str = "eu-west-1";
const CLUSTER: &str = "prod-eu-west-1";
const CELL: &str = "prod-eu-west-1";
const FUNCTION_ROLE: &str = "arn:aws:iam::111111111111:role/cellbridge-bootstrap";
const CELL_ROLE: &str = "arn:aws:iam::222222222222:role/cellbridge-cell";
const GIT_SECRET: &str = "cellbridge/flux-git";
const PASSWORD: &str = "hunter2-do-not-log";

type Bed = Bootstrapper<MemAws, MemKube, MemSecrets>;

/// Flux's components, cut to what the sequence cares about: a Namespace, the two CRDs the sync
/// objects need, a controller.
const COMPONENTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gitrepositories.source.toolkit.fluxcd.io
spec:
  group: source.toolkit.fluxcd.io
  names: {kind: GitRepository, plural: gitrepositories}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kustomizations.kustomize.toolkit.fluxcd.io
spec:
  group: kustomize.toolkit.fluxcd.io
  names: {kind: Kustomization, plural: kustomizations}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: source-controller
  namespace: flux-system
spec: {}
"#;

const SYNC: &str = r#"
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  secretRef:
    name: flux-system
  url: https://github.com/acme/fleet
"#;

fn metadata(cell: &str, cluster: &str, extra: &[(&str, &str)]) -> String {
    let mut data = format!("  cell_name: \"{cell}\"\n  cluster_name: \"{cluster}\"\n  aws_region: \"{REGION}\"\n");
    for (k, v) in extra {
        data.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n{data}"
    )
}

/// A fleet with the template and the cell `CELL` (merged), whose cluster is `CLUSTER`.
fn fleet(extra: &[(&str, &str)]) -> MemFleet {
    let mut f = MemFleet::new();
    f.insert("clusters/_template/flux-system/gotk-components.yaml", COMPONENTS);
    f.insert("clusters/_template/flux-system/gotk-sync.yaml", SYNC);
    f.insert(
        format!("clusters/{CELL}/cell-metadata.yaml"),
        metadata(CELL, CLUSTER, extra),
    );
    f
}

fn settings() -> Settings {
    Settings {
        flux_git_url: None,
        flux_git_branch: "main".into(),
        flux_git_secret: Some(GIT_SECRET.into()),
        cluster_wait: Duration::from_secs(5),
        cluster_poll: Duration::from_millis(1),
        access_principal_arn: None,
        tuning: Tuning::default(),
    }
}

fn bed() -> Bed {
    let aws = MemAws::new(FUNCTION_ROLE);
    aws.add_cluster(MemCluster::active(CLUSTER, REGION));
    let kube = MemKube::new(&aws);
    let secrets = MemSecrets::new();
    secrets.put(GIT_SECRET, json!({"username": "git", "password": PASSWORD}).to_string());
    Bootstrapper::with_ports(aws, kube, secrets, settings())
}

fn request() -> Request {
    Request {
        cluster: CLUSTER.into(),
        region: REGION.into(),
        cell: None,
        force: false,
        dry_run: false,
    }
}

async fn run(bed: &Bed, fleet: &MemFleet) -> Result<Report, BootstrapError> {
    bed.run(fleet, &request(), Target::Eks).await
}

fn entries(bed: &Bed) -> Vec<String> {
    bed.accounts()
        .entries(REGION, CLUSTER)
        .into_iter()
        .map(|e| e.principal)
        .collect()
}

fn flux_installed(bed: &Bed) {
    bed.kube().put(
        REGION,
        CLUSTER,
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
               "metadata": {"name": "flux-system", "namespace": "flux-system"}}),
    );
}

#[tokio::test]
async fn a_new_cluster_gets_flux_in_order_and_the_temporary_access_is_given_back() {
    let bed = bed();
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some(CELL));
    assert_eq!(
        bed.kube().applied(),
        [
            "Namespace flux-system",
            "CustomResourceDefinition gitrepositories.source.toolkit.fluxcd.io",
            "CustomResourceDefinition kustomizations.kustomize.toolkit.fluxcd.io",
            "Deployment flux-system/source-controller",
            "Secret flux-system/flux-system",
            "GitRepository flux-system/flux-system",
            "Kustomization flux-system/flux-system",
        ]
    );
    let phases: Vec<Phase> = report.objects.iter().map(|o| o.phase).collect();
    assert!(phases.is_sorted(), "{phases:?}");
    let access = report.access_entry.clone().unwrap();
    assert!(access.temporary && access.removed, "{access:?}");
    assert_eq!(access.principal_arn, FUNCTION_ROLE);
    assert!(entries(&bed).is_empty(), "the temporary entry is gone");
    assert_eq!(report.git_repository.as_ref().unwrap().ready, Some(true));
    // The Git secret reached the cluster; its value reached neither the report nor an error.
    let secret = bed
        .kube()
        .get(REGION, CLUSTER, "Secret", Some("flux-system"), "flux-system")
        .unwrap();
    assert!(secret["data"]["password"].is_string());
    assert!(!serde_json::to_string(&report).unwrap().contains(PASSWORD));
}

#[tokio::test]
async fn flux_already_there_writes_nothing_and_still_gives_the_access_back() {
    let bed = bed();
    flux_installed(&bed);
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::AlreadyBootstrapped);
    assert!(bed.kube().applied().is_empty(), "{:?}", bed.kube().applied());
    assert!(report.objects.is_empty());
    assert!(entries(&bed).is_empty());

    // `force` applies over it.
    let forced = bed
        .run(
            &fleet(&[]),
            &Request {
                force: true,
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(forced.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(bed.kube().applied().len(), 7);
}

#[tokio::test]
async fn access_is_removed_after_a_failed_apply_whatever_the_failure() {
    for (code, class) in [(422, Class::Final), (503, Class::Retryable)] {
        let bed = bed();
        // A 503 outlives the adapter's retries in the real client; here it is simply answered
        // more often than any retry budget.
        bed.kube().fail("apply", "Deployment", 100, code);
        let err = run(&bed, &fleet(&[])).await.unwrap_err();
        assert_eq!(err.class(), class, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(CLUSTER) && msg.contains(CELL) && msg.contains("source-controller"),
            "{msg}"
        );
        assert!(
            entries(&bed).is_empty(),
            "HTTP {code}: the access entry outlived the run"
        );
        assert!(bed.accounts().calls().contains(&format!("DeleteAccessEntry {CLUSTER}")));
    }
}

#[tokio::test]
async fn a_failed_delete_fails_the_run_and_the_next_run_removes_the_entry() {
    let bed = bed();
    bed.accounts().fail("DeleteAccessEntry", 1, true);
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Retryable, "{err}");
    assert_eq!(entries(&bed), [FUNCTION_ROLE], "left behind by the failed delete");

    // The event comes back: Flux is there, and the entry, recognised by its tag, is deleted.
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::AlreadyBootstrapped);
    assert!(report.access_entry.unwrap().removed);
    assert!(entries(&bed).is_empty());
}

#[tokio::test]
async fn someone_elses_access_entry_is_used_and_never_deleted() {
    let bed = bed();
    bed.accounts().add_entry(REGION, CLUSTER, FUNCTION_ROLE, false);
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let access = report.access_entry.unwrap();
    assert!(!access.temporary && !access.removed);
    assert_eq!(entries(&bed), [FUNCTION_ROLE]);
    let calls = bed.accounts().calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("CreateAccessEntry") || c.starts_with("DeleteAccessEntry")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn an_entry_without_its_policy_is_refused_by_kubernetes_as_eks_does() {
    // The double's authorization rule, checked through the sequence: an entry created but whose
    // policy association failed gives no access, and is not left behind.
    let bed = bed();
    bed.accounts().fail("AssociateAccessPolicy", 1, false);
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains("AssociateAccessPolicy"), "{err}");
    assert!(entries(&bed).is_empty(), "a useless entry was left behind");
    assert!(bed.kube().applied().is_empty());
}

#[tokio::test]
async fn a_cluster_still_creating_is_handed_back_and_one_that_becomes_active_is_bootstrapped() {
    let bed = bed();
    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).creating_for(1_000_000));
    let report = bed
        .run_until(&fleet(&[]), &request(), Target::Eks, Some(Duration::from_millis(20)))
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::ClusterNotReady);
    assert_eq!(report.cluster_status.as_deref(), Some("CREATING"));
    assert!(bed.kube().applied().is_empty());
    assert!(
        !bed.accounts()
            .calls()
            .iter()
            .any(|c| c.starts_with("CreateAccessEntry"))
    );

    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).creating_for(3));
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
}

#[tokio::test]
async fn a_config_map_only_or_failed_cluster_is_refused_before_anything_is_touched() {
    for (cluster, says) in [
        (
            MemCluster::active(CLUSTER, REGION).authentication_mode("CONFIG_MAP"),
            "authenticationMode=API_AND_CONFIG_MAP",
        ),
        (MemCluster::active(CLUSTER, REGION).status("FAILED"), "is FAILED"),
    ] {
        let bed = bed();
        bed.accounts().add_cluster(cluster);
        let err = run(&bed, &fleet(&[])).await.unwrap_err();
        assert_eq!(err.class(), Class::Final);
        assert!(err.to_string().contains(says), "{err}");
        assert!(!bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")));
        assert!(bed.kube().applied().is_empty());
    }
}

#[tokio::test]
async fn a_cluster_of_no_cell_is_skipped_and_a_tag_names_the_cell() {
    let bed = bed();
    bed.accounts().add_cluster(MemCluster::active("scratch", REGION));
    let report = bed
        .run(
            &fleet(&[]),
            &Request {
                cluster: "scratch".into(),
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::NotACell);
    assert!(bed.kube().applied().is_empty());

    // The tag wins over the lookup by cluster name (a renamed cluster).
    bed.accounts()
        .add_cluster(MemCluster::active("renamed", REGION).tag("cellbridge.dev/cell", CELL));
    let report = bed
        .run(
            &fleet(&[]),
            &Request {
                cluster: "renamed".into(),
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some(CELL));
}

#[tokio::test]
async fn a_cell_in_another_account_is_reached_through_its_role() {
    let fleet = fleet(&[("bootstrap_role_arn", CELL_ROLE)]);
    let bed = bed();
    bed.accounts().trust_role(CELL_ROLE);
    let report = run(&bed, &fleet).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.access_entry.unwrap().principal_arn, CELL_ROLE);
    assert!(entries(&bed).is_empty());

    // A role that does not trust cellbridge is final; STS throttling is worth a retry.
    let bed = self::bed();
    let err = run(&bed, &fleet).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains(CELL_ROLE), "{err}");
    bed.accounts().trust_role(CELL_ROLE);
    bed.accounts().fail("AssumeRole", 1, true);
    assert_eq!(run(&bed, &fleet).await.unwrap_err().class(), Class::Retryable);
    assert!(bed.kube().applied().is_empty());
}

#[tokio::test]
async fn git_credentials_are_checked_before_the_cluster_is_touched() {
    // Missing: final; Secrets Manager failing: retryable; malformed: final, naming the field.
    let bed = bed();
    bed.secrets().put(GIT_SECRET, json!({"username": "git"}).to_string());
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains(GIT_SECRET), "{err}");

    let bed = self::bed();
    bed.secrets().fail(1);
    assert_eq!(run(&bed, &fleet(&[])).await.unwrap_err().class(), Class::Retryable);

    let bed = Bootstrapper::with_ports(
        MemAws::new(FUNCTION_ROLE),
        MemKube::new(&MemAws::new(FUNCTION_ROLE)),
        MemSecrets::new(),
        settings(),
    );
    bed.accounts().add_cluster(MemCluster::active(CLUSTER, REGION));
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains("ResourceNotFoundException"), "{err}");
    let calls = bed.accounts().calls();
    assert!(!calls.iter().any(|c| c.contains("AccessEntry")), "{calls:?}");
}

#[tokio::test]
async fn a_dry_run_plans_without_access_or_writes() {
    let bed = bed();
    let report = bed
        .run(
            &fleet(&[]),
            &Request {
                dry_run: true,
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Planned);
    assert_eq!(report.objects.len(), 7);
    assert!(bed.kube().applied().is_empty());
    assert!(!bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")));
}

#[tokio::test]
async fn a_crd_never_established_fails_retryably_and_applies_nothing_after_it() {
    let bed = bed();
    bed.kube().stuck_crd("kustomizations.kustomize.toolkit.fluxcd.io");
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Retryable);
    assert!(
        err.to_string().contains("kustomizations.kustomize.toolkit.fluxcd.io"),
        "{err}"
    );
    assert!(!bed.kube().applied().iter().any(|a| a.starts_with("Deployment")));
    assert!(entries(&bed).is_empty());
}

#[tokio::test]
async fn a_source_that_is_not_ready_is_reported_not_failed() {
    let bed = bed();
    bed.kube().source_status(SourceStatus {
        ready: Some(false),
        reason: Some("AuthenticationFailed".into()),
        message: Some("ssh: handshake failed".into()),
        revision: None,
    });
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(
        report.git_repository.unwrap().reason.as_deref(),
        Some("AuthenticationFailed")
    );
}

#[tokio::test]
async fn a_kubeconfig_target_skips_eks_entirely() {
    let bed = bed();
    let path = std::path::Path::new("/home/me/.kube/prod");
    bed.kube().kubeconfig(path, REGION, CLUSTER);
    let report = bed
        .run(&fleet(&[]), &request(), Target::Kubeconfig(path))
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert!(report.access_entry.is_none());
    assert!(bed.accounts().calls().is_empty(), "{:?}", bed.accounts().calls());

    let err = bed
        .run(
            &fleet(&[]),
            &request(),
            Target::Kubeconfig(std::path::Path::new("/nowhere")),
        )
        .await
        .unwrap_err();
    assert_eq!(err.class(), Class::Final);
    assert!(err.to_string().contains("/nowhere"), "{err}");
}

/// The fleet as the handler reads it, failing like GitHub can.
struct Fleet(Result<MemFleet, fn() -> GithubError>);

impl FleetSource for Fleet {
    fn fleet(&self, _deadline: Instant) -> BoxFuture<'_, Result<Arc<dyn FleetRead>, GithubError>> {
        let r: Result<Arc<dyn FleetRead>, GithubError> = match &self.0 {
            Ok(f) => Ok(Arc::new(f.clone())),
            Err(e) => Err(e()),
        };
        Box::pin(async move { r })
    }
}

fn service(bed: Bed, fleet: Fleet) -> BootstrapService<MemAws, MemKube, MemSecrets> {
    BootstrapService {
        bootstrapper: bed,
        fleets: Box::new(fleet),
    }
}

fn created(cluster: &str) -> Value {
    json!({"version": "0", "id": "e1", "detail-type": "AWS API Call via CloudTrail", "source": "aws.eks",
           "account": "111111111111", "region": REGION, "time": "2026-12-01T00:00:00Z", "resources": [],
           "detail": {"eventSource": "eks.amazonaws.com", "eventName": "CreateCluster",
                      "requestParameters": {"name": cluster}, "responseElements": {"cluster": {"name": cluster}}}})
}

fn sqs(bodies: &[Value]) -> Value {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| json!({"messageId": format!("m{i}"), "body": b.to_string(), "eventSource": "aws:sqs"}))
        .collect();
    json!({"Records": records})
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(600)
}

#[tokio::test]
async fn a_per_cluster_failure_is_retryable_for_lambda_and_listed_for_sqs() {
    let svc = service(bed(), Fleet(Ok(fleet(&[]))));
    svc.bootstrapper.kube().fail("apply", "Deployment", 100, 503);
    let inv = svc.handle(&created(CLUSTER), deadline()).await.unwrap();
    assert_eq!(inv.class, Some(Class::Retryable), "{}", inv.response);
    assert_eq!(inv.class.unwrap().error_type(), "cellbridge.Retryable");

    // Two clusters in one batch: only the one that failed comes back.
    let b = bed();
    b.accounts().add_cluster(MemCluster::active("other", REGION));
    let svc = service(b, Fleet(Ok(fleet(&[]))));
    svc.bootstrapper.kube().fail("apply", "Deployment", 100, 503);
    let inv = svc
        .handle(&sqs(&[created("other"), created(CLUSTER)]), deadline())
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
    let svc = service(bed(), Fleet(Err(transient)));
    let err = svc.handle(&created(CLUSTER), deadline()).await.unwrap_err();
    assert_eq!(err.class(), Class::Retryable, "{err}");
    assert_eq!(err.class().exit_code(), 3);

    let svc = service(bed(), Fleet(Err(transient)));
    let inv = svc.handle(&sqs(&[created(CLUSTER)]), deadline()).await.unwrap();
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
