//! Committing to a branch of a local Git repository without touching its working tree or the
//! checked-out branch: a private index file and git's plumbing commands.

use std::path::Path;
use std::process::{Command, Stdio};

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

/// Commits `files` on top of HEAD to `branch` (created or moved there), returns the commit id.
pub fn commit_files(root: &Path, branch: &str, files: &[(String, String)], message: &str) -> Result<String, GitError> {
    let head = git(root, None, &["rev-parse", "HEAD"], None)?;
    let dir = tempfile_dir(root)?;
    let index = dir.join("index");
    let result = (|| {
        git(root, Some(&index), &["read-tree", &head], None)?;
        for (path, text) in files {
            let blob = git(root, None, &["hash-object", "-w", "--stdin"], Some(text.as_bytes()))?;
            git(
                root,
                Some(&index),
                &["update-index", "--add", "--cacheinfo", &format!("100644,{blob},{path}")],
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
