//! What reaches a cluster without a word: a layer whose substitution kustomize-controller skips
//! (its `${...}` applied as written), and a variable whose value is the empty string.

use super::*;

const APP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  annotations:\n    note: plain\ndata:\n  cluster: ${cluster_name}\n  vpc: ${vpc_id:=none}\n";
const OFF: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: off\n  labels:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  a: ${not_substituted_anyway}\n";

fn with_release(f: &mut MemFleet, tag: &str) {
    f.insert(
        format!("clusters/{CELL}/flux-system/gotk-components.yaml"),
        format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: kustomize-controller\n  namespace: flux-system\nspec:\n  template:\n    spec:\n      containers:\n        - name: manager\n          image: ghcr.io/fluxcd/kustomize-controller:{tag}\n"
        ),
    );
}

#[test]
fn a_layer_no_variable_resolves_for_is_a_finding_with_the_release_s_way_out() {
    let mut f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[("apps/a-off.yaml", OFF), ("apps/b-app.yaml", APP)],
    );
    // An empty `cell-metadata` (a hand edit): no variable resolves, Flux skips the layer.
    let empty = BTreeMap::new();
    with_release(&mut f, "v1.9.5");
    let r = check_cell(&f, CELL, &empty).unwrap();
    assert_eq!(where_(&r), ["apps/b-app.yaml:8 cluster_name [apps]"]);
    let finding = &r.findings[0];
    assert_eq!(finding.kind, FindingKind::Skipped);
    for part in [
        "layer `apps` has `${cluster_name}`",
        "ConfigMap/cell-metadata",
        "applies `${cluster_name}` to the cluster as written",
        "`spec.postBuild.substituteStrategy: Always`",
        "kustomize-controller v1.9.5",
    ] {
        assert!(finding.message.contains(part), "{part}: {}", finding.message);
    }
    assert!(!r.passed());

    // Before v1.9.0 there is no such strategy: the hint is a source that resolves.
    with_release(&mut f, "v1.8.5");
    let r = check_cell(&f, CELL, &empty).unwrap();
    assert_eq!(where_(&r), ["apps/b-app.yaml:8 cluster_name [apps]"]);
    assert!(
        r.findings[0]
            .message
            .contains("has no `substituteStrategy` (it came with v1.9.0)")
            && r.findings[0].message.contains("give the layer a source that resolves"),
        "{}",
        r.findings[0].message
    );

    // `Always` on v1.9: substituted, so strict mode speaks instead.
    let always = layers_yaml(&[("apps", "./apps", "    substituteStrategy: Always\n")]);
    f.insert(format!("clusters/{CELL}/layers.yaml"), always);
    with_release(&mut f, "v1.9.0");
    let r = check_cell(&f, CELL, &empty).unwrap();
    assert_eq!(
        r.findings.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FindingKind::Unset]
    );

    // A layer whose manifests hold no `${` (or only in resources that disable substitution) is
    // fine whatever its sources.
    let mut f = fleet_with(&layers_yaml(&[("apps", "./apps", "")]), &[("apps/a-off.yaml", OFF)]);
    with_release(&mut f, "v1.9.5");
    assert!(check_cell(&f, CELL, &empty).unwrap().passed());
}

#[test]
fn an_empty_value_is_a_warning_at_its_first_use() {
    let files = [
        (
            "apps/a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  one: ${cell_name}\n  vpc: \"${vpc_id}\"\n",
        ),
        (
            "apps/b.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  vpc: ${vpc_id}\n  keep: ${vpc_id=unset-only}\n  fallback: ${vpc_id:=vpc-default}\n",
        ),
    ];
    let f = fleet_with(&layers_yaml(&[("apps", "./apps", "")]), &files);
    let mut v = vars();
    v.insert("vpc_id".into(), String::new());
    let r = check_cell(&f, CELL, &v).unwrap();
    assert!(r.passed(), "Flux accepts an empty value: {:?}", r.findings);
    let empty: Vec<String> = r
        .warnings
        .iter()
        .filter(|w| w.kind == FindingKind::Empty)
        .map(|w| format!("{}:{} {} [{}]", w.file, w.line, w.variable, w.layer))
        .collect();
    assert_eq!(empty, ["apps/a.yaml:7 vpc_id [apps]"]);
    assert!(r.warnings[0].message.contains("`vpc_id` is set to an empty string"));

    // Only the forms an empty value flows through: `:=` takes its default.
    let f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[(
            "apps/c.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: ${vpc_id:=vpc-default}\n  b: ${vpc_id:-x}\n  n: ${cluster_name}\n",
        )],
    );
    assert!(check_cell(&f, CELL, &v).unwrap().warnings.is_empty());
}
