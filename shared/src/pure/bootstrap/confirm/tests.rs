use std::time::Duration;

use super::fixtures::*;
use super::*;

const MIN: Duration = Duration::from_secs(60);

/// Before the grace period, after it, and at the deadline.
fn early() -> Timing {
    Timing {
        elapsed: MIN,
        grace: 5 * MIN,
        deadline: 20 * MIN,
    }
}
fn after_grace() -> Timing {
    Timing {
        elapsed: 6 * MIN,
        ..early()
    }
}
fn at_deadline() -> Timing {
    Timing {
        elapsed: 20 * MIN,
        ..early()
    }
}

/// A components cell whose controllers run and whose Flux objects are as given.
fn cell(git: Option<FluxObject>, ks: Option<FluxObject>) -> Snapshot {
    Snapshot {
        controllers: CONTROLLERS.iter().map(|c| c.to_string()).collect(),
        deployments: CONTROLLERS.iter().map(|c| deployment_available(c)).collect(),
        pods: CONTROLLERS
            .iter()
            .map(|c| pod_running(&format!("{c}-6d8f7b9c4-x2x7k")))
            .collect(),
        nodes: 2,
        git_repository: git,
        kustomization: ks,
        ..Snapshot::default()
    }
}

fn all_timings() -> [Timing; 3] {
    [early(), after_grace(), at_deadline()]
}

#[test]
fn ready_when_both_objects_are_ready_at_the_same_revision() {
    let s = cell(Some(git_ready(GIT_REVISION)), Some(kustomization_ready(GIT_REVISION)));
    for t in all_timings() {
        let v = classify(&s, &t);
        assert_eq!(v.outcome, Outcome::Ready, "{v:?}");
        assert!(v.is_final() && v.awaited.is_empty());
        assert!(v.sentence.contains(GIT_REVISION), "{}", v.sentence);
    }
}

#[test]
fn a_kustomization_still_at_the_old_revision_is_not_ready() {
    let new = "master@sha1:450796ddb2ab6724ee1cc32a4be56da032d1cca0";
    let s = cell(Some(git_ready(new)), Some(kustomization_ready(GIT_REVISION)));
    let v = classify(&s, &after_grace());
    assert_eq!(v.outcome, Outcome::Confirming);
    assert!(
        v.sentence.contains(&format!("to apply revision {new}")),
        "{}",
        v.sentence
    );
    let v = classify(&s, &at_deadline());
    assert_eq!(v.outcome, Outcome::TimedOut);
    assert!(v.sentence.contains(GIT_REVISION), "the last thing seen: {}", v.sentence);
}

#[test]
fn ready_needs_every_controller_available() {
    let mut s = cell(Some(git_ready(GIT_REVISION)), Some(kustomization_ready(GIT_REVISION)));
    s.deployments[2] = deployment_unavailable("helm-controller");
    let v = classify(&s, &after_grace());
    assert_eq!(v.outcome, Outcome::Confirming);
    assert!(
        v.sentence.contains("Deployment helm-controller to be Available"),
        "{}",
        v.sentence
    );
    s.deployments.remove(3);
    let v = classify(&s, &at_deadline());
    assert_eq!(v.outcome, Outcome::TimedOut);
    assert!(
        v.sentence.contains("Deployment notification-controller to exist"),
        "{}",
        v.sentence
    );
}

#[test]
fn a_ready_condition_older_than_the_spec_is_not_trusted() {
    let mut git = git_ready(GIT_REVISION);
    git.generation = Some(2);
    let s = cell(Some(git), Some(kustomization_ready(GIT_REVISION)));
    assert_eq!(classify(&s, &after_grace()).outcome, Outcome::Confirming);
}

