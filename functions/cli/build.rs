//! Names the commit `cellbridge --version` prints: `CELLBRIDGE_COMMIT` when the build sets it (a
//! source archive has no Git), else the checkout's `git rev-parse HEAD`, else `unknown`. Never the
//! network.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo::rerun-if-env-changed=CELLBRIDGE_COMMIT");
    let commit = match std::env::var("CELLBRIDGE_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_owned(),
        _ => from_git().unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo::rustc-env=CELLBRIDGE_COMMIT={commit}");
}

fn from_git() -> Option<String> {
    let head = git(&["rev-parse", "--short=12", "HEAD"])?;
    // Build again when HEAD moves: HEAD itself, the branch it names, and the packed refs.
    for path in ["HEAD", "packed-refs"] {
        rerun_on_git_path(path);
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        rerun_on_git_path(&branch);
    }
    Some(head)
}

fn rerun_on_git_path(path: &str) {
    if let Some(p) = git(&["rev-parse", "--git-path", path]) {
        let p = PathBuf::from(p);
        if p.exists() {
            println!("cargo::rerun-if-changed={}", p.display());
        }
    }
}
