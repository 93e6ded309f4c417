//! Committing to a branch of a local Git repository without touching its working tree or the
//! checked-out branch: a private index file and git's plumbing commands.

use std::path::Path;
use std::process::{Command, Stdio};

use cellbridge::fleet::FileWrite;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args}: {message}")]
    Failed { args: String, message: String },
}

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

pub fn is_repo(root: &Path) -> bool {
    git(root, None, &["rev-parse", "--show-toplevel"], None)
        .ok()
        .and_then(|top| std::fs::canonicalize(top).ok())
        .zip(std::fs::canonicalize(root).ok())
        .is_some_and(|(top, root)| top == root)
}

/// Commits `files` on top of HEAD to `branch` (created or moved there), each with its mode (a
/// symlink is the blob of its target, mode 120000, as git stores one), returns the commit id.
pub fn commit_files(root: &Path, branch: &str, files: &[FileWrite], message: &str) -> Result<String, GitError> {
    let head = git(root, None, &["rev-parse", "HEAD"], None)?;
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
        git(
            root,
            None,
            &["update-ref", &format!("refs/heads/{branch}"), &commit],
            None,
        )?;
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
    use cellbridge::fleet::FileMode;

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