#[test]
fn no_nodes_waits_for_the_deadline() {
    let mut s = cell(None, None);
    s.nodes = 0;
    s.pods = vec![pod_no_nodes("source-controller-6d8f7b9c4-x2x7k")];
    for t in [early(), after_grace()] {
        let v = classify(&s, &t);
        assert_eq!(
            (v.outcome, v.suspect),
            (Outcome::Confirming, Some(Outcome::NoNodes)),
            "{v:?}"
        );
        assert!(v.sentence.contains("a node to join the cluster"), "{}", v.sentence);
    }
    assert_eq!(classify(&s, &at_deadline()).outcome, Outcome::NoNodes);
}

#[test]
fn the_scheduler_saying_no_nodes_is_no_nodes_even_with_a_node_count() {
    let mut s = cell(None, None);
    s.pods = vec![pod_no_nodes("kustomize-controller-5f8d-abcde")];
    assert_eq!(classify(&s, &at_deadline()).outcome, Outcome::NoNodes);
}

#[test]
fn unschedulable_carries_the_schedulers_message_at_the_deadline() {
    let mut s = cell(None, None);
    s.pods[0] = pod_untolerated_taint("source-controller-6d8f7b9c4-x2x7k");
    assert_eq!(classify(&s, &after_grace()).suspect, Some(Outcome::Unschedulable));
    let v = classify(&s, &at_deadline());
    assert_eq!(v.outcome, Outcome::Unschedulable);
    assert!(
        v.sentence.contains("untolerated taint {CriticalAddonsOnly: }"),
        "{}",
        v.sentence
    );
}

#[test]
fn image_pull_is_final_after_the_grace_period() {
    let image = "ghcr.io/fluxcd/source-controller:v1.7.0";
    let mut s = cell(None, None);
    s.pods[0] = pod_image_pull_backoff("source-controller-6d8f7b9c4-x2x7k", image);
    let v = classify(&s, &early());
    assert_eq!((v.outcome, v.suspect), (Outcome::Confirming, Some(Outcome::ImagePull)));
    let v = classify(&s, &after_grace());
    assert_eq!(v.outcome, Outcome::ImagePull);
    assert!(
        v.sentence.contains(&format!("Back-off pulling image {image:?}")),
        "{}",
        v.sentence
    );
}

#[test]
fn a_refused_credential_is_git_auth_after_the_grace_period() {
    for git in [git_secret_not_found(), git_key_refused(), git_token_refused()] {
        let s = cell(Some(git), None);
        let v = classify(&s, &early());
        assert_eq!(
            (v.outcome, v.suspect),
            (Outcome::Confirming, Some(Outcome::GitAuth)),
            "{v:?}"
        );
        assert_eq!(classify(&s, &after_grace()).outcome, Outcome::GitAuth);
    }
}

#[test]
fn an_unreachable_remote_is_reported_only_at_the_deadline() {
    for git in [git_no_such_host(), git_app_x509()] {
        let s = cell(Some(git), None);
        let v = classify(&s, &after_grace());
        assert_eq!(
            (v.outcome, v.suspect),
            (Outcome::Confirming, Some(Outcome::GitUnreachable)),
            "{v:?}"
        );
        assert_eq!(classify(&s, &at_deadline()).outcome, Outcome::GitUnreachable);
    }
}

#[test]
fn a_git_failure_of_neither_kind_times_out_with_flux_s_words() {
    let s = cell(Some(git_missing_ref()), None);
    let v = classify(&s, &after_grace());
    assert_eq!((v.outcome, v.suspect), (Outcome::Confirming, None));
    let v = classify(&s, &at_deadline());
    assert_eq!(v.outcome, Outcome::TimedOut);
    assert!(v.sentence.contains("couldn't find remote ref"), "{}", v.sentence);
}

#[test]
fn a_strict_substitution_failure_is_build_failed_and_flagged() {
    let s = cell(Some(git_ready(GIT_REVISION)), Some(kustomization_strict_unset()));
    let v = classify(&s, &early());
    assert_eq!(
        (v.outcome, v.suspect),
        (Outcome::Confirming, Some(Outcome::BuildFailed))
    );
    let v = classify(&s, &after_grace());
    assert_eq!(v.outcome, Outcome::BuildFailed);
    assert!(v.strict_substitution);
    assert!(
        v.sentence.contains("variable not set (strict mode): \"missing\""),
        "{}",
        v.sentence
    );
}

