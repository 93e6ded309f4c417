//! The `cellbridge` command line, end to end: real Terraform-written states (freshly written
//! by the `terraform` binary when it is installed, else the recorded fixtures), the example
//! fleet, and the documented exit codes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{cellbridge, fleet_copy, root, snapshot, text};

/// States written by terraform in this run, or the recorded fixtures when terraform is absent.
fn states() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let recorded = root().join("tests/fixtures/states");
        if Command::new("terraform").arg("version").output().is_err() {
            eprintln!(
                "terraform is not installed: using the recorded states in {}",
                recorded.display()
            );
            return recorded;
        }
        let dir = std::env::temp_dir().join(format!("cellbridge-cli-states-{}", std::process::id()));
        let out = Command::new("bash")
            .arg(root().join("tests/fixtures/terraform/generate.sh"))
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "generate.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The hand-made cases terraform cannot write (format 3, broken JSON) come from fixtures.
        for f in ["format-3.tfstate", "not-json.tfstate", "truncated.tfstate"] {
            std::fs::copy(recorded.join(f), dir.join(f)).unwrap();
        }
        dir
    })
}

fn state(name: &str) -> PathBuf {
    states().join(format!("{name}.tfstate"))
}

fn example_fleet() -> String {
    root().join("examples/fleet").display().to_string()
}

#[test]
fn every_refused_state_exits_2_and_names_the_cause_not_the_value() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("sensitive", "marked sensitive", &[]),
        (
            "secret-key",
            "`db_password` looks like a secret",
            &["correct-horse-battery-staple"],
        ),
        (
            "secret-value",
            "`bootstrap_blob` looks like a secret",
            &["q8Zr4Lx2Vb7Nw1Ps9Tk3Yd6Hf0Jg5MaCeWuXo2RiT7"],
        ),
        (
            "private-key",
            "`deploy_material` looks like a secret",
            &["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"],
        ),
        (
            "url-password",
            "`orders_db_url` looks like a secret (its value is a URL with a password in its user info); cellbridge carries identifiers only: output the endpoint and the ARN of the secret",
            &["Pa55word!"],
        ),
        (
            "empty-user-password",
            "`cache_url` looks like a secret (its value is a URL with a password in its user info)",
            &["hunter2pass"],
        ),
        (
            "connection-string",
            "`storage_connection` looks like a secret (its value is a connection string with an `AccountKey=` field)",
            &["T2ZmaWNpYWxseU5vdEFSZWFsS2V5QnV0TG9uZ0Vub3VnaA"],
        ),
        (
            "webhook",
            "`alerts_webhook` looks like a secret (its value is a Slack webhook URL, which is a credential itself)",
            &["Xq7LmN2pR8sT4vW6yZ1aB3cD"],
        ),
        ("nested", "key `subnets` holds a nested map", &[]),
        (
            "key-with-dot",
            "key `cluster.endpoint` is not a valid Flux variable name",
            &[],
        ),
        (
            "key-with-dash",
            "key `cluster-endpoint` is not a valid Flux variable name",
            &[],
        ),
        ("cell-name-traversal", "\"../x\" is not a DNS-1123 label", &[]),
        ("cell-name-slash", "\"prod/eu\" is not a DNS-1123 label", &[]),
        ("value-newline", "value of key `note` spans several lines", &[]),
        ("missing-schema", "has no `schema` key", &[]),
        (
            "no-output",
            "no `cell_metadata` output (outputs present: cell_meta)",
            &[],
        ),
        ("format-3", "unsupported state format version 3", &[]),
        ("not-json", "not JSON at byte", &[]),
        ("truncated", "truncated", &[]),
    ];
    for (name, expect, secrets) in cases {
        let path = state(name);
        let fleet = fleet_copy();
        let before = snapshot(fleet.path());
        for cmd in ["plan", "sync"] {
            let o = cellbridge(&[
                cmd,
                "--state",
                path.to_str().unwrap(),
                "--fleet",
                fleet.path().to_str().unwrap(),
            ]);
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd} {name}: {out}{err}");
            assert!(err.contains(expect), "{cmd} {name}: expected {expect:?} in {err:?}");
            assert!(
                err.contains(path.to_str().unwrap()),
                "{cmd} {name}: the error names the file: {err}"
            );
            for s in *secrets {
                assert!(
                    !out.contains(s) && !err.contains(s),
                    "{cmd} {name} leaks a secret value"
                );
            }
        }
        assert_eq!(
            snapshot(fleet.path()),
            before,
            "{name}: a refused state wrote into the fleet"
        );
    }
}

