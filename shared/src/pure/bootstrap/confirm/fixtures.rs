//! Status shapes as upstream writes them, one source each, cited beside it. Where upstream
//! wraps an error in a format string, the format string is the source and the wrapped text is
//! named with its own origin.

use super::{Condition, ConditionStatus, Deployment, FluxObject, Pod, Waiting};

/// The clocks the confirmation tests read a cluster with: a 5-minute grace, a 20-minute deadline,
/// `elapsed` since the apply.
pub fn timing_at(elapsed: std::time::Duration) -> super::Timing {
    const MIN: std::time::Duration = std::time::Duration::from_secs(60);
    super::Timing {
        elapsed,
        grace: 5 * MIN,
        deadline: 20 * MIN,
    }
}

pub const CONTROLLERS: [&str; 4] = [
    "source-controller",
    "kustomize-controller",
    "helm-controller",
    "notification-controller",
];

pub fn condition(status: &str, reason: &str, message: &str, observed_generation: Option<i64>) -> Condition {
    Condition {
        status: ConditionStatus::parse(status),
        reason: reason.into(),
        message: message.into(),
        observed_generation,
    }
}

/// Kubernetes, `pkg/controller/deployment/util/deployment_util.go`: `MinimumReplicasAvailable`
/// with "Deployment has minimum availability." (the Available condition of every Deployment
/// whose replicas are up, as the "Deployments" concept page's status shows).
pub fn deployment_available(name: &str) -> Deployment {
    Deployment {
        name: name.into(),
        available: Some(condition(
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            None,
        )),
    }
}

/// Kubernetes, same file: `MinimumReplicasUnavailable`, "Deployment does not have minimum
/// availability."
pub fn deployment_unavailable(name: &str) -> Deployment {
    Deployment {
        name: name.into(),
        available: Some(condition(
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            None,
        )),
    }
}

/// kube-scheduler, `pkg/scheduler/schedule_one.go`: `ErrNoNodesAvailable`, "no nodes available
/// to schedule pods", recorded as PodScheduled=False reason `Unschedulable` (`v1.PodReasonUnschedulable`).
pub fn pod_no_nodes(name: &str) -> Pod {
    pod_unschedulable(name, "no nodes available to schedule pods")
}

/// A pod the scheduler could not place, with its message.
fn pod_unschedulable(name: &str, message: &str) -> Pod {
    Pod {
        name: name.into(),
        phase: "Pending".into(),
        scheduled: Some(condition("False", "Unschedulable", message, None)),
        waiting: vec![],
    }
}

