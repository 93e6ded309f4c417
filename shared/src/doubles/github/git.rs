//! The repository's git data: refs, trees, commits and blobs, as GitHub's "Git database" API
//! keeps them, and the people who push.
//!
//! - refs move by fast-forward only unless forced ("Update a reference": `force` "Indicates
//!   whether to force the update or to make sure the update is a fast-forward update",
//!   <https://docs.github.com/rest/git/refs#update-a-reference>); a refused update is 422
//!   "Update is not a fast forward", which the port reports as a lost race;
//! - creating a ref that exists is 422 "Reference already exists"
//!   (<https://docs.github.com/rest/git/refs#create-a-reference>);
//! - a tree's `base_tree`, a commit's tree and parents must exist (422,
//!   <https://docs.github.com/rest/git/trees#create-a-tree>, .../commits#create-a-commit);
//! - a tree entry has a mode, `100644` a file, `100755` an executable, `120000` "a blob that
//!   specifies the path of a symlink" (same page); the store keeps it, an edit keeps it, and a
//!   change of mode alone is a change;
//! - deleting a pull request's head branch closes the pull request
//!   (<https://docs.github.com/pull-requests/collaborating-with-pull-requests/proposing-changes-to-your-work-with-pull-requests/creating-and-deleting-branches-within-your-repository#deleting-a-branch-used-for-a-pull-request>);
//! - a repository rule (a ruleset) refuses updates of the branches it protects.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use sha1::Digest as _;

use super::{GithubError, MemGithub, Result, Snapshot, Store, api};
use crate::adapters::github::archive::Keeper;
use crate::adapters::github::operations::{self as ops, Operation};
use crate::ports::github::TreeFiles;
use crate::pure::fleet::object_id::blob_id;
use crate::pure::fleet::object_id::hex;
use crate::pure::fleet::{FileMode, FileWrite, Keep};

#[derive(Debug, Clone)]
pub(super) struct Commit {
    pub(super) tree: String,
    pub(super) parents: Vec<String>,
    pub(super) message: String,
    /// The store's clock when it was made: which of two commits is newer.
    pub(super) when: u64,
}

/// A file of a tree: its mode and text (a symlink's target).
pub(super) type Entry = (FileMode, String);

/// How the store, which keeps texts, keeps a file's bytes ([`MemGithub::commit_bytes`]).
const BYTES_MARKER: &str = "\u{0}bytes:";

impl Store {
    pub(super) fn put_tree(&mut self, files: BTreeMap<String, Entry>) -> String {
        let mut h = sha1::Sha1::new();
        for (p, (m, c)) in &files {
            h.update(p.as_bytes());
            h.update([0]);
            h.update(m.git_mode().as_bytes());
            h.update([0]);
            h.update(c.as_bytes());
            h.update([0]);
        }
        let id = hex(&h.finalize());
        self.trees.insert(id.clone(), files);
        id
    }

    pub(super) fn put_commit(&mut self, tree: &str, parents: &[String], message: &str) -> String {
        // Like git's, the id covers a timestamp: two commits of the same content differ.
        self.clock += 1;
        let mut h = sha1::Sha1::new();
        h.update(format!("tree {tree}\n{}\n{}\n{message}", parents.join(" "), self.clock));
        let id = hex(&h.finalize());
        self.commits.insert(
            id.clone(),
            Commit {
                tree: tree.to_owned(),
                parents: parents.to_vec(),
                message: message.to_owned(),
                when: self.clock,
            },
        );
        id
    }

    /// `of` and every commit it descends from.
    pub(super) fn ancestors(&self, of: &str) -> HashSet<String> {
        let mut seen = HashSet::new();
        let mut stack = vec![of.to_owned()];
        while let Some(c) = stack.pop() {
            if let Some(commit) = self.commits.get(&c)
                && seen.insert(c)
            {
                stack.extend(commit.parents.iter().cloned());
            }
        }
        seen
    }

    /// The newest common ancestor of `a` and `b`, as `git merge-base`: a common ancestor no
    /// other common ancestor descends from (after criss-cross merges there can be several, which
    /// git merges into a virtual base: the double takes the newest); none without shared history.
    pub(super) fn merge_base(&self, a: &str, b: &str) -> Option<String> {
        let theirs = self.ancestors(b);
        let common: Vec<String> = self.ancestors(a).into_iter().filter(|c| theirs.contains(c)).collect();
        let mut dominated = HashSet::new();
        let mut stack: Vec<String> = common
            .iter()
            .flat_map(|c| self.commits[c].parents.iter().cloned())
            .collect();
        while let Some(c) = stack.pop() {
            if !dominated.contains(&c) {
                stack.extend(self.commits[&c].parents.iter().cloned());
                dominated.insert(c);
            }
        }
        common
            .into_iter()
            .filter(|c| !dominated.contains(c))
            .max_by(|x, y| (self.commits[x].when, x).cmp(&(self.commits[y].when, y)))
    }

