//! `examples/teams-fleet/`, a fleet laid out the way teams lay them out, end to end through the
//! command line: layers reading several sources (a ConfigMap in Git, a SOPS Secret, a declared
//! and an undeclared in-cluster Secret), a symlinked overlay, a GitHub-App template with SOPS
//! decryption and an executable script.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{cellbridge, cellbridge_committing, git_out as git, root, text};

fn teams_fleet() -> PathBuf {
    root().join("examples/teams-fleet")
}

/// A scratch copy, symlinks kept as symlinks (`cp -a`), committed in a new Git repository.
fn teams_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("cp")
        .arg("-a")
        .arg(teams_fleet().join("."))
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "fleet"]);
    dir
}

fn new_cell_state() -> String {
    root()
        .join("examples/states/payments-us-east-2.tfstate")
        .display()
        .to_string()
}

#[test]
fn check_fails_only_on_the_typo_and_on_what_flux_itself_would_fail() {
    let fleet = teams_fleet();
    let o = cellbridge(&["--output", "json", "check", "--fleet", fleet.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{out}");
    let findings: Vec<(String, String)> = cells[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                format!(
                    "{}:{} {}",
                    f["file"].as_str().unwrap(),
                    f["line"],
                    f["variable"].as_str().unwrap()
                ),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let wheres: Vec<&str> = findings.iter().map(|(w, _)| w.as_str()).collect();
    let datadog = std::fs::read_to_string(fleet.join("infrastructure/base/datadog.yaml")).unwrap();
    let typo_line = datadog.lines().position(|l| l.contains("cluster_nmae")).unwrap() + 1;
    let layers = std::fs::read_to_string(fleet.join("clusters/payments-eu-west-1/layers.yaml")).unwrap();
    let canary_line = layers
        .lines()
        .position(|l| l.contains("path: ./apps/overlays/canary"))
        .unwrap()
        + 1;
    assert_eq!(
        wheres,
        [
            format!("clusters/payments-eu-west-1/layers.yaml:{canary_line} "),
            format!("infrastructure/base/datadog.yaml:{typo_line} cluster_nmae"),
            "monitoring/prometheus.yaml:9 cluster_name".to_owned(),
        ],
        "{out}"
    );
    assert!(findings[0].1.contains("symlink"), "{}", findings[0].1);
    assert!(
        findings[1].1.contains("did you mean `cluster_name`?"),
        "{}",
        findings[1].1
    );
    // The monitoring layer's only source holds no key: Flux skips its substitution, and on this
    // cell's release the way out is `substituteStrategy: Always`.
    assert!(
        findings[2].1.contains("layer `monitoring` has `${cluster_name}`")
            && findings[2].1.contains("ConfigMap/monitoring-overrides")
            && findings[2].1.contains("substituteStrategy: Always"),
        "{}",
        findings[2].1
    );
    // The empty certificate ARN: a warning at its first use, not a failure.
    let warnings: Vec<String> = cells[0]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            format!(
                "{}:{} {} {}",
                w["file"].as_str().unwrap(),
                w["line"],
                w["variable"].as_str().unwrap(),
                w["kind"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        warnings,
        ["ingress/ingress.yaml:7 ingress_certificate_arn empty"],
        "{out}"
    );
    // The SOPS Secret, the ConfigMap next to the cell and the declared in-cluster Secret supply
    // the rest; only the operator's undeclared optional Secret could supply this one.
    let unverified = cells[0]["unverified"].as_array().unwrap();
    assert_eq!(unverified.len(), 1, "{out}");
    assert_eq!(unverified[0]["variable"], "new_checkout_flow");
    assert_eq!(unverified[0]["sources"], serde_json::json!(["Secret/feature-flags"]));

    // The same in words, with the hint where to declare the source.
    let o = cellbridge(&["check", "--fleet", fleet.to_str().unwrap()]);
    let (out, _) = text(&o);
    assert!(
        out.contains("unverified apps/base/deployment.yaml:") && out.contains(".cellbridge/in-cluster-sources.yaml"),
        "{out}"
    );
    assert!(
        out.contains("warning ingress/ingress.yaml:7: `ingress_certificate_arn` is set to an empty string"),
        "{out}"
    );
}

/// `check` reads what is in Git, so a secret already in a fleet's `cell-metadata.yaml` cannot
/// be refused: it is warned about, by key and kind, never by value.
#[test]
fn check_warns_of_a_secret_already_in_git() {
    let repo = teams_repo();
    let cm = repo.path().join("clusters/payments-eu-west-1/cell-metadata.yaml");
    let before = std::fs::read_to_string(&cm).unwrap();
    let password = "Pa55word!-Kq3";
    std::fs::write(
        &cm,
        before.replace(
            "  schema: \"1\"\n",
            &format!("  orders_db: \"mongodb+srv://app:{password}@cluster0.example.net/db\"\n  schema: \"1\"\n"),
        ),
    )
    .unwrap();
    let o = cellbridge(&["check", "--fleet", repo.path().to_str().unwrap()]);
    let (out, err) = text(&o);
    let line = std::fs::read_to_string(&cm)
        .unwrap()
        .lines()
        .position(|l| l.contains("orders_db"))
        .unwrap()
        + 1;
    assert!(
        out.contains(&format!(
            "warning clusters/payments-eu-west-1/cell-metadata.yaml:{line}: `orders_db` of ConfigMap/cell-metadata looks like a secret (its value is a URL with a password in its user info) and is in Git already: rotate that secret"
        )),
        "{out}"
    );
    assert!(!out.contains(password) && !err.contains(password), "the value leaked");
}

#[test]
fn a_new_cell_is_the_template_byte_for_byte_but_its_path() {
    let repo = teams_repo();
    let p = repo.path();
    let o = cellbridge_committing(&["sync", "--state", &new_cell_state(), "--fleet", p.to_str().unwrap()]);
    // The cell's layers fail the check (the typo, the symlinked overlay), so exit 1; the
    // commit is made all the same, as a pull request would be opened with a failing status.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", text(&o));
    let branch = "cellbridge/payments-us-east-2";
    let template = std::fs::read_to_string(p.join("clusters/_template/flux-system/gotk-sync.yaml")).unwrap();
    let written = git(
        p,
        &[
            "show",
            &format!("{branch}:clusters/payments-us-east-2/flux-system/gotk-sync.yaml"),
        ],
    );
    assert_eq!(
        written,
        template.replace("path: ./clusters/_template", "path: ./clusters/payments-us-east-2"),
        "everything but the path is the template's: provider github, SOPS decryption, comments"
    );
    assert!(written.contains("provider: github") && written.contains("provider: sops"));
    let tree = git(p, &["ls-tree", "-r", branch, "clusters/payments-us-east-2/"]);
    let mode_of = |name: &str| {
        tree.lines()
            .find(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("{name} not in\n{tree}"))
            .split(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(mode_of("scripts/rotate-age-key.sh"), "100755", "{tree}");
    assert_eq!(mode_of("cluster-vars.yaml"), "100644", "{tree}");
    // Every file of the template, nothing more but the metadata.
    let template_files = git(p, &["ls-tree", "-r", "--name-only", "main", "clusters/_template/"]);
    let cell_files = git(
        p,
        &["ls-tree", "-r", "--name-only", branch, "clusters/payments-us-east-2/"],
    );
    let mut want: Vec<String> = template_files
        .lines()
        .map(|l| l.replace("clusters/_template/", "clusters/payments-us-east-2/"))
        .collect();
    want.push("clusters/payments-us-east-2/cell-metadata.yaml".into());
    want.sort();
    want.dedup();
    assert_eq!(cell_files.lines().collect::<Vec<_>>(), want);
}
