//! The bad input corpus at the command line, for the cases cli.rs does not
//! already cover: a 200 MB state (whole and truncated), broken fleet repos (a path outside the
//! repo, a symlink loop, malformed `${`, a cell-metadata.yaml that is not a ConfigMap or not
//! YAML) and events of the wrong shape. Every case must end in an error that names the cause and
//! where it is, with the documented exit code, and must leave the fleet byte-identical (for a
//! Git fleet: no new refs).
//!
//! A malformed SSH key in the Flux Git secret is covered where the rule lives:
//! `shared/src/pure/bootstrap/gitsecret/tests.rs`
//! (`keys_flux_cannot_read_are_refused_before_anything_is_applied`), and a malformed secret
//! stopping the run before the cluster is touched in `shared/tests/rules/bootstrap/sync_objects.rs`
//! (`git_credentials_are_checked_before_the_cluster_is_touched`).

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{cellbridge, fleet_copy, git, git_init, root, snapshot, text};

fn fixture_state(name: &str) -> PathBuf {
    root().join(format!("tests/fixtures/states/{name}.tfstate"))
}

fn refs(dir: &Path) -> String {
    git(dir, &["for-each-ref", "--format=%(refname) %(objectname)"])
}

/// Streams a valid Terraform state of about `bytes` bytes: the prod-eu-west-1 fixture's header
/// and outputs, then a `resources` array of realistic-looking resources (escapes, unicode,
/// nesting) long enough to reach the size.
fn write_huge_state(path: &Path, bytes: u64) {
    let fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture_state("prod-eu-west-1")).unwrap()).unwrap();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    write!(
        w,
        "{{\n  \"version\": 4,\n  \"terraform_version\": {},\n  \"serial\": {},\n  \"lineage\": {},\n  \"outputs\": {},\n  \"resources\": [",
        fixture["terraform_version"], fixture["serial"], fixture["lineage"], fixture["outputs"]
    )
    .unwrap();
    let mut written: u64 = 0;
    let mut i: u64 = 0;
    while written < bytes {
        let r = serde_json::json!({
            "mode": "managed",
            "type": "aws_instance",
            "name": format!("node_{i}"),
            "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
            "instances": [{
                "index_key": i,
                "schema_version": 1,
                "attributes": {
                    "id": format!("i-{i:017x}"),
                    "ami": "ami-0c55b159cbfafe1f0",
                    "tags": {"Name": format!("node {i}"), "cellbridge.dev/cell": "prod-eu-west-1", "note": "quotes \" and \\ and ünïcödé ✓"},
                    "user_data": "#!/bin/bash\necho '{\"a\": [1, 2, {\"b\": null}]}' > /etc/x\n",
                    "ebs_block_device": [{"volume_size": 100, "encrypted": true, "iops": null}, {"volume_size": 1.5e3}],
                    "security_groups": ["sg-0123", "sg-4567"],
                },
                "sensitive_attributes": [],
                "dependencies": ["aws_subnet.a", "aws_security_group.nodes"],
            }],
        })
        .to_string();
        if i > 0 {
            w.write_all(b",\n    ").unwrap();
        }
        w.write_all(r.as_bytes()).unwrap();
        written += r.len() as u64 + 6;
        i += 1;
    }
    w.write_all(b"\n  ],\n  \"check_results\": null\n}\n").unwrap();
    w.flush().unwrap();
}

#[test]
fn a_200_mb_state_is_planned_and_a_truncated_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.tfstate");
    write_huge_state(&path, 200 * 1024 * 1024);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size >= 200 * 1024 * 1024, "{size}");
    let fleet = fleet_copy();
    let f = fleet.path().to_str().unwrap();
    let before = snapshot(fleet.path());

    let o = cellbridge(&["plan", "--state", path.to_str().unwrap(), "--fleet", f]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        out.contains("| `karpenter_queue_name` | `karpenter-prod-eu-west-1` | `karpenter-prod-eu-west-1-v2` |"),
        "the plan is the same as for the small state: {out}"
    );
    assert!(
        out.contains("+  karpenter_queue_name: \"karpenter-prod-eu-west-1-v2\""),
        "{out}"
    );
    assert!(out.contains("Status cellbridge/strict-substitution: success"), "{out}");
    assert!(
        !out.contains("aws_instance") && !out.contains("node_1"),
        "nothing but the outputs is read out"
    );

    // Cut in the middle of `resources`: the outputs were complete, the document is not.
    let cut = size / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    for cmd in ["plan", "sync"] {
        let o = cellbridge(&[cmd, "--state", path.to_str().unwrap(), "--fleet", f]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {out}{err}");
        assert!(
            err.contains(&format!("{}: truncated", path.display())),
            "{cmd}: names the file and the cause: {err}"
        );
        assert!(err.contains(&format!("byte {cut}")), "{cmd}: says where it ends: {err}");
    }
    assert_eq!(snapshot(fleet.path()), before, "a refused state wrote into the fleet");
}

