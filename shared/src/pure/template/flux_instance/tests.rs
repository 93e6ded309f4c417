use crate::pure::fleet::{FileMode, MemFleet};
use crate::pure::template::flux_instance::*;
use crate::pure::template::{CellSync, FluxGit, TemplateError, cell_sync, new_cell_files, sync_source};

const FILE: &str = "clusters/_template/flux-system/flux-instance.yaml";

/// controlplaneio-fluxcd/flux-operator v0.58.1, `docs/guides/instance/instance-sync.md`, "Sync from
/// a Git Repository using GitHub App auth", with a team's comments and the template's path.
const TEMPLATE: &str = r#"# Flux for every cell, run by the Flux Operator.
apiVersion: fluxcd.controlplane.io/v1
kind: FluxInstance
metadata:
  name: flux
  namespace: flux-system
spec:
  distribution:
    version: "2.8.x"
    registry: "ghcr.io/fluxcd"
  sync:
    kind: GitRepository
    provider: github   # GitHub App authentication
    url: "https://github.com/my-org/my-fleet.git"
    ref: "refs/heads/main"
    path: "clusters/_template"   # the cell's own directory
    pullSecret: "flux-system"
"#;

fn found(text: &str) -> FoundInstance {
    let mut m = MemFleet::new();
    m.insert(FILE, text);
    find_instance(&m, "clusters/_template")
        .unwrap()
        .expect("a FluxInstance")
}

fn prepared(text: &str, flux: &FluxGit) -> Result<InstanceTemplate, TemplateError> {
    InstanceTemplate::new(found(text), flux)
}

fn base(branch: &str) -> FluxGit {
    FluxGit {
        base_branch: Some(branch.into()),
        ..FluxGit::default()
    }
}

#[test]
fn only_the_path_changes_when_nothing_is_configured() {
    let t = prepared(TEMPLATE, &base("trunk")).unwrap();
    let out = t.render("prod-eu-west-1").unwrap();
    assert_eq!(
        out,
        TEMPLATE.replacen(
            "path: \"clusters/_template\"   #",
            "path: \"clusters/prod-eu-west-1\"   #",
            1
        ),
        "the template's bytes but for the path: comments, order, quoting and `provider: github` kept"
    );
    // The template's branch wins over the base branch.
    assert_eq!(t.branch(), Some("main"));
    assert_eq!(t.template_file(), FILE);
}

#[test]
fn a_configured_url_and_branch_replace_only_their_values_in_their_quotes() {
    let flux = FluxGit {
        url: Some("ssh://git@github.com/acme/fleet".into()),
        branch: Some("release/2026".into()),
        base_branch: Some("main".into()),
    };
    let t = prepared(TEMPLATE, &flux).unwrap();
    let want = TEMPLATE
        .replacen(
            "url: \"https://github.com/my-org/my-fleet.git\"",
            "url: \"ssh://git@github.com/acme/fleet\"",
            1,
        )
        .replacen("ref: \"refs/heads/main\"", "ref: \"refs/heads/release/2026\"", 1)
        .replacen("path: \"clusters/_template\"", "path: \"clusters/c1\"", 1);
    assert_eq!(t.render("c1").unwrap(), want);
    assert_eq!(t.branch(), Some("release/2026"));
}

#[test]
fn plain_and_single_quoted_values_keep_their_style_and_the_leading_dot() {
    let text = TEMPLATE
        .replace(
            "url: \"https://github.com/my-org/my-fleet.git\"",
            "url: 'https://github.com/my-org/my-fleet.git'",
        )
        .replace("ref: \"refs/heads/main\"", "ref: refs/heads/main")
        .replace("path: \"clusters/_template\"", "path: ./clusters/_template/");
    let flux = FluxGit {
        url: Some("https://github.com/acme/it's.git".into()),
        branch: Some("next".into()),
        base_branch: None,
    };
    let out = prepared(&text, &flux).unwrap().render("c1").unwrap();
    assert!(out.contains("    url: 'https://github.com/acme/it''s.git'\n"), "{out}");
    assert!(out.contains("    ref: refs/heads/next\n"), "{out}");
    assert!(
        out.contains("    path: ./clusters/c1/   # the cell's own directory\n"),
        "{out}"
    );
}

#[test]
fn a_missing_ref_is_the_base_branch_and_without_one_an_error_naming_the_field() {
    let text = TEMPLATE.replace("    ref: \"refs/heads/main\"\n", "");
    let t = prepared(&text, &base("develop")).unwrap();
    assert_eq!(t.branch(), Some("develop"));
    let out = t.render("c1").unwrap();
    assert!(
        out.contains("  sync:\n    ref: refs/heads/develop\n    kind: GitRepository\n"),
        "{out}"
    );
    let e = prepared(&text, &FluxGit::default()).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{FILE}: "))
            && e.contains("`spec.sync.ref`")
            && e.contains("CELLBRIDGE_FLUX_GIT_BRANCH"),
        "{e}"
    );
}

#[test]
fn a_ref_that_is_no_branch_is_kept_and_refuses_a_configured_branch() {
    let text = TEMPLATE.replace("refs/heads/main", "refs/tags/v1.2.3");
    let t = prepared(&text, &base("main")).unwrap();
    assert_eq!(t.branch(), None);
    assert!(t.render("c1").unwrap().contains("ref: \"refs/tags/v1.2.3\""));
    let flux = FluxGit {
        branch: Some("main".into()),
        ..base("main")
    };
    let e = prepared(&text, &flux).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{FILE}: "))
            && e.contains("`spec.sync.ref` is `refs/tags/v1.2.3`")
            && e.contains("CELLBRIDGE_FLUX_GIT_BRANCH"),
        "{e}"
    );
}

