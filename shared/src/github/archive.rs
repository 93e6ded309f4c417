//! The base branch as one archive: GitHub's tarball, read as it is (no per-file request), and
//! the tree id git would give it.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Instant;

use http::Method;
use sha1::Digest as _;

use super::operations as ops;
use super::transport::enc;
use super::{GithubError, GithubFleet, Result, Snapshot};
use crate::fleet::{FileMode, MemFleet};

impl GithubFleet {
    /// The base branch's files and head commit.
    pub(super) async fn download_snapshot(&self, deadline: Instant) -> Result<Snapshot> {
        let base_branch = self.base_branch(deadline).await?;
        let what = format!("downloading {} at {base_branch}", self.repo_name());
        let r = self
            .repo_send(
                &what,
                &ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE,
                &format!("/tarball/{}", enc(&base_branch)),
                None,
                deadline,
            )
            .await?;
        let archive = if r.status.is_redirection() {
            let loc = r
                .headers
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| GithubError::Protocol {
                    what: what.clone(),
                    detail: "redirect without Location".into(),
                })?;
            let loc = match loc
                .starts_with('/')
                .then(|| http::Uri::try_from(self.api_url.as_str()).ok())
                .flatten()
            {
                // A path is relative to the server, not to the API's base path.
                Some(api) => format!(
                    "{}://{}{loc}",
                    api.scheme_str().unwrap_or("https"),
                    api.authority().map(|a| a.as_str()).unwrap_or_default()
                ),
                None => loc.to_owned(),
            };
            let d = self
                .send(&what, Method::GET, &loc, None, Some("application/x-gzip"), deadline)
                .await?;
            if !d.status.is_success() {
                return Err(d.api_error(&what));
            }
            d.body
        } else if r.status.is_success() {
            r.body
        } else {
            return Err(r.api_error(&what));
        };
        let parsed = tokio::task::spawn_blocking(move || read_archive(&archive))
            .await
            .map_err(|e| GithubError::Protocol {
                what: what.clone(),
                detail: e.to_string(),
            })?
            .map_err(|detail| GithubError::Protocol {
                what: what.clone(),
                detail,
            })?;
        Ok(Snapshot {
            base_branch,
            base_sha: parsed.sha,
            base_tree: parsed.tree,
            fleet: parsed.fleet,
        })
    }
}

/// A GitHub archive read: the commit it names, the id git gives its root tree, and its files
/// with their modes (symlinks as symlinks: see [`crate::fleet`] for how the fleet reads them).
#[derive(Debug, Clone)]
pub struct Archive {
    pub sha: String,
    pub tree: Option<String>,
    pub fleet: MemFleet,
}

/// Reads a GitHub archive: a gzip'd pax tar whose global header's `comment` is the commit id
/// and whose entries sit under one `owner-repo-<short sha>/` directory, as `git archive` of a
/// commit writes it (regular files 0664 or 0775, symlinks as symlink entries whose link name
/// is the target).
pub fn read_archive(bytes: &[u8]) -> std::result::Result<Archive, String> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut sha = None;
    let mut fleet = MemFleet::new();
    for entry in tar.entries().map_err(|e| format!("not a tar.gz archive: {e}"))? {
        let mut entry = entry.map_err(|e| format!("corrupt archive: {e}"))?;
        let kind = entry.header().entry_type();
        if kind == tar::EntryType::XGlobalHeader {
            let mut buf = Vec::new();
            entry
                .read_to_end(&mut buf)
                .map_err(|e| format!("corrupt archive: {e}"))?;
            sha = pax_comment(&buf);
            continue;
        }
        let path = entry
            .path()
            .map_err(|e| format!("corrupt archive: {e}"))?
            .to_string_lossy()
            .into_owned();
        let Some((_, rel)) = path.split_once('/') else { continue };
        let rel = rel.trim_end_matches('/');
        if rel.is_empty() || rel.split('/').any(|s| s == ".." || s == "." || s.is_empty()) {
            continue;
        }
        if kind.is_file() {
            // Git records the executable bit alone; `git archive` writes 0775 for it.
            let exec = entry.header().mode().map(|m| m & 0o100 != 0).unwrap_or(false);
            let mut buf = Vec::with_capacity(entry.size() as usize);
            entry
                .read_to_end(&mut buf)
                .map_err(|e| format!("corrupt archive at {rel}: {e}"))?;
            let mode = if exec { FileMode::Executable } else { FileMode::Regular };
            fleet.insert_mode(rel.to_owned(), mode, buf);
        } else if kind.is_symlink() {
            // Git stores a link as a blob of its target.
            let target = entry
                .link_name_bytes()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            fleet.insert_symlink(rel.to_owned(), target);
        }
    }
    let sha = sha.ok_or("the archive has no pax header naming its commit")?;
    let files: BTreeMap<String, (&'static str, Vec<u8>)> = fleet
        .files()
        .iter()
        .map(|(p, (mode, bytes))| (p.clone(), (mode.git_mode(), bytes.clone())))
        .collect();
    Ok(Archive {
        sha,
        tree: Some(git_tree_id(&files)),
        fleet,
    })
}

