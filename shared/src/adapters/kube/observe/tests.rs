//! The mapping from what the API server sends to the classifier's shapes: each input is an
//! upstream example's JSON, each expectation the fixture `confirm` cites for the same source.

use serde_json::{Value, json};

use super::*;
use crate::pure::bootstrap::confirm::fixtures::*;

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// Kubernetes "Deployments" concept page, `kubectl get deployment nginx-deployment -o yaml`'s
/// status: Progressing, then Available.
#[test]
fn a_deployment_reads_its_available_condition() {
    let d: KubeDeployment = typed(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "source-controller", "namespace": "flux-system", "generation": 1},
        "status": {"availableReplicas": 1, "observedGeneration": 1, "conditions": [
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
             "message": "ReplicaSet \"source-controller-6d8f7b9c4\" has successfully progressed.",
             "lastTransitionTime": "2016-10-04T12:25:39Z", "lastUpdateTime": "2016-10-04T12:25:39Z"},
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.",
             "lastTransitionTime": "2016-10-04T12:25:42Z", "lastUpdateTime": "2016-10-04T12:25:42Z"}]}
    }));
    assert_eq!(deployment(&d), deployment_available("source-controller"));
    // Just created: no status at all until the controller manager writes one.
    let fresh: KubeDeployment = typed(json!({"metadata": {"name": "helm-controller"}}));
    assert_eq!(deployment(&fresh).available, None);
}

/// A pod the scheduler refused, as `kubectl get pod -o yaml` shows it (Kubernetes "Debug
/// Pods": a Pending pod's PodScheduled condition).
#[test]
fn a_pending_pod_reads_its_scheduling_condition() {
    let expected = pod_untolerated_taint("kustomize-controller-7cf8d7c9b-q4k2z");
    let p: KubePod = typed(json!({
        "metadata": {"name": "kustomize-controller-7cf8d7c9b-q4k2z", "namespace": "flux-system"},
        "status": {"phase": "Pending", "qosClass": "Burstable", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": expected.scheduled.as_ref().unwrap().message, "lastProbeTime": null,
             "lastTransitionTime": "2025-01-20T10:00:00Z"}]}
    }));
    assert_eq!(pod(&p), expected);
}

/// kubelet's status of a container whose image cannot be pulled (`state.waiting`), with the
/// fields every `ContainerStatus` carries; an init container waiting is read too.
#[test]
fn waiting_containers_are_read_init_containers_first() {
    let image = "ghcr.io/fluxcd/source-controller:v9.9.9";
    let expected = pod_image_pull_backoff("source-controller-6d8f7b9c4-x2x7k", image);
    let status = |name: &str, reason: &str, message: String| {
        json!({"name": name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
               "started": false, "state": {"waiting": {"reason": reason, "message": message}}})
    };
    let mut p: KubePod = typed(json!({
        "metadata": {"name": "source-controller-6d8f7b9c4-x2x7k"},
        "status": {"phase": "Pending",
                   "conditions": [{"type": "PodScheduled", "status": "True"},
                                  {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
                   "containerStatuses": [status("manager", "ImagePullBackOff", format!("Back-off pulling image {image:?}"))]}
    }));
    assert_eq!(pod(&p), expected);

    p.status.as_mut().unwrap().init_container_statuses =
        Some(vec![typed(status("init", "ErrImagePull", "rpc error".into()))]);
    let waiting: Vec<String> = pod(&p).waiting.iter().map(|w| w.container.clone()).collect();
    assert_eq!(waiting, ["init", "manager"]);
}

/// source-controller `docs/spec/v1/gitrepositories.md`, "Artifact example" and "Ready
/// GitRepository".
#[test]
fn a_git_repository_reads_its_artifact_revision() {
    let data = json!({"status": {
        "artifact": {"digest": "sha256:e750c7a46724acaef8f8aa926259af30bbd9face2937f8e3ea0a5dc5fc8b9e2c",
                     "lastUpdateTime": "2022-01-29T06:59:23Z",
                     "path": "gitrepository/default/podinfo/363a6a8fe6a7f13e05d34c163b0ef02a777da20a.tar.gz",
                     "revision": GIT_REVISION, "size": 91318},
        "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
                        "message": format!("stored artifact for revision '{GIT_REVISION}'"),
                        "lastTransitionTime": "2022-01-29T06:59:23Z"}],
        "observedGeneration": 1}});
    assert_eq!(flux_object(&GIT_REPOSITORY, Some(1), &data), git_ready(GIT_REVISION));
}

/// kustomize-controller `docs/spec/v1/kustomizations.md`, "Ready Kustomization" and "Last
/// applied revision"; the artifact is the GitRepository's, not read for a Kustomization.
#[test]
fn a_kustomization_reads_its_last_applied_revision() {
    let data = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                        "observedGeneration": 1, "message": format!("Applied revision: {GIT_REVISION}")}],
        "lastAppliedRevision": GIT_REVISION, "lastAttemptedRevision": GIT_REVISION,
        "observedGeneration": 1}});
    assert_eq!(
        flux_object(&KUSTOMIZATION, Some(1), &data),
        kustomization_ready(GIT_REVISION)
    );
    // Applied, not reconciled yet: the generation only.
    let fresh = flux_object(&KUSTOMIZATION, Some(1), &json!({"spec": {}}));
    assert_eq!(
        fresh,
        FluxObject {
            generation: Some(1),
            ..FluxObject::default()
        }
    );
}

/// flux-operator v0.58.1 `docs/api/v1/fluxinstance.md`, the `kubectl describe` example: no
/// `observedGeneration` beside the conditions (`FluxInstanceStatus` has none); the Ready
/// condition's own and `lastAppliedRevision` are what is read.
#[test]
fn a_flux_instance_reads_its_ready_condition_and_last_applied_revision() {
    let data = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                        "message": "Reconciliation finished in 52s", "observedGeneration": 1,
                        "lastTransitionTime": "2024-06-03T12:20:57Z"}],
        "lastAppliedRevision": FLUX_INSTANCE_REVISION, "lastAttemptedRevision": FLUX_INSTANCE_REVISION}});
    assert_eq!(flux_object(&FLUX_INSTANCE, Some(1), &data), flux_instance_ready());
}

/// The sync objects a FluxInstance makes (flux-operator v0.58.1 `api/v1/fluxinstance_types.go`,
/// `Sync`): its kind, its name, else the instance's namespace.
#[test]
fn a_flux_instance_names_its_sync_objects() {
    let named = json!({"spec": {"sync": {"kind": "OCIRepository", "name": "fleet", "url": "oci://r/f", "ref": "latest", "path": "."}}});
    let (kind, name) = instance_sync(&named, "flux-system").unwrap();
    assert_eq!((kind.kind, name.as_str()), ("OCIRepository", "fleet"));
    let unnamed = json!({"spec": {"sync": {"kind": "GitRepository", "url": "https://g/f", "ref": "refs/heads/main", "path": "."}}});
    let (kind, name) = instance_sync(&unnamed, "flux-system").unwrap();
    assert_eq!((kind.kind, name.as_str()), ("GitRepository", "flux-system"));
    assert!(instance_sync(&json!({"spec": {}}), "flux-system").is_none());
}
