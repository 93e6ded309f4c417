use crate::pure::check::*;
use crate::pure::fleet::MemFleet;

const CELL: &str = "prod-eu-west-1";

fn layers_yaml(entries: &[(&str, &str, &str)]) -> String {
    // (name, path, extra postBuild lines)
    entries
        .iter()
        .map(|(name, path, extra)| {
            format!(
                "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cell-metadata\n{extra}"
            )
        })
        .collect()
}

fn fleet_with(layers: &str, files: &[(&str, &str)]) -> MemFleet {
    let mut f = MemFleet::new();
    f.insert(
        format!("clusters/{CELL}/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cell-metadata.yaml\n  - layers.yaml\n  - flux-system\n",
    );
    f.insert(
        format!("clusters/{CELL}/cell-metadata.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  cell_name: \"prod-eu-west-1\"\n  cluster_name: \"prod\"\n  vpc_id: \"vpc-1\"\n",
    );
    f.insert(format!("clusters/{CELL}/layers.yaml"), layers);
    f.insert(
        format!("clusters/{CELL}/flux-system/kustomization.yaml"),
        "resources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\n",
    );
    // Never parsed: were it read, this would be a YAML error.
    f.insert(
        format!("clusters/{CELL}/flux-system/gotk-components.yaml"),
        "{{{ not yaml ${x",
    );
    f.insert(
        format!("clusters/{CELL}/flux-system/gotk-sync.yaml"),
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\nspec:\n  path: ./clusters/prod-eu-west-1\n",
    );
    for (p, t) in files {
        f.insert(*p, *t);
    }
    f
}

fn vars() -> BTreeMap<String, String> {
    [
        ("cell_name", "prod-eu-west-1"),
        ("cluster_name", "prod"),
        ("vpc_id", "vpc-1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn run(f: &MemFleet) -> CheckReport {
    check_cell(f, CELL, &vars()).unwrap()
}

fn where_(r: &CheckReport) -> Vec<String> {
    r.findings
        .iter()
        .map(|f| format!("{}:{} {} [{}]", f.file, f.line, f.variable, f.layer))
        .collect()
}

const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  # ${in_a_comment} is dropped by kustomize\nspec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: \"repo/${cluster_name}:1\"\n          args: ['--vpc=${vpc_id}', \"--region=${aws_region}\"]\n";

mod build;
mod flux;
mod operator;
mod release;
mod skipped;
mod values;

#[test]
fn missing_variable_is_reported_with_file_line_and_layer() {
    let f = fleet_with(
        &layers_yaml(&[("infra", "./infrastructure/base", "")]),
        &[("infrastructure/base/deploy.yaml", DEPLOY)],
    );
    let r = run(&f);
    assert_eq!(
        where_(&r),
        vec!["infrastructure/base/deploy.yaml:12 aws_region [infra]"]
    );
    assert!(
        r.findings[0].message.contains("variable not set"),
        "{}",
        r.findings[0].message
    );
    assert!(!r.passed());
    assert_eq!(
        r.layers,
        vec![Layer {
            name: "infra".into(),
            defined_in: format!("clusters/{CELL}/layers.yaml"),
            path: "infrastructure/base".into(),
            files: 1,
        }]
    );
    assert_eq!(r.unused_keys, vec!["cell_name"]);
}

#[test]
fn defaults_inline_substitute_and_escapes_count_as_set() {
    let layers = layers_yaml(&[("apps", "./apps", "    substitute:\n      team: platform\n")]);
    let f = fleet_with(
        &layers,
        &[(
            "apps/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: ${region:=eu-west-1}\n  b: ${zone=a}\n  c: ${tier:-gold}\n  d: ${team}\n  e: $${literal}\n  f: $bare\n  g: ${cell_name^^}\n",
        )],
    );
    let r = run(&f);
    assert!(r.passed(), "{:?}", r.findings);
    assert_eq!(r.unused_keys, vec!["cluster_name", "vpc_id"]);
}

#[test]
fn dash_default_and_malformed_expressions_are_findings() {
    let f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[(
            "apps/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: \"${region-eu}\"\n  b: \"${\"\n  c: ${1abc}\n",
        )],
    );
    let r = run(&f);
    assert_eq!(
        where_(&r),
        vec![
            "apps/cm.yaml:6  [apps]",
            "apps/cm.yaml:7  [apps]",
            "apps/cm.yaml:8 1abc [apps]"
        ]
    );
    assert!(r.findings[0].message.contains("missing closing brace") && r.findings[0].message.contains("${name:-word}"));
    assert!(
        r.findings[1].message.contains("unable to parse variable name"),
        "{}",
        r.findings[1].message
    );
    assert!(r.findings[2].message.contains("can never be a key"));
}

#[test]
fn disabled_resources_are_skipped_by_label_or_annotation() {
    let f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[(
            "apps/all.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  x: ${nope1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  x: ${nope2}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  x: ${nope3}\n",
        )],
    );
    assert_eq!(where_(&run(&f)), vec!["apps/all.yaml:24 nope3 [apps]"]);
}

#[test]
fn check_fleet_reads_each_cells_configmap_and_skips_the_template() {
    let mut f = fleet_with(
        &layers_yaml(&[("infra", "./infrastructure/base", "")]),
        &[("infrastructure/base/deploy.yaml", DEPLOY)],
    );
    f.insert("clusters/_template/layers.yaml", "${anything}");
    let reports = check_fleet(&f, None).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].cell, CELL);
    assert_eq!(
        where_(&reports[0]),
        vec!["infrastructure/base/deploy.yaml:12 aws_region [infra]"]
    );
    assert_eq!(check_fleet(&f, Some(CELL)).unwrap(), reports);
    let e = check_fleet(&f, Some("nope")).unwrap_err();
    assert!(e.to_string().contains("clusters/nope"), "{e}");
}

