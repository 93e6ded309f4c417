use super::*;

#[test]
fn a_known_value_that_makes_the_resource_no_longer_yaml_is_a_finding_naming_it() {
    // `url: "${db_host}:${db_port}"`: the quotes are gone once kustomize re-serialises it, so an
    // empty port leaves `url: db:`, and a value with `: ` a mapping where a value was.
    let layer = layers_yaml(&[(
        "apps",
        "./apps",
        "    substitute:\n      db_host: db\n      db_port: \"\"\n      banner: \"a: b\"\n      fine: \"eu-west-1\"\n      quoted: \"it's\"\n",
    )]);
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  url: \"${db_host}:${db_port}\"\n  banner: '${banner}'\n  region: ${fine}\n  note: \"with: ${quoted}\"\n  block: |\n    ${banner}\n    more\n  default: ${nothing:=x}\n";
    let r = run(&fleet_with(&layer, &[("apps/app.yaml", app)]));
    let values: Vec<(usize, &str)> = r
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Value)
        .map(|f| (f.line, f.variable.as_str()))
        .collect();
    assert_eq!(
        values,
        [(6, "db_port"), (7, "banner"), (9, "quoted")],
        "{:#?}",
        r.findings
    );
    let port = r.findings.iter().find(|f| f.variable == "db_port").unwrap();
    assert!(
        port.message.contains("(at `:`)") && port.message.contains("YAMLToJSON"),
        "{}",
        port.message
    );
    // The value itself is never printed, only its offending character.
    assert!(
        !r.findings.iter().any(|f| f.message.contains("a: b")),
        "{:?}",
        r.findings
    );
}

#[test]
fn a_value_from_a_source_the_check_cannot_read_is_said_not_checked() {
    let layer = layers_yaml(&[("apps", "./apps", "      - kind: Secret\n        name: in-cluster\n")]);
    // A declared source names its keys: only `token` may come from it, twice here, said once.
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: ${cluster_name}\n  b: ${token}\n  c: ${token}-2\n";
    let r = run(&fleet_with(
        &layer,
        &[
            ("apps/app.yaml", app),
            (
                ".cellbridge/in-cluster-sources.yaml",
                "sources:\n  - kind: Secret\n    name: in-cluster\n    namespace: flux-system\n    keys: [token]\n",
            ),
        ],
    ));
    assert_eq!(r.findings, vec![]);
    assert_eq!(
        r.not_checked,
        [
            "layer apps: whether `${token}` keeps each resource YAML once substituted: its value may come from Secret/in-cluster, which the check does not read"
        ]
    );
}

/// A layer substituting from `ConfigMap/app-vars`, and a directory `vars/` that kustomize
/// builds with `kustomization` around `vars.yaml`.
fn renamed_source(kustomization: &str, vars_yaml: &str) -> CheckReport {
    let layer = layers_yaml(&[("apps", "./apps", "      - kind: ConfigMap\n        name: app-vars\n")]);
    let mut f = fleet_with(
        &layer,
        &[
            (
                "apps/app.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: ${region}\n",
            ),
            ("vars/kustomization.yaml", kustomization),
            ("vars/vars.yaml", vars_yaml),
        ],
    );
    f.insert(
        format!("clusters/{CELL}/kustomization.yaml"),
        "resources:\n  - cell-metadata.yaml\n  - layers.yaml\n  - flux-system\n  - ../../vars\n",
    );
    run(&f)
}

/// The layer's `substituteFrom` finds no `ConfigMap/app-vars`: a finding says so.
fn assert_not_found(r: &CheckReport) {
    assert!(
        r.findings
            .iter()
            .any(|f| f.message.contains("applies no ConfigMap `app-vars`")),
        "{:#?}",
        r.findings
    );
}

const VARS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: staging-vars\n  namespace: flux-system\ndata:\n  region: eu-west-1\n";

#[test]
fn a_json6902_patch_that_renames_a_configmap_is_followed() {
    let by = |field: &str, prefix: &str| {
        format!(
            "resources:\n  - vars.yaml\nnamePrefix: {prefix}\n{field}:\n  - target:\n      kind: ConfigMap\n      name: staging-vars\n    patch: |\n      - op: replace\n        path: /metadata/name\n        value: app-vars\n"
        )
    };
    // Without the patch the layer finds no `app-vars`: a finding.
    let r = renamed_source("resources:\n  - vars.yaml\n", VARS);
    assert_not_found(&r);
    // `patches` run before namePrefix: the prefix is added to the new name...
    let r = renamed_source(&by("patches", "x-"), VARS);
    assert_not_found(&r);
    let r = renamed_source(&by("patches", "\"\""), VARS);
    assert_eq!(r.findings, vec![]);
    // ...`patchesJson6902` after it, so its name is final.
    let r = renamed_source(&by("patchesJson6902", "x-"), VARS);
    assert_eq!(r.findings, vec![]);
    // Re-namespaced away from the layer's namespace: not found there.
    let away = "resources:\n  - vars.yaml\npatches:\n  - target:\n      kind: ConfigMap\n      name: app-vars\n    patch: |\n      - op: replace\n        path: /metadata/namespace\n        value: elsewhere\n";
    let r = renamed_source(away, &VARS.replace("staging-vars", "app-vars"));
    assert_not_found(&r);
}

#[test]
fn a_replacement_that_renames_a_configmap_is_said_not_checked() {
    let k = "resources:\n  - vars.yaml\nreplacements:\n  - source:\n      kind: ConfigMap\n      name: other\n      fieldPath: data.name\n    targets:\n      - select:\n          kind: ConfigMap\n          name: app-vars\n        fieldPaths:\n          - metadata.name\n";
    let r = renamed_source(k, &VARS.replace("staging-vars", "app-vars"));
    assert!(
        r.not_checked
            .iter()
            .any(|n| n.starts_with("vars/kustomization.yaml:") && n.contains("ConfigMap/app-vars")),
        "{:?}",
        r.not_checked
    );
}

#[test]
fn a_source_without_a_namespace_is_never_applied_so_never_found() {
    let r = renamed_source(
        "resources:\n  - vars.yaml\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-vars\ndata:\n  region: eu-west-1\n",
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.message.contains("no namespace"))
        .expect("a finding");
    assert_eq!((f.file.as_str(), f.line), ("vars/vars.yaml", 1));
    assert!(f.message.contains("namespace not specified"), "{}", f.message);
    // A kustomization `namespace` gives it one.
    let r = renamed_source(
        "namespace: flux-system\nresources:\n  - vars.yaml\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-vars\ndata:\n  region: eu-west-1\n",
    );
    assert_eq!(r.findings, vec![]);
}