#[test]
fn an_oci_sync_gets_its_path_only_and_refuses_git_settings() {
    // flux-operator v0.58.1 `docs/api/v1/fluxinstance.md`, "Sync from OCI over HTTP/S".
    let text = TEMPLATE
        .replace("kind: GitRepository", "kind: OCIRepository")
        .replace("    provider: github   # GitHub App authentication\n", "")
        .replace(
            "https://github.com/my-org/my-fleet.git",
            "oci://ghcr.io/my-org/my-fleet-manifests",
        )
        .replace("refs/heads/main", "latest");
    let t = prepared(&text, &base("main")).unwrap();
    assert_eq!(
        t.render("c1").unwrap(),
        text.replace("\"clusters/_template\"", "\"clusters/c1\"")
    );
    let flux = FluxGit {
        url: Some("ssh://git@github.com/acme/fleet".into()),
        ..base("main")
    };
    let e = prepared(&text, &flux).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{FILE}: "))
            && e.contains("`spec.sync.kind` is `OCIRepository`")
            && e.contains("CELLBRIDGE_FLUX_GIT_URL"),
        "{e}"
    );
}

#[test]
fn a_sync_path_that_is_not_the_templates_is_refused_naming_the_file_and_field() {
    let i = TEMPLATE.find("  sync:\n").unwrap();
    let cases = [
        (
            TEMPLATE.replace("\"clusters/_template\"", "\"clusters/prod-eu-west-1\""),
            "`spec.sync.path` is `clusters/prod-eu-west-1`",
        ),
        (
            TEMPLATE.replace("    path: \"clusters/_template\"   # the cell's own directory\n", ""),
            "`spec.sync.path` is missing",
        ),
        (TEMPLATE[..i].to_owned(), "no `spec.sync`, so no `spec.sync.path`"),
        (
            TEMPLATE.replace("\"clusters/_template\"", "\"../clusters/_template\""),
            "`spec.sync.path` is `../clusters/_template`",
        ),
    ];
    for (text, want) in cases {
        let e = prepared(&text, &base("main")).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{FILE}: ")), "{e}");
        assert!(e.contains(want) && e.contains("clusters/_template"), "{want}: {e}");
    }
    // No URL written and none configured: nothing for Flux to pull.
    let no_url = TEMPLATE.replace("    url: \"https://github.com/my-org/my-fleet.git\"\n", "");
    let e = prepared(&no_url, &base("main")).unwrap_err().to_string();
    assert!(
        e.contains("`spec.sync.url` is missing") && e.contains("CELLBRIDGE_FLUX_GIT_URL"),
        "{e}"
    );
}

fn operator_template() -> MemFleet {
    let mut m = MemFleet::new();
    m.insert(
        "clusters/_template/kustomization.yaml",
        "resources:\n  - flux-system\n  - cell-metadata.yaml\n",
    );
    m.insert(
        "clusters/_template/flux-system/kustomization.yaml",
        "resources:\n  - flux-instance.yaml\n",
    );
    m.insert(FILE, TEMPLATE);
    m
}

#[test]
fn a_new_cell_from_an_operator_template_gets_its_flux_instance_and_no_gotk_sync() {
    let m = operator_template();
    let sync = cell_sync(&m, &base("main")).unwrap();
    assert!(matches!(sync, CellSync::Instance(_)));
    let files = new_cell_files(&m, "c1", &sync).unwrap();
    let got: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        got,
        [
            "clusters/c1/flux-system/flux-instance.yaml",
            "clusters/c1/flux-system/kustomization.yaml",
            "clusters/c1/kustomization.yaml",
        ],
        "no gotk-sync.yaml beside the FluxInstance"
    );
    assert_eq!(files[0].mode, FileMode::Regular);
    assert_eq!(
        files[0].content,
        TEMPLATE.replace("\"clusters/_template\"", "\"clusters/c1\"")
    );
    // The bootstrap's sync objects come from a gotk-sync.yaml, which such a template has none of.
    let e = sync_source(&m, &base("main")).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{FILE}: a FluxInstance template")), "{e}");
}

#[test]
fn both_kinds_in_one_template_are_refused_naming_both_files() {
    for gotk in ["gotk-sync.yaml", "gotk-components.yaml"] {
        let mut m = operator_template();
        m.insert(format!("clusters/_template/flux-system/{gotk}"), "# flux bootstrap\n");
        let e = cell_sync(&m, &base("main")).unwrap_err();
        assert!(matches!(e, TemplateError::BothKinds { .. }), "{e}");
        let e = e.to_string();
        assert!(
            e.starts_with("both kinds in one cell")
                && e.contains(FILE)
                && e.contains(&format!("clusters/_template/flux-system/{gotk}")),
            "{e}"
        );
    }
    // A second FluxInstance is refused too: the operator runs one.
    let mut m = operator_template();
    m.insert("clusters/_template/extra.yaml", TEMPLATE);
    let e = cell_sync(&m, &base("main")).unwrap_err().to_string();
    assert!(
        e.contains("a second FluxInstance") && e.contains(FILE) && e.contains("clusters/_template/extra.yaml"),
        "{e}"
    );
}
