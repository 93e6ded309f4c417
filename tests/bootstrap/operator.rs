//! cluster-bootstrap end to end for a Flux Operator cell: a new cell's cluster, found by its tag,
//! gets the operator from the template's install manifest (upstream's own, trimmed:
//! `tests/fixtures/flux-operator/`), its CRDs Established before the rest, the Git secret named
//! by `spec.sync.pullSecret` from Secrets Manager and the FluxInstance written for the cell, over
//! moto and the fake Kubernetes API server; a second run finds the FluxInstance and writes nothing.

use crate::support::*;
use cellbridge::pure::fleet::LocalFleet;
use cellbridge::{rules::bootstrap::Phase, rules::bootstrap::report::BootstrapOutcome};
use serde_json::json;
use std::collections::BTreeSet;

const T: &str = "clusters/_template/flux-system";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_operator_cell_gets_the_operator_its_git_secret_and_the_flux_instance_in_order() {
    let mut bed = Bed::new("eks-operator-new", &[("cellbridge.dev/cell", "ops-eu")], None).await;
    bed.fleet =
        LocalFleet::open(cellbridge_tests::process::repo_root().join("tests/fixtures/flux-operator/fleet")).unwrap();
    let report = bed.run(&bed.request()).await.unwrap();

    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some("ops-eu"));
    assert_eq!(
        report.components_file.as_deref(),
        Some(format!("{T}/flux-operator-install.yaml").as_str())
    );
    assert_eq!(
        report.sync_file.as_deref(),
        Some(format!("{T}/flux-instance.yaml (written for ops-eu)").as_str())
    );
    let applied: Vec<String> = report
        .objects
        .iter()
        .map(|o| format!("{} {}", o.target.kind, o.target.name))
        .collect();
    assert_eq!(
        applied,
        [
            "Namespace flux-system",
            "CustomResourceDefinition fluxinstances.fluxcd.controlplane.io",
            "CustomResourceDefinition fluxreports.fluxcd.controlplane.io",
            "ServiceAccount flux-operator",
            "ClusterRole flux-operator-edit",
            "ClusterRole flux-operator-view",
            "ClusterRoleBinding flux-operator-cluster-admin",
            "Service flux-operator",
            "Deployment flux-operator",
            "Secret flux-system",
            "FluxInstance flux",
        ]
    );
    let phases: Vec<Phase> = report.objects.iter().map(|o| o.phase).collect();
    assert!(phases.is_sorted(), "{phases:?}");

    // What the API server saw: every object server-side applied by `cellbridge` in that order,
    // the CRDs Established (listed) before the operator's other objects.
    let c = calls(&bed.kube);
    let patches: Vec<&str> = c
        .iter()
        .filter(|(m, _)| m == "PATCH")
        .map(|(_, p)| p.as_str())
        .collect();
    assert_eq!(patches.len(), 11, "{patches:?}");
    assert_eq!(patches[0], "/api/v1/namespaces/flux-system");
    assert!(
        patches[1..3]
            .iter()
            .all(|p| p.starts_with("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"))
    );
    assert_eq!(
        patches[8],
        "/apis/apps/v1/namespaces/flux-system/deployments/flux-operator"
    );
    assert_eq!(patches[9], "/api/v1/namespaces/flux-system/secrets/flux-system");
    assert_eq!(
        patches[10],
        "/apis/fluxcd.controlplane.io/v1/namespaces/flux-system/fluxinstances/flux"
    );
    let first_list = c
        .iter()
        .position(|(m, p)| m == "GET" && p == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        .unwrap();
    let fourth_patch = c
        .iter()
        .enumerate()
        .filter(|(_, (m, _))| m == "PATCH")
        .nth(3)
        .unwrap()
        .0;
    assert!(first_list < fourth_patch, "the CRDs are waited for before the rest");
    for r in bed.kube.requests().iter().filter(|r| r["method"] == "PATCH") {
        assert_eq!(r["content_type"], "application/apply-patch+yaml");
        assert!(r["query"].as_str().unwrap().contains("fieldManager=cellbridge"), "{r}");
    }

    // The FluxInstance is there, the template's written for the cell; the operator runs.
    let instances = bed.kube.objects(Some("FluxInstance"));
    assert_eq!(instances.len(), 1);
    let fi = &instances[0];
    assert_eq!(fi["metadata"]["name"], "flux");
    assert_eq!(fi["metadata"]["namespace"], "flux-system");
    assert_eq!(fi["spec"]["sync"]["path"], "clusters/ops-eu");
    assert_eq!(fi["spec"]["sync"]["url"], GIT_URL);
    assert_eq!(fi["spec"]["sync"]["pullSecret"], "flux-system");
    assert_eq!(fi["spec"]["distribution"]["version"], "2.x");
    let deployment = &bed.kube.objects(Some("Deployment"))[0];
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "ghcr.io/controlplaneio-fluxcd/flux-operator:v0.58.1"
    );
    let secret = flux_object(&bed.kube, "Secret");
    let keys: BTreeSet<&str> = secret["data"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["identity", "identity.pub", "known_hosts"]));
    // No GitRepository of cellbridge's: the operator makes it from `spec.sync`.
    assert!(bed.kube.objects(Some("GitRepository")).is_empty());
    // The first check reads the FluxInstance, which no operator runs here to make Ready.
    let flux = report.flux.as_ref().unwrap();
    assert_eq!(flux.outcome.as_str(), "confirming", "{flux:?}");
    let access = report.access_entry.as_ref().unwrap();
    assert!(access.temporary && access.removed);
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());

    // Create-if-missing: the FluxInstance is the operator's now, Ready as it reports it
    // (flux-operator docs/api/v1/fluxinstance.md); a second run writes nothing.
    bed.kube.set_status(
        "fluxcd.controlplane.io/v1",
        "FluxInstance",
        Some("flux-system"),
        "flux",
        json!({"observedGeneration": 1, "lastAppliedRevision": "v2.8.3@sha256:0000",
               "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                               "message": "Reconciliation finished in 52s", "observedGeneration": 1,
                               "lastTransitionTime": "2025-01-20T10:00:00Z"}]}),
    );
    bed.kube.clear_requests();
    let second = bed.run(&bed.request()).await.unwrap();
    assert_eq!(second.outcome, BootstrapOutcome::AlreadyBootstrapped);
    assert!(bed.writes().is_empty(), "second run wrote: {:?}", bed.writes());
    let calls = calls(&bed.kube);
    assert_eq!(
        calls[0].1, "/apis/fluxcd.controlplane.io/v1/namespaces/flux-system/fluxinstances/flux",
        "one read of the FluxInstance decides: {calls:?}"
    );
    assert!(calls.iter().all(|(m, _)| m == "GET"), "{calls:?}");
    let flux = second.flux.as_ref().unwrap();
    assert_eq!(flux.outcome.as_str(), "ready", "{flux:?}");
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}
