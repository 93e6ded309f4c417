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
fn nested_kustomizations_components_and_patches_are_followed() {
    let f = fleet_with(
        &layers_yaml(&[("infra", "./infrastructure/prod", "")]),
        &[
            (
                "infrastructure/prod/kustomization.yaml",
                "resources:\n  - ../base\n  - ns.yaml\ncomponents:\n  - ../components/monitoring\npatches:\n  - path: patch.yaml\n    target:\n      kind: Deployment\n  - patch: |-\n      - op: add\n        path: /metadata/labels/owner\n        value: ${owner}\npatchesStrategicMerge:\n  - psm.yaml\npatchesJson6902:\n  - path: json.yaml\n    target:\n      kind: Deployment\n      name: app\nconfigMapGenerator:\n  - name: gen\n    literals:\n      - REGION=${gen_region}\n    envs:\n      - app.env\n",
            ),
            (
                "infrastructure/base/kustomization.yaml",
                "resources:\n  - deploy.yaml\n",
            ),
            (
                "infrastructure/base/deploy.yaml",
                "kind: Deployment\nmetadata:\n  name: ${base_var}\n",
            ),
            (
                "infrastructure/base/unlisted.yaml",
                "kind: X\nmetadata:\n  name: ${unlisted}\n",
            ),
            (
                "infrastructure/prod/ns.yaml",
                "kind: Namespace\nmetadata:\n  name: ${ns_var}\n",
            ),
            (
                "infrastructure/prod/patch.yaml",
                "kind: Deployment\nmetadata:\n  name: app\n  labels:\n    a: ${patch_var}\n",
            ),
            (
                "infrastructure/prod/psm.yaml",
                "kind: Deployment\nmetadata:\n  labels:\n    b: ${psm_var}\n",
            ),
            (
                "infrastructure/prod/json.yaml",
                "- op: add\n  path: /x\n  value: ${json_var}\n",
            ),
            ("infrastructure/prod/app.env", "# ${env_comment}\nA=${env_var}\n"),
            (
                "infrastructure/components/monitoring/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n  - sm.yaml\n",
            ),
            (
                "infrastructure/components/monitoring/sm.yaml",
                "kind: ServiceMonitor\nmetadata:\n  name: ${comp_var}\n",
            ),
        ],
    );
    let r = run(&f);
    let vars: Vec<&str> = r.findings.iter().map(|f| f.variable.as_str()).collect();
    assert_eq!(
        vars,
        vec![
            "base_var",
            "comp_var",
            "env_var",
            "json_var",
            "owner",
            "gen_region",
            "ns_var",
            "patch_var",
            "psm_var"
        ]
    );
    let owner = r.findings.iter().find(|f| f.variable == "owner").unwrap();
    assert_eq!(
        (owner.file.as_str(), owner.line),
        ("infrastructure/prod/kustomization.yaml", 13)
    );
    let env = r.findings.iter().find(|f| f.variable == "env_var").unwrap();
    assert_eq!(env.line, 2);
    // Eight distinct files, the kustomization file itself counted once for its inline parts.
    assert_eq!(r.layers[0].files, 8);
}

#[test]
fn directory_without_kustomization_builds_every_yaml_file() {
    let f = fleet_with(
        &layers_yaml(&[("apps", "./apps", "")]),
        &[
            ("apps/a.yaml", "kind: A\nmetadata:\n  name: ${a_var}\n"),
            ("apps/sub/b.yml", "kind: B\nmetadata:\n  name: ${b_var}\n"),
            ("apps/README.md", "${not_yaml}\n"),
            ("apps/kust/kustomization.yaml", "resources:\n  - c.yaml\n"),
            ("apps/kust/c.yaml", "kind: C\nmetadata:\n  name: ${c_var}\n"),
            ("apps/kust/ignored.yaml", "kind: D\nmetadata:\n  name: ${d_var}\n"),
        ],
    );
    let r = run(&f);
    let vars: Vec<&str> = r.findings.iter().map(|f| f.variable.as_str()).collect();
    assert_eq!(vars, vec!["a_var", "c_var", "b_var"]);
}

#[test]
fn paths_leaving_the_repo_are_refused() {
    let f = fleet_with(
        &layers_yaml(&[("infra", "./infrastructure", "")]),
        &[(
            "infrastructure/kustomization.yaml",
            "resources:\n  - ../../../etc/passwd\n",
        )],
    );
    let e = check_cell(&f, CELL, &vars()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("infrastructure/kustomization.yaml: `resources` entry `../../../etc/passwd` leaves"),
        "{e}"
    );
    let f = fleet_with(&layers_yaml(&[("infra", "../outside", "")]), &[]);
    let e = check_cell(&f, CELL, &vars()).unwrap_err();
    assert!(
        e.to_string().contains("spec.path `../outside` leaves the fleet repo"),
        "{e}"
    );
}

