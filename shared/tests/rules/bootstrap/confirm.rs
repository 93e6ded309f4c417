//! cluster-bootstrap: confirming Flux took over, from what the cluster reports. After the apply,
//! one reading through the port (`observe`) and the classifier give each outcome from the status a
//! cluster would show: a working cluster is ready; pods the scheduler refuses for a taint are
//! `unschedulable`, but only at the deadline; an image that cannot be pulled, credentials the Git
//! host refuses and a strict substitution Flux refuses are final once the grace is over; a
//! Kustomization left at an old revision times out naming it. Nothing is reported for objects not
//! applied, a FluxInstance the cluster does not serve reads as absent, and a refused read is
//! classified like every other call.

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::{MemKubeApi, SYNCED_REVISION};
use cellbridge::ports::cluster::kube::{ClusterAuth, Observe, Tuning};
use cellbridge::ports::cluster::{KubeApi, KubeConnect};
use cellbridge::pure::bootstrap::confirm::fixtures::*;
use cellbridge::pure::bootstrap::confirm::{FluxObject, Outcome, Snapshot, Timing, Verdict, classify};
use cellbridge::pure::fleet::MemFleet;
use cellbridge::rules::bootstrap::report::BootstrapOutcome;
use cellbridge::shell::error::{Class, Classify};
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

fn at(elapsed: Duration) -> Timing {
    timing_at(elapsed)
}

/// Before the grace period is over, after it, and at the deadline.
fn early() -> Timing {
    at(MIN)
}
fn after_grace() -> Timing {
    at(6 * MIN)
}
fn at_deadline() -> Timing {
    at(20 * MIN)
}

/// The bed's components with Flux's four controllers.
fn components() -> String {
    let mut text = COMPONENTS.to_owned();
    for name in &CONTROLLERS[1..] {
        text.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec: {{}}\n"
        ));
    }
    text
}

fn four_controllers() -> MemFleet {
    let mut f = fleet(&[]);
    f.insert("clusters/_template/flux-system/gotk-components.yaml", components());
    f
}

/// What to read, the controllers named from the components the bootstrap applied.
fn what() -> Observe {
    let objects = cellbridge::pure::bootstrap::plan::parse_objects(&components(), "gotk-components.yaml").unwrap();
    let controllers = objects
        .into_iter()
        .filter(|(target, _)| target.kind == "Deployment")
        .map(|(target, _)| target.name)
        .collect();
    Observe::flux_system(controllers)
}

/// A connection of an operator's kubeconfig: the bootstrap gave its temporary access back.
async fn connect(bed: &Bed) -> MemKubeApi {
    let path = std::path::Path::new("/home/me/.kube/confirm");
    bed.kube().kubeconfig(path, REGION, CLUSTER);
    bed.kube()
        .connect(ClusterAuth::Kubeconfig(path.into()), &Tuning::default(), false)
        .await
        .unwrap()
}

async fn observe(bed: &Bed) -> Snapshot {
    connect(bed).await.observe(&what()).await.unwrap()
}

async fn verdict(bed: &Bed, timing: Timing) -> Verdict {
    classify(&observe(bed).await, &timing)
}