/// A broken fleet: `check` and `plan` run over it, and `plan` must never write.
struct Broken {
    fleet: tempfile::TempDir,
    before: Vec<(PathBuf, Vec<u8>)>,
}

impl Broken {
    fn new(breakage: impl FnOnce(&Path)) -> Broken {
        let fleet = fleet_copy();
        breakage(fleet.path());
        let before = snapshot(fleet.path());
        Broken { fleet, before }
    }
    fn f(&self) -> &str {
        self.fleet.path().to_str().unwrap()
    }
    fn check(&self) -> (Option<i32>, String, String) {
        let o = cellbridge(&["check", "--fleet", self.f()]);
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    }
    fn plan(&self) -> (Option<i32>, String, String) {
        let state = fixture_state("prod-eu-west-1");
        let o = cellbridge(&["plan", "--state", state.to_str().unwrap(), "--fleet", self.f()]);
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    }
    fn unchanged(&self, case: &str) {
        assert_eq!(
            snapshot(self.fleet.path()),
            self.before,
            "{case}: the fleet was written"
        );
    }
}

#[test]
fn a_kustomization_entry_outside_the_repo_is_named_with_its_file() {
    let b = Broken::new(|p| {
        let k = p.join("clusters/prod-eu-west-1/kustomization.yaml");
        let mut t = std::fs::read_to_string(&k).unwrap();
        t.push_str("  - ../../../outside\n");
        std::fs::write(k, t).unwrap();
    });
    let expect =
        "clusters/prod-eu-west-1/kustomization.yaml: `resources` entry `../../../outside` leaves the fleet repo";
    let (code, out, err) = b.check();
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains(expect), "{err}");
    // plan still shows the pull request, with the check failing and saying why.
    let (code, out, err) = b.plan();
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("Status cellbridge/strict-substitution: failure"), "{out}");
    assert!(out.contains(expect), "{out}");
    b.unchanged("outside path");
}

/// Flux's source artifact holds no symlinks (see cellbridge's `fleet` module), so a loop is no
/// error: a kustomization reaching through it finds nothing, and the finding names the link.
#[test]
fn a_symlink_loop_in_the_fleet_is_named() {
    let b = Broken::new(|p| {
        let dir = p.join("infrastructure/base");
        std::os::unix::fs::symlink("loop-b", dir.join("loop-a")).unwrap();
        std::os::unix::fs::symlink("loop-a", dir.join("loop-b")).unwrap();
        let k = dir.join("kustomization.yaml");
        let mut t = std::fs::read_to_string(&k).unwrap();
        t.push_str("  - loop-a\n");
        std::fs::write(k, t).unwrap();
    });
    let expect = "`loop-a` is a symlink (→ loop-b): Flux leaves symlinks out of its source artifact";
    let (code, out, err) = b.check();
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("infrastructure/base/kustomization.yaml:"),
        "names the file: {out}"
    );
    assert!(out.contains(expect), "names the link and says why: {out}");
    let (code, out, err) = b.plan();
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("Status cellbridge/strict-substitution: failure"), "{out}");
    assert!(out.contains(expect), "{out}");
    b.unchanged("symlink loop");
}

#[test]
fn malformed_substitutions_are_reported_with_file_and_line() {
    let rel = "infrastructure/base/karpenter/helmrelease.yaml";
    let original = std::fs::read_to_string(root().join("examples/fleet").join(rel)).unwrap();
    let line_of = |needle: &str| original.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases = [
        (
            "clusterName: ${cluster_name}",
            "clusterName: ${cluster_name",
            "missing closing brace in `${cluster_name`",
        ),
        (
            "interruptionQueue: ${karpenter_queue_name}",
            "interruptionQueue: ${1abc}",
            "`1abc` can never be a key",
        ),
    ];
    for (from, to, cause) in cases {
        let line = line_of(from.split(':').next().unwrap());
        let b = Broken::new(|p| std::fs::write(p.join(rel), original.replace(from, to)).unwrap());
        let at = format!("{rel}:{line}");
        // A manifest Flux would refuse is a check failure (exit 1), not invalid input to cellbridge.
        let (code, out, err) = b.check();
        assert_eq!(code, Some(1), "{to}: {out}{err}");
        assert!(
            out.contains(&at) && out.contains(cause),
            "{to}: expected {at} and {cause:?} in {out}"
        );
        let (code, out, err) = b.plan();
        assert_eq!(code, Some(1), "{to}: {out}{err}");
        assert!(out.contains("Status cellbridge/strict-substitution: failure"), "{out}");
        assert!(out.contains(&at) && out.contains(cause), "{to}: {out}");
        b.unchanged(to);
    }
}

