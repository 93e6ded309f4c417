use super::*;

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
