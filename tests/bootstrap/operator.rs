//! cluster-bootstrap end to end for a Flux Operator cell: a new cell's cluster, found by its tag,
//! gets the operator from the template's install manifest (upstream's own, trimmed:
//! `tests/fixtures/flux-operator/`), its CRDs Established before the rest, the Git secret named
//! by `spec.sync.pullSecret` from Secrets Manager and the FluxInstance written for the cell, over
//! moto and the fake Kubernetes API server; a second run finds the FluxInstance and writes nothing.
//! Its confirmation reads the FluxInstance as the operator reports it (its CRD prunes any other
//! status field), then the sync objects it made: `git-auth` while the source refuses the key
//! though the instance says Ready (`spec.wait: false`), `ready` once the Kustomization applied.

use crate::support::*;
use cellbridge::pure::bootstrap::confirm::fixtures::FLUX_INSTANCE_REVISION;
use cellbridge::pure::fleet::LocalFleet;
use cellbridge::{rules::bootstrap::Phase, rules::bootstrap::report::BootstrapOutcome};
use cellbridge_tests::kube::KubeFake;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// What the Flux Operator does once its FluxInstance is in (flux-operator v0.58.1): Flux's CRDs
/// (the fixture's `gotk-components.yaml`, GitRepository and Kustomization), and the sync objects
/// of `spec.sync` as `internal/builder/templates.go` (`syncTmpl`) writes them, named `name`.
fn operator_installs_flux(kube: &KubeFake, name: &str) {
    let path = fixture_fleet().join("clusters/_template/flux-system/gotk-components.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    for doc in text.split("\n---\n").filter(|d| {
        d.contains("name: gitrepositories.source.toolkit.fluxcd.io")
            || d.contains("name: kustomizations.kustomize.toolkit.fluxcd.io")
    }) {
        let (_, crd) = cellbridge::pure::bootstrap::plan::parse_objects(doc, "gotk-components.yaml")
            .unwrap()
            .remove(0);
        kube.put_object(crd);
    }
    let fi = kube.objects(Some("FluxInstance")).remove(0);
    let sync = &fi["spec"]["sync"];
    kube.put_object_when_served(
        json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1m", "ref": {"name": sync["ref"]}, "secretRef": {"name": sync["pullSecret"]},
                 "url": sync["url"]}}),
    );
    kube.put_object_when_served(
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "10m0s", "path": sync["path"], "prune": true,
                 "sourceRef": {"kind": "GitRepository", "name": name}}}),
    );
}

/// kube-controller-manager's Available condition (`pkg/controller/deployment/util/deployment_util.go`).
fn available(kube: &KubeFake, name: &str) {
    kube.set_status(
        "apps/v1",
        "Deployment",
        Some("flux-system"),
        name,
        json!({"observedGeneration": 1, "replicas": 1,
               "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                               "message": "Deployment has minimum availability.",
                               "lastTransitionTime": "2025-01-20T10:00:00Z", "lastUpdateTime": "2025-01-20T10:00:00Z"}]}),
    );
}

/// source-controller's status for the GitRepository (v1.9.1 `docs/spec/v1/gitrepositories.md`:
/// "Ready GitRepository", "Artifact example"; a failure keeps no artifact here).
fn source_status(kube: &KubeFake, status: &str, reason: &str, message: &str) {
    let generation = flux_object(kube, "GitRepository")["metadata"]["generation"].clone();
    let mut st = json!({"observedGeneration": generation,
        "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message,
                        "observedGeneration": generation, "lastTransitionTime": "2025-01-20T10:00:00Z"}]});
    if status == "True" {
        let revision = message.split('\'').nth(1).unwrap();
        st["artifact"] = json!({"digest": "sha256:e750c7a46724acaef8f8aa926259af30bbd9face2ae065ae8896ba5ee5ab832b",
            "lastUpdateTime": "2022-01-29T06:59:23Z", "revision": revision, "size": 91318,
            "path": "gitrepository/flux-system/flux-system/363a6a8fe6a7f13e05d34c163b0ef02a777da20a.tar.gz",
            "url": "http://source-controller.flux-system.svc.cluster.local./gitrepository/flux-system/flux-system/363a6a8fe6a7f13e05d34c163b0ef02a777da20a.tar.gz"});
    }
    kube.set_status(
        "source.toolkit.fluxcd.io/v1",
        "GitRepository",
        Some("flux-system"),
        "flux-system",
        st,
    );
}