#[test]
fn a_cell_metadata_file_that_is_not_a_config_map_is_refused() {
    let rel = "clusters/prod-eu-west-1/cell-metadata.yaml";
    let cases = [
        ("just: [unclosed\n", "not valid YAML"),
        (
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata: {}\n",
            "expected ConfigMap `cell-metadata` in namespace `flux-system`, found Secret",
        ),
    ];
    for (content, cause) in cases {
        let b = Broken::new(|p| std::fs::write(p.join(rel), content).unwrap());
        let (code, out, err) = b.check();
        assert_eq!(code, Some(2), "check {cause}: {out}{err}");
        assert!(err.contains(&format!("{rel}: ")) && err.contains(cause), "check: {err}");
        let (code, out, err) = b.plan();
        assert_eq!(code, Some(2), "plan {cause}: {out}{err}");
        assert!(err.contains(&format!("{rel}: ")) && err.contains(cause), "plan: {err}");
        b.unchanged(cause);
    }
}

#[test]
fn refused_input_in_a_git_fleet_makes_no_ref_and_no_commit() {
    let fleet = fleet_copy();
    let p = fleet.path();
    std::fs::write(
        p.join("clusters/prod-eu-west-1/cell-metadata.yaml"),
        "just: [unclosed\n",
    )
    .unwrap();
    git_init(p);
    let refs_before = refs(p);
    let files_before = snapshot(p);
    for state in ["prod-eu-west-1", "truncated", "format-3"] {
        let s = fixture_state(state);
        let o = cellbridge(&["sync", "--state", s.to_str().unwrap(), "--fleet", p.to_str().unwrap()]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{state}: {out}{err}");
        assert_eq!(refs(p), refs_before, "{state}: a refused sync created or moved a ref");
        assert_eq!(
            git(p, &["status", "--porcelain"]),
            "",
            "{state}: the working tree changed"
        );
        assert_eq!(snapshot(p), files_before, "{state}");
    }
}

/// Settings that make any network call fail at once: a refusal must come before one.
fn invoke(function: &str, event: &serde_json::Value) -> (Option<i32>, String, String) {
    invoke_with(function, event, &[])
}

fn invoke_with(function: &str, event: &serde_json::Value, extra: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("event.json");
    std::fs::write(&path, event.to_string()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_cellbridge"))
        .args(["invoke", function, "--event", path.to_str().unwrap()])
        .args(extra)
        .env("CELLBRIDGE_FLEET_REPO", "acme/fleet")
        .env("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github")
        .env("CELLBRIDGE_STATE_BUCKET", "acme-tfstate")
        .env("CELLBRIDGE_FLUX_GIT_SECRET", "cellbridge/flux-git")
        .env("CELLBRIDGE_FLUX_GIT_URL", "ssh://git@github.com/acme/fleet")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_MAX_ATTEMPTS", "1")
        .output()
        .unwrap();
    let (out, err) = text(&o);
    (o.status.code(), out, err)
}

#[test]
fn events_of_the_wrong_shape_are_refused_naming_the_field() {
    let mut no_key: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("events/s3-put.json")).unwrap()).unwrap();
    no_key["Records"][0]["s3"]["object"]
        .as_object_mut()
        .unwrap()
        .remove("key");
    let cases: Vec<(&str, serde_json::Value, Vec<&str>)> = vec![
        (
            "state-sync",
            serde_json::json!({"action": "sync", "cell": "x", "celll": "y"}),
            vec!["unknown field `celll`", "`cell`"],
        ),
        (
            "cluster-bootstrap",
            serde_json::json!({"action": "bootstrap", "cluster": "c", "region": "eu-west-1", "dryrun": true}),
            vec!["unknown field `dryrun`", "`dry_run`"],
        ),
        (
            "state-sync",
            serde_json::json!({"action": "frobnicate", "cell": "x"}),
            vec!["unknown action \"frobnicate\"", "\"sync\""],
        ),
        (
            "cluster-bootstrap",
            serde_json::json!({"action": "frobnicate", "cluster": "c"}),
            vec!["unknown action \"frobnicate\"", "\"bootstrap\""],
        ),
        ("state-sync", no_key, vec!["S3 record 0", "no s3.object.key"]),
        (
            "state-sync",
            serde_json::json!({"hello": 1}),
            vec![
                "not a state-sync event",
                "S3 notification",
                "EventBridge",
                "SQS",
                "\"action\"",
            ],
        ),
        (
            "cluster-bootstrap",
            serde_json::json!({"hello": 1}),
            vec![
                "not a cluster-bootstrap event",
                "EventBridge event, SQS messages nor a manual payload",
            ],
        ),
        ("state-sync", serde_json::json!([1, 2]), vec!["not a JSON object"]),
    ];
    for (function, event, expect) in cases {
        let (code, out, err) = invoke(function, &event);
        assert_eq!(code, Some(2), "{function} {event}: {out}{err}");
        for e in expect {
            assert!(err.contains(e), "{function} {event}: expected {e:?} in {err}");
        }
    }
}

