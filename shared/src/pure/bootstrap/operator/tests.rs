//! A Flux Operator cell's plan and its refusals, over an in-memory fleet with the operator's own
//! (trimmed) install manifest.

use super::*;
use crate::pure::bootstrap::gitsecret;
use crate::pure::fleet::MemFleet;

const INSTALL: &str = include_str!(
    "../../../../../tests/fixtures/flux-operator/fleet/clusters/_template/flux-system/flux-operator-install.yaml"
);

const INSTANCE: &str = "apiVersion: fluxcd.controlplane.io/v1
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
    path: ./clusters/_template
    pullSecret: fleet-git
";

const T: &str = "clusters/_template/flux-system";

fn fleet(instance: &str) -> MemFleet {
    let mut f = MemFleet::new();
    f.insert(format!("{T}/flux-operator-install.yaml"), INSTALL);
    f.insert(format!("{T}/flux-instance.yaml"), instance);
    f.insert(
        format!("{T}/kustomization.yaml"),
        "resources:\n  - flux-operator-install.yaml\n  - flux-instance.yaml\n",
    );
    f
}

fn credentials(cell: &OperatorCell) -> GitCredentials {
    let text = serde_json::json!({"username": "git", "password": "pw"}).to_string();
    gitsecret::parse("cellbridge/flux-git", &text, &cell.repository()).unwrap()
}

fn refused(f: &MemFleet) -> String {
    read(f, "c1", &FluxGit::default()).unwrap_err().to_string()
}

/// The template's FluxInstance with `from` replaced by `to`.
fn instance_with(from: &str, to: &str) -> String {
    assert!(INSTANCE.contains(from), "{from}");
    INSTANCE.replacen(from, to, 1)
}

#[test]
fn a_template_flux_instance_is_an_operator_cell_applied_in_order_and_written_for_the_cell() {
    let cell = read(&fleet(INSTANCE), "c1", &FluxGit::default()).unwrap().unwrap();
    assert_eq!(cell.dir, "clusters/_template");
    assert_eq!(cell.operator_file, format!("{T}/flux-operator-install.yaml"));
    assert_eq!(cell.instance_file, format!("{T}/flux-instance.yaml (written for c1)"));
    assert_eq!(cell.pull_secret(), "fleet-git");
    let owner = cell.owner();
    assert_eq!(
        owner.target.to_string(),
        "FluxInstance flux-system/flux (fluxcd.controlplane.io/v1)"
    );
    assert_eq!(owner.plural, "fluxinstances");
    let creds = credentials(&cell);
    let steps = cell.build(&creds);
    let got: Vec<(Phase, String)> = steps
        .iter()
        .map(|s| (s.phase, format!("{} {}", s.target.kind, s.target.name)))
        .collect();
    let want = [
        (Phase::Namespace, "Namespace flux-system"),
        (
            Phase::Crd,
            "CustomResourceDefinition fluxinstances.fluxcd.controlplane.io",
        ),
        (
            Phase::Crd,
            "CustomResourceDefinition fluxreports.fluxcd.controlplane.io",
        ),
        (Phase::Component, "ServiceAccount flux-operator"),
        (Phase::Component, "ClusterRole flux-operator-edit"),
        (Phase::Component, "ClusterRole flux-operator-view"),
        (Phase::Component, "ClusterRoleBinding flux-operator-cluster-admin"),
        (Phase::Component, "Service flux-operator"),
        (Phase::Component, "Deployment flux-operator"),
        (Phase::GitSecret, "Secret fleet-git"),
        (Phase::Instance, "FluxInstance flux"),
    ];
    let want: Vec<(Phase, String)> = want.iter().map(|(p, s)| (*p, (*s).to_owned())).collect();
    assert_eq!(got, want);
    let secret = steps[9].object();
    assert_eq!(secret["metadata"]["name"], "fleet-git");
    assert_eq!(secret["metadata"]["namespace"], "flux-system");
    assert!(secret["data"]["password"].is_string());
    let instance = steps[10].object();
    assert_eq!(instance["spec"]["sync"]["path"], "./clusters/c1");
    assert_eq!(instance["spec"]["sync"]["url"], "https://github.com/acme/fleet");
    assert_eq!(instance["spec"]["sync"]["ref"], "refs/heads/main");
    assert_eq!(instance["spec"]["distribution"]["version"], "2.x");
}