pub(super) fn pax_comment(records: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(records);
    text.lines()
        .find_map(|l| {
            l.split_once(' ')
                .and_then(|(_, kv)| kv.strip_prefix("comment="))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| s.len() == 40)
}

pub(super) fn git_object_id(kind: &str, content: &[u8]) -> [u8; 20] {
    let mut h = sha1::Sha1::new();
    h.update(format!("{kind} {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize().into()
}

/// The id git gives the root tree holding `files` ({path: (mode, content)}).
pub(super) fn git_tree_id(files: &BTreeMap<String, (&'static str, Vec<u8>)>) -> String {
    enum Node<'a> {
        Blob(&'static str, &'a [u8]),
        Dir(BTreeMap<&'a str, Node<'a>>),
    }
    let mut root: BTreeMap<&str, Node> = BTreeMap::new();
    for (path, (mode, content)) in files {
        let mut parts: Vec<&str> = path.split('/').collect();
        let leaf = parts.pop().unwrap_or_default();
        let mut node = &mut root;
        for p in parts {
            let n = node.entry(p).or_insert_with(|| Node::Dir(BTreeMap::new()));
            node = match n {
                Node::Dir(m) => m,
                Node::Blob(..) => return String::new(),
            };
        }
        node.insert(leaf, Node::Blob(mode, content));
    }
    pub(super) fn write(dir: &BTreeMap<&str, Node>) -> [u8; 20] {
        // Git orders entries by name, a directory's name compared as if it ended in `/`.
        let mut entries: Vec<(String, &str, [u8; 20])> = dir
            .iter()
            .map(|(name, n)| match n {
                Node::Blob(mode, content) => (name.to_string(), *mode, git_object_id("blob", content)),
                Node::Dir(m) => (format!("{name}/"), "40000", write(m)),
            })
            .collect();
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut raw = Vec::new();
        for (key, mode, id) in entries {
            raw.extend_from_slice(mode.as_bytes());
            raw.push(b' ');
            raw.extend_from_slice(key.trim_end_matches('/').as_bytes());
            raw.push(0);
            raw.extend_from_slice(&id);
        }
        git_object_id("tree", &raw)
    }
    hex(&write(&root))
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git write-tree` of the files below, d/b.txt executable and l a link to a.txt.
    const TREE_WITH_MODES: &str = "c461d5c1b92f1d2496c46f70c99100401cc023f7";

    #[test]
    fn tree_ids_are_gits() {
        // `git hash-object` / `git write-tree` of a.txt = "hello\n", d/b.txt = "x".
        let mut files = BTreeMap::new();
        files.insert("a.txt".to_owned(), ("100644", b"hello\n".to_vec()));
        files.insert("d/b.txt".to_owned(), ("100644", b"x".to_vec()));
        assert_eq!(
            hex(&git_object_id("blob", b"hello\n")),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(git_tree_id(&files), "6cea91b04bb0ee583812deb647f220c6dde4ff82");
        // The same with d/b.txt executable and a link l → a.txt (`git update-index --chmod=+x`,
        // `ln -s a.txt l`, `git write-tree`).
        files.insert("d/b.txt".to_owned(), ("100755", b"x".to_vec()));
        files.insert("l".to_owned(), ("120000", b"a.txt".to_vec()));
        assert_eq!(git_tree_id(&files), TREE_WITH_MODES);
    }

    #[test]
    fn pax_comment_is_the_commit() {
        let sha = "48e9c0b5358ffbb0edb88f0f4db3b893b419c1a6";
        assert_eq!(
            pax_comment(format!("52 comment={sha}\n").as_bytes()).as_deref(),
            Some(sha)
        );
    }
}