#[test]
fn fields_aws_may_add_to_its_events_are_tolerated() {
    // Only manual payloads are strict: an S3 record with fields AWS added later still gets as
    // far as reading the state, which here fails at the closed port (retryable, exit 3).
    let mut event: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("events/s3-put.json")).unwrap()).unwrap();
    event["Records"][0]["newAwsField"] = serde_json::json!({"x": 1});
    event["Records"][0]["s3"]["object"]["checksumAlgorithm"] = "CRC64NVME".into();
    event["someTopLevelField"] = 1.into();
    let (code, out, err) = invoke("state-sync", &event);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        out.contains("\"retryable\": true") && out.contains("prod-eu-west-1"),
        "{out}"
    );
}

/// A bootstrap that fails on a fault worth retrying exits 3 like state-sync's, whether the fault
/// is at EKS (the local fleet read fine) or while reading the fleet repo from GitHub (the
/// credentials' secret cannot be reached): neither is the event's fault.
#[test]
fn a_bootstrap_that_may_pass_on_a_retry_exits_3() {
    let event: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("events/cloudtrail-create-cluster.json")).unwrap()).unwrap();
    let fleet = root().join("tests/fixtures/flux/fleet");
    for (what, extra) in [
        ("EKS unreachable", vec!["--fleet", fleet.to_str().unwrap()]),
        ("the fleet repo's credentials unreachable", vec![]),
    ] {
        let (code, out, err) = invoke_with("cluster-bootstrap", &event, &extra);
        assert_eq!(code, Some(3), "{what}: {out}{err}");
    }
}

/// The suite-wide leak capture (tests/support/leak.rs's layout, written here without that crate):
/// secrets go to `secrets.jsonl`, output to a capture file of this process.
fn leak_dir() -> PathBuf {
    let d = std::env::var_os("CELLBRIDGE_LEAK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/leak-capture"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn append(path: PathBuf, text: &str) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

#[test]
fn refused_secret_values_appear_in_no_output_even_at_trace() {
    let dir = leak_dir();
    let capture = dir.join(format!("bad_input-{}.log", std::process::id()));
    let cases = [
        ("secret-key", "db_password"),
        ("secret-value", "bootstrap_blob"),
        ("private-key", "deploy_material"),
    ];
    for (name, key) in cases {
        let path = fixture_state(name);
        let state: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let value = state["outputs"]["cell_metadata"]["value"][key]
            .as_str()
            .unwrap()
            .to_owned();
        append(
            dir.join("secrets.jsonl"),
            &(serde_json::json!({"id": format!("cli: `{key}` of {name}.tfstate"), "value": value, "from": "bad_input"})
                .to_string() + "\n"),
        );
        let fleet = fleet_copy();
        for args in [
            &["plan"][..],
            &["sync"],
            &["--output", "json", "plan"],
            &["--verbose", "plan"],
            &["--verbose", "--output", "json", "sync"],
        ] {
            let o = Command::new(env!("CARGO_BIN_EXE_cellbridge"))
                .args(args)
                .args([
                    "--state",
                    path.to_str().unwrap(),
                    "--fleet",
                    fleet.path().to_str().unwrap(),
                ])
                .env("RUST_LOG", "trace")
                .output()
                .unwrap();
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {out}{err}");
            assert!(
                format!("{out}{err}").contains(&format!("`{key}` looks like a secret")),
                "{out}{err}"
            );
            append(
                capture.clone(),
                &format!("== cellbridge {args:?} {name}\n{out}\n{err}\n"),
            );
            let body = value.lines().find(|l| !l.starts_with("-----")).unwrap();
            assert!(
                !out.contains(body) && !err.contains(body),
                "{name} {args:?}: the value is in the output"
            );
        }
    }
}

/// `--fleet` naming a directory that is no fleet repository (no `clusters/`) is said to be one,
/// for every command that reads a fleet, before anything else is read or written.
#[test]
fn a_fleet_directory_without_clusters_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let state = fixture_state("prod-eu-west-1");
    let s = state.to_str().unwrap();
    for args in [
        vec!["plan", "--state", s, "--fleet", d],
        vec!["sync", "--state", s, "--fleet", d],
        vec!["check", "--fleet", d],
        vec!["status", "--states", d, "--fleet", d],
    ] {
        let o = cellbridge(&args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}{err}");
        assert!(
            err.contains(&format!("fleet repo {d}: no clusters/ directory here")),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
}