#[test]
fn the_configured_url_and_branch_reach_a_template_instance_as_the_pull_request_writes_it() {
    let flux = FluxGit {
        url: Some("https://git.example.com/fleet".into()),
        branch: Some("release".into()),
        base_branch: Some("main".into()),
    };
    let f = fleet(&instance_with("path: ./clusters/_template", "path: clusters/_template"));
    let cell = read(&f, "c1", &flux).unwrap().unwrap();
    assert_eq!(cell.repository().url, "https://git.example.com/fleet");
    let creds = credentials(&cell);
    let steps = cell.build(&creds);
    let sync = &steps.last().unwrap().object()["spec"]["sync"];
    assert_eq!(sync["path"], "clusters/c1");
    assert_eq!(sync["ref"], "refs/heads/release");
    assert_eq!(sync["url"], "https://git.example.com/fleet");

    // What state-sync refuses for a new cell, the bootstrap refuses too.
    let pinned = fleet(&instance_with("refs/heads/main", "refs/tags/v1.0.0"));
    let e = read(&pinned, "c1", &flux).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{T}/flux-instance.yaml: ")) && e.contains("CELLBRIDGE_FLUX_GIT_BRANCH cannot apply"),
        "{e}"
    );
    let elsewhere = fleet(&instance_with("path: ./clusters/_template", "path: ./clusters/other"));
    let e = read(&elsewhere, "c1", &FluxGit::default()).unwrap_err().to_string();
    assert!(e.contains("`spec.sync.path` is `./clusters/other`"), "{e}");
}

const O: &str = "clusters/c1/flux-system";

/// The cell `c1` merged with its own operator files (and the template's still there).
fn own_fleet(instance: &str) -> MemFleet {
    let mut f = fleet(INSTANCE);
    f.insert(format!("{O}/flux-operator-install.yaml"), INSTALL);
    f.insert(
        format!("{O}/flux-instance.yaml"),
        instance.replace("./clusters/_template", "./clusters/c1"),
    );
    f
}

