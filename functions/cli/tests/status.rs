//! `cellbridge status`, end to end: the example fleet and Terraform-written states laid out as
//! the state bucket is (`cells/<cell>/terraform.tfstate`, workspaces under `env:/<ws>/`), a
//! stack destroyed by the real `terraform destroy` when terraform is installed, and the
//! documented exit codes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{cellbridge, fleet_copy, root, text};

/// The value the refused `secret-value` state holds: never printed.
const SECRET: &str = "q8Zr4Lx2Vb7Nw1Ps9Tk3Yd6Hf0Jg5MaCeWuXo2RiT7";

fn put(states: &Path, key: &str, from: &Path) {
    let to = states.join(key);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
}

fn put_json(states: &Path, key: &str, json: &serde_json::Value) {
    let to = states.join(key);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::write(to, serde_json::to_string_pretty(json).unwrap()).unwrap();
}

fn example_state(cell: &str) -> PathBuf {
    root().join(format!("examples/states/{cell}.tfstate"))
}

fn fixture(name: &str) -> PathBuf {
    root().join(format!("tests/fixtures/states/{name}.tfstate"))
}

/// What `terraform destroy` leaves of a cell's stack: applied, then destroyed, by the real
/// binary when it is installed; else the same document written by hand.
fn destroyed_state(dir: &Path) -> PathBuf {
    let out = dir.join("destroyed.tfstate");
    if Command::new("terraform").arg("version").output().is_err() {
        eprintln!("terraform is not installed: writing what `terraform destroy` leaves by hand");
        let json = serde_json::json!({
            "version": 4,
            "terraform_version": "1.11.4",
            "serial": 4,
            "lineage": "7c7838c0-72d4-420c-6133-4a5f09676e51",
            "outputs": {},
            "resources": [],
            "check_results": null
        });
        std::fs::write(&out, json.to_string()).unwrap();
        return out;
    }
    let work = dir.join("tf");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(
        root().join("tests/fixtures/terraform/cell/main.tf"),
        work.join("main.tf"),
    )
    .unwrap();
    let vars = root().join("tests/fixtures/terraform/cases/staging-us-east-1.cell.tfvars.json");
    let state = format!("-state={}", out.display());
    let var_file = format!("-var-file={}", vars.display());
    for args in [
        &["init", "-input=false", "-no-color"][..],
        &["apply", "-input=false", "-no-color", "-auto-approve", &var_file, &state],
        &[
            "destroy",
            "-input=false",
            "-no-color",
            "-auto-approve",
            &var_file,
            &state,
        ],
    ] {
        let o = Command::new("terraform")
            .args(args)
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "terraform {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(written["outputs"], serde_json::json!({}), "{written}");
    assert_eq!(written["resources"], serde_json::json!([]), "{written}");
    out
}

/// The state column of the text row of `cell` whose source is `source` ("-" for none).
fn text_state<'a>(out: &'a str, cell: &str, source: &str) -> &'a str {
    let header = out.lines().next().unwrap();
    let (state_col, serial_col) = (header.find("STATE").unwrap(), header.find("SERIAL").unwrap());
    let (source_col, detail_col) = (header.find("SOURCE").unwrap(), header.find("DETAIL").unwrap());
    let line = out
        .lines()
        .find(|l| {
            l.len() > detail_col && l[..state_col].trim_end() == cell && l[source_col..detail_col].trim_end() == source
        })
        .unwrap_or_else(|| panic!("no row for {cell} from {source} in\n{out}"));
    line[state_col..serial_col].trim_end()
}

fn text_row<'a>(out: &'a str, cell: &str, source: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{cell} ")) && l.contains(&format!(" {source} ")))
        .unwrap_or_else(|| panic!("no row for {cell} from {source} in\n{out}"))
}

