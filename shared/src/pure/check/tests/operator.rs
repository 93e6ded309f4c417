//! Cells whose Flux the Flux Operator runs: the tree starts at the FluxInstance's
//! `spec.sync.path`, its release and kustomize-controller patches are the rules, and a new cell
//! made from an operator template is checked with the template's files written for it.

use super::*;

const INSTANCE_FILE: &str = "clusters/prod-eu-west-1/flux-system/flux-instance.yaml";

/// controlplaneio-fluxcd/flux-operator v0.58.1, `docs/guides/instance/instance-sync.md`, "Sync
/// from a Git Repository", with `{path}` and `{extra}` (more of `spec`) filled in.
fn instance(path: &str, extra: &str) -> String {
    format!(
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  distribution:\n    version: \"2.9.x\"\n    registry: \"ghcr.io/fluxcd\"\n  sync:\n    kind: GitRepository\n    url: \"https://gitlab.com/my-org/my-fleet.git\"\n    ref: \"refs/heads/main\"\n    path: \"{path}\"\n    pullSecret: \"flux-system\"\n{extra}"
    )
}

/// A cell whose `flux-system/` holds a FluxInstance instead of gotk-components.yaml and
/// gotk-sync.yaml.
fn operator_cell(layers: &str, instance_text: &str) -> MemFleet {
    let gotk = fleet_with(layers, &[]);
    let mut f = MemFleet::new();
    for (path, (_, bytes)) in gotk.files() {
        if !path.ends_with("/gotk-components.yaml") && !path.ends_with("/gotk-sync.yaml") {
            f.insert(path.clone(), bytes.clone());
        }
    }
    f.insert(
        format!("clusters/{CELL}/flux-system/kustomization.yaml"),
        "resources:\n  - flux-instance.yaml\n",
    );
    f.insert(INSTANCE_FILE, instance_text);
    f
}

const UNSET: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  region: \"${aws_region}\"\n";

#[test]
fn the_tree_starts_at_the_flux_instances_sync_path() {
    // The cell directory lists `infra`; the FluxInstance syncs `live/`, which lists `apps`.
    let mut f = operator_cell(
        &layers_yaml(&[("infra", "./infrastructure", "")]),
        &instance("clusters/prod-eu-west-1/live", ""),
    );
    f.insert("infrastructure/cm.yaml", UNSET);
    f.insert("apps/cm.yaml", UNSET);
    f.insert(
        format!("clusters/{CELL}/live/kustomization.yaml"),
        "resources:\n  - ../cell-metadata.yaml\n  - layers.yaml\n",
    );
    f.insert(
        format!("clusters/{CELL}/live/layers.yaml"),
        layers_yaml(&[("apps", "./apps", "")]),
    );
    let r = run(&f);
    let names: Vec<&str> = r.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["apps"],
        "the layers of the tree Flux applies, not the directory's"
    );
    assert_eq!(where_(&r), ["apps/cm.yaml:6 aws_region [apps]"]);
    // The same FluxInstance at the cell's own directory: its layers are the directory's.
    let mut f = f.clone();
    f.insert(INSTANCE_FILE, instance("./clusters/prod-eu-west-1", ""));
    let r = run(&f);
    assert_eq!(where_(&r), ["infrastructure/cm.yaml:6 aws_region [infra]"]);
}

#[test]
fn a_sync_path_flux_cannot_find_is_a_finding_at_the_flux_instance() {
    let f = operator_cell(
        &layers_yaml(&[("infra", "./infrastructure", "")]),
        &instance("clusters/prod-eu-west-01", ""),
    );
    let r = run(&f);
    assert_eq!(where_(&r), [format!("{INSTANCE_FILE}:14  [flux-system]")]);
    assert!(
        r.findings[0]
            .message
            .contains("`clusters/prod-eu-west-01` is not a directory")
            && r.findings[0].message.contains("kustomization path not found"),
        "{}",
        r.findings[0].message
    );
    assert!(!r.passed());
    // `spec.sync.name` names the Kustomization the operator creates.
    let named = instance("clusters/prod-eu-west-01", "").replace(
        "    kind: GitRepository\n",
        "    kind: GitRepository\n    name: fleet\n",
    );
    let r = run(&operator_cell("", &named));
    assert_eq!(r.findings[0].layer, "fleet");
}