/// kube-scheduler's FitError ("0/%v nodes are available: %v.") around the TaintToleration
/// plugin's reason, `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`
/// ("node(s) had untolerated taint {%s: %s}"); the taint is EKS Auto Mode's system node pool's.
pub fn pod_untolerated_taint(name: &str) -> Pod {
    pod_unschedulable(
        name,
        "0/2 nodes are available: 2 node(s) had untolerated taint {CriticalAddonsOnly: }. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    )
}

/// kubelet, `pkg/kubelet/images/image_manager.go`: `Back-off pulling image %q` with
/// `ErrImagePullBackOff` ("ImagePullBackOff", `pkg/kubelet/images/types.go`).
pub fn pod_image_pull_backoff(name: &str, image: &str) -> Pod {
    Pod {
        name: name.into(),
        phase: "Pending".into(),
        scheduled: Some(condition("True", "", "", None)),
        waiting: vec![Waiting {
            container: "manager".into(),
            reason: "ImagePullBackOff".into(),
            message: format!("Back-off pulling image {image:?}"),
        }],
    }
}

pub fn pod_running(name: &str) -> Pod {
    Pod {
        name: name.into(),
        phase: "Running".into(),
        scheduled: Some(condition("True", "", "", None)),
        waiting: vec![],
    }
}

/// source-controller `docs/spec/v1/gitrepositories.md`: "Ready GitRepository" (`Ready`, `True`,
/// `Succeeded`) and "Artifact example" (the revision); the message is
/// `gitrepository_controller.go`'s "stored artifact for revision '%s'".
pub const GIT_REVISION: &str = "master@sha1:363a6a8fe6a7f13e05d34c163b0ef02a777da20a";

pub fn git_ready(revision: &str) -> FluxObject {
    FluxObject {
        generation: Some(1),
        observed_generation: Some(1),
        ready: Some(condition(
            "True",
            "Succeeded",
            &format!("stored artifact for revision '{revision}'"),
            Some(1),
        )),
        revision: Some(revision.into()),
    }
}

/// source-controller `internal/controller/gitrepository_controller_test.go`, "Include get
/// failure makes CheckoutFailed=True": `AuthenticationFailed`, the secret not found.
pub fn git_secret_not_found() -> FluxObject {
    failing_git(
        "AuthenticationFailed",
        "failed to get secret '/non-existing': secrets \"non-existing\" not found",
    )
}

/// `gitrepository_controller.go`'s `failed to checkout and determine revision: %w` around
/// fluxcd/pkg `git/gogit/clone.go`'s `unable to clone '%s': %w`, with the error fluxcd/pkg
/// `git/gogit/clone_test.go` (`Test_ssh_KeyTypes`, "unauthorized key") expects from a refused key.
pub fn git_key_refused() -> FluxObject {
    failing_git(
        "GitOperationFailed",
        "failed to checkout and determine revision: unable to clone 'ssh://git@github.com/o/fleet': ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain",
    )
}

/// The same wrapping around go-git's `transport.ErrAuthenticationRequired` ("authentication
/// required", `plumbing/transport/common.go`), the answer to a refused HTTPS token; the URL
/// carries one, as Flux accepts.
pub fn git_token_refused() -> FluxObject {
    failing_git(
        "GitOperationFailed",
        "failed to checkout and determine revision: unable to clone 'https://flux:ghp_s3cr3tT0ken@github.com/o/fleet': authentication required",
    )
}

/// The same wrapping around Go's `net.DNSError` ("lookup %s on %s: no such host") under
/// `dial tcp`, as `net/http` reports a name that does not resolve.
pub fn git_no_such_host() -> FluxObject {
    failing_git(
        "GitOperationFailed",
        "failed to checkout and determine revision: unable to clone 'https://github.com/o/fleet': Get \"https://github.com/o/fleet/info/refs?service=git-upload-pack\": dial tcp: lookup github.com on 172.20.0.10:53: no such host",
    )
}

/// source-controller `gitrepository_controller_test.go`, "HTTPS with GitHub App without CA":
/// `AuthenticationFailed` with an `x509: ` message (the TLS handshake to the GitHub API).
pub fn git_app_x509() -> FluxObject {
    failing_git("AuthenticationFailed", "x509: certificate signed by unknown authority")
}

/// source-controller `docs/spec/v1/gitrepositories.md`, "Describe the GitRepository": a branch
/// that does not exist; the condition at generation 2, the object's status still at 1.
pub fn git_missing_ref() -> FluxObject {
    FluxObject {
        generation: Some(2),
        observed_generation: Some(1),
        ready: Some(condition(
            "False",
            "GitOperationFailed",
            "failed to checkout and determine revision: unable to clone 'https://github.com/stefanprodan/podinfo': couldn't find remote ref \"refs/heads/invalid\"",
            Some(2),
        )),
        revision: None,
    }
}

fn failing_git(reason: &str, message: &str) -> FluxObject {
    FluxObject {
        generation: Some(1),
        observed_generation: None,
        ready: Some(condition("False", reason, message, Some(1))),
        revision: None,
    }
}

/// kustomize-controller `docs/spec/v1/kustomizations.md`: "Ready Kustomization" (`Ready`,
/// `True`, `ReconciliationSucceeded`, "Applied revision: …") and "Last applied revision".
pub fn kustomization_ready(revision: &str) -> FluxObject {
    FluxObject {
        generation: Some(1),
        observed_generation: Some(1),
        ready: Some(condition(
            "True",
            "ReconciliationSucceeded",
            &format!("Applied revision: {revision}"),
            Some(1),
        )),
        revision: Some(revision.into()),
    }
}

/// kustomize-controller `docs/spec/v1/kustomizations.md`, "Describe the Kustomization": a path
/// not in the artifact (`ArtifactFailed`), condition at generation 3, status at 2.
pub fn kustomization_path_not_found() -> FluxObject {
    FluxObject {
        generation: Some(3),
        observed_generation: Some(2),
        ready: Some(condition(
            "False",
            "ArtifactFailed",
            "kustomization path not found: stat /tmp/kustomization-1464362706/invalid: no such file or directory",
            Some(3),
        )),
        revision: Some("master/67e2c98a60dc92283531412a9e604dd4bae005a9".into()),
    }
}

/// kustomize-controller `internal/controller/kustomization_varsub_test.go`
/// (`TestKustomizationReconciler_VarsubStrict`): `BuildFailed` whose message holds "variable not
/// set" for the manifest's `missing: ${missing}`; the words are those the controller's
/// `post build failed for '%s/%s': %w` wraps around fluxcd/pkg `kustomize_varsub.go`
/// (`envsubst error: %w`, `variable substitution failed: %w`) and `envsubst/template.go`'s
/// `errVarNotSet`.
pub fn kustomization_strict_unset() -> FluxObject {
    failing_kustomization(
        "BuildFailed",
        "post build failed for 'ServiceAccount.v1.[noGrp]/abcde': envsubst error: variable substitution failed: variable not set (strict mode): \"missing\"",
    )
}

/// fluxcd/pkg `kustomize/kustomize_varsub.go` (`LoadVariables`): `substitute from
/// 'ConfigMap/%s' error: %w` around the API server's NotFound, reported `BuildFailed`.
pub fn kustomization_substitute_from_missing() -> FluxObject {
    failing_kustomization(
        "BuildFailed",
        "substitute from 'ConfigMap/cluster-vars' error: configmaps \"cluster-vars\" not found",
    )
}

/// kustomize-controller `kustomization_controller.go`: a dry-run the API server rejects is
/// `ReconciliationFailed`; apimachinery's `field.Invalid` quotes the value back.
pub fn kustomization_dry_run_invalid() -> FluxObject {
    failing_kustomization(
        "ReconciliationFailed",
        "Secret/apps/db dry-run failed (Invalid): Secret \"db\" is invalid: data[password]: Invalid value: \"hunter2-\\\"quoted\\\"\": a valid config key must consist of alphanumeric characters",
    )
}

fn failing_kustomization(reason: &str, message: &str) -> FluxObject {
    FluxObject {
        generation: Some(1),
        observed_generation: None,
        ready: Some(condition("False", reason, message, Some(1))),
        revision: None,
    }
}

/// flux-operator v0.58.1 `docs/api/v1/fluxinstance.md`, the `kubectl describe` example: `Ready`,
/// `True`, `ReconciliationSucceeded`, "Reconciliation finished in 52s", the condition's
/// `Observed Generation: 1`, `Last Applied Revision`. No `observedGeneration` beside the
/// conditions: `FluxInstanceStatus` (`api/v1/fluxinstance_types.go`) has none, and its CRD's
/// schema prunes one written there. The same status whatever `spec.wait` says: with `wait: false`
/// it is written right after the apply, before any health check.
pub fn flux_instance_ready() -> FluxObject {
    FluxObject {
        generation: Some(1),
        observed_generation: None,
        ready: Some(condition(
            "True",
            "ReconciliationSucceeded",
            "Reconciliation finished in 52s",
            Some(1),
        )),
        revision: Some(FLUX_INSTANCE_REVISION.into()),
    }
}

/// The distribution the example's instance applied.
pub const FLUX_INSTANCE_REVISION: &str =
    "v2.3.0@sha256:4cc5babdb1279ad0177bf513292deadbfa3f7b7c3da0be7fa53b39ab434f7219";

/// flux-operator `internal/controller/fluxinstance_controller.go`: a build failure is Ready=False
/// `BuildFailed` with "build failed: %s" (and Stalled), here around `internal/builder/semver.go`'s
/// "no match found for semver: %s" for a distribution version that does not exist.
pub fn flux_instance_build_failed() -> FluxObject {
    FluxObject {
        generation: Some(1),
        observed_generation: None,
        ready: Some(condition(
            "False",
            "BuildFailed",
            "build failed: no match found for semver: 2.99.x",
            Some(1),
        )),
        revision: None,
    }
}
