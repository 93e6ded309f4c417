//! GitHub in memory (feature `test-support`): a store with GitHub's rules for the primitives
//! cellbridge uses ([`GithubRepo`](crate::ports::github::GithubRepo), in its slices), so the pull request logic
//! and the orchestrator above it run in every test in milliseconds. It holds no cellbridge
//! logic: what to write and when is decided above the port, in the code the product runs.
//!
//! Each rule of GitHub's that the store keeps lives beside the primitives it governs, with where
//! GitHub documents it (the HTTP fake in `tests/fakes/github_fake.py` models the same and is
//! checked against GitHub's OpenAPI description):
//! - `git`: refs, trees, commits and blobs, and the repository rules that refuse ref updates;
//! - `compare`: "Compare two commits";
//! - `pulls`: pull requests, their text, labels and comments;
//! - `issues`: issues, and GitHub's refusals of an issue's write;
//! - `merges`: merging a pull request, or a commit into a branch, three ways;
//! - `auto_merge`: commit statuses and check runs, branch protection, the merge state, and
//!   GitHub's auto-merge;
//! - `signing`: who GitHub signs commits for, and rules requiring signed commits;
//! - `merge_queue`: merge queues a base branch requires, their entries and their merges;
//! - `dashboard`: the listing of open pull requests;
//! - `faults`: what a test makes happen (faults, races, an App's permissions, a seeded
//!   schedule) and what it reads back (calls, journal).
//!
//! Where the adapter reads one of GitHub's answers (a refusal meaning a lost race, a missing
//! permission), the store answers as GitHub does and the same reading applies
//! ([`crate::adapters::github::answers`], [`crate::adapters::github::permissions`]), so that the two cannot drift apart.
//!
//! Faults: [`MemGithub::fail`] makes the next calls of an operation fail as the transport would
//! report them after its retries; [`MemGithub::race`] lets another writer commit just before
//! an operation runs. People: [`MemGithub::merge`] (and [`MemGithub::try_merge`]),
//! [`MemGithub::commit`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use crate::adapters::github::operations::Operation;
use crate::ports::github::{
    AutoMergeAnswer, CellReading, CheckState, CloseReason, Comparison, GitData, Issue, Issues, Merge, MergeAnswer,
    MergeMethod, MergeState, Merges, OpenPull, PullRequest, Pulls, QueueAnswer, TreeFiles,
};
use crate::ports::github::{GithubError, Result, Snapshot};
use crate::pure::fleet::{FileWrite, Keep, MemFleet};

mod auto_merge;
mod compare;
mod dashboard;
mod faults;
mod git;
mod issues;
mod merge_queue;
mod merges;
mod pulls;
mod signing;
#[cfg(test)]
mod tests;

pub use auto_merge::{MemAutoMerge, MemStatus, Protection, VIEWER};
pub use faults::Fault;
pub use issues::MemIssue;
pub use merge_queue::{MemGroup, MemQueueEntry};
pub use merges::{MemMerge, MergeRefused};
pub use pulls::MemPull;
pub use signing::SignatureRule;

use auto_merge::Posted;
use faults::{Race, Rule};
use git::{Commit, Entry};