    pub(super) fn is_ancestor(&self, ancestor: &str, of: &str) -> bool {
        let mut stack = vec![of.to_owned()];
        let mut seen = std::collections::HashSet::new();
        while let Some(c) = stack.pop() {
            if c == ancestor {
                return true;
            }
            if seen.insert(c.clone())
                && let Some(commit) = self.commits.get(&c)
            {
                stack.extend(commit.parents.iter().cloned());
            }
        }
        false
    }

    pub(super) fn files_at(&self, commit: &str) -> BTreeMap<String, Entry> {
        self.commits
            .get(commit)
            .and_then(|c| self.trees.get(&c.tree))
            .cloned()
            .unwrap_or_default()
    }

    /// Another writer's commit on `branch` (created if missing, from the default branch); a
    /// `None` text deletes the file.
    pub(super) fn commit_on(&mut self, branch: &str, files: &[(String, Option<String>)], message: &str) -> String {
        let parent = self
            .refs
            .get(branch)
            .or_else(|| self.refs.get(&self.default_branch))
            .cloned();
        let mut tree = parent.as_deref().map(|p| self.files_at(p)).unwrap_or_default();
        for (p, c) in files {
            match c {
                // A person's edit keeps the file's mode, as git does.
                Some(c) => {
                    tree.entry(p.clone())
                        .and_modify(|e| e.1.clone_from(c))
                        .or_insert_with(|| (FileMode::Regular, c.clone()));
                }
                None => {
                    tree.remove(p);
                }
            }
        }
        let tree = self.put_tree(tree);
        let parents: Vec<String> = parent.into_iter().collect();
        let sha = self.put_commit(&tree, &parents, message);
        self.refs.insert(branch.to_owned(), sha.clone());
        sha
    }

    /// A repository rule refusing a write to `branch`: 422 "Repository rule violations found"
    /// (<https://docs.github.com/rest/git/refs#update-a-reference>,
    /// <https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets>).
    pub(super) fn check_rules(&self, branch: &str, doing: &str) -> Result<()> {
        match self.protected.get(branch) {
            Some(rule) => Err(GithubError::Refused {
                what: format!("{doing} branch {branch}"),
                rule: format!("Repository rule violations found\n\n{rule}"),
            }),
            None => Ok(()),
        }
    }
}

static GRAPHQL_UPDATE_REFS: Operation = ops::GRAPHQL_UPDATE_REFS.as_operation();

/// The port's git primitives.
impl Store {
    pub(super) fn read_base(&mut self, keep: &Keep) -> Result<Snapshot> {
        self.enter(&ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE)?;
        let base_sha = self.refs[&self.default_branch].clone();
        let tree = self.commits[&base_sha].tree.clone();
        // As GitHub's archive is read: other cells' directories read past, and no tree id.
        let mut keeper = Keeper::new(keep, u64::MAX);
        for (p, (m, c)) in &self.trees[&tree] {
            let _ = keeper.offer(p, *m, c.len() as u64, || Ok(c.clone().into_bytes()));
        }
        let (fleet, _) = keeper.finish();
        Ok(Snapshot {
            base_branch: self.default_branch.clone(),
            base_sha,
            base_tree: Default::default(),
            fleet,
            keep: keep.clone(),
        })
    }

    pub(super) fn tree_files(&mut self, commit: &str) -> Result<TreeFiles> {
        self.enter(&ops::GIT_GET_TREE)?;
        let Some(c) = self.commits.get(commit) else {
            return Err(api(&ops::GIT_GET_TREE, 404, "Not Found"));
        };
        let tree = c.tree.clone();
        let files: BTreeMap<String, String> = self
            .files_at(commit)
            .into_iter()
            .map(|(p, (_, text))| {
                let id = blob_id(&text);
                self.blobs.entry(id.clone()).or_insert(text);
                (p, id)
            })
            .collect();
        Ok(TreeFiles { tree, files })
    }

    pub(super) fn read_blob(&mut self, blob: &str) -> Result<Vec<u8>> {
        self.enter(&ops::GIT_GET_BLOB)?;
        // Ids are learnt from comparisons, as a client learns them.
        self.blobs
            .get(blob)
            .map(|t| match t.strip_prefix(BYTES_MARKER) {
                Some(hex) => (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or_default())
                    .collect(),
                None => t.clone().into_bytes(),
            })
            .ok_or_else(|| api(&ops::GIT_GET_BLOB, 404, "Not Found"))
    }