/// A cluster bootstrapped with the four controllers; its report is then whatever the test sets.
async fn bootstrapped() -> Bed {
    let bed = bed();
    let report = run(&bed, &four_controllers()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    bed
}

/// Applied, never reconciled: a controller that does not run writes no status.
fn no_status() -> FluxObject {
    FluxObject {
        generation: Some(1),
        ..FluxObject::default()
    }
}

#[tokio::test]
async fn nothing_is_reported_before_the_apply_and_a_working_cluster_is_ready_after_it() {
    let bed = bed();
    let before = observe(&bed).await;
    assert!(before.deployments.is_empty() && before.pods.is_empty(), "{before:?}");
    assert!(before.git_repository.is_none() && before.kustomization.is_none());
    let v = classify(&before, &early());
    assert_eq!(v.outcome, Outcome::Confirming, "{v:?}");
    assert!(
        v.sentence.contains("Deployment source-controller to exist"),
        "{}",
        v.sentence
    );

    run(&bed, &four_controllers()).await.unwrap();
    let after = observe(&bed).await;
    assert_eq!(after.deployments.len(), 4, "{after:?}");
    assert_eq!(after.pods.len(), 4, "one pod per Deployment: {after:?}");
    assert_eq!(after.controllers, CONTROLLERS.map(String::from));
    let v = classify(&after, &early());
    assert_eq!(v.outcome, Outcome::Ready, "{v:?}");
    assert!(v.sentence.contains(SYNCED_REVISION), "{}", v.sentence);
}

#[tokio::test]
async fn pods_refused_for_a_taint_are_unschedulable_only_at_the_deadline() {
    let bed = bootstrapped().await;
    for name in CONTROLLERS {
        bed.kube().deployment_status(deployment_unavailable(name));
        bed.kube()
            .pods(name, vec![pod_untolerated_taint(&format!("{name}-6d8f7b9c4-x2x7k"))]);
    }
    // The controllers never ran: no Flux object has a status.
    bed.kube().git_repository_status(no_status());
    bed.kube().kustomization_status(no_status());

    let v = verdict(&bed, after_grace()).await;
    assert_eq!(
        v.outcome,
        Outcome::Confirming,
        "Karpenter may still launch a node: {v:?}"
    );
    assert_eq!(v.suspect, Some(Outcome::Unschedulable));
    let v = verdict(&bed, at_deadline()).await;
    assert_eq!(v.outcome, Outcome::Unschedulable, "{v:?}");
    assert!(
        v.sentence.contains("untolerated taint {CriticalAddonsOnly: }"),
        "{}",
        v.sentence
    );
    assert_eq!(v.outcome.exit_code(), 3);

    // No Node at all is its own reason, first.
    bed.kube().nodes(0);
    assert_eq!(verdict(&bed, at_deadline()).await.outcome, Outcome::NoNodes);
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_is_image_pull_once_the_grace_is_over() {
    let bed = bootstrapped().await;
    let image = "ghcr.io/fluxcd/source-controller:v1.99.0";
    bed.kube()
        .deployment_status(deployment_unavailable("source-controller"));
    bed.kube().pods(
        "source-controller",
        vec![pod_image_pull_backoff("source-controller-6d8f7b9c4-x2x7k", image)],
    );
    bed.kube().git_repository_status(no_status());
    bed.kube().kustomization_status(no_status());

    let v = verdict(&bed, early()).await;
    assert_eq!(v.outcome, Outcome::Confirming, "a registry may answer late: {v:?}");
    assert_eq!(v.suspect, Some(Outcome::ImagePull));
    let v = verdict(&bed, after_grace()).await;
    assert_eq!(v.outcome, Outcome::ImagePull, "{v:?}");
    assert!(
        v.sentence.contains(image) && v.sentence.contains("ImagePullBackOff"),
        "{}",
        v.sentence
    );
}

#[tokio::test]
async fn credentials_the_git_host_refuses_are_git_auth_and_never_quoted() {
    let bed = bootstrapped().await;
    bed.kube().git_repository_status(git_token_refused());
    bed.kube().kustomization_status(no_status());

    assert_eq!(verdict(&bed, early()).await.suspect, Some(Outcome::GitAuth));
    let v = verdict(&bed, after_grace()).await;
    assert_eq!(v.outcome, Outcome::GitAuth, "{v:?}");
    assert!(v.sentence.contains("authentication required"), "{}", v.sentence);
    assert!(!v.sentence.contains("ghp_s3cr3tT0ken"), "{}", v.sentence);
    assert_eq!(v.outcome.exit_code(), 2);
}

#[tokio::test]
async fn a_strict_substitution_flux_refuses_is_build_failed_and_said_so() {
    let bed = bootstrapped().await;
    bed.kube().kustomization_status(kustomization_strict_unset());

    let v = verdict(&bed, after_grace()).await;
    assert_eq!(v.outcome, Outcome::BuildFailed, "{v:?}");
    assert!(v.strict_substitution, "{v:?}");
    assert!(v.sentence.contains("variable not set (strict mode)"), "{}", v.sentence);
    assert_eq!(v.outcome.exit_code(), 1);
}

#[tokio::test]
async fn a_kustomization_left_at_an_old_revision_times_out_naming_both() {
    let bed = bootstrapped().await;
    let old = "main@sha1:1111111111111111111111111111111111111111";
    bed.kube().kustomization_status(kustomization_ready(old));

    let v = verdict(&bed, after_grace()).await;
    assert_eq!(v.outcome, Outcome::Confirming, "{v:?}");
    let v = verdict(&bed, at_deadline()).await;
    assert_eq!(v.outcome, Outcome::TimedOut, "{v:?}");
    assert!(
        v.sentence.contains(SYNCED_REVISION) && v.sentence.contains(old),
        "{}",
        v.sentence
    );
}

#[tokio::test]
async fn a_flux_instance_not_served_is_absent_and_a_refused_read_is_classified() {
    let bed = bootstrapped().await;
    let mut api = connect(&bed).await;
    let operator = Observe {
        flux_instance: Some("flux".into()),
        ..what()
    };
    let s = api.observe(&operator).await.unwrap();
    assert!(s.operator && s.flux_instance.is_none(), "{s:?}");
    assert_eq!(classify(&s, &early()).outcome, Outcome::Confirming);

    for (operation, kind, code, class) in [
        ("list", "Pod", 503, Class::Retryable),
        ("get", "GitRepository", 403, Class::Retryable),
        ("list", "Node", 422, Class::Final),
    ] {
        bed.kube().fail(operation, kind, 1, code);
        let err = api.observe(&what()).await.unwrap_err();
        assert_eq!(err.class(), class, "{err}");
        assert!(err.to_string().contains(&code.to_string()), "{err}");
    }
    // Each fault was spent once: the next reading works.
    assert_eq!(
        classify(&api.observe(&what()).await.unwrap(), &early()).outcome,
        Outcome::Ready
    );
}
