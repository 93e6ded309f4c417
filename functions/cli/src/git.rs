//! Committing to a branch of a local Git repository without touching its working tree or the
//! checked-out branch: a private index file and git's plumbing commands.

use std::path::Path;
use std::process::{Command, Stdio};

use cellbridge::pure::fleet::FileWrite;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args}: {message}")]
    Failed { args: String, message: String },
    /// The cell's branch holds a commit cellbridge did not write: it is never moved.
    #[error(
        "branch {branch} holds {commit}, a commit cellbridge did not write: cellbridge will not move it. Merge or keep that work elsewhere, or delete the branch (git branch -D {branch}), then sync again"
    )]
    Foreign { branch: String, commit: String },
}

/// The trailer every commit `cellbridge sync` writes carries: what tells its commits from a
/// person's on the cell's branch.
pub const TRAILER: &str = "Cellbridge-Serial:";

fn git(root: &Path, index: Option<&Path>, args: &[&str], stdin: Option<&[u8]>) -> Result<String, GitError> {
    let mut cmd = Command::new("git");
    cmd.current_dir(root)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(i) = index {
        cmd.env("GIT_INDEX_FILE", i);
    }
    let failed = |message: String| GitError::Failed {
        args: args.join(" "),
        message,
    };
    let mut child = cmd.spawn().map_err(|e| failed(e.to_string()))?;
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(input)
            .map_err(|e| failed(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The repository `root` is in, and the path of `root` inside it (`""` at its top, else ending in
/// `/`): a fleet may be a sub-directory of a larger repository. `None` outside any repository.
pub fn repo_of(root: &Path) -> Option<(std::path::PathBuf, String)> {
    let top = git(root, None, &["rev-parse", "--show-toplevel"], None).ok()?;
    let prefix = git(root, None, &["rev-parse", "--show-prefix"], None).ok()?;
    Some((std::path::PathBuf::from(top), prefix))
}

/// Commits `files` (paths below the repository's top) on top of HEAD to `branch`, each with its
/// mode (a symlink is the blob of its target, mode 120000, as git stores one); returns the
/// commit id. A branch that exists moves only when every commit it has beyond HEAD is one
/// cellbridge wrote ([`TRAILER`]), and only from the head read (`update-ref` with its old
/// value): a person's commit is never dropped.
pub fn commit_files(root: &Path, branch: &str, files: &[FileWrite], message: &str) -> Result<String, GitError> {
    let head = git(root, None, &["rev-parse", "HEAD"], None)?;
    let refname = format!("refs/heads/{branch}");
    let current = git(root, None, &["rev-parse", "--verify", "--quiet", &refname], None).ok();
    if let Some(tip) = current.as_deref().filter(|t| !t.is_empty()) {
        let theirs = git(root, None, &["rev-list", &format!("{head}..{tip}")], None)?;
        for c in theirs.lines().filter(|l| !l.is_empty()) {
            let msg = git(root, None, &["log", "-1", "--format=%B", c], None)?;
            if !msg.lines().any(|l| l.starts_with(TRAILER)) {
                let subject = git(root, None, &["log", "-1", "--format=%h (%an: %s)", c], None)?;
                return Err(GitError::Foreign {
                    branch: branch.to_owned(),
                    commit: subject,
                });
            }
        }
    }
    let dir = tempfile_dir(root)?;
    let index = dir.join("index");
    let result = (|| {
        git(root, Some(&index), &["read-tree", &head], None)?;
        for f in files {
            let blob = git(
                root,
                None,
                &["hash-object", "-w", "--stdin"],
                Some(f.content.as_bytes()),
            )?;
            git(
                root,
                Some(&index),
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("{},{blob},{}", f.mode.git_mode(), f.path),
                ],
                None,
            )?;
        }
        let tree = git(root, Some(&index), &["write-tree"], None)?;
        let commit = git(
            root,
            None,
            &["commit-tree", &tree, "-p", &head, "-F", "-"],
            Some(message.as_bytes()),
        )?;
        // Compare-and-swap: from the head read (or creating it), so a commit made meanwhile is
        // never overwritten.
        let old = current
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "0".repeat(40));
        git(root, None, &["update-ref", &refname, &commit, &old], None)?;
        Ok(commit)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn tempfile_dir(root: &Path) -> Result<std::path::PathBuf, GitError> {
    let git_dir = git(root, None, &["rev-parse", "--absolute-git-dir"], None)?;
    let dir = Path::new(&git_dir).join(format!("cellbridge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| GitError::Failed {
        args: "mkdir".into(),
        message: e.to_string(),
    })?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellbridge::pure::fleet::FileMode;

    #[test]
    fn commits_keep_each_files_mode() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let run = |args: &[&str]| git(root, None, args, None).unwrap();
        run(&["init", "-q"]);
        // commit_files' own `git commit-tree` reads the identity from the repository.
        run(&["config", "user.name", "t"]);
        run(&["config", "user.email", "t@example.com"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        run(&["add", "a.txt"]);
        run(&["commit", "-qm", "base"]);
        let files = [
            FileWrite::regular("c/cell-metadata.yaml", "x: 1\n"),
            FileWrite {
                path: "c/scripts/run.sh".into(),
                mode: FileMode::Executable,
                content: "#!/bin/sh\n".into(),
            },
            FileWrite {
                path: "c/README.md".into(),
                mode: FileMode::Symlink,
                content: "../a.txt".into(),
            },
        ];
        let commit = commit_files(root, "cellbridge/c", &files, "cell c").unwrap();
        let tree = run(&["ls-tree", "-r", &commit]);
        let modes: Vec<(&str, &str)> = tree
            .lines()
            .map(|l| {
                let (meta, path) = l.split_once('\t').unwrap();
                (path, meta.split(' ').next().unwrap())
            })
            .collect();
        assert_eq!(
            modes,
            [
                ("a.txt", "100644"),
                ("c/README.md", "120000"),
                ("c/cell-metadata.yaml", "100644"),
                ("c/scripts/run.sh", "100755")
            ]
        );
        assert_eq!(run(&["cat-file", "-p", &format!("{commit}:c/README.md")]), "../a.txt");
    }
}
