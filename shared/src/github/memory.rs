//! GitHub in memory (feature `test-support`): a store with GitHub's rules for the primitives
//! cellbridge uses ([`GithubRepo`]), so the pull request logic and the orchestrator above it run
//! in every test in milliseconds. It holds no cellbridge logic: what to write and when is
//! decided above the port, in the code the product runs.
//!
//! The rules and where GitHub documents them (the HTTP fake in `tests/fakes/github_fake.py`
//! models the same and is checked against GitHub's OpenAPI description):
//! - refs move by fast-forward only unless forced ("Update a reference": `force` "Indicates
//!   whether to force the update or to make sure the update is a fast-forward update",
//!   https://docs.github.com/rest/git/refs#update-a-reference); a refused update is 422
//!   "Update is not a fast forward", which the port reports as a lost race;
//! - creating a ref that exists is 422 "Reference already exists"
//!   (https://docs.github.com/rest/git/refs#create-a-reference);
//! - a tree's `base_tree`, a commit's tree and parents must exist (422,
//!   https://docs.github.com/rest/git/trees#create-a-tree, .../commits#create-a-commit);
//! - one open pull request per head branch, and none without commits between base and head
//!   (422 "A pull request already exists for ...", "No commits between ...",
//!   https://docs.github.com/rest/pulls/pulls#create-a-pull-request);
//! - deleting a pull request's head branch closes the pull request
//!   (https://docs.github.com/pull-requests/collaborating-with-pull-requests/proposing-changes-to-your-work-with-pull-requests/creating-and-deleting-branches-within-your-repository#deleting-a-branch-used-for-a-pull-request);
//! - a status needs an existing commit and a description of at most 140 characters (422,
//!   https://docs.github.com/rest/commits/statuses#create-a-commit-status);
//! - labels added are kept with those already there; the issues endpoint's `labels` replaces
//!   the set (https://docs.github.com/rest/issues/labels#add-labels-to-an-issue,
//!   https://docs.github.com/rest/issues/issues#update-an-issue).
//!
//! Faults: [`MemGithub::fail`] makes the next calls of an operation fail as the transport would
//! report them after its retries; [`MemGithub::race`] lets another writer commit just before
//! an operation runs. People: [`MemGithub::merge`], [`MemGithub::commit`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use sha1::Digest as _;

use super::archive::hex;
use super::operations::{self as ops, Operation};
use super::port::{GithubRepo, OpenPull};
use super::{GithubError, Result, Snapshot};
use crate::fleet::MemFleet;

/// A pull request as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemPull {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub merged: bool,
}

/// A commit status as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemStatus {
    pub context: String,
    pub success: bool,
    pub description: String,
}

#[derive(Debug, Clone)]
struct Commit {
    tree: String,
    parents: Vec<String>,
    message: String,
}

/// How an injected fault fails the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 5xx or rate limits past the retries, or no answer before the deadline.
    Transient,
    /// A final answer with this HTTP status (401, 403, 404, 422...).
    Status(u16),
}

struct Rule {
    op: &'static str,
    times: usize,
    fault: Fault,
}

struct Race {
    op: &'static str,
    branch: String,
    files: Vec<(String, String)>,
}

#[derive(Default)]
struct Store {
    default_branch: String,
    trees: HashMap<String, BTreeMap<String, String>>,
    commits: HashMap<String, Commit>,
    refs: BTreeMap<String, String>,
    pulls: Vec<MemPull>,
    statuses: HashMap<String, Vec<MemStatus>>,
    rules: Vec<Rule>,
    races: Vec<Race>,
    calls: Vec<&'static str>,
    clock: u64,
}

/// One repository on GitHub, in memory.
pub struct MemGithub {
    store: Mutex<Store>,
}

fn api(op: &Operation, status: u16, message: impl Into<String>) -> GithubError {
    GithubError::Api {
        what: op.id.to_owned(),
        status,
        message: message.into(),
    }
}

impl Store {
    fn put_tree(&mut self, files: BTreeMap<String, String>) -> String {
        let mut h = sha1::Sha1::new();
        for (p, c) in &files {
            h.update(p.as_bytes());
            h.update([0]);
            h.update(c.as_bytes());
            h.update([0]);
        }
        let id = hex(&h.finalize());
        self.trees.insert(id.clone(), files);
        id
    }

