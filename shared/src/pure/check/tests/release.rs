use super::*;

/// A cell's gotk-components.yaml reduced to what names the release: the kustomize-controller
/// Deployment, its image tag and arguments (as `flux install --export` writes them).
fn components(tag: &str, args: &[&str]) -> String {
    let args: String = args.iter().map(|a| format!("            - {a}\n")).collect();
    format!(
        "---\n# Flux Version: v2.0.0\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: kustomize-controller\n  namespace: flux-system\nspec:\n  template:\n    spec:\n      containers:\n        - name: manager\n          image: ghcr.io/fluxcd/kustomize-controller:{tag}\n          args:\n            - --watch-all-namespaces=true\n{args}"
    )
}

const UNSET_FORMS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: forms\ndata:\n  bare: ${missing_bare}\n  length: ${#missing_length}\n  upper: ${missing_upper^^}\n  region: ${cluster_name:0:-1}\n";

fn release_fleet(components_yaml: &str, extra: &[(&str, &str)]) -> MemFleet {
    let components_path = format!("clusters/{CELL}/flux-system/gotk-components.yaml");
    let mut files: Vec<(&str, &str)> = vec![
        ("apps/forms.yaml", UNSET_FORMS),
        (components_path.as_str(), components_yaml),
    ];
    files.extend_from_slice(extra);
    fleet_with(&layers_yaml(&[("apps", "./apps", "")]), &files)
}

/// (variable, line) of the unset-variable findings and of the warnings.
type Where = Vec<(String, usize)>;

fn outcome(r: &CheckReport) -> (Where, Where) {
    let pick = |v: &[Finding]| {
        v.iter()
            .filter(|f| f.kind == FindingKind::Unset)
            .map(|f| (f.variable.clone(), f.line))
            .collect()
    };
    (pick(&r.findings), pick(&r.warnings))
}

fn names(pairs: &[(&str, usize)]) -> Vec<(String, usize)> {
    pairs.iter().map(|(n, l)| (n.to_string(), *l)).collect()
}

#[test]
fn the_newest_release_fails_every_unset_form_and_reads_a_negative_length_from_the_end() {
    let r = run(&release_fleet(&components("v1.9.5", &[]), &[]));
    assert_eq!(r.flux.kustomize_controller.as_deref(), Some("v1.9.5"));
    assert_eq!(r.flux.notice, None);
    assert_eq!(
        outcome(&r),
        (
            names(&[("missing_bare", 6), ("missing_length", 7), ("missing_upper", 8)]),
            vec![]
        )
    );
}

#[test]
fn before_v1_9_5_a_negative_substring_length_fails_the_layer() {
    let r = run(&release_fleet(&components("v1.9.4", &[]), &[]));
    let f = r
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Release)
        .expect("a release finding");
    assert_eq!(
        (f.file.as_str(), f.line, f.variable.as_str()),
        ("apps/forms.yaml", 9, "cluster_name")
    );
    assert!(
        f.message.contains("`${cluster_name:0:-1}`") && f.message.contains("v1.9.4"),
        "{}",
        f.message
    );
    // An `images:` override in flux-system/kustomization.yaml is what the cell runs.
    let fixed = release_fleet(
        &components("v1.9.4", &[]),
        &[(
            "clusters/prod-eu-west-1/flux-system/kustomization.yaml",
            "resources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\nimages:\n  - name: ghcr.io/fluxcd/kustomize-controller\n    newTag: v1.9.5\n",
        )],
    );
    let r = run(&fixed);
    assert_eq!(r.flux.kustomize_controller.as_deref(), Some("v1.9.5"));
    assert!(
        r.findings.iter().all(|f| f.kind != FindingKind::Release),
        "{:?}",
        r.findings
    );
}