#[test]
fn remote_missing_and_cyclic_resources() {
    let f = fleet_with(
        &layers_yaml(&[("infra", "./infra", "")]),
        &[
            (
                "infra/kustomization.yaml",
                "resources:\n  - https://github.com/org/repo//deploy?ref=v1\n  - missing.yaml\n  - nokust\n",
            ),
            ("infra/nokust/x.yaml", "kind: X\n"),
        ],
    );
    let r = run(&f);
    assert_eq!(r.not_checked.len(), 1);
    assert!(r.not_checked[0].contains("https://github.com/org/repo//deploy?ref=v1"));
    assert_eq!(
        where_(&r),
        vec![
            "infra/kustomization.yaml:3  [infra]",
            "infra/kustomization.yaml:4  [infra]"
        ]
    );

    let f = fleet_with(
        &layers_yaml(&[("infra", "./a", "")]),
        &[
            ("a/kustomization.yaml", "resources:\n  - ../b\n"),
            ("b/kustomization.yaml", "resources:\n  - ../a\n"),
        ],
    );
    assert!(check_cell(&f, CELL, &vars()).unwrap_err().to_string().contains("cycle"));
}

#[test]
fn only_layers_with_a_post_build_are_checked() {
    let other = "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: plain\nspec:\n  path: ./plain\n";
    let layers = format!("{}{other}", layers_yaml(&[("apps", "./apps", "")]));
    let f = fleet_with(
        &layers,
        &[
            ("apps/a.yaml", "kind: A\nmetadata:\n  name: ${cluster_name}\n"),
            ("plain/a.yaml", "kind: A\nmetadata:\n  name: ${whatever}\n"),
        ],
    );
    let r = run(&f);
    assert!(r.passed(), "{:?}", r.findings);
    assert_eq!(
        r.layers.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
        vec!["apps"]
    );
}

