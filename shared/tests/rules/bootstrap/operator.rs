//! cluster-bootstrap of a Flux Operator cell (a `flux-system` holding a FluxInstance): the
//! operator's install manifest, the Git secret named by `spec.sync.pullSecret` and the FluxInstance
//! are applied in order and the access given back; a FluxInstance already there is never
//! overwritten (create-if-missing); the Git credential rules hold for `spec.sync` (a GitHub App for
//! `provider: github`); a dry run plans it; each refusal (a FluxInstance the operator would reject,
//! no operator CRD, both kinds of Flux in one cell) stops the run before anything is applied.

use super::sync_objects::GITHUB_APP_KEY;
use crate::support::bootstrap::*;
use cellbridge::pure::fleet::MemFleet;
use cellbridge::shell::error::{Class, Classify};
use cellbridge::{
    pure::bootstrap::confirm::Outcome, rules::bootstrap::Phase, rules::bootstrap::Request, rules::bootstrap::Target,
    rules::bootstrap::report::BootstrapOutcome,
};
use serde_json::json;

/// The operator's own install manifest (v0.58.1, trimmed; its origin is at its top).
const INSTALL: &str = include_str!(
    "../../../../tests/fixtures/flux-operator/fleet/clusters/_template/flux-system/flux-operator-install.yaml"
);

pub(crate) const INSTANCE: &str = "apiVersion: fluxcd.controlplane.io/v1
kind: FluxInstance
metadata:
  name: flux
  namespace: flux-system
spec:
  distribution:
    version: \"2.x\"
    registry: ghcr.io/fluxcd
  sync:
    kind: GitRepository
    url: https://github.com/acme/fleet
    ref: refs/heads/main
    path: clusters/_template
    pullSecret: flux-system
";

const T: &str = "clusters/_template/flux-system";

/// The bed's cell `CELL` (merged, no `flux-system` of its own) with an operator template.
pub(crate) fn operator_fleet(instance: &str) -> MemFleet {
    let mut f = MemFleet::new();
    f.insert(format!("{T}/flux-operator-install.yaml"), INSTALL);
    f.insert(format!("{T}/flux-instance.yaml"), instance);
    f.insert(
        format!("{T}/kustomization.yaml"),
        "resources:\n  - flux-operator-install.yaml\n  - flux-instance.yaml\n",
    );
    f.insert(
        format!("clusters/{CELL}/cell-metadata.yaml"),
        metadata(CELL, CLUSTER, &[]),
    );
    f
}

const ORDER: [&str; 11] = [
    "Namespace flux-system",
    "CustomResourceDefinition fluxinstances.fluxcd.controlplane.io",
    "CustomResourceDefinition fluxreports.fluxcd.controlplane.io",
    "ServiceAccount flux-system/flux-operator",
    "ClusterRole flux-operator-edit",
    "ClusterRole flux-operator-view",
    "ClusterRoleBinding flux-operator-cluster-admin",
    "Service flux-system/flux-operator",
    "Deployment flux-system/flux-operator",
    "Secret flux-system/flux-system",
    "FluxInstance flux-system/flux",
];

#[tokio::test]
async fn an_operator_cell_gets_the_operator_its_git_secret_and_the_flux_instance_in_order() {
    let bed = bed();
    let report = run(&bed, &operator_fleet(INSTANCE)).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(bed.kube().applied(), ORDER);
    let phases: Vec<Phase> = report.objects.iter().map(|o| o.phase).collect();
    assert!(phases.is_sorted(), "{phases:?}");
    assert_eq!(phases.last(), Some(&Phase::Instance));
    assert_eq!(
        report.components_file.as_deref(),
        Some("clusters/_template/flux-system/flux-operator-install.yaml")
    );
    assert_eq!(
        report.sync_file.as_deref(),
        Some("clusters/_template/flux-system/flux-instance.yaml (written for prod-eu-west-1)")
    );
    // The FluxInstance, written for the cell; no GitRepository of cellbridge's (the operator
    // makes it).
    let fi = bed
        .kube()
        .get(REGION, CLUSTER, "FluxInstance", Some("flux-system"), "flux")
        .unwrap();
    assert_eq!(fi["spec"]["sync"]["path"], format!("clusters/{CELL}"));
    assert_eq!(fi["spec"]["distribution"]["registry"], "ghcr.io/fluxcd");
    // The first check reads the FluxInstance: Ready (upstream's status) is Flux taking over.
    let flux = report.flux.as_ref().unwrap();
    assert_eq!(flux.outcome, Outcome::Ready, "{flux:?}");
    assert!(flux.sentence.contains("FluxInstance"), "{}", flux.sentence);
    let secret = bed
        .kube()
        .get(REGION, CLUSTER, "Secret", Some("flux-system"), "flux-system")
        .unwrap();
    assert!(secret["data"]["password"].is_string());
    assert!(!serde_json::to_string(&report).unwrap().contains(PASSWORD));
    let access = report.access_entry.unwrap();
    assert!(access.temporary && access.removed, "{access:?}");
    assert!(entries(&bed).is_empty());
}

