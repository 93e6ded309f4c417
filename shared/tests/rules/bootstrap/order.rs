//! cluster-bootstrap: the order of the apply and what it writes. A new cluster gets Flux in order
//! and the temporary access is given back; Flux already there writes nothing; a dry run plans without
//! access or writes; a CRD never Established fails retryably and nothing after it is applied; credentials
//! the Git host refuses leave the bootstrap done and confirming, its re-check ready; a kubeconfig target skips EKS entirely.

use crate::support::bootstrap::*;
use cellbridge::shell::error::{Class, Classify};
use cellbridge::{
    pure::bootstrap::confirm::Outcome,
    pure::bootstrap::confirm::fixtures::git_key_refused,
    pure::bootstrap::record::{FLUX_SINCE_TAG, FLUX_TAG},
    rules::bootstrap::Phase,
    rules::bootstrap::Request,
    rules::bootstrap::Target,
    rules::bootstrap::report::BootstrapOutcome,
};
use serde_json::json;
use std::time::Duration;

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
    // Flux took over at the first check, and the cluster says so.
    let flux = report.flux.as_ref().unwrap();
    assert_eq!((flux.outcome, flux.check, flux.recorded), (Outcome::Ready, 1, true));
    assert!(report.recheck.is_none(), "nothing left to check");
    let tags = bed.accounts().cluster_tags(REGION, CLUSTER);
    assert_eq!(tags.get(FLUX_TAG).map(String::as_str), Some("ready"));
    assert_eq!(tags.get(FLUX_SINCE_TAG), Some(&flux.since));
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
async fn credentials_the_git_host_refuses_leave_the_bootstrap_done_and_confirming_with_a_re_check() {
    let bed = bed();
    bed.kube().git_repository_status(git_key_refused());
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let flux = report.flux.as_ref().unwrap();
    // Within the grace a refused key may be a race of the fresh apply: not final yet.
    assert_eq!(
        (flux.outcome, flux.suspect),
        (Outcome::Confirming, Some(Outcome::GitAuth))
    );
    let (next, delay) = report.recheck.clone().expect("a re-check");
    assert_eq!(
        (next.check, next.cell.as_str(), delay),
        (2, CELL, Duration::from_secs(30))
    );
    assert_eq!(next.controllers, ["source-controller"]);
    assert_eq!(
        bed.accounts()
            .cluster_tags(REGION, CLUSTER)
            .get(FLUX_TAG)
            .map(String::as_str),
        Some("confirming")
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