#[test]
fn cell_kustomization_decides_which_layer_files_count() {
    let mut f = fleet_with(&layers_yaml(&[("apps", "./apps", "")]), &[("apps/a.yaml", "kind: A\n")]);
    // Not listed in clusters/<cell>/kustomization.yaml: Flux never applies it.
    f.insert(
        format!("clusters/{CELL}/extra.yaml"),
        layers_yaml(&[("extra", "./extra", "")]),
    );
    f.insert("extra/a.yaml", "kind: A\nmetadata:\n  name: ${nope}\n");
    assert!(run(&f).passed());
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

#[test]
fn symlinks_are_findings_as_flux_leaves_them_out_in_every_view() {
    let layers = layers_yaml(&[
        ("apps", "./apps/prod", ""),
        ("infra", "./infra", ""),
        ("plain", "./plain", ""),
    ]);
    let mut f = fleet_with(
        &layers,
        &[
            ("apps/base/kustomization.yaml", "resources:\n  - deploy.yaml\n"),
            ("apps/base/deploy.yaml", "kind: A\n"),
            (
                "infra/kustomization.yaml",
                "resources:\n  - ns.yaml\n  - shared.yaml\n  - ../linked\npatches:\n  - path: patch.yaml\n",
            ),
            ("infra/ns.yaml", "kind: Namespace\nmetadata:\n  name: ${cluster_name}\n"),
            ("common/kustomization.yaml", "resources: []\n"),
            ("common/shared.yaml", "kind: S\n"),
            ("common/patch.yaml", "kind: P\n"),
            ("plain/a.yaml", "kind: A\n"),
        ],
    );
    f.insert_symlink("apps/prod", "base");
    f.insert_symlink("infra/shared.yaml", "../common/shared.yaml");
    f.insert_symlink("infra/patch.yaml", "../common/patch.yaml");
    f.insert_symlink("linked/kustomization.yaml", "../common/kustomization.yaml");
    f.insert_symlink("plain/b.yaml", "../common/shared.yaml");
    f.insert_symlink("plain/loop", "..");
    f.insert_symlink("plain/README.md", "../README.md");
    let r = run(&f);
    let found: Vec<(String, usize, String)> = r
        .findings
        .iter()
        .map(|x| (x.file.clone(), x.line, x.message.clone()))
        .collect();
    let layers_file = format!("clusters/{CELL}/layers.yaml");
    assert_eq!(
        found,
        vec![
            (
                layers_file,
                9,
                "spec.path `apps/prod` is a symlink (→ base): Flux leaves symlinks out of its source artifact, so kustomize-controller fails with 'kustomization path not found'".to_owned()
            ),
            (
                "infra/kustomization.yaml".to_owned(),
                3,
                "kustomize build fails: `shared.yaml` is a symlink (→ ../common/shared.yaml): Flux leaves symlinks out of its source artifact, so it is not there".to_owned()
            ),
            (
                "infra/kustomization.yaml".to_owned(),
                4,
                "kustomize build fails: directory `linked` has no kustomization.yaml (`linked/kustomization.yaml` is a symlink (→ ../common/kustomization.yaml): Flux leaves symlinks out of its source artifact)".to_owned()
            ),
            (
                "infra/kustomization.yaml".to_owned(),
                6,
                "kustomize build fails: `patch.yaml` is a symlink (→ ../common/patch.yaml): Flux leaves symlinks out of its source artifact, so it is not there".to_owned()
            ),
        ]
    );
    // Left out of a generated kustomization: nothing fails, the report says what is missing.
    let notes: Vec<&str> = r.not_checked.iter().map(String::as_str).collect();
    assert_eq!(
        notes,
        [
            "`plain/b.yaml` is a symlink (→ ../common/shared.yaml): Flux leaves symlinks out of its source artifact, so kustomize-controller builds `plain` without it",
            "`plain/loop` is a symlink (→ ..): Flux leaves symlinks out of its source artifact, so kustomize-controller builds `plain` without it",
        ]
    );

    // The same repository checked out: the same report (a link is never followed, so a loop
    // is no error).
    let dir = tempfile::tempdir().unwrap();
    for (p, (mode, bytes)) in f.files() {
        let full = dir.path().join(p);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        if *mode == crate::pure::fleet::FileMode::Symlink {
            std::os::unix::fs::symlink(String::from_utf8_lossy(bytes).as_ref(), &full).unwrap();
        } else {
            std::fs::write(&full, bytes).unwrap();
        }
    }
    let local = crate::pure::fleet::LocalFleet::open(dir.path()).unwrap();
    assert_eq!(check_cell(&local, CELL, &vars()).unwrap(), r);
}

#[test]
fn an_invalid_key_of_cell_metadata_fails_every_layer_that_reads_it() {
    // Flux validates every variable name before substituting, the cell's ConfigMap's keys
    // included (fluxcd/pkg kustomize/kustomize_varsub.go, varSubstitution): a hand-edited
    // `my-var` fails each layer that substitutes from cell-metadata.
    let mut f = fleet_with(
        &layers_yaml(&[("infra", "./infrastructure/base", ""), ("apps", "./apps/base", "")]),
        &[
            ("infrastructure/base/kustomization.yaml", "resources: []\n"),
            ("apps/base/kustomization.yaml", "resources: []\n"),
        ],
    );
    f.insert(
        format!("clusters/{CELL}/cell-metadata.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  cell_name: \"prod-eu-west-1\"\n  \"1abc\": \"x\"\n  my-var: \"y\"\n",
    );
    let mut v = vars();
    v.insert("my-var".into(), "y".into());
    v.insert("1abc".into(), "x".into());
    let r = check_cell(&f, CELL, &v).unwrap();
    let meta = format!("clusters/{CELL}/cell-metadata.yaml");
    assert_eq!(
        where_(&r),
        vec![
            format!("{meta}:8 1abc [apps]"),
            format!("{meta}:8 1abc [infra]"),
            format!("{meta}:9 my-var [apps]"),
            format!("{meta}:9 my-var [infra]"),
        ]
    );
    assert!(
        r.findings[0].message.contains("'1abc' var name is invalid"),
        "{}",
        r.findings[0].message
    );
    assert!(!r.passed());
}

#[test]
fn a_layer_with_no_variables_is_applied_unsubstituted_unless_its_strategy_is_always() {
    // kustomize-controller substitutes only when some variable is defined (inline or from a
    // source) or spec.postBuild.substituteStrategy is Always (api/v1 kustomization_types.go,
    // SubstituteStrategy; fluxcd/pkg kustomize_varsub.go: `len(vars) > 0 || options.Always`).
    let layer = |extra: &str| {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: plain\n  namespace: flux-system\nspec:\n  path: ./apps/plain\n  postBuild:\n    substitute: {{}}\n{extra}    substituteFrom:\n      - kind: ConfigMap\n        name: empty-vars\n"
        )
    };
    let files = [
        (
            "apps/plain/kustomization.yaml",
            "resources:\n  - deploy.yaml\n  - vars.yaml\n",
        ),
        ("apps/plain/deploy.yaml", DEPLOY),
        (
            "apps/plain/vars.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: empty-vars\n  namespace: flux-system\ndata: {}\n",
        ),
    ];
    let f = fleet_with(&layer(""), &files);
    let r = run(&f);
    assert_eq!(
        where_(&r),
        Vec::<String>::new(),
        "no variable: Flux leaves ${{...}} as written"
    );
    assert!(r.passed());

    let f = fleet_with(&layer("    substituteStrategy: Always\n"), &files);
    let r = run(&f);
    assert_eq!(
        where_(&r),
        vec![
            "apps/plain/deploy.yaml:11 cluster_name [plain]",
            "apps/plain/deploy.yaml:12 aws_region [plain]",
            "apps/plain/deploy.yaml:12 vpc_id [plain]",
        ]
    );
}

#[test]
fn a_reference_written_with_yaml_escapes_is_checked_as_kustomize_reserialises_it() {
    // `"\x24{x}"`, `"\u0024{x}"` and `"$\u007bx}"` are `${x}` once YAML is parsed, and kustomize
    // hands envsubst the value re-serialised (fluxcd/pkg kustomize_varsub.go: res.AsYAML), so
    // Flux substitutes them: the check must look even when the raw text has no `${`.
    let deploy = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: escaped\ndata:\n  a: \"\\x24{vpc_id}\"\n  b: \"\\u0024{aws_region}\"\n  c: \"$\\u007bsubnet_id}\"\n";
    let f = fleet_with(
        &layers_yaml(&[("infra", "./infrastructure/base", "")]),
        &[
            ("infrastructure/base/kustomization.yaml", "resources:\n  - cm.yaml\n"),
            ("infrastructure/base/cm.yaml", deploy),
        ],
    );
    let r = run(&f);
    assert_eq!(
        where_(&r),
        vec![
            "infrastructure/base/cm.yaml:7 aws_region [infra]",
            "infrastructure/base/cm.yaml:8 subnet_id [infra]",
        ]
    );
}

#[test]
fn text_after_a_nul_in_a_value_is_still_checked() {
    // The Go scanner ends its input at a NUL, but kustomize-controller never hands it one: yaml.v2
    // re-serialises the value with the NUL written `\0` (fluxcd/pkg kustomize_varsub.go,
    // res.AsYAML), so what follows is substituted.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nul\ndata:\n  a: \"x\\0${vpc_idd}\"\n";
    let f = fleet_with(
        &layers_yaml(&[("infra", "./infrastructure/base", "")]),
        &[
            ("infrastructure/base/kustomization.yaml", "resources:\n  - cm.yaml\n"),
            ("infrastructure/base/cm.yaml", cm),
        ],
    );
    let r = run(&f);
    assert_eq!(where_(&r), vec!["infrastructure/base/cm.yaml:6 vpc_idd [infra]"]);
}

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
    assert_eq!(run(&files("v1.9.0")).findings.len(), 1);
    assert_eq!(
        run(&files("v1.8.5")).findings.len(),
        0,
        "the field is unknown before v1.9.0"
    );
}