/// An EKS cluster's `certificate_authority` data (base64 of a PEM certificate) is public: the
/// plan carries it.
#[test]
fn a_cluster_certificate_passes_the_contract() {
    let path = state("eks-ca");
    let fleet = fleet_copy();
    let o = cellbridge(&[
        "plan",
        "--state",
        path.to_str().unwrap(),
        "--fleet",
        fleet.path().to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(2), "{out}{err}");
    assert!(!err.contains("looks like a secret"), "{err}");
    assert!(out.contains("`cluster_certificate_authority_data`"), "{out}");
}

#[test]
fn an_oversized_value_is_refused() {
    // Over Kubernetes' 1 MiB ConfigMap data limit: written by terraform when it is installed.
    let dir = tempfile::tempdir().unwrap();
    let mut vars: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/terraform/cases/prod-eu-west-1.cell.tfvars.json"))
            .unwrap(),
    )
    .unwrap();
    vars["metadata"]["allowed_cidrs"] = "10.0.0.0/16,".repeat(100_000).into();
    let path = if Command::new("terraform").arg("version").output().is_ok() {
        let cases = dir.path().join("cases");
        std::fs::create_dir_all(&cases).unwrap();
        std::fs::write(cases.join("huge.cell.tfvars.json"), vars.to_string()).unwrap();
        // generate.sh reads cases/ beside itself: run a copy of the fixture tree.
        let tf = dir.path().join("tf");
        Command::new("cp")
            .arg("-r")
            .arg(root().join("tests/fixtures/terraform"))
            .arg(&tf)
            .status()
            .unwrap();
        std::fs::write(tf.join("cases/huge.cell.tfvars.json"), vars.to_string()).unwrap();
        let o = Command::new("bash")
            .arg(tf.join("generate.sh"))
            .arg(dir.path())
            .arg("huge")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dir.path().join("huge.tfstate")
    } else {
        eprintln!("terraform is not installed: building the oversized state from the recorded fixture");
        let mut s: serde_json::Value = serde_json::from_slice(
            &std::fs::read(root().join("tests/fixtures/states/prod-eu-west-1.tfstate")).unwrap(),
        )
        .unwrap();
        s["outputs"]["cell_metadata"]["value"] = vars["metadata"].clone();
        let p = dir.path().join("huge.tfstate");
        std::fs::write(&p, s.to_string()).unwrap();
        p
    };
    let o = cellbridge(&["plan", "--state", path.to_str().unwrap(), "--fleet", &example_fleet()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("a ConfigMap holds at most 1048576 bytes"), "{err}");
}

#[test]
fn plan_for_a_new_cell_shows_the_whole_directory() {
    let o = cellbridge(&[
        "plan",
        "--state",
        state("staging-us-east-1").to_str().unwrap(),
        "--fleet",
        &example_fleet(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("cellbridge: new cell staging-us-east-1"), "{out}");
    assert!(out.contains("Labels: cellbridge, new-cell"));
    for f in [
        "cell-metadata.yaml",
        "kustomization.yaml",
        "layers.yaml",
        "flux-system/gotk-sync.yaml",
        "flux-system/gotk-components.yaml",
    ] {
        assert!(
            out.contains(&format!("+++ b/clusters/staging-us-east-1/{f}")),
            "missing {f} in\n{out}"
        );
    }
    assert!(
        out.contains("+  path: ./clusters/staging-us-east-1"),
        "gotk-sync is rendered for the cell"
    );
    assert!(out.contains("+  vpc_id: \"vpc-0f1e2d3c4b5a69788\""));
    assert!(out.contains("Status cellbridge/strict-substitution: success"), "{out}");
}

#[test]
fn plan_for_a_changed_value_shows_old_and_new() {
    let o = cellbridge(&[
        "plan",
        "--state",
        state("prod-eu-west-1").to_str().unwrap(),
        "--fleet",
        &example_fleet(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains("| `karpenter_queue_name` | `karpenter-prod-eu-west-1` | `karpenter-prod-eu-west-1-v2` |"),
        "{out}"
    );
    assert!(out.contains("-  karpenter_queue_name: \"karpenter-prod-eu-west-1\""));
    assert!(out.contains("+  karpenter_queue_name: \"karpenter-prod-eu-west-1-v2\""));
    assert!(
        !out.contains("+++ b/clusters/prod-eu-west-1/layers.yaml"),
        "only the ConfigMap changes"
    );
}

#[test]
fn a_key_added_without_a_schema_bump_fails_with_exit_1() {
    let o = cellbridge(&[
        "plan",
        "--state",
        state("key-added").to_str().unwrap(),
        "--fleet",
        &example_fleet(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(out.contains("schema-change"), "{out}");
    assert!(out.contains("Status cellbridge/strict-substitution: failure"));
    let o = cellbridge(&[
        "plan",
        "--state",
        state("key-added-bumped").to_str().unwrap(),
        "--fleet",
        &example_fleet(),
    ]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("Labels: cellbridge, schema-change"));
    assert!(
        out.contains("Keys no manifest uses:") && out.contains("`velero_bucket`"),
        "{out}"
    );
}

#[test]
fn json_output_is_machine_readable() {
    let o = cellbridge(&[
        "--output",
        "json",
        "plan",
        "--state",
        state("prod-eu-west-1").to_str().unwrap(),
        "--fleet",
        &example_fleet(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "change");
    assert_eq!(v["cell"], "prod-eu-west-1");
    assert_eq!(v["status_ok"], true);
    assert_eq!(v["key_changes"][0]["key"], "karpenter_queue_name");
    let o = cellbridge(&[
        "--output",
        "json",
        "plan",
        "--state",
        state("nested").to_str().unwrap(),
        "--fleet",
        &example_fleet(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["error"].as_str().unwrap().contains("subnets"));
}

/// What `terraform destroy` leaves (written by terraform: apply, then destroy): a decommission
/// plan for the cell named with --cell, exit 0, and nothing written even by `sync`.
#[test]
fn a_destroyed_state_shows_the_decommission_plan_and_writes_nothing() {
    let fleet = fleet_copy();
    let f = fleet.path().to_str().unwrap();
    let s = state("destroyed");
    let s = s.to_str().unwrap();
    let o = cellbridge(&["plan", "--state", s, "--fleet", f]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("stack was destroyed") && err.contains("--cell NAME"),
        "{err}"
    );

    let o = cellbridge(&["plan", "--state", s, "--fleet", f, "--cell", "prod-eu-west-1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        out.contains("Pull request on branch cellbridge/prod-eu-west-1"),
        "{out}"
    );
    assert!(out.contains("Labels: cellbridge, decommission"), "{out}");
    assert!(out.contains("must be confirmed gone from `eu-west-1`"), "{out}");
    for file in ["cell-metadata.yaml", "layers.yaml", "flux-system/gotk-components.yaml"] {
        assert!(
            out.contains(&format!("- `clusters/prod-eu-west-1/{file}`")),
            "{file}: {out}"
        );
    }
    assert!(!out.contains("clusters/_template"), "only the cell's directory: {out}");
    assert!(out.contains("| `infrastructure` |"), "the layers it ran: {out}");

    let o = cellbridge(&[
        "--output",
        "json",
        "plan",
        "--state",
        s,
        "--fleet",
        f,
        "--cell",
        "prod-eu-west-1",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "decommission");
    assert_eq!(v["decommission"]["confirmed"], false);

    let before = snapshot(fleet.path());
    let o = cellbridge(&["sync", "--state", s, "--fleet", f, "--cell", "prod-eu-west-1"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(snapshot(fleet.path()), before, "a decommission is a person's merge");
    // A cell the fleet does not have: nothing to remove.
    let o = cellbridge(&["plan", "--state", s, "--fleet", f, "--cell", "eu-gone-1"]);
    let (out, _) = text(&o);
    assert!(out.contains("nothing to remove"), "{out}");
}

#[test]
fn sync_writes_a_plain_directory_and_is_then_in_sync() {
    let fleet = fleet_copy();
    let f = fleet.path().to_str().unwrap();
    let s = state("staging-us-east-1");
    let o = cellbridge(&["sync", "--state", s.to_str().unwrap(), "--fleet", f]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(
        fleet
            .path()
            .join("clusters/staging-us-east-1/flux-system/gotk-sync.yaml")
            .is_file()
    );
    let o = cellbridge(&["plan", "--state", s.to_str().unwrap(), "--fleet", f]);
    let (out, _) = text(&o);
    assert!(out.contains("cell staging-us-east-1 is in sync"), "{out}");
    let o = cellbridge(&["check", "--fleet", f, "--cell", "staging-us-east-1"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

#[test]
fn sync_in_a_git_repo_commits_to_the_cell_branch_only() {
    let fleet = fleet_copy();
    let p = fleet.path();
    let git = |args: &[&str]| common::git(p, args);
    common::git_init(p);
    let head = git(&["rev-parse", "HEAD"]);
    let o = common::cellbridge_committing(&[
        "sync",
        "--state",
        state("prod-eu-west-1").to_str().unwrap(),
        "--fleet",
        p.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(git(&["rev-parse", "HEAD"]), head, "the checked-out branch did not move");
    assert_eq!(git(&["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(git(&["status", "--porcelain"]), "", "the working tree is untouched");
    assert_eq!(
        git(&["rev-parse", "cellbridge/prod-eu-west-1^"]),
        head,
        "the branch starts from HEAD"
    );
    assert_eq!(
        git(&["diff", "--name-only", "main", "cellbridge/prod-eu-west-1"]),
        "clusters/prod-eu-west-1/cell-metadata.yaml"
    );
    let shown = git(&[
        "show",
        "cellbridge/prod-eu-west-1:clusters/prod-eu-west-1/cell-metadata.yaml",
    ]);
    assert!(shown.contains("karpenter_queue_name: \"karpenter-prod-eu-west-1-v2\""));
}

#[test]
fn sync_never_moves_a_cell_branch_holding_a_persons_commit() {
    let fleet = fleet_copy();
    let p = fleet.path();
    let git = |args: &[&str]| common::git(p, args);
    common::git_init(p);
    let sync = || {
        common::cellbridge_committing(&[
            "sync",
            "--state",
            state("prod-eu-west-1").to_str().unwrap(),
            "--fleet",
            p.to_str().unwrap(),
        ])
    };
    // cellbridge's own commit on the branch: a later sync may move it.
    assert_eq!(sync().status.code(), Some(0));
    let o = sync();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    // A reviewer's commit on it: never dropped, the sync fails naming branch and commit.
    git(&["checkout", "-q", "cellbridge/prod-eu-west-1"]);
    std::fs::write(p.join("clusters/prod-eu-west-1/NOTES.md"), "a reviewer's note\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "a reviewer's note"]);
    git(&["checkout", "-q", "main"]);
    let theirs = git(&["rev-parse", "cellbridge/prod-eu-west-1"]);
    let o = sync();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("branch cellbridge/prod-eu-west-1 holds") && err.contains("a reviewer's note"),
        "{err}"
    );
    assert_eq!(
        git(&["rev-parse", "cellbridge/prod-eu-west-1"]),
        theirs,
        "the branch did not move"
    );
}

#[test]
fn sync_in_a_fleet_below_the_repositorys_top_commits_at_the_fleets_path() {
    let repo = tempfile::tempdir().unwrap();
    let fleet = fleet_copy();
    let sub = repo.path().join("platform/fleet");
    std::fs::create_dir_all(sub.parent().unwrap()).unwrap();
    std::fs::rename(fleet.path(), &sub)
        .or_else(|_| {
            std::process::Command::new("cp")
                .arg("-r")
                .arg(fleet.path())
                .arg(&sub)
                .status()
                .map(|_| ())
        })
        .unwrap();
    let git = |args: &[&str]| common::git(repo.path(), args);
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "monorepo"]);
    let o = common::cellbridge_committing(&[
        "sync",
        "--state",
        state("prod-eu-west-1").to_str().unwrap(),
        "--fleet",
        sub.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(git(&["status", "--porcelain"]), "", "the working tree is untouched");
    assert_eq!(
        git(&["diff", "--name-only", "main", "cellbridge/prod-eu-west-1"]),
        "platform/fleet/clusters/prod-eu-west-1/cell-metadata.yaml"
    );
}

#[test]
fn verbose_says_what_was_read_and_planned_in_plain_lines() {
    let fleet = fleet_copy();
    let f = fleet.path().to_str().unwrap();
    let s = state("prod-eu-west-1");
    let o = cellbridge(&["-v", "plan", "--state", s.to_str().unwrap(), "--fleet", f]);
    let (_, err) = text(&o);
    for said in [
        "state read",
        "serial=",
        "reading the fleet checkout",
        "planned",
        "cell=prod-eu-west-1",
        "check_passed=true",
    ] {
        assert!(err.contains(said), "{said:?} missing from {err}");
    }
    assert!(
        !err.contains('\u{1b}'),
        "no terminal colours in a redirected log: {err:?}"
    );
    let o = cellbridge(&["-v", "check", "--fleet", f]);
    let (_, err) = text(&o);
    assert!(err.contains("checked") && err.contains("findings=0"), "{err}");
}

#[test]
fn check_reports_missing_variables_with_file_and_line() {
    let fleet = fleet_copy();
    let f = fleet.path().join("infrastructure/base/karpenter/helmrelease.yaml");
    let text_before = std::fs::read_to_string(&f).unwrap();
    std::fs::write(
        &f,
        text_before.replace(
            "interruptionQueue: ${karpenter_queue_name}",
            "interruptionQueue: ${karpenter_queue}",
        ),
    )
    .unwrap();
    let line = text_before
        .lines()
        .position(|l| l.contains("interruptionQueue"))
        .unwrap()
        + 1;
    let o = cellbridge(&["check", "--fleet", fleet.path().to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        out.contains(&format!("infrastructure/base/karpenter/helmrelease.yaml:{line}")),
        "{out}"
    );
    assert!(out.contains("karpenter_queue"), "{out}");
    let o = cellbridge(&["check", "--fleet", &example_fleet()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

#[test]
fn recorded_fixtures_match_what_terraform_writes_today() {
    if Command::new("terraform").arg("version").output().is_err() {
        eprintln!("SKIPPED: terraform is not installed; nothing to compare the recorded fixtures with");
        return;
    }
    for name in ["staging-us-east-1", "prod-eu-west-1", "sensitive", "nested"] {
        let fresh = cellbridge::pure::tfstate::read_state_file(&state(name)).unwrap();
        let recorded =
            cellbridge::pure::tfstate::read_state_file(&root().join(format!("tests/fixtures/states/{name}.tfstate")))
                .unwrap();
        assert_eq!(
            fresh.outputs, recorded.outputs,
            "{name}: regenerate with tests/fixtures/terraform/generate.sh tests/fixtures/states"
        );
    }
}

#[test]
fn invoke_names_the_missing_variable_and_the_bad_event() {
    let o = Command::new(env!("CARGO_BIN_EXE_cellbridge"))
        .args(["invoke", "state-sync", "--event"])
        .arg(root().join("events/manual-sync-cell.json"))
        .env_remove("CELLBRIDGE_FLEET_REPO")
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("CELLBRIDGE_FLEET_REPO"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("event.json");
    std::fs::write(&bad, "{\"action\": ").unwrap();
    for function in ["state-sync", "cluster-bootstrap"] {
        let o = cellbridge(&["invoke", function, "--event", bad.to_str().unwrap()]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{function}: {err}");
        assert!(
            err.contains(bad.to_str().unwrap()),
            "{function}: the error names the file: {err}"
        );
    }
}