/// kustomize-controller's status (`docs/spec/v1/kustomizations.md`, "Ready Kustomization").
fn kustomization_applied(kube: &KubeFake, revision: &str) {
    let generation: Value = flux_object(kube, "Kustomization")["metadata"]["generation"].clone();
    kube.set_status(
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        Some("flux-system"),
        "flux-system",
        json!({"observedGeneration": generation, "lastAppliedRevision": revision, "lastAttemptedRevision": revision,
               "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                               "message": format!("Applied revision: {revision}"),
                               "observedGeneration": generation, "lastTransitionTime": "2025-01-20T10:01:00Z"}]}),
    );
}

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

    // The operator at work: Flux's CRDs and the sync objects of `spec.sync`, its own status as it
    // writes it, plus the field the confirmation used to need: the CRD does not declare it, and
    // the API server drops it.
    bed.kube
        .control("POST", "/_fake/auto-ready", Some(json!({"enabled": false})));
    operator_installs_flux(&bed.kube, "flux-system");
    bed.kube.nodes(2);
    available(&bed.kube, "flux-operator");
    let fi_status = json!({"lastAppliedRevision": FLUX_INSTANCE_REVISION,
        "lastAttemptedRevision": FLUX_INSTANCE_REVISION,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                        "message": "Reconciliation finished in 52s", "observedGeneration": 1,
                        "lastTransitionTime": "2024-06-03T12:20:57Z"}]});
    let mut written = fi_status.clone();
    written["observedGeneration"] = json!(1);
    bed.kube.set_status(
        "fluxcd.controlplane.io/v1",
        "FluxInstance",
        Some("flux-system"),
        "flux",
        written,
    );
    assert_eq!(
        bed.kube.objects(Some("FluxInstance"))[0]["status"],
        fi_status,
        "pruned by the CRD"
    );

    // `spec.wait: false`: the instance is Ready at once while source-controller refuses the key.
    source_status(
        &bed.kube,
        "False",
        "GitOperationFailed",
        &format!(
            "failed to checkout and determine revision: unable to clone '{GIT_URL}': ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain"
        ),
    );
    let mut now_final = settings(&bed.secret);
    now_final.confirm.grace = std::time::Duration::ZERO;
    bed.kube.clear_requests();
    let second = bed.run_with(&bed.request(), now_final.clone()).await.unwrap();
    assert_eq!(second.outcome, BootstrapOutcome::AlreadyBootstrapped);
    assert!(bed.writes().is_empty(), "second run wrote: {:?}", bed.writes());
    let calls = calls(&bed.kube);
    assert_eq!(
        calls[0].1, "/apis/fluxcd.controlplane.io/v1/namespaces/flux-system/fluxinstances/flux",
        "one read of the FluxInstance decides: {calls:?}"
    );
    assert!(calls.iter().all(|(m, _)| m == "GET"), "{calls:?}");
    let flux = second.flux.as_ref().unwrap();
    assert_eq!(flux.outcome.as_str(), "git-auth", "{flux:?}");
    assert!(
        flux.sentence.contains("GitRepository flux-system is not Ready"),
        "{}",
        flux.sentence
    );

    // The key accepted and the sync applied: ready.
    let revision = "refs/heads/main@sha1:363a6a8fe6a7f13e05d34c163b0ef02a777da20a";
    source_status(
        &bed.kube,
        "True",
        "Succeeded",
        &format!("stored artifact for revision '{revision}'"),
    );
    kustomization_applied(&bed.kube, revision);
    let third = bed.run_with(&bed.request(), now_final).await.unwrap();
    let flux = third.flux.as_ref().unwrap();
    assert_eq!(flux.outcome.as_str(), "ready", "{flux:?}");
    assert!(flux.sentence.contains(FLUX_INSTANCE_REVISION), "{}", flux.sentence);
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}
