//! Helpers shared by the command line's integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn cellbridge(args: &[&str]) -> Output {
    // The variables that stand for flags: a caller's environment must not change what a test sees.
    Command::new(env!("CARGO_BIN_EXE_cellbridge"))
        .args(args)
        .env_remove("CELLBRIDGE_FLUX_GIT_URL")
        .env_remove("CELLBRIDGE_FLUX_GIT_BRANCH")
        .env_remove("CELLBRIDGE_STATE_KEY_PATTERN")
        .output()
        .unwrap()
}

pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A scratch copy of the example fleet (tests must never write into the repo).
pub fn fleet_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("cp")
        .arg("-r")
        .arg(root().join("examples/fleet/."))
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    dir
}

/// Every file (and symlink target) under `dir`, except Git's own bookkeeping.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                out.push((p, target.into_os_string().into_encoded_bytes()));
            } else if meta.is_dir() {
                if p.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                stack.push(p)
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()))
            }
        }
    }
    out.sort();
    out
}

/// Git's author and committer, so commits work on a machine without a Git identity.
const GIT_IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "t"),
    ("GIT_AUTHOR_EMAIL", "t@t"),
    ("GIT_COMMITTER_NAME", "t"),
    ("GIT_COMMITTER_EMAIL", "t@t"),
];

/// `git args` in `dir`, which must succeed; its standard output as written.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .envs(GIT_IDENTITY)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The same, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_out(dir, args).trim().to_owned()
}

/// `dir` as a Git repository on branch `main` with everything in it committed.
pub fn git_init(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "fleet"]);
}

/// `cellbridge args` with a Git identity (for `sync` into a repository).
pub fn cellbridge_committing(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cellbridge"))
        .args(args)
        .env_remove("CELLBRIDGE_FLUX_GIT_URL")
        .envs(GIT_IDENTITY)
        .output()
        .unwrap()
}
