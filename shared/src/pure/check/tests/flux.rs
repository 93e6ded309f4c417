use super::*;

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
    // No variable: Flux leaves `${...}` as written, which the check says at the first one.
    let f = fleet_with(&layer(""), &files);
    let r = run(&f);
    assert_eq!(where_(&r), ["apps/plain/deploy.yaml:11 cluster_name [plain]"]);
    assert_eq!(r.findings[0].kind, FindingKind::Skipped);
    assert!(
        r.findings[0]
            .message
            .contains("none of its sources (ConfigMap/empty-vars) holds a key"),
        "{}",
        r.findings[0].message
    );

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