#[derive(Default)]
struct Store {
    default_branch: String,
    /// Tree id → path → (mode, text; a symlink's text is its target).
    trees: HashMap<String, BTreeMap<String, Entry>>,
    commits: HashMap<String, Commit>,
    refs: BTreeMap<String, String>,
    pulls: Vec<MemPull>,
    /// Issues and pull requests share one sequence of numbers, as on GitHub.
    issues: Vec<MemIssue>,
    /// The App installation's permissions (`None`: everything cellbridge needs): a call whose
    /// documented permission is missing is refused with 403, as GitHub refuses it.
    permissions: Option<BTreeMap<String, String>>,
    /// Whether the App's installation token was minted (once per process, as the adapter does).
    token_minted: bool,
    /// The installation was found not to grant `checks: read`: tokens are asked for without it,
    /// and the merge state is read without check runs (as the adapter does, for the process).
    no_checks: bool,
    /// When the token expires, as GitHub's answers would say (`set_token_expiry`).
    token_expiry: Option<std::time::SystemTime>,
    statuses: HashMap<String, Vec<MemStatus>>,
    rules: Vec<Rule>,
    races: Vec<Race>,
    /// Branch → the message of the repository rule that refuses updates to it.
    protected: BTreeMap<String, String>,
    calls: Vec<&'static str>,
    clock: u64,
    /// Commits made through the port (cellbridge's), in order.
    created: Vec<String>,
    /// Every call and every note of the test, in order: a schedule's story.
    journal: Vec<String>,
    /// Blobs by id, as comparisons named them.
    blobs: HashMap<String, String>,
    /// Seeded interleaving: each call yields to the scheduler a pseudo-random number of times.
    jitter: Option<u64>,
    /// The most open pull requests of `cellbridge/` branches in a merge queue or auto-merging at
    /// once, as seen after every request and every person's act (`dashboard`).
    peak_in_flight: usize,
    /// The repository's "Allow auto-merge" setting (`allow_auto_merge`, off unless set: "Default:
    /// `false`", <https://docs.github.com/rest/repos/repos#update-a-repository>).
    allow_auto_merge: bool,
    /// Base branch → its protection.
    branch_protection: BTreeMap<String, Protection>,
    /// Commit → the checks people's CI reported on it (name, state), newest last.
    checks: HashMap<String, Vec<(String, CheckState)>>,
    /// Every merge of a pull request, in order.
    merges: Vec<MemMerge>,
    /// When each pull request was opened (seconds since the epoch), by number.
    pull_created: HashMap<u64, u64>,
    /// Pull requests whose merge state GitHub has not computed yet (`UNKNOWN`).
    merge_not_computed: std::collections::HashSet<u64>,
    /// Why each closed issue was closed (`completed`, `duplicate`), by number.
    state_reasons: HashMap<u64, &'static str>,
    /// Issues turned off in the repository's settings.
    issues_disabled: bool,
    /// The credentials are a personal access token, not an App installation (`signing`).
    token: bool,
    /// Commits GitHub verified the signature of.
    verified: std::collections::HashSet<String>,
    /// Branch → the rule requiring signed commits on it.
    signature_rules: BTreeMap<String, SignatureRule>,
    /// The branch a cell's reading last told whether it requires signed commits, and the
    /// answer: `requires_signatures` of it asks nothing more, as the adapter keeps it.
    signatures_read: Option<(String, bool)>,
    /// Merge queues required, and their entries.
    queues: merge_queue::Queues,
}

/// One repository on GitHub, in memory.
pub struct MemGithub {
    store: Mutex<Store>,
}

/// GitHub's final answer, classified as the transport classifies it.
fn api(op: &Operation, status: u16, message: impl Into<String>) -> GithubError {
    GithubError::from_status(op.id, status, message.into(), None)
}

impl Store {
    /// The number GitHub gives the next issue or pull request.
    fn next_number(&self) -> u64 {
        (self.pulls.len() + self.issues.len()) as u64 + 1
    }
}

impl MemGithub {
    /// A repository whose default branch `branch` holds `files` (path, text) in one commit.
    pub fn new(branch: &str, files: &[(String, String)]) -> Self {
        let mut store = Store {
            default_branch: branch.to_owned(),
            ..Store::default()
        };
        let files: Vec<(String, Option<String>)> = files.iter().map(|(p, c)| (p.clone(), Some(c.clone()))).collect();
        store.commit_on(branch, &files, "initial commit");
        Self {
            store: Mutex::new(store),
        }
    }