#[test]
fn the_cells_own_flux_instance_is_applied_as_it_is_and_a_gotk_cell_is_none() {
    let mut f = own_fleet(&instance_with("ref: refs/heads/main", "ref: refs/tags/v2"));
    f.insert(
        "clusters/c1/layers.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    );
    let cell = read(&f, "c1", &FluxGit::default()).unwrap().unwrap();
    assert_eq!(cell.dir, "clusters/c1");
    assert_eq!(cell.operator_file, format!("{O}/flux-operator-install.yaml"));
    assert_eq!(cell.instance_file, format!("{O}/flux-instance.yaml"));
    assert_eq!(cell.sync_name(), "flux-system");
    let creds = credentials(&cell);
    let steps = cell.build(&creds);
    let sync = &steps.last().unwrap().object()["spec"]["sync"];
    assert_eq!(sync["path"], "./clusters/c1");
    assert_eq!(sync["ref"], "refs/tags/v2");

    // A cell of gotk-components.yaml and gotk-sync.yaml: not the operator's, whatever the
    // template holds (the cell's own `flux-system/` decides).
    let mut g = fleet(INSTANCE);
    g.insert(
        "clusters/c1/flux-system/gotk-components.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n",
    );
    assert!(read(&g, "c1", &FluxGit::default()).unwrap().is_none());
    let mut t = MemFleet::new();
    t.insert("clusters/_template/flux-system/gotk-sync.yaml", "---\n");
    assert!(read(&t, "c1", &FluxGit::default()).unwrap().is_none());
}

#[test]
fn any_yaml_file_of_the_directory_counts_but_a_symlink() {
    let mut f = MemFleet::new();
    f.insert("clusters/_template/operator/install.yml", INSTALL);
    f.insert("clusters/_template/flux.yaml", INSTANCE);
    f.insert("clusters/_template/README.md", "FluxInstance notes\n");
    let cell = read(&f, "c1", &FluxGit::default()).unwrap().unwrap();
    assert_eq!(cell.operator_file, "clusters/_template/operator/install.yml");
    assert_eq!(cell.instance_file, "clusters/_template/flux.yaml (written for c1)");
    // One file may hold both: the FluxInstance is applied last, once.
    let mut one = MemFleet::new();
    one.insert(format!("{T}/all.yaml"), format!("{INSTALL}\n---\n{INSTANCE}"));
    let cell = read(&one, "c1", &FluxGit::default()).unwrap().unwrap();
    let creds = credentials(&cell);
    let steps = cell.build(&creds);
    assert_eq!(steps.iter().filter(|s| s.target.kind == KIND).count(), 1);
    assert_eq!(steps.last().unwrap().phase, Phase::Instance);
    // Flux's artifact has no symlink: neither has the bootstrap.
    let mut linked = MemFleet::new();
    linked.insert("shared/install.yaml", INSTALL);
    linked.insert_symlink(format!("{T}/install.yaml"), "../../../shared/install.yaml");
    linked.insert(format!("{T}/flux-instance.yaml"), INSTANCE);
    let e = read(&linked, "c1", &FluxGit::default()).unwrap_err().to_string();
    assert!(e.contains("no YAML file below clusters/_template/ defines"), "{e}");
}

#[test]
fn a_flux_instance_the_operator_would_reject_is_refused_naming_file_document_and_field() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "name: flux\n",
            "name: flux-system\n",
            "metadata.name",
            "`flux-system`: the only accepted name for a FluxInstance is 'flux'",
        ),
        (
            "  namespace: flux-system\n",
            "",
            "metadata.namespace",
            "unset: cellbridge creates the Namespace `flux-system`",
        ),
        (
            "  namespace: flux-system\n",
            "  namespace: flux\n",
            "metadata.namespace",
            "`flux`: cellbridge creates",
        ),
        (
            "    version: \"2.x\"\n",
            "",
            "spec.distribution.version",
            "missing: the CRD requires it",
        ),
        (
            "    registry: ghcr.io/fluxcd\n",
            "    registry: \"\"\n",
            "spec.distribution.registry",
            "empty: the CRD requires it",
        ),
        (
            "    version: \"2.x\"\n",
            "    version: 2.8\n",
            "spec.distribution.version",
            "must be a string, not a number",
        ),
        (
            "    registry: ghcr.io/fluxcd\n",
            "    registry: ghcr.io/fluxcd\n    variant: alpine\n",
            "spec.distribution.variant",
            "`alpine` is not one of upstream-alpine",
        ),
        (
            "  sync:\n",
            "  components: [source-controller, flagger]\n  sync:\n",
            "spec.components[1]",
            "`flagger` is not one of",
        ),
        (
            "    kind: GitRepository\n",
            "    kind: HelmRepository\n",
            "spec.sync.kind",
            "`HelmRepository` is not one of OCIRepository, GitRepository, Bucket",
        ),
        (
            "    kind: GitRepository\n",
            "",
            "spec.sync.kind",
            "missing: the CRD requires it",
        ),
        (
            "    url: https://github.com/acme/fleet\n",
            "",
            "spec.sync.url",
            "missing: the CRD requires it",
        ),
        (
            "    ref: refs/heads/main\n",
            "",
            "spec.sync.ref",
            "missing: the CRD requires it",
        ),
        (
            "    path: ./clusters/_template\n",
            "",
            "spec.sync.path",
            "missing: the CRD requires it",
        ),
        (
            "    kind: GitRepository\n",
            "    kind: Bucket\n    provider: github\n",
            "spec.sync.provider",
            "sync.provider 'github' is only supported for GitRepository",
        ),
        (
            "    kind: GitRepository\n",
            "    kind: GitRepository\n    provider: gcp\n",
            "spec.sync.provider",
            "sync.provider 'gcp' is only supported for OCIRepository and Bucket",
        ),
        (
            "    kind: GitRepository\n",
            "    kind: GitRepository\n    interval: 5 minutes\n",
            "spec.sync.interval",
            "`5 minutes` does not match the CRD's pattern",
        ),
        (
            "    kind: GitRepository\n",
            "    kind: GitRepository\n    provider: gitlab\n",
            "spec.sync.provider",
            "`gitlab` is not one of generic",
        ),
        (
            "apiVersion: fluxcd.controlplane.io/v1\n",
            "apiVersion: fluxcd.controlplane.io/v1beta1\n",
            "apiVersion",
            "the Flux Operator serves FluxInstance as `fluxcd.controlplane.io/v1`",
        ),
        // Valid for the operator, not bootstrappable with Git credentials.
        (
            "    kind: GitRepository\n",
            "    kind: OCIRepository\n",
            "spec.sync.kind",
            "OCIRepository: cellbridge bootstraps Flux with Git credentials",
        ),
        (
            "    pullSecret: fleet-git\n",
            "",
            "spec.sync.pullSecret",
            "unset: the operator's GitRepository would read the fleet repo without the credentials",
        ),
    ];
    for (from, to, field, reason) in cases {
        let e = refused(&own_fleet(&instance_with(from, to)));
        let head = format!("{O}/flux-instance.yaml, document 1: FluxInstance field `{field}`: ");
        assert!(e.starts_with(&head) && e.contains(reason), "{from:?} -> {to:?}: {e}");
        assert!(e.ends_with("; nothing was applied"), "{e}");
    }
    let no_sync = INSTANCE.split("  sync:\n").next().unwrap().to_owned();
    let e = refused(&own_fleet(&no_sync));
    assert!(
        e.contains("field `spec.sync`: unset: the operator would install Flux and sync nothing"),
        "{e}"
    );
    let e = refused(&own_fleet(&INSTANCE.replace(
        "spec:\n  distribution:\n    version: \"2.x\"\n    registry: ghcr.io/fluxcd\n",
        "spec:\n",
    )));
    assert!(
        e.contains("field `spec.distribution`: missing: the CRD requires it"),
        "{e}"
    );
}