#[test]
fn a_symlinked_cell_directory_is_one_finding_not_a_silent_skip() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("clusters/real")).unwrap();
    std::fs::write(
        root.join("clusters/real/cell-metadata.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\ndata:\n  cell_name: real\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("real", root.join("clusters/alias")).unwrap();
    let f = crate::pure::fleet::LocalFleet::open(root).unwrap();
    let reports = check_fleet(&f, None).unwrap();
    let cells: Vec<(&str, bool)> = reports.iter().map(|r| (r.cell.as_str(), r.passed())).collect();
    assert_eq!(cells, [("alias", false), ("real", true)]);
    assert_eq!(reports[0].findings[0].file, "clusters/alias");
    assert!(
        reports[0].findings[0].message.contains("symlink (→ real)"),
        "{:?}",
        reports[0].findings
    );
    assert_eq!(check_fleet(&f, Some("alias")).unwrap()[0], reports[0]);
}

#[test]
fn check_fleet_refuses_a_cell_without_its_configmap() {
    let mut f = MemFleet::new();
    f.insert("clusters/lonely/layers.yaml", layers_yaml(&[("apps", "./apps", "")]));
    let e = check_fleet(&f, None).unwrap_err();
    assert!(
        e.to_string().starts_with("clusters/lonely/cell-metadata.yaml: missing"),
        "{e}"
    );
    f.insert(
        "clusters/lonely/cell-metadata.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n",
    );
    let e = check_fleet(&f, None).unwrap_err();
    assert!(matches!(e, CheckError::ConfigMap(_)), "{e}");
}

#[test]
fn yaml_errors_name_the_file() {
    let f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[("apps/bad.yaml", "a: [${x}\n")],
    );
    let e = check_cell(&f, CELL, &vars()).unwrap_err();
    assert!(e.to_string().starts_with("apps/bad.yaml: not valid YAML"), "{e}");
}

#[test]
fn block_scalars_map_to_their_own_lines() {
    let f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[(
            "apps/cm.yaml",
            "kind: ConfigMap\nmetadata:\n  name: x\ndata:\n  script: |\n    echo one\n    # not a YAML comment: ${in_block}\n    echo ${cluster_name} ${second}\n",
        )],
    );
    assert_eq!(
        where_(&run(&f)),
        vec!["apps/cm.yaml:7 in_block [apps]", "apps/cm.yaml:8 second [apps]"]
    );
}