    fn put_commit(&mut self, tree: &str, parents: &[String], message: &str) -> String {
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
            },
        );
        id
    }

    fn is_ancestor(&self, ancestor: &str, of: &str) -> bool {
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

    fn files_at(&self, commit: &str) -> BTreeMap<String, String> {
        self.commits
            .get(commit)
            .and_then(|c| self.trees.get(&c.tree))
            .cloned()
            .unwrap_or_default()
    }

    /// Another writer's commit on `branch` (created if missing, from the default branch).
    fn commit_on(&mut self, branch: &str, files: &[(String, String)], message: &str) -> String {
        let parent = self
            .refs
            .get(branch)
            .or_else(|| self.refs.get(&self.default_branch))
            .cloned();
        let mut tree = parent.as_deref().map(|p| self.files_at(p)).unwrap_or_default();
        for (p, c) in files {
            tree.insert(p.clone(), c.clone());
        }
        let tree = self.put_tree(tree);
        let parents: Vec<String> = parent.into_iter().collect();
        let sha = self.put_commit(&tree, &parents, message);
        self.refs.insert(branch.to_owned(), sha.clone());
        sha
    }

    /// Records the call, runs a pending race, and answers an injected fault.
    fn enter(&mut self, op: &'static Operation) -> Result<()> {
        self.calls.push(op.id);
        if let Some(i) = self.races.iter().position(|r| r.op == op.id) {
            let race = self.races.remove(i);
            self.commit_on(&race.branch, &race.files, "another writer");
        }
        if let Some(rule) = self.rules.iter_mut().find(|r| r.op == op.id && r.times > 0) {
            rule.times -= 1;
            return Err(match rule.fault {
                Fault::Transient => GithubError::Transient {
                    what: op.id.to_owned(),
                    detail: "injected: 502 after every retry".into(),
                },
                Fault::Status(s) => api(op, s, "injected"),
            });
        }
        Ok(())
    }
}