#[test]
fn an_operator_manifest_without_its_crd_or_deployment_and_a_mixed_cell_are_refused() {
    // No install manifest at all.
    let mut f = MemFleet::new();
    f.insert(format!("{T}/flux-instance.yaml"), INSTANCE);
    assert_eq!(
        refused(&f),
        format!(
            "{T}/flux-instance.yaml holds a FluxInstance, but no YAML file below clusters/_template/ defines the CustomResourceDefinition `fluxinstances.fluxcd.controlplane.io`: commit the Flux Operator's install manifest (its release's install.yaml) there; nothing was applied"
        )
    );
    // A manifest with the other CRDs but not FluxInstance's.
    let mut f = fleet(INSTANCE);
    let without = INSTALL.replace(
        "name: fluxinstances.fluxcd.controlplane.io",
        "name: fluxinstances.example.com",
    );
    f.insert(format!("{T}/flux-operator-install.yaml"), without);
    assert!(refused(&f).contains("no YAML file below"), "{}", refused(&f));
    // No Deployment.
    let mut f = fleet(INSTANCE);
    f.insert(
        format!("{T}/flux-operator-install.yaml"),
        INSTALL.split("apiVersion: apps/v1\nkind: Deployment").next().unwrap(),
    );
    assert!(
        refused(&f).contains(
            "flux-operator-install.yaml: defines the CustomResourceDefinition `fluxinstances.fluxcd.controlplane.io` but no Deployment"
        ),
        "{}",
        refused(&f)
    );
    // Two install manifests.
    let mut f = fleet(INSTANCE);
    f.insert(format!("{T}/again.yaml"), INSTALL);
    assert!(
        refused(&f)
            .contains("defines the CustomResourceDefinition `fluxinstances.fluxcd.controlplane.io`, and so does"),
        "{}",
        refused(&f)
    );
    // Both kinds of Flux in one directory: the template's, and a cell's own.
    let mut f = fleet(INSTANCE);
    f.insert(format!("{T}/gotk-sync.yaml"), "---\n");
    assert_eq!(
        refused(&f),
        format!(
            "{T}: holds both a FluxInstance ({T}/flux-instance.yaml) and clusters/_template/flux-system/gotk-sync.yaml: a cell's Flux is installed either by the Flux Operator or from gotk-components.yaml and gotk-sync.yaml, never both; remove one of them; nothing was applied"
        )
    );
    let mut f = own_fleet(INSTANCE);
    f.insert(format!("{O}/gotk-components.yaml"), "---\n");
    assert!(
        refused(&f).starts_with(&format!("{O}: holds both a FluxInstance")),
        "{}",
        refused(&f)
    );
    // Two FluxInstances.
    let mut f = own_fleet(INSTANCE);
    f.insert("clusters/c1/another.yaml", INSTANCE);
    assert!(refused(&f).contains("a second FluxInstance"), "{}", refused(&f));
}

#[test]
fn durations_follow_the_crds_pattern() {
    for ok in ["1m", "10s", "1.5h", "100ms", "1h30m", "2m0s"] {
        assert!(is_duration(ok), "{ok}");
    }
    for bad in ["", "m", "1", "1d", "1.h", "-1m", "1m ", "1 m"] {
        assert!(!is_duration(bad), "{bad}");
    }
}