#[test]
fn a_path_missing_from_the_artifact_is_build_failed_without_the_flag() {
    let s = cell(Some(git_ready(GIT_REVISION)), Some(kustomization_path_not_found()));
    let v = classify(&s, &after_grace());
    assert_eq!(v.outcome, Outcome::BuildFailed);
    assert!(!v.strict_substitution);
}

#[test]
fn a_substitution_source_not_found_yet_waits_for_the_deadline() {
    let s = cell(
        Some(git_ready(GIT_REVISION)),
        Some(kustomization_substitute_from_missing()),
    );
    assert_eq!(classify(&s, &after_grace()).outcome, Outcome::Confirming);
    let v = classify(&s, &at_deadline());
    assert_eq!(v.outcome, Outcome::TimedOut);
    assert!(v.sentence.contains("cluster-vars"), "{}", v.sentence);
}

#[test]
fn the_first_cause_wins() {
    let mut s = cell(Some(git_token_refused()), Some(kustomization_strict_unset()));
    s.pods[1] = pod_image_pull_backoff(
        "kustomize-controller-5f8d-abcde",
        "ghcr.io/fluxcd/kustomize-controller:v9",
    );
    assert_eq!(classify(&s, &after_grace()).outcome, Outcome::ImagePull);
    s.pods[1] = pod_running("kustomize-controller-5f8d-abcde");
    assert_eq!(classify(&s, &after_grace()).outcome, Outcome::GitAuth);
}

/// An operator cell whose Flux objects are as given: the operator's Deployment runs, the
/// FluxInstance as given, the sync objects named `fleet` (`spec.sync.name`).
fn operator_cell(fi: Option<FluxObject>, git: Option<FluxObject>, ks: Option<FluxObject>) -> Snapshot {
    Snapshot {
        controllers: vec!["flux-operator".into()],
        deployments: vec![deployment_available("flux-operator")],
        operator: true,
        flux_instance: fi,
        sync_name: "fleet".into(),
        ..cell(git, ks)
    }
}

#[test]
fn a_flux_instance_as_the_operator_reports_it_is_ready_once_its_sync_objects_are() {
    let synced = || (Some(git_ready(GIT_REVISION)), Some(kustomization_ready(GIT_REVISION)));
    let (git, ks) = synced();
    let s = operator_cell(Some(flux_instance_ready()), git, ks);
    let v = classify(&s, &early());
    assert_eq!(v.outcome, Outcome::Ready, "{v:?}");
    assert!(v.awaited.is_empty());
    assert!(
        v.sentence.contains(FLUX_INSTANCE_REVISION) && v.sentence.contains("Kustomization fleet applied"),
        "{}",
        v.sentence
    );
    // Ready=True alone is not enough: the sync objects are still to come.
    let s = operator_cell(Some(flux_instance_ready()), None, None);
    let v = classify(&s, &early());
    assert_eq!(v.outcome, Outcome::Confirming);
    assert!(v.sentence.contains("GitRepository fleet to exist"), "{}", v.sentence);
    // A condition about an older generation, or no revision applied yet, is not Ready.
    let (git, ks) = synced();
    let mut fi = flux_instance_ready();
    fi.generation = Some(2);
    let v = classify(&operator_cell(Some(fi), git, ks), &early());
    assert_eq!(v.outcome, Outcome::Confirming);
    assert!(v.sentence.contains("FluxInstance to be Ready"), "{}", v.sentence);
    let (git, ks) = synced();
    let fi = FluxObject {
        revision: None,
        ..flux_instance_ready()
    };
    assert_eq!(
        classify(&operator_cell(Some(fi), git, ks), &early()).outcome,
        Outcome::Confirming
    );
}