    pub(super) fn create_tree(
        &mut self,
        on: &str,
        tree: Option<&str>,
        files: &[FileWrite],
        removed: &[String],
    ) -> Result<String> {
        // Without the tree's id, GitHub is asked for the commit first.
        let base = match tree {
            Some(t) => t.to_owned(),
            None => {
                self.enter(&ops::GIT_GET_COMMIT)?;
                self.commits.get(on).map(|c| c.tree.clone()).unwrap_or_default()
            }
        };
        self.enter(&ops::GIT_CREATE_TREE)?;
        let base = base.as_str();
        let Some(mut tree) = self.trees.get(base).cloned() else {
            return Err(api(
                &ops::GIT_CREATE_TREE,
                422,
                "Invalid tree info: base_tree does not exist",
            ));
        };
        for f in files {
            tree.insert(f.path.clone(), (f.mode, f.content.clone()));
        }
        // An entry with `"sha": null` deletes the path; GitHub "returns an error if you
        // try to delete a file that does not exist"
        // (https://docs.github.com/rest/git/trees#create-a-tree): a 422.
        for path in removed {
            if tree.remove(path).is_none() {
                return Err(api(&ops::GIT_CREATE_TREE, 422, "GitRPC::BadObjectState"));
            }
        }
        Ok(self.put_tree(tree))
    }

    pub(super) fn create_commit(&mut self, tree: &str, parents: &[String], message: &str) -> Result<String> {
        self.enter(&ops::GIT_CREATE_COMMIT)?;
        if !self.trees.contains_key(tree) {
            return Err(api(&ops::GIT_CREATE_COMMIT, 422, "Tree SHA does not exist"));
        }
        if parents.iter().any(|p| !self.commits.contains_key(p)) {
            return Err(api(
                &ops::GIT_CREATE_COMMIT,
                422,
                "Parent SHA does not exist or is not a commit object",
            ));
        }
        let sha = self.put_commit(tree, parents, message);
        self.sign_if_app(&sha);
        self.created.push(sha.clone());
        Ok(sha)
    }

    pub(super) fn move_branch(&mut self, branch: &str, _from: &str, commit: &str) -> Result<()> {
        self.enter(&ops::GIT_UPDATE_REF)?;
        self.check_rules(branch, "updating")?;
        let lost = |detail: &str| GithubError::Conflict {
            what: format!("updating branch {branch}"),
            detail: detail.to_owned(),
        };
        let Some(current) = self.refs.get(branch).cloned() else {
            return Err(lost("Reference does not exist"));
        };
        if !self.commits.contains_key(commit) {
            return Err(api(&ops::GIT_UPDATE_REF, 422, "Object does not exist"));
        }
        if !self.is_ancestor(&current, commit) {
            return Err(lost("Update is not a fast forward"));
        }
        self.refs.insert(branch.to_owned(), commit.to_owned());
        Ok(())
    }

    pub(super) fn create_branch(&mut self, branch: &str, commit: &str) -> Result<bool> {
        self.enter(&ops::GIT_CREATE_REF)?;
        self.check_rules(branch, "creating")?;
        if self.refs.contains_key(branch) {
            return Ok(false);
        }
        if !self.commits.contains_key(commit) {
            return Err(api(&ops::GIT_CREATE_REF, 422, "Object does not exist"));
        }
        self.refs.insert(branch.to_owned(), commit.to_owned());
        Ok(true)
    }

    pub(super) fn branch_head(&mut self, branch: &str) -> Result<Option<(String, String)>> {
        self.enter(&ops::REPOS_GET_COMMIT)?;
        Ok(self
            .refs
            .get(branch)
            .map(|c| (c.clone(), self.commits[c].message.clone())))
    }

    pub(super) fn delete_branch_at(&mut self, branch: &str, expected: &str) -> Result<bool> {
        self.enter(&GRAPHQL_UPDATE_REFS)?;
        // `beforeOid`: the ref must point at `expected`, or nothing is updated (the
        // mutation's refusal; see `port::GitData::delete_branch_at`).
        if self.refs.get(branch).map(String::as_str) != Some(expected) {
            return Ok(false);
        }
        self.check_rules(branch, "deleting")?;
        if let Some(head) = self.refs.remove(branch) {
            for p in self.pulls.iter_mut().filter(|p| p.open && p.own() && p.head == branch) {
                p.open = false;
                p.closed_head = Some(head.clone());
                p.auto_merge = None;
            }
        }
        Ok(true)
    }
}