#[tokio::test]
async fn a_flux_instance_already_there_is_never_overwritten() {
    let bed = bed();
    let theirs = json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "FluxInstance",
        "metadata": {"name": "flux", "namespace": "flux-system"},
        "spec": {"distribution": {"version": "2.7.x", "registry": "ghcr.io/fluxcd"}}});
    bed.kube().put(REGION, CLUSTER, theirs.clone());
    let report = run(&bed, &operator_fleet(INSTANCE)).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::AlreadyBootstrapped);
    assert!(bed.kube().applied().is_empty(), "{:?}", bed.kube().applied());
    assert_eq!(
        bed.kube()
            .get(REGION, CLUSTER, "FluxInstance", Some("flux-system"), "flux")
            .unwrap(),
        theirs
    );
    assert!(entries(&bed).is_empty(), "the access is given back");

    // The Kustomization `flux-system` is not what owns an operator cell.
    let bed = self::bed();
    bed.kube().put(
        REGION,
        CLUSTER,
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
               "metadata": {"name": "flux-system", "namespace": "flux-system"}}),
    );
    let report = run(&bed, &operator_fleet(INSTANCE)).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);

    // A second run finds the FluxInstance it applied; `force` applies over it.
    let again = run(&bed, &operator_fleet(INSTANCE)).await.unwrap();
    assert_eq!(again.outcome, BootstrapOutcome::AlreadyBootstrapped);
    let forced = bed
        .run(
            &operator_fleet(INSTANCE),
            &Request {
                force: true,
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(forced.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(bed.kube().applied().len(), 2 * ORDER.len());
}

#[tokio::test]
async fn a_dry_run_plans_an_operator_cell_without_access_or_writes() {
    let bed = bed();
    let report = bed
        .run(
            &operator_fleet(INSTANCE),
            &Request {
                dry_run: true,
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Planned);
    let planned: Vec<String> = report
        .objects
        .iter()
        .map(|o| format!("{} {}", o.phase.describe(), o.target))
        .collect();
    assert_eq!(planned.len(), ORDER.len());
    assert_eq!(
        planned.last().unwrap(),
        "Flux instance FluxInstance flux-system/flux (fluxcd.controlplane.io/v1)"
    );
    assert!(bed.kube().applied().is_empty());
    assert!(!bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")));
}

#[tokio::test]
async fn the_git_credential_rules_hold_for_the_flux_instances_sync() {
    let github = INSTANCE.replace(
        "    pullSecret: flux-system\n",
        "    pullSecret: flux-system\n    provider: github\n",
    );
    // `provider: github` with a password: refused before anything is applied.
    let bed = bed();
    let e = run(&bed, &operator_fleet(&github)).await.unwrap_err();
    assert_eq!(e.class(), Class::Final);
    assert!(e.to_string().contains("`spec.provider: github`"), "{e}");
    assert!(bed.kube().applied().is_empty());
    assert!(entries(&bed).is_empty());
    assert!(!bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")));

    // With a GitHub App: its fields reach the Secret the FluxInstance names.
    let bed = self::bed();
    bed.secrets().put(
        GIT_SECRET,
        json!({"githubAppID": "1234", "githubAppInstallationID": "5678", "githubAppPrivateKey": GITHUB_APP_KEY})
            .to_string(),
    );
    let named = github.replace("pullSecret: flux-system", "pullSecret: fleet-app");
    let report = run(&bed, &operator_fleet(&named)).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let secret = bed
        .kube()
        .get(REGION, CLUSTER, "Secret", Some("flux-system"), "fleet-app")
        .unwrap();
    assert!(secret["data"]["githubAppID"].is_string(), "{secret}");
    assert!(
        bed.kube()
            .applied()
            .contains(&"Secret flux-system/fleet-app".to_owned())
    );

    // An ssh:// URL with HTTPS credentials: the scheme rule.
    let bed = self::bed();
    let ssh = INSTANCE.replace("https://github.com/acme/fleet", "ssh://git@github.com/acme/fleet");
    let e = run(&bed, &operator_fleet(&ssh)).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("holds HTTPS credentials but Flux syncs from ssh://"),
        "{e}"
    );
    assert!(bed.kube().applied().is_empty());
}

#[tokio::test]
async fn each_refusal_stops_the_run_before_anything_is_applied() {
    let no_crd = {
        let mut f = MemFleet::new();
        f.insert(format!("{T}/flux-instance.yaml"), INSTANCE);
        f.insert(
            format!("clusters/{CELL}/cell-metadata.yaml"),
            metadata(CELL, CLUSTER, &[]),
        );
        f
    };
    let mixed = {
        let mut f = operator_fleet(INSTANCE);
        f.insert(format!("{T}/gotk-components.yaml"), COMPONENTS);
        f
    };
    let cases: [(&str, MemFleet, &str); 5] = [
        (
            "a FluxInstance without a version",
            operator_fleet(&INSTANCE.replace("    version: \"2.x\"\n", "")),
            "flux-instance.yaml, document 1: FluxInstance field `spec.distribution.version`: missing",
        ),
        (
            "a FluxInstance named otherwise",
            operator_fleet(&INSTANCE.replace("name: flux\n", "name: main\n")),
            "FluxInstance field `metadata.name`: `main`: the only accepted name for a FluxInstance is 'flux'",
        ),
        (
            "a sync kind the operator does not know",
            operator_fleet(&INSTANCE.replace("kind: GitRepository", "kind: Git")),
            "FluxInstance field `spec.sync.kind`: `Git` is not one of",
        ),
        (
            "no operator CRD",
            no_crd,
            "no YAML file below clusters/_template/ defines the CustomResourceDefinition `fluxinstances.fluxcd.controlplane.io`",
        ),
        (
            "both kinds of Flux",
            mixed,
            "holds both a FluxInstance (clusters/_template/flux-system/flux-instance.yaml) and clusters/_template/flux-system/gotk-components.yaml",
        ),
    ];
    for (what, fleet, says) in cases {
        let bed = bed();
        let e = run(&bed, &fleet).await.unwrap_err();
        assert_eq!(e.class(), Class::Final, "{what}");
        assert!(e.to_string().contains(says), "{what}: {e}");
        assert!(e.to_string().ends_with("nothing was applied"), "{what}: {e}");
        assert!(bed.kube().applied().is_empty(), "{what}");
        assert!(
            !bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")),
            "{what}: no access entry before the plan holds"
        );
    }
}

/// With `spec.wait: false` the operator reports its FluxInstance Ready right after applying
/// (flux-operator v0.58.1 `api/v1/fluxinstance_types.go`, `Wait`): the sync objects it made, named
/// by `spec.sync.name`, decide; a refused key is `git-auth`, and the re-checks read the same
/// names, the message carrying them.
#[tokio::test]
async fn a_flux_instance_ready_without_waiting_is_git_auth_while_its_source_refuses_the_key() {
    use cellbridge::pure::bootstrap::confirm::fixtures::git_key_refused;
    let instance = INSTANCE.replace("  sync:\n", "  wait: false\n  sync:\n    name: fleet\n");
    let mut s = settings();
    s.confirm.grace = std::time::Duration::from_secs(600);
    let bed = bed_with(s);
    bed.kube().git_repository_status(git_key_refused());
    let report = run(&bed, &operator_fleet(&instance)).await.unwrap();
    let flux = report.flux.as_ref().unwrap();
    assert_eq!(
        (flux.outcome, flux.suspect),
        (Outcome::Confirming, Some(Outcome::GitAuth)),
        "{flux:?}"
    );
    assert!(
        flux.sentence.contains("GitRepository fleet is not Ready"),
        "{}",
        flux.sentence
    );
    let (next, _) = report.recheck.clone().unwrap();
    assert_eq!(
        next.sync.as_deref(),
        Some("fleet"),
        "the sync name goes with the re-check"
    );
    assert!(next.to_body().contains(r#""sync":"fleet""#));

    let rep = bed.recheck(&next, Target::Eks, None).await.unwrap();
    let flux = rep.flux.unwrap();
    assert_eq!(flux.suspect, Some(Outcome::GitAuth), "{flux:?}");
    assert!(
        flux.sentence.contains("GitRepository fleet is not Ready"),
        "{}",
        flux.sentence
    );
}