#[test]
fn a_flux_instance_ready_without_waiting_cannot_hide_a_refused_key() {
    // `spec.wait: false`: the operator writes Ready at once; source-controller refuses the key.
    let s = operator_cell(Some(flux_instance_ready()), Some(git_key_refused()), None);
    assert_eq!(classify(&s, &early()).suspect, Some(Outcome::GitAuth));
    let v = classify(&s, &after_grace());
    assert_eq!(v.outcome, Outcome::GitAuth, "{v:?}");
    assert!(
        v.sentence.starts_with("GitRepository fleet is not Ready"),
        "{}",
        v.sentence
    );
}

#[test]
fn an_operator_cell_syncing_from_an_oci_repository_reads_it_as_its_source() {
    let mut s = operator_cell(
        Some(flux_instance_ready()),
        Some(git_ready(GIT_REVISION)),
        Some(kustomization_ready(GIT_REVISION)),
    );
    s.source_kind = "OCIRepository".into();
    assert_eq!(classify(&s, &early()).outcome, Outcome::Ready);
    s.git_repository = None;
    let v = classify(&s, &early());
    assert!(v.sentence.contains("OCIRepository fleet to exist"), "{}", v.sentence);
}

#[test]
fn a_flux_instance_not_ready_takes_its_reason_from_the_rest_or_its_own_build() {
    let mut s = cell(Some(git_token_refused()), None);
    s.operator = true;
    s.flux_instance = Some(FluxObject {
        ready: None,
        ..flux_instance_ready()
    });
    assert_eq!(classify(&s, &after_grace()).outcome, Outcome::GitAuth);
    s.git_repository = None;
    s.flux_instance = Some(flux_instance_build_failed());
    let v = classify(&s, &after_grace());
    assert_eq!(v.outcome, Outcome::BuildFailed);
    assert!(v.sentence.contains("no match found for semver"), "{}", v.sentence);
    s.flux_instance = None;
    let v = classify(&s, &at_deadline());
    assert_eq!(v.outcome, Outcome::TimedOut);
    assert!(v.sentence.contains("FluxInstance to exist"), "{}", v.sentence);
}

#[test]
fn sentences_are_redacted() {
    let s = cell(Some(git_token_refused()), None);
    let v = classify(&s, &after_grace());
    assert!(!v.sentence.contains("ghp_s3cr3tT0ken"), "{}", v.sentence);
    assert!(
        v.sentence.contains("https://flux:[redacted]@github.com/o/fleet"),
        "{}",
        v.sentence
    );

    let mut s = cell(Some(git_ready(GIT_REVISION)), Some(kustomization_dry_run_invalid()));
    s.secrets = vec![Secret::new("apps/db".to_owned())];
    let v = classify(&s, &at_deadline());
    assert_eq!(v.outcome, Outcome::TimedOut);
    assert!(!v.sentence.contains("hunter2"), "{}", v.sentence);
    assert!(!v.sentence.contains("apps/db"), "{}", v.sentence);
    assert!(
        v.sentence.contains("Invalid value: [redacted]: a valid config key"),
        "{}",
        v.sentence
    );
}

#[test]
fn outcomes_serialize_by_their_product_names() {
    let all = [
        (Outcome::Ready, "ready", 0),
        (Outcome::NoNodes, "no-nodes", 3),
        (Outcome::Unschedulable, "unschedulable", 3),
        (Outcome::ImagePull, "image-pull", 3),
        (Outcome::GitAuth, "git-auth", 2),
        (Outcome::GitUnreachable, "git-unreachable", 3),
        (Outcome::BuildFailed, "build-failed", 1),
        (Outcome::TimedOut, "timed-out", 3),
        (Outcome::Confirming, "confirming", 3),
    ];
    for (o, name, code) in all {
        assert_eq!(serde_json::to_value(o).unwrap(), serde_json::json!(name));
        assert_eq!((o.as_str(), o.exit_code()), (name, code));
        assert_eq!(serde_json::from_value::<Outcome>(serde_json::json!(name)).unwrap(), o);
    }
}