impl MemGithub {
    /// A repository whose default branch `branch` holds `files` (path, text) in one commit.
    pub fn new(branch: &str, files: &[(String, String)]) -> Self {
        let mut store = Store {
            default_branch: branch.to_owned(),
            ..Store::default()
        };
        store.commit_on(branch, files, "initial commit");
        Self {
            store: Mutex::new(store),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        f(&mut self.store.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The next `times` calls of `op` fail with `fault`.
    pub fn fail(&self, op: &Operation, times: usize, fault: Fault) {
        self.with(|s| {
            s.rules.push(Rule {
                op: op.id,
                times,
                fault,
            })
        });
    }

    /// Just before the next call of `op`, another writer commits `files` on `branch`.
    pub fn race(&self, op: &Operation, branch: &str, files: &[(&str, &str)]) {
        let files = files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect();
        self.with(|s| {
            s.races.push(Race {
                op: op.id,
                branch: branch.to_owned(),
                files,
            })
        });
    }

    /// A person's commit on `branch`; its id.
    pub fn commit(&self, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        let files: Vec<(String, String)> = files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect();
        self.with(|s| s.commit_on(branch, &files, message))
    }

    /// A person merges pull request `number` (a merge commit on its base); its head branch
    /// stays until someone deletes it.
    pub fn merge(&self, number: u64) {
        self.with(|s| {
            let pr = s
                .pulls
                .iter()
                .find(|p| p.number == number && p.open)
                .cloned()
                .expect("an open pull request");
            let head = s.refs[&pr.head].clone();
            let base = s.refs[&pr.base].clone();
            let tree = s.commits[&head].tree.clone();
            let sha = s.put_commit(&tree, &[base, head.clone()], &format!("Merge pull request #{number}"));
            s.refs.insert(pr.base.clone(), sha);
            let p = s.pulls.iter_mut().find(|p| p.number == number).expect("found above");
            p.open = false;
            p.merged = true;
        });
    }

    pub fn pulls(&self) -> Vec<MemPull> {
        self.with(|s| s.pulls.clone())
    }

    /// The files of `branch` (path → text), empty when there is no such branch.
    pub fn files(&self, branch: &str) -> BTreeMap<String, String> {
        self.with(|s| s.refs.get(branch).map(|c| s.files_at(c)).unwrap_or_default())
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

    pub fn statuses(&self, commit: &str) -> Vec<MemStatus> {
        self.with(|s| s.statuses.get(commit).cloned().unwrap_or_default())
    }

    /// The operation ids called so far, in order.
    pub fn calls(&self) -> Vec<&'static str> {
        self.with(|s| s.calls.clone())
    }

    /// Calls that write (every operation but the reads).
    pub fn writes(&self) -> usize {
        let reads = [
            ops::REPOS_GET.id,
            ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE.id,
            ops::PULLS_LIST.id,
            ops::GIT_GET_COMMIT.id,
            ops::REPOS_GET_COMMIT.id,
        ];
        self.calls().iter().filter(|c| !reads.contains(c)).count()
    }

    pub fn clear_calls(&self) {
        self.with(|s| s.calls.clear());
    }
}

impl GithubRepo for MemGithub {
    async fn read_base(&self, _deadline: Instant) -> Result<Snapshot> {
        self.with(|s| {
            s.enter(&ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE)?;
            let base_sha = s.refs[&s.default_branch].clone();
            let tree = s.commits[&base_sha].tree.clone();
            let fleet: MemFleet = s.trees[&tree]
                .iter()
                .map(|(p, c)| (p.clone(), c.clone().into_bytes()))
                .collect();
            Ok(Snapshot {
                base_branch: s.default_branch.clone(),
                base_sha,
                base_tree: Some(tree),
                fleet,
            })
        })
    }

    async fn open_pull(&self, branch: &str, _deadline: Instant) -> Result<Option<OpenPull>> {
        self.with(|s| {
            s.enter(&ops::PULLS_LIST)?;
            Ok(s.pulls
                .iter()
                .rev()
                .find(|p| p.open && p.head == branch)
                .map(|p| OpenPull {
                    number: p.number,
                    url: format!("https://github.example/acme/fleet/pull/{}", p.number),
                    head_sha: s.refs.get(&p.head).cloned().unwrap_or_default(),
                    labels: p.labels.clone(),
                    body: p.body.clone(),
                }))
        })
    }

    async fn create_tree(&self, snap: &Snapshot, files: &[(String, String)], _deadline: Instant) -> Result<String> {
        self.with(|s| {
            s.enter(&ops::GIT_CREATE_TREE)?;
            let base = snap.base_tree.as_deref().unwrap_or_default();
            let Some(mut tree) = s.trees.get(base).cloned() else {
                return Err(api(
                    &ops::GIT_CREATE_TREE,
                    422,
                    "Invalid tree info: base_tree does not exist",
                ));
            };
            for (p, c) in files {
                tree.insert(p.clone(), c.clone());
            }
            Ok(s.put_tree(tree))
        })
    }

    async fn create_commit(&self, tree: &str, parents: &[String], message: &str, _deadline: Instant) -> Result<String> {
        self.with(|s| {
            s.enter(&ops::GIT_CREATE_COMMIT)?;
            if !s.trees.contains_key(tree) {
                return Err(api(&ops::GIT_CREATE_COMMIT, 422, "Tree SHA does not exist"));
            }
            if parents.iter().any(|p| !s.commits.contains_key(p)) {
                return Err(api(
                    &ops::GIT_CREATE_COMMIT,
                    422,
                    "Parent SHA does not exist or is not a commit object",
                ));
            }
            Ok(s.put_commit(tree, parents, message))
        })
    }

    async fn move_branch(&self, branch: &str, commit: &str, _deadline: Instant) -> Result<()> {
        self.with(|s| {
            s.enter(&ops::GIT_UPDATE_REF)?;
            let lost = |detail: &str| GithubError::Conflict {
                what: format!("updating branch {branch}"),
                detail: detail.to_owned(),
            };
            let Some(current) = s.refs.get(branch).cloned() else {
                return Err(lost("Reference does not exist"));
            };
            if !s.commits.contains_key(commit) {
                return Err(api(&ops::GIT_UPDATE_REF, 422, "Object does not exist"));
            }
            if !s.is_ancestor(&current, commit) {
                return Err(lost("Update is not a fast forward"));
            }
            s.refs.insert(branch.to_owned(), commit.to_owned());
            Ok(())
        })
    }

    async fn create_branch(&self, branch: &str, commit: &str, _deadline: Instant) -> Result<bool> {
        self.with(|s| {
            s.enter(&ops::GIT_CREATE_REF)?;
            if s.refs.contains_key(branch) {
                return Ok(false);
            }
            if !s.commits.contains_key(commit) {
                return Err(api(&ops::GIT_CREATE_REF, 422, "Object does not exist"));
            }
            s.refs.insert(branch.to_owned(), commit.to_owned());
            Ok(true)
        })
    }

    async fn branch_head(&self, branch: &str, _deadline: Instant) -> Result<Option<(String, String)>> {
        self.with(|s| {
            s.enter(&ops::REPOS_GET_COMMIT)?;
            Ok(s.refs.get(branch).map(|c| (c.clone(), s.commits[c].message.clone())))
        })
    }

    async fn delete_branch(&self, branch: &str, _deadline: Instant) -> Result<()> {
        self.with(|s| {
            s.enter(&ops::GIT_DELETE_REF)?;
            if s.refs.remove(branch).is_some() {
                for p in s.pulls.iter_mut().filter(|p| p.open && p.head == branch) {
                    p.open = false;
                }
            }
            Ok(())
        })
    }

    async fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        _deadline: Instant,
    ) -> Result<()> {
        self.with(|s| {
            s.enter(&ops::REPOS_CREATE_COMMIT_STATUS)?;
            if !s.commits.contains_key(commit) {
                return Err(api(
                    &ops::REPOS_CREATE_COMMIT_STATUS,
                    422,
                    format!("No commit found for SHA: {commit}"),
                ));
            }
            if description.chars().count() > 140 {
                return Err(api(
                    &ops::REPOS_CREATE_COMMIT_STATUS,
                    422,
                    "description is too long (maximum is 140 characters)",
                ));
            }
            let list = s.statuses.entry(commit.to_owned()).or_default();
            list.retain(|st| st.context != context);
            list.push(MemStatus {
                context: context.to_owned(),
                success,
                description: description.to_owned(),
            });
            Ok(())
        })
    }

    async fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        _deadline: Instant,
    ) -> Result<(u64, String)> {
        self.with(|s| {
            s.enter(&ops::PULLS_CREATE)?;
            let (Some(h), Some(b)) = (s.refs.get(head).cloned(), s.refs.get(base).cloned()) else {
                return Err(api(&ops::PULLS_CREATE, 422, "Validation Failed: head or base invalid"));
            };
            if s.pulls.iter().any(|p| p.open && p.head == head) {
                return Err(GithubError::Conflict {
                    what: format!("opening the pull request for {head}"),
                    detail: format!("A pull request already exists for acme:{head}."),
                });
            }
            if s.is_ancestor(&h, &b) {
                return Err(api(
                    &ops::PULLS_CREATE,
                    422,
                    format!("No commits between {base} and {head}"),
                ));
            }
            let number = s.pulls.len() as u64 + 1;
            s.pulls.push(MemPull {
                number,
                head: head.to_owned(),
                base: base.to_owned(),
                title: title.to_owned(),
                body: body.to_owned(),
                labels: Vec::new(),
                open: true,
                merged: false,
            });
            Ok((number, format!("https://github.example/acme/fleet/pull/{number}")))
        })
    }

    async fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        _deadline: Instant,
    ) -> Result<()> {
        self.with(|s| {
            s.enter(&ops::ISSUES_UPDATE)?;
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) else {
                return Err(api(&ops::ISSUES_UPDATE, 404, "Not Found"));
            };
            p.title = title.to_owned();
            p.body = body.to_owned();
            let mut labels = labels.to_vec();
            labels.sort();
            labels.dedup();
            p.labels = labels;
            Ok(())
        })
    }

    async fn add_labels(&self, number: u64, labels: &[String], _deadline: Instant) -> Result<()> {
        self.with(|s| {
            s.enter(&ops::ISSUES_ADD_LABELS)?;
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) else {
                return Err(api(&ops::ISSUES_ADD_LABELS, 404, "Not Found"));
            };
            p.labels.extend(labels.iter().cloned());
            p.labels.sort();
            p.labels.dedup();
            Ok(())
        })
    }

    async fn close_pull(&self, number: u64, _deadline: Instant) -> Result<()> {
        self.with(|s| {
            s.enter(&ops::PULLS_UPDATE)?;
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) else {
                return Err(api(&ops::PULLS_UPDATE, 404, "Not Found"));
            };
            p.open = false;
            Ok(())
        })
    }
}