#[test]
fn status_shows_every_cell_and_state_and_exits_1_when_one_needs_attention() {
    let fleet = fleet_copy();
    let clusters = fleet.path().join("clusters");
    for cell in ["decom-eu-west-2", "orphan-ap-south-1"] {
        std::fs::create_dir_all(clusters.join(cell)).unwrap();
        std::fs::write(clusters.join(cell).join("kustomization.yaml"), "resources: []\n").unwrap();
    }
    let scratch = tempfile::tempdir().unwrap();
    let states = scratch.path().join("states");
    put(
        &states,
        "cells/prod-eu-west-1/terraform.tfstate",
        &example_state("prod-eu-west-1"),
    );
    put(
        &states,
        "cells/staging-us-east-1/terraform.tfstate",
        &example_state("staging-us-east-1"),
    );
    put(
        &states,
        "cells/payments-us-east-2/terraform.tfstate",
        &example_state("payments-us-east-2"),
    );
    // Not a state key under the pattern: no row.
    put(
        &states,
        "cells/prod-eu-west-1/terraform.tfstate.backup",
        &example_state("prod-eu-west-1"),
    );
    // Workspaces of prod-eu-west-1: an older serial of the fleet's lineage, and two refused.
    let mut old: serde_json::Value =
        serde_json::from_slice(&std::fs::read(example_state("prod-eu-west-1")).unwrap()).unwrap();
    old["serial"] = 1.into();
    put_json(&states, "env:/old/cells/prod-eu-west-1/terraform.tfstate", &old);
    put(
        &states,
        "env:/canary/cells/prod-eu-west-1/terraform.tfstate",
        &fixture("nested"),
    );
    put(
        &states,
        "env:/blue/cells/prod-eu-west-1/terraform.tfstate",
        &fixture("secret-value"),
    );
    put(
        &states,
        "cells/decom-eu-west-2/terraform.tfstate",
        &destroyed_state(scratch.path()),
    );
    // staging's state under another cell's key.
    put(
        &states,
        "cells/renamed-eu-west-1/terraform.tfstate",
        &example_state("staging-us-east-1"),
    );
    put(
        &states,
        "cells/broken-us-west-2/terraform.tfstate",
        &fixture("truncated"),
    );

    let args = [
        "status",
        "--fleet",
        fleet.path().to_str().unwrap(),
        "--states",
        states.to_str().unwrap(),
    ];
    let o = cellbridge(&args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let expected = [
        ("broken-us-west-2", "cells/broken-us-west-2/terraform.tfstate", "failed"),
        (
            "decom-eu-west-2",
            "cells/decom-eu-west-2/terraform.tfstate",
            "destroyed",
        ),
        ("orphan-ap-south-1", "-", "state missing"),
        (
            "payments-us-east-2",
            "cells/payments-us-east-2/terraform.tfstate",
            "pending",
        ),
        ("prod-eu-west-1", "cells/prod-eu-west-1/terraform.tfstate", "pending"),
        (
            "prod-eu-west-1",
            "env:/blue/cells/prod-eu-west-1/terraform.tfstate",
            "refused",
        ),
        (
            "prod-eu-west-1",
            "env:/canary/cells/prod-eu-west-1/terraform.tfstate",
            "refused",
        ),
        (
            "prod-eu-west-1",
            "env:/old/cells/prod-eu-west-1/terraform.tfstate",
            "stale",
        ),
        (
            "renamed-eu-west-1",
            "cells/renamed-eu-west-1/terraform.tfstate",
            "refused",
        ),
        (
            "staging-us-east-1",
            "cells/staging-us-east-1/terraform.tfstate",
            "pending",
        ),
    ];
    for (cell, source, state) in expected {
        assert_eq!(text_state(&out, cell, source), state, "{cell} {source}:\n{out}");
    }
    assert_eq!(
        out.lines().count(),
        1 + expected.len() + 2,
        "one row per state and missing cell:\n{out}"
    );
    assert!(!out.contains(".backup"), "{out}");
    // What each row says.
    let row = |cell, source| text_row(&out, cell, source);
    assert!(
        row("prod-eu-west-1", "cells/prod-eu-west-1/terraform.tfstate").ends_with("1 key changed; strict check passes"),
        "{out}"
    );
    assert!(
        row("staging-us-east-1", "cells/staging-us-east-1/terraform.tfstate")
            .contains("new cell (12 keys); strict check passes"),
        "{out}"
    );
    assert!(
        row("payments-us-east-2", "cells/payments-us-east-2/terraform.tfstate")
            .contains("new cell (6 keys); strict check fails"),
        "{out}"
    );
    assert!(
        row("prod-eu-west-1", "env:/canary/cells/prod-eu-west-1/terraform.tfstate")
            .contains("cell_metadata key `subnets` holds a nested map"),
        "{out}"
    );
    assert!(
        row("prod-eu-west-1", "env:/blue/cells/prod-eu-west-1/terraform.tfstate")
            .contains("cell_metadata key `bootstrap_blob` looks like a secret"),
        "{out}"
    );
    assert!(
        row("renamed-eu-west-1", "cells/renamed-eu-west-1/terraform.tfstate").contains(
            "the key says cell `renamed-eu-west-1` (--key-pattern) but cell_metadata.cell_name is `staging-us-east-1`"
        ),
        "{out}"
    );
    let broken = states.join("cells/broken-us-west-2/terraform.tfstate");
    assert!(
        row("broken-us-west-2", "cells/broken-us-west-2/terraform.tfstate")
            .contains(&format!("{}: truncated", broken.display())),
        "the reason names the file:\n{out}"
    );
    assert!(
        row("decom-eu-west-2", "cells/decom-eu-west-2/terraform.tfstate")
            .contains("the stack was destroyed (`terraform destroy`)"),
        "{out}"
    );
    assert!(
        row("orphan-ap-south-1", "-").contains("no state names the cell"),
        "{out}"
    );
    assert_eq!(
        out.lines().last().unwrap(),
        "7 cells (10 rows): 1 failed, 3 refused, 1 destroyed, 1 state missing, 3 pending, 1 stale; 9 need attention",
        "{out}"
    );
    for leak in [SECRET, "subnet-1", "subnet-2"] {
        assert!(
            !out.contains(leak) && !err.contains(leak),
            "a value reached the output: {leak}\n{out}"
        );
    }

    // The same as JSON, for automation.
    let o = cellbridge(&[&args[..], &["--json"]].concat());
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let s = &v["summary"];
    assert_eq!((s["cells"].as_u64(), s["rows"].as_u64()), (Some(7), Some(10)), "{s}");
    assert_eq!(s["needs_attention"], 9, "{s}");
    assert_eq!(
        (s["pending"].as_u64(), s["refused"].as_u64()),
        (Some(3), Some(3)),
        "{s}"
    );
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), expected.len());
    for (cell, source, state) in expected {
        let source = (source != "-").then_some(source);
        let c = cells
            .iter()
            .find(|c| c["cell"] == cell && c["source"].as_str() == source)
            .unwrap_or_else(|| panic!("{cell} {source:?} missing from {out}"));
        assert_eq!(c["state"], state.replace(' ', "-"), "{c}");
    }
    let pending = |cell: &str| {
        cells
            .iter()
            .find(|c| c["cell"] == cell && c["state"] == "pending")
            .unwrap()
    };
    assert_eq!(pending("payments-us-east-2")["check_ok"], false);
    assert_eq!(pending("payments-us-east-2")["new_cell"], true);
    assert_eq!(pending("prod-eu-west-1")["keys_changed"], 1);
    assert_eq!(pending("prod-eu-west-1")["serial"], 3);
    assert!(cells.iter().find(|c| c["cell"] == "decom-eu-west-2").unwrap()["serial"].is_u64());
    assert!(
        !out.contains(SECRET) && !out.contains("subnet-1"),
        "a value reached the JSON"
    );
}