#[test]
fn with_strict_mode_off_by_default_before_v1_9_unset_variables_are_warnings() {
    let r = run(&release_fleet(&components("v1.8.5", &[]), &[]));
    assert_eq!(outcome(&r).0, vec![]);
    assert_eq!(
        outcome(&r).1,
        names(&[("missing_bare", 6), ("missing_length", 7), ("missing_upper", 8)])
    );
    assert!(
        r.warnings[0].message.contains("Flux substitutes an empty string")
            && r.warnings[0]
                .message
                .contains("strict mode off (the release's default)"),
        "{}",
        r.warnings[0].message
    );
    // The negative length panics on v1.8.5 whatever strict mode says.
    let kinds: Vec<FindingKind> = r.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::Release]);
}

#[test]
fn the_feature_gate_turned_on_before_v1_9_fails_only_a_bare_reference() {
    // Flux's documented way: a JSON6902 patch in flux-system/kustomization.yaml, target by name.
    let patched = "resources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\npatches:\n  - patch: |\n      - op: add\n        path: /spec/template/spec/containers/0/args/-\n        value: --feature-gates=StrictPostBuildSubstitutions=true\n    target:\n      kind: Deployment\n      name: \"(kustomize-controller|helm-controller)\"\n";
    let r = run(&release_fleet(
        &components("v1.8.5", &[]),
        &[("clusters/prod-eu-west-1/flux-system/kustomization.yaml", patched)],
    ));
    assert_eq!(r.flux.strict_gate, Some(true));
    assert_eq!(
        outcome(&r),
        (
            names(&[("missing_bare", 6)]),
            names(&[("missing_length", 7), ("missing_upper", 8)])
        )
    );
    // A patch whose target is another controller changes nothing.
    let elsewhere = patched.replace("(kustomize-controller|helm-controller)", "helm-controller");
    let r = run(&release_fleet(
        &components("v1.8.5", &[]),
        &[(
            "clusters/prod-eu-west-1/flux-system/kustomization.yaml",
            elsewhere.as_str(),
        )],
    ));
    assert_eq!((r.flux.strict_gate, outcome(&r).0.len()), (None, 0));
}

#[test]
fn the_gate_turned_off_on_v1_9_makes_failures_warnings() {
    let r = run(&release_fleet(
        &components(
            "v1.9.5",
            &["--feature-gates=OOMWatch=true,StrictPostBuildSubstitutions=false"],
        ),
        &[],
    ));
    assert_eq!((outcome(&r).0, r.findings.len()), (vec![], 0));
    assert_eq!(r.warnings.len(), 3);
    assert!(
        r.warnings[0].message.contains("StrictPostBuildSubstitutions=false"),
        "{}",
        r.warnings[0].message
    );
}

#[test]
fn a_release_before_v1_3_has_no_strict_mode_whatever_the_gate() {
    let r = run(&release_fleet(
        &components("v1.2.2", &["--feature-gates=StrictPostBuildSubstitutions=true"]),
        &[],
    ));
    assert_eq!(r.findings.iter().filter(|f| f.kind == FindingKind::Unset).count(), 0);
    assert_eq!(r.warnings.len(), 3);
}

#[test]
fn a_flux_instance_names_the_release_and_its_patches_the_gate() {
    let instance = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  distribution:\n    version: \"2.8.x\"\n    registry: ghcr.io/fluxcd\n  kustomize:\n    patches:\n      - target:\n          kind: Deployment\n          name: kustomize-controller\n        patch: |\n          - op: add\n            path: /spec/template/spec/containers/0/args/-\n            value: --feature-gates=StrictPostBuildSubstitutions=true\n";
    let mut f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[
            ("apps/forms.yaml", UNSET_FORMS),
            ("clusters/prod-eu-west-1/flux-instance.yaml", instance),
        ],
    );
    f.insert(
        format!("clusters/{CELL}/kustomization.yaml"),
        "resources:\n  - cell-metadata.yaml\n  - layers.yaml\n  - flux-instance.yaml\n",
    );
    let r = run(&f);
    assert_eq!(r.flux.kustomize_controller.as_deref(), Some("v1.8.5"));
    assert!(
        r.flux
            .version_from
            .as_deref()
            .is_some_and(|v| v.contains("flux-instance.yaml")),
        "{:?}",
        r.flux
    );
    assert_eq!(r.flux.strict_gate, Some(true));
    assert_eq!(outcome(&r).0, names(&[("missing_bare", 6)]));
}