#[test]
fn the_flux_instances_release_and_gate_patch_are_the_rules_even_when_the_tree_does_not_list_it() {
    let gate_off = "  kustomize:\n    patches:\n      - target:\n          kind: Deployment\n          name: kustomize-controller\n        patch: |\n          - op: add\n            path: /spec/template/spec/containers/0/args/-\n            value: --feature-gates=StrictPostBuildSubstitutions=false\n";
    let mut f = operator_cell(
        &layers_yaml(&[("infra", "./infrastructure", "")]),
        &instance("clusters/prod-eu-west-1", gate_off),
    );
    f.insert("infrastructure/cm.yaml", UNSET);
    // The cell's kustomization.yaml leaves flux-system/ out: the FluxInstance is applied by
    // other means (Terraform, the operator's chart), and still says which Flux runs.
    f.insert(
        format!("clusters/{CELL}/kustomization.yaml"),
        "resources:\n  - cell-metadata.yaml\n  - layers.yaml\n",
    );
    let r = run(&f);
    assert_eq!(r.flux.kustomize_controller.as_deref(), Some("v1.9.x"));
    assert_eq!(r.flux.strict_gate, Some(false));
    assert_eq!(r.flux.gate_from.as_deref(), Some(INSTANCE_FILE));
    assert!(
        r.passed(),
        "strict mode off: a warning, not a finding: {:?}",
        r.findings
    );
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert_eq!(r.warnings[0].file, "infrastructure/cm.yaml");
    // Without the patch, v1.9's default: strict, a finding.
    f.insert(INSTANCE_FILE, instance("clusters/prod-eu-west-1", ""));
    let r = run(&f);
    assert_eq!(where_(&r), ["infrastructure/cm.yaml:6 aws_region [infra]"]);
}

#[test]
fn what_the_check_cannot_follow_is_listed_as_not_checked() {
    // A patch to the operator's own Kustomization, as upstream's config/terraform example
    // adds a postBuild with.
    let patched = "  kustomize:\n    patches:\n      - target:\n          kind: Kustomization\n          name: flux-system\n        patch: |\n          - op: add\n            path: /spec/postBuild\n            value:\n              substituteFrom:\n                - kind: ConfigMap\n                  name: flux-runtime-info\n";
    let r = run(&operator_cell(
        &layers_yaml(&[("infra", "./infrastructure", "")]),
        &instance("clusters/prod-eu-west-1", patched),
    ));
    assert!(
        r.not_checked
            .iter()
            .any(|n| n.starts_with(&format!("{INSTANCE_FILE}:18: ")) && n.contains("Kustomization `flux-system`")),
        "{:?}",
        r.not_checked
    );
    // An OCI artifact's path that is no directory here: the cell directory, with a note.
    let oci = instance("./", "")
        .replace("kind: GitRepository", "kind: OCIRepository")
        .replace("\"./\"", "\"./deploy\"");
    let mut f = operator_cell(&layers_yaml(&[("infra", "./infrastructure", "")]), &oci);
    f.insert("infrastructure/cm.yaml", UNSET);
    let r = run(&f);
    assert_eq!(where_(&r), ["infrastructure/cm.yaml:6 aws_region [infra]"]);
    assert!(
        r.not_checked.iter().any(|n| n.contains("an OCIRepository")),
        "{:?}",
        r.not_checked
    );
}

#[test]
fn two_flux_instances_in_a_cell_are_invalid_input_naming_both() {
    let mut f = operator_cell("", &instance("clusters/prod-eu-west-1", ""));
    f.insert(
        format!("clusters/{CELL}/flux-instance.yaml"),
        instance("clusters/prod-eu-west-1", ""),
    );
    let e = check_cell(&f, CELL, &vars()).unwrap_err().to_string();
    assert!(
        e.contains(INSTANCE_FILE) && e.contains("clusters/prod-eu-west-1/flux-instance.yaml"),
        "{e}"
    );
}

#[test]
fn a_new_cell_from_an_operator_template_is_checked_with_the_templates_files() {
    use crate::pure::plan::{self, PlanOptions, StateRef};
    let mut f = MemFleet::new();
    f.insert(
        "clusters/_template/kustomization.yaml",
        "resources:\n  - cell-metadata.yaml\n  - layers.yaml\n  - flux-system\n",
    );
    f.insert(
        "clusters/_template/layers.yaml",
        layers_yaml(&[("infra", "./infrastructure", "")]),
    );
    f.insert(
        "clusters/_template/flux-system/kustomization.yaml",
        "resources:\n  - flux-instance.yaml\n",
    );
    let gate_off = "  kustomize:\n    patches:\n      - target:\n          kind: Deployment\n        patch: |\n          - op: add\n            path: /spec/template/spec/containers/0/args/-\n            value: --feature-gates=StrictPostBuildSubstitutions=false\n";
    f.insert(
        "clusters/_template/flux-system/flux-instance.yaml",
        instance("clusters/_template", gate_off),
    );
    f.insert("infrastructure/cm.yaml", UNSET);
    let meta = plan::fixtures::meta("c9", 1, &[]);
    let p = plan::plan(&meta, StateRef::default(), &f, &PlanOptions::default()).unwrap();
    let new_instance = "clusters/c9/flux-system/flux-instance.yaml";
    let written = p
        .files
        .iter()
        .find(|c| c.path == new_instance)
        .expect("the FluxInstance");
    assert!(written.new.contains("    path: \"clusters/c9\"\n"), "{}", written.new);
    assert!(!p.files.iter().any(|c| c.path.ends_with("gotk-sync.yaml")));
    // Checked from the cell's tree, with its FluxInstance's rules: strict mode off.
    assert_eq!(p.check.layers.len(), 1, "{:?}", p.check);
    assert_eq!(p.check.flux.gate_from.as_deref(), Some(new_instance));
    assert!(p.check.passed(), "{:?}", p.check.findings);
    assert_eq!(p.check.warnings[0].variable, "aws_region");
}