/// People's pushes, and what the tests read of the repository.
impl MemGithub {
    /// A person's commit on `branch`; its id.
    pub fn commit(&self, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        let files: Vec<(String, Option<String>)> = files
            .iter()
            .map(|(p, c)| (p.to_string(), Some(c.to_string())))
            .collect();
        self.with(|s| {
            let sha = s.commit_on(branch, &files, message);
            s.settle();
            sha
        })
    }

    /// A person's commit on `branch` adding `path` with these bytes (a binary file). The store
    /// keeps texts: bytes are kept as a marker text that its blobs read back as the bytes.
    pub fn commit_bytes(&self, branch: &str, path: &str, bytes: &[u8], message: &str) -> String {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let files = vec![(path.to_owned(), Some(format!("{BYTES_MARKER}{hex}")))];
        self.with(|s| s.commit_on(branch, &files, message))
    }

    /// A person's commit on `branch` that deletes `paths`; its id.
    pub fn delete_files(&self, branch: &str, paths: &[&str], message: &str) -> String {
        let files: Vec<(String, Option<String>)> = paths.iter().map(|p| (p.to_string(), None)).collect();
        self.with(|s| s.commit_on(branch, &files, message))
    }

    /// A person force-pushes `branch` to `commit` (history rewritten; GitHub allows it on a
    /// branch no rule protects). Pull requests keep what they pinned; an open one follows.
    pub fn force_push(&self, branch: &str, commit: &str) {
        self.with(|s| {
            s.refs.insert(branch.to_owned(), commit.to_owned());
        });
    }

    /// A repository rule (a ruleset: "Changes must be made through a pull request", signed
    /// commits required...) refuses every update of `branch` with `message`.
    pub fn protect(&self, branch: &str, message: &str) {
        self.with(|s| s.protected.insert(branch.to_owned(), message.to_owned()));
    }

    /// The commits made through the port (cellbridge's), in order.
    pub fn created_commits(&self) -> Vec<String> {
        self.with(|s| s.created.clone())
    }

    /// A commit's message.
    pub fn message(&self, commit: &str) -> String {
        self.with(|s| s.commits.get(commit).map(|c| c.message.clone()).unwrap_or_default())
    }

    /// The commit's parents.
    pub fn parents(&self, commit: &str) -> Vec<String> {
        self.with(|s| s.commits.get(commit).map(|c| c.parents.clone()).unwrap_or_default())
    }

    /// The paths a commit changes against its first parent (every path for a root commit).
    pub fn changed_paths(&self, commit: &str) -> Vec<String> {
        self.with(|s| {
            let new = s.files_at(commit);
            let old = s.commits[commit]
                .parents
                .first()
                .map(|p| s.files_at(p))
                .unwrap_or_default();
            let paths: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
            paths
                .into_iter()
                .filter(|p| old.get(*p) != new.get(*p))
                .cloned()
                .collect()
        })
    }

    /// Whether `commit` is `of` or one of its ancestors.
    pub fn is_ancestor(&self, commit: &str, of: &str) -> bool {
        self.with(|s| s.is_ancestor(commit, of))
    }

    /// The files of a commit (path → text; a symlink's text is its target).
    pub fn files_at(&self, commit: &str) -> BTreeMap<String, String> {
        self.with(|s| s.files_at(commit).into_iter().map(|(p, (_, t))| (p, t)).collect())
    }

    /// The files of `branch` (path → text), empty when there is no such branch.
    pub fn files(&self, branch: &str) -> BTreeMap<String, String> {
        self.head(branch).map(|c| self.files_at(&c)).unwrap_or_default()
    }

    /// The mode of every file of `branch` (path → mode), empty when there is no such branch.
    pub fn modes(&self, branch: &str) -> BTreeMap<String, FileMode> {
        self.with(|s| {
            s.refs
                .get(branch)
                .map(|c| s.files_at(c).into_iter().map(|(p, (m, _))| (p, m)).collect())
                .unwrap_or_default()
        })
    }

    pub fn head(&self, branch: &str) -> Option<String> {
        self.with(|s| s.refs.get(branch).cloned())
    }

    /// Commits reachable from `branch` but not from the default branch (what a pull request shows).
    pub fn commits_ahead(&self, branch: &str) -> usize {
        self.with(|s| {
            let (Some(head), Some(base)) = (s.refs.get(branch), s.refs.get(&s.default_branch)) else {
                return 0;
            };
            let mut stack = vec![head.clone()];
            let mut seen = std::collections::HashSet::new();
            while let Some(c) = stack.pop() {
                if s.is_ancestor(&c, base) || !seen.insert(c.clone()) {
                    continue;
                }
                stack.extend(s.commits[&c].parents.iter().cloned());
            }
            seen.len()
        })
    }
}