#[test]
fn a_fleet_in_sync_exits_0_under_any_key_pattern() {
    // Sync both example states into a scratch fleet first: then the fleet holds them.
    let fleet = fleet_copy();
    let f = fleet.path().to_str().unwrap();
    for cell in ["prod-eu-west-1", "staging-us-east-1"] {
        let o = cellbridge(&["sync", "--state", example_state(cell).to_str().unwrap(), "--fleet", f]);
        assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    }
    let states = tempfile::tempdir().unwrap();
    for cell in ["prod-eu-west-1", "staging-us-east-1"] {
        put(
            states.path(),
            &format!("stacks/{cell}/eks.tfstate"),
            &example_state(cell),
        );
    }
    let s = states.path().to_str().unwrap();
    let o = cellbridge(&[
        "status",
        "--fleet",
        f,
        "--states",
        s,
        "--key-pattern",
        "stacks/{cell}/eks.tfstate",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(
        text_state(&out, "prod-eu-west-1", "stacks/prod-eu-west-1/eks.tfstate"),
        "in sync"
    );
    assert_eq!(
        text_state(&out, "staging-us-east-1", "stacks/staging-us-east-1/eks.tfstate"),
        "in sync"
    );
    assert_eq!(
        out.lines().last().unwrap(),
        "2 cells: 2 in sync; 0 need attention",
        "{out}"
    );

    // Under the default pattern none of these keys is a state: both cells lack one.
    let o = cellbridge(&["status", "--fleet", f, "--states", s]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert_eq!(text_state(&out, "prod-eu-west-1", "-"), "state missing");
    assert_eq!(text_state(&out, "staging-us-east-1", "-"), "state missing");
}

#[test]
fn an_unreadable_states_dir_or_a_bad_pattern_exits_2_naming_it() {
    let fleet = fleet_copy();
    let f = fleet.path().to_str().unwrap();
    let missing = fleet.path().join("no-such-states");
    let m = missing.to_str().unwrap();
    let o = cellbridge(&["status", "--fleet", f, "--states", m]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains(&format!("states directory {m}: ")), "{err}");
    assert!(out.is_empty(), "{out}");

    let o = cellbridge(&["status", "--fleet", f, "--states", m, "--json"]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["exit_code"], 2);
    assert!(v["error"].as_str().unwrap().contains(m), "{v}");

    let o = cellbridge(&[
        "status",
        "--fleet",
        f,
        "--states",
        f,
        "--key-pattern",
        "cells/terraform.tfstate",
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--key-pattern \"cells/terraform.tfstate\": must contain {cell}"),
        "{err}"
    );

    let o = cellbridge(&["status", "--fleet", m, "--states", f]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(m), "{err}");
}

/// The rows the fleet dashboard makes of the same states and fleet: a cell part of the key that
/// is no DNS-1123 label is refused, and a symlinked `clusters/<cell>` (which Flux leaves out of
/// its artifact) is a cell that fails, or lacks a state.
#[test]
fn a_non_dns_1123_cell_is_refused_and_a_symlinked_cell_fails_as_on_the_dashboard() {
    let fleet = fleet_copy();
    let clusters = fleet.path().join("clusters");
    std::os::unix::fs::symlink("prod-eu-west-1", clusters.join("alias-eu-west-1")).unwrap();
    std::os::unix::fs::symlink("prod-eu-west-1", clusters.join("link-eu-west-1")).unwrap();
    let states = tempfile::tempdir().unwrap();
    let prod: serde_json::Value =
        serde_json::from_slice(&std::fs::read(example_state("prod-eu-west-1")).unwrap()).unwrap();
    for cell in ["Prod_EU", "alias-eu-west-1"] {
        let mut state = prod.clone();
        state["outputs"]["cell_metadata"]["value"]["cell_name"] = cell.into();
        put_json(states.path(), &format!("cells/{cell}/terraform.tfstate"), &state);
    }
    let (f, s) = (fleet.path().to_str().unwrap(), states.path().to_str().unwrap());
    let o = cellbridge(&["status", "--fleet", f, "--states", s]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let refused = text_row(&out, "Prod_EU", "cells/Prod_EU/terraform.tfstate");
    assert_eq!(
        text_state(&out, "Prod_EU", "cells/Prod_EU/terraform.tfstate"),
        "refused"
    );
    assert!(
        refused.contains("the cell part \"Prod_EU\" of the key is not a DNS-1123 label"),
        "{out}"
    );
    let linked = text_row(&out, "alias-eu-west-1", "cells/alias-eu-west-1/terraform.tfstate");
    assert_eq!(
        text_state(&out, "alias-eu-west-1", "cells/alias-eu-west-1/terraform.tfstate"),
        "failed"
    );
    assert!(
        linked.contains("fleet path clusters/alias-eu-west-1 is a symlink (→ prod-eu-west-1)"),
        "{out}"
    );
    assert_eq!(text_state(&out, "link-eu-west-1", "-"), "state missing");
    assert_eq!(text_state(&out, "prod-eu-west-1", "-"), "state missing");
}