    /// A repository whose default branch `branch` holds `fleet` (modes and symlinks included)
    /// in one commit.
    pub fn from_fleet(branch: &str, fleet: &MemFleet) -> Self {
        let mut store = Store {
            default_branch: branch.to_owned(),
            ..Store::default()
        };
        let tree: BTreeMap<String, Entry> = fleet
            .files()
            .iter()
            .map(|(p, (m, b))| (p.clone(), (*m, String::from_utf8_lossy(b).into_owned())))
            .collect();
        let tree = store.put_tree(tree);
        let sha = store.put_commit(&tree, &[], "initial commit");
        store.refs.insert(branch.to_owned(), sha);
        Self {
            store: Mutex::new(store),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let out = f(&mut s);
        s.peak_in_flight = s.peak_in_flight.max(s.in_flight());
        out
    }

    /// One request through the port: the schedule's yields first, then the store, held for the
    /// whole request as GitHub applies one request at a time.
    async fn call<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        self.pause().await;
        self.with(f)
    }
}

/// Each primitive (of every slice) is answered where its rules live (see the module's list).
impl GitData for MemGithub {
    async fn read_base(&self, keep: &Keep, _deadline: Instant) -> Result<Snapshot> {
        self.call(|s| s.read_base(keep)).await
    }

    async fn compare(&self, base: &str, head: &str, _deadline: Instant) -> Result<Comparison> {
        self.call(|s| s.compare(base, head)).await
    }

    async fn tree_files(&self, commit: &str, _deadline: Instant) -> Result<TreeFiles> {
        self.call(|s| s.tree_files(commit)).await
    }

    async fn read_blob(&self, blob: &str, _deadline: Instant) -> Result<Vec<u8>> {
        self.call(|s| s.read_blob(blob)).await
    }

    async fn create_tree(
        &self,
        on: &str,
        tree: Option<&str>,
        files: &[FileWrite],
        removed: &[String],
        _deadline: Instant,
    ) -> Result<String> {
        self.call(|s| s.create_tree(on, tree, files, removed)).await
    }

    async fn create_commit(&self, tree: &str, parents: &[String], message: &str, _deadline: Instant) -> Result<String> {
        self.call(|s| s.create_commit(tree, parents, message)).await
    }

    async fn move_branch(&self, branch: &str, from: &str, commit: &str, _deadline: Instant) -> Result<()> {
        self.call(|s| s.move_branch(branch, from, commit)).await
    }

    async fn create_branch(&self, branch: &str, commit: &str, _deadline: Instant) -> Result<bool> {
        self.call(|s| s.create_branch(branch, commit)).await
    }

    async fn branch_head(&self, branch: &str, _deadline: Instant) -> Result<Option<(String, String)>> {
        self.call(|s| s.branch_head(branch)).await
    }

    async fn delete_branch_at(&self, branch: &str, expected: &str, _deadline: Instant) -> Result<bool> {
        self.call(|s| s.delete_branch_at(branch, expected)).await
    }

    async fn signs_git_data(&self, _deadline: Instant) -> Result<bool> {
        Ok(self.with(|s| !s.token))
    }

    async fn requires_signatures(&self, branch: &str, _deadline: Instant) -> Result<bool> {
        self.call(|s| s.requires_signatures(branch)).await
    }

    async fn commit_on_branch(
        &self,
        branch: &str,
        expected_head: &str,
        files: &[FileWrite],
        removed: &[String],
        message: &str,
        _deadline: Instant,
    ) -> Result<String> {
        self.call(|s| s.commit_on_branch(branch, expected_head, files, removed, message))
            .await
    }

    async fn update_pull_branch(
        &self,
        number: u64,
        branch: &str,
        expected_head: &str,
        _deadline: Instant,
    ) -> Result<Merge> {
        self.call(|s| s.update_pull_branch(number, branch, expected_head)).await
    }

    async fn merge_into(&self, branch: &str, commit: &str, message: &str, _deadline: Instant) -> Result<Merge> {
        self.call(|s| s.merge_into(branch, commit, message)).await
    }

    async fn check_write_access(&self, _deadline: Instant) -> Result<()> {
        self.call(|s| s.check_write_access()).await
    }

    fn token_expires_at(&self) -> Option<std::time::SystemTime> {
        self.with(|s| s.token_expiry)
    }
}

impl Pulls for MemGithub {
    async fn latest_pull(&self, branch: &str, _deadline: Instant) -> Result<Option<PullRequest>> {
        self.call(|s| s.latest_pull(branch)).await
    }