#[test]
fn flux_releases_map_to_their_kustomize_controller() {
    for (flux, kc) in [
        ("2.9.3", Some("v1.9.4")),
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
            release::controller_of_flux(flux).map(|v| v.to_string()).as_deref(),
            kc,
            "{flux}"
        );
    }
}

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
    assert!(
        r.findings
            .iter()
            .any(|f| f.message.contains("applies no ConfigMap `app-vars`")),
        "{:#?}",
        r.findings
    );
    // `patches` run before namePrefix: the prefix is added to the new name...
    let r = renamed_source(&by("patches", "x-"), VARS);
    assert!(
        r.findings
            .iter()
            .any(|f| f.message.contains("applies no ConfigMap `app-vars`")),
        "{:#?}",
        r.findings
    );
    let r = renamed_source(&by("patches", "\"\""), VARS);
    assert_eq!(r.findings, vec![]);
    // ...`patchesJson6902` after it, so its name is final.
    let r = renamed_source(&by("patchesJson6902", "x-"), VARS);
    assert_eq!(r.findings, vec![]);
    // Re-namespaced away from the layer's namespace: not found there.
    let away = "resources:\n  - vars.yaml\npatches:\n  - target:\n      kind: ConfigMap\n      name: app-vars\n    patch: |\n      - op: replace\n        path: /metadata/namespace\n        value: elsewhere\n";
    let r = renamed_source(away, &VARS.replace("staging-vars", "app-vars"));
    assert!(
        r.findings
            .iter()
            .any(|f| f.message.contains("applies no ConfigMap `app-vars`")),
        "{:#?}",
        r.findings
    );
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
