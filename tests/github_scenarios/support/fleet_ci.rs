//! The fleet repository's own CI, played by the scenarios as GitHub Actions would run the
//! workflow cellbridge ships (`examples/github-actions/cellbridge-check.yml`): the check step's
//! own `run:` command, read from the workflow and the action it uses (`action/action.yml`), run
//! by bash over the files of the event's commit with the built `cellbridge` first on `PATH`,
//! and its exit status reported as a commit status named as the workflow's job.
//!
//! Nothing of the command is copied here: a change to the shipped workflow or action (another
//! command, an `|| true`, a check name) changes what the scenarios' queue sees.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cellbridge_tests::process::repo_root;
use serde_json::Value;

/// The shipped workflow's check: its name, and its step's command with that step's environment.
#[derive(Debug)]
pub(crate) struct FleetCheck {
    /// The job's `name`: the check a branch or a merge queue requires.
    pub(crate) name: String,
    run: String,
    env: Vec<(String, String)>,
}

const WORKFLOW: &str = "examples/github-actions/cellbridge-check.yml";
const ACTION: &str = "action/action.yml";

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The check as the shipped workflow defines it (read once).
pub(crate) fn fleet_check() -> &'static FleetCheck {
    static CHECK: OnceLock<FleetCheck> = OnceLock::new();
    CHECK.get_or_init(|| {
        let workflow = yaml(WORKFLOW);
        for event in ["pull_request", "merge_group"] {
            assert!(
                workflow["on"].get(event).is_some(),
                "{WORKFLOW}: not run on `{event}`, so GitHub never reports its check there"
            );
        }
        let jobs = workflow["jobs"].as_object().expect("jobs");
        assert_eq!(jobs.len(), 1, "{WORKFLOW}: one job, the check");
        let job = jobs.values().next().unwrap();
        let name = job["name"].as_str().expect("the job's name").to_owned();
        // The step that uses this repository's own action (`<owner>/<repo>/action@<ref>`).
        let step = job["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["uses"].as_str().is_some_and(|u| u.contains("/action@")))
            .unwrap_or_else(|| panic!("{WORKFLOW}: no step uses the action in {ACTION}"));
        let with = step["with"].as_object().cloned().unwrap_or_default();
        let action = yaml(ACTION);
        let input = |key: &str| -> String {
            match with.get(key) {
                Some(v) => scalar(v),
                None => scalar(&action["inputs"][key]["default"]),
            }
        };
        // The action's last step runs the check (the ones before install `cellbridge`, which
        // the scenarios have built).
        let steps = action["runs"]["steps"].as_array().expect("a composite action's steps");
        let check = steps.iter().rev().find(|s| s.get("run").is_some()).expect("a run step");
        assert_eq!(check["shell"], "bash", "{ACTION}: the check step's shell");
        let env = check["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), expression(&scalar(v), &input)))
                    .collect()
            })
            .unwrap_or_default();
        FleetCheck {
            name,
            run: check["run"].as_str().unwrap().to_owned(),
            env,
        }
    })
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `text` with its `${{ inputs.<name> }}` expressions evaluated; any other expression is one
/// this player of GitHub Actions does not know, and says so.
fn expression(text: &str, input: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("a closed expression") + start;
        let expr = rest[start + 3..end].trim();
        let name = expr
            .strip_prefix("inputs.")
            .unwrap_or_else(|| panic!("{ACTION}: the check step's `${{{{ {expr} }}}}` is not played here"));
        out.push_str(&input(name));
        rest = &rest[end + 2..];
    }
    out + rest
}

/// The built command line: `make test` builds it before the suites run.
fn cellbridge() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let bin = target.join("debug/cellbridge");
    assert!(
        bin.exists(),
        "{} is missing: `cargo build -p cellbridge-cli` first (make test builds it)",
        bin.display()
    );
    bin
}

/// Runs the check over `files` (the event's commit, checked out at the workspace's root):
/// whether it passed, and what it printed.
pub(crate) fn run_check(files: &BTreeMap<String, String>) -> (bool, String) {
    let check = fleet_check();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    for (path, text) in files {
        write(&workspace, path, text);
    }
    // Only `cellbridge` added to the runner's PATH, as the action's install step does.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(cellbridge(), bin.join("cellbridge")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    // GitHub's `shell: bash`: `bash --noprofile --norc -eo pipefail {0}`.
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &check.run])
        .current_dir(&workspace)
        .env("PATH", path)
        .envs(check.env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
}