#[test]
fn the_fleet_setting_speaks_for_cells_whose_files_do_not_and_an_unknown_release_is_a_notice() {
    let fleet = |setting: Option<&str>| {
        let mut f = release_fleet("# trimmed: a Namespace only\n", &[]);
        if let Some(s) = setting {
            f.insert(FLEET_SETTING, s);
        }
        f
    };
    let r = run(&fleet(None));
    assert!(
        r.flux.notice.as_deref().is_some_and(|n| n.contains("newest rules")),
        "{:?}",
        r.flux
    );
    assert_eq!(outcome(&r).0.len(), 3);
    let r = run(&fleet(Some("kustomizeControllerVersion: v1.7.3\n")));
    assert_eq!(
        (r.flux.notice.as_deref(), outcome(&r).0.len(), r.warnings.len()),
        (None, 0, 3)
    );
    assert_eq!(r.flux.version_from.as_deref(), Some(FLEET_SETTING));
    let r = run(&fleet(Some("kustomizeControllerVersion: v1.10.0\n")));
    assert!(
        r.flux.notice.as_deref().is_some_and(|n| n.contains("v1.10.0")),
        "{:?}",
        r.flux
    );
    assert_eq!(outcome(&r).0.len(), 3);
    let err = check_cell(&fleet(Some("strictPostBuildSubstitutions: maybe\n")), CELL, &vars()).unwrap_err();
    assert!(
        err.to_string().contains(FLEET_SETTING) && err.to_string().contains("maybe"),
        "{err}"
    );
}

#[test]
fn substitute_strategy_always_needs_v1_9() {
    let layer = "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: raw\n  namespace: flux-system\nspec:\n  path: ./raw\n  postBuild:\n    substituteStrategy: Always\n";
    let files = |tag: &str| -> MemFleet {
        let c = components(tag, &[]);
        let mut f = fleet_with(
            layer,
            &[(
                "raw/x.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: ${nothing}\n",
            )],
        );
        f.insert(format!("clusters/{CELL}/flux-system/gotk-components.yaml"), c);
        f
    };
    let r = run(&files("v1.9.0"));
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].kind, FindingKind::Unset);
    // Before v1.9.0 the field is unknown: the layer is not substituted, `${nothing}` reaches the
    // cluster as written, and the way out is a source that resolves.
    let r = run(&files("v1.8.5"));
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    assert_eq!(
        (r.findings[0].kind, r.findings[0].file.as_str(), r.findings[0].line),
        (FindingKind::Skipped, "raw/x.yaml", 6)
    );
    let m = &r.findings[0].message;
    assert!(
        m.contains("`${nothing}`")
            && m.contains("is unknown to kustomize-controller v1.8.5")
            && m.contains("a source that resolves"),
        "{m}"
    );
}

#[test]
fn flux_releases_map_to_their_kustomize_controller() {
    for (flux, kc) in [
        ("2.9.3", Some("v1.9.4")),
        ("2.9.4", Some("v1.9.4")),
        ("v2.9.5", Some("v1.9.5")),
        // No source gives Flux v2.10's controllers yet: the table does not guess.
        ("2.10.0", None),
        ("v2.9.0", Some("v1.9.1")),
        ("2.9.7", Some("v1.9.x")),
        ("2.9.x", Some("v1.9.x")),
        ("2.x", Some("v1.9.x")),
        ("2.8.x", Some("v1.8.5")),
        ("2.6.4", Some("v1.6.1")),
        ("2.6.9", None),
        ("3.0.0", None),
        (">=2.8 <2.9", None),
    ] {
        assert_eq!(
            crate::pure::check::release::controller_of_flux(flux)
                .map(|v| v.to_string())
                .as_deref(),
            kc,
            "{flux}"
        );
    }
}