    async fn cell_reading(
        &self,
        branch: &str,
        label: &str,
        base: &str,
        base_sha: &str,
        _deadline: Instant,
    ) -> Result<CellReading> {
        self.call(|s| s.cell_reading(branch, label, base, base_sha)).await
    }

    async fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        _deadline: Instant,
    ) -> Result<(u64, String)> {
        self.call(|s| s.create_pull(head, base, title, body)).await
    }

    async fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        _deadline: Instant,
    ) -> Result<bool> {
        self.call(|s| s.update_pull_text(number, title, body, labels)).await
    }

    async fn add_labels(&self, number: u64, labels: &[String], _deadline: Instant) -> Result<()> {
        self.call(|s| s.add_labels(number, labels)).await
    }

    async fn comment(&self, number: u64, body: &str, _deadline: Instant) -> Result<()> {
        self.call(|s| s.comment(number, body)).await
    }

    async fn close_pull(&self, number: u64, body: &str, _deadline: Instant) -> Result<()> {
        self.call(|s| s.close_pull(number, body)).await
    }

    async fn open_pulls(&self, head_prefix: &str, context: &str, _deadline: Instant) -> Result<Vec<OpenPull>> {
        self.call(|s| s.open_pulls(head_prefix, context)).await
    }

    async fn newest_pulls(&self, branches: &[String], _deadline: Instant) -> Result<BTreeMap<String, PullRequest>> {
        self.call(|s| s.newest_pulls(branches)).await
    }
}

impl Issues for MemGithub {
    async fn open_issues(&self, label: &str, _deadline: Instant) -> Result<Vec<Issue>> {
        self.call(|s| s.open_issues(label)).await
    }

    async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        _deadline: Instant,
    ) -> Result<(u64, String)> {
        self.call(|s| s.create_issue(title, body, labels)).await
    }

    async fn close_issue(&self, number: u64, body: &str, reason: CloseReason, _deadline: Instant) -> Result<()> {
        self.call(|s| s.close_issue(number, body, reason)).await
    }
}

impl Merges for MemGithub {
    async fn status(&self, commit: &str, context: &str, _deadline: Instant) -> Result<Option<(bool, String)>> {
        self.call(|s| s.status(commit, context)).await
    }

    async fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        _deadline: Instant,
    ) -> Result<()> {
        self.call(|s| s.set_status(commit, success, context, description)).await
    }

    async fn set_pending(&self, commit: &str, context: &str, description: &str, _deadline: Instant) -> Result<()> {
        self.call(|s| s.post_status(commit, Posted::Pending, context, description))
            .await
    }

    async fn merge_state(&self, number: u64, _deadline: Instant) -> Result<MergeState> {
        self.call(|s| s.merge_state(number)).await
    }

    async fn enable_auto_merge(
        &self,
        node: &str,
        expected_head: &str,
        method: MergeMethod,
        _deadline: Instant,
    ) -> Result<AutoMergeAnswer> {
        self.call(|s| s.enable_auto_merge(node, expected_head, method)).await
    }

    async fn disable_auto_merge(&self, node: &str, _deadline: Instant) -> Result<()> {
        self.call(|s| s.disable_auto_merge(node)).await
    }

    async fn merge_pull(&self, number: u64, sha: &str, method: MergeMethod, _deadline: Instant) -> Result<MergeAnswer> {
        self.call(|s| s.merge_pull(number, sha, method)).await
    }

    async fn queue_auto_merge(&self, node: &str, expected_head: &str, _deadline: Instant) -> Result<QueueAnswer> {
        self.call(|s| s.queue_auto_merge(node, expected_head)).await
    }

    async fn enqueue(&self, node: &str, expected_head: &str, _deadline: Instant) -> Result<QueueAnswer> {
        self.call(|s| s.enqueue(node, expected_head)).await
    }

    async fn dequeue(&self, node: &str, _deadline: Instant) -> Result<()> {
        self.call(|s| s.dequeue(node)).await
    }
}
