//! GitHub as the pull-request logic sees it: the primitives of one repository (read the base,
//! trees and commits, refs, pull requests, statuses, labels), not "publish a plan". The logic
//! above ([`super::pull_request`]) runs the same whatever implements this: [`super::GithubFleet`]
//! over the REST API, or the in-memory store of the `test-support` feature.
//!
//! Each method answers what GitHub answers, classified: a ref that moved under a fast-forward
//! is [`Conflict`](super::GithubError::Conflict) (redo on a fresh base), a repository rule
//! refusing a ref update is [`Refused`](super::GithubError::Refused), a 5xx or rate limit that
//! outlived the retries is [`Transient`](super::GithubError::Transient), any other refusal is
//! [`Api`](super::GithubError::Api).

use std::future::Future;
use std::time::Instant;

use super::{Result, Snapshot};
use crate::fleet::{FileWrite, Keep};

/// Where a pull request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullState {
    Open,
    /// Closed without merging.
    Closed,
    Merged,
}

/// A cell's pull request, as far as cellbridge needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub url: String,
    pub title: String,
    pub state: PullState,
    pub head_sha: String,
    pub labels: Vec<String>,
    pub body: String,
}

/// An open issue (not a pull request), as far as cellbridge needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub number: u64,
    pub url: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
}

/// How a commit relates to another ("Compare two commits": the head's status against the base).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Identical,
    /// The head has commits the base lacks, and lacks none of the base's.
    Ahead,
    /// The head lacks commits of the base and has none of its own.
    Behind,
    /// Each has commits the other lacks.
    Diverged,
}

impl Relation {
    /// The head contains every commit of the base.
    pub fn contains_base(self) -> bool {
        matches!(self, Relation::Identical | Relation::Ahead)
    }
}

/// A file the head changed since its merge base with the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    pub path: String,
    /// The blob at the head; `None` when the head removed the file.
    pub blob: Option<String>,
}

/// "Compare two commits" (three dots: the head's changes since the merge base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub relation: Relation,
    pub merge_base: String,
    pub files: Vec<ChangedFile>,
    /// The head commit's tree, when the answer shows it (saves reading the commit).
    pub head_tree: Option<String>,
}

/// What merging a commit into a branch did ("Merge a branch").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// A merge commit, now the branch's head.
    Merged(String),
    /// The branch already contains the commit.
    UpToDate,
    /// Both sides changed the same thing: nothing moved.
    Conflict,
}

/// The primitives of one GitHub repository.
pub trait GithubRepo: Send + Sync {
    /// Whether the credentials may write what cellbridge writes, where GitHub tells before any
    /// write (a GitHub App installation's permissions):
    /// [`MissingPermissions`](super::GithubError::MissingPermissions) names what is missing.
    /// `Ok` when GitHub cannot tell (a token): a 403 then names the permission.
    fn check_write_access(&self, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Whether a write could still be sent before `deadline` within this process's share of
    /// GitHub's limits: [`Transient`](super::GithubError::Transient) when the pacing leaves no
    /// room, so that a state comes back later instead of reading the base for nothing.
    fn write_room(&self, _deadline: Instant) -> Result<()> {
        Ok(())
    }
    /// The base branch's head commit and the files `keep` keeps (the rest read past), within
    /// the memory limit ([`TooLarge`](super::GithubError::TooLarge) beyond it).
    fn read_base(&self, keep: &Keep, deadline: Instant) -> impl Future<Output = Result<Snapshot>> + Send;
    /// The newest pull request whose head is `branch`, open, closed or merged.
    fn latest_pull(&self, branch: &str, deadline: Instant) -> impl Future<Output = Result<Option<PullRequest>>> + Send;
    /// How `head` relates to `base`, and the files `head` changed since their merge base.
    fn compare(&self, base: &str, head: &str, deadline: Instant) -> impl Future<Output = Result<Comparison>> + Send;
    /// A blob's text.
    fn read_blob(&self, blob: &str, deadline: Instant) -> impl Future<Output = Result<String>> + Send;
    /// A tree: the tree of commit `on` (or `tree`, when the caller knows it) with `files`
    /// written over it, each with its mode (a symlink's content is its target), and the files
    /// `removed` taken out (each must be there: GitHub refuses to delete a file that does not
    /// exist).
    fn create_tree(
        &self,
        on: &str,
        tree: Option<&str>,
        files: &[FileWrite],
        removed: &[String],
        deadline: Instant,
    ) -> impl Future<Output = Result<String>> + Send;
    fn create_commit(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<String>> + Send;
    /// Moves `branch` from `from` to `commit` by fast-forward only: [`Conflict`](super::GithubError::Conflict)
    /// when someone moved it meanwhile, [`Refused`](super::GithubError::Refused) when a
    /// repository rule refuses the update.
    fn move_branch(
        &self,
        branch: &str,
        from: &str,
        commit: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Creates `branch` at `commit`; `Ok(false)` when it already exists.
    fn create_branch(&self, branch: &str, commit: &str, deadline: Instant)
    -> impl Future<Output = Result<bool>> + Send;
    /// The branch head's id and commit message, `None` when there is no such branch.
    fn branch_head(
        &self,
        branch: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Option<(String, String)>>> + Send;
    /// Deletes `branch`; already gone is fine.
    fn delete_branch(&self, branch: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Merges `commit` into `branch` on GitHub's side, as a person's "Update branch" would.
    fn merge_into(
        &self,
        branch: &str,
        commit: &str,
        message: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Merge>> + Send;
    /// The newest status of `context` on `commit`: (success, description).
    fn status(
        &self,
        commit: &str,
        context: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Option<(bool, String)>>> + Send;
    fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Opens a pull request; [`Conflict`](super::GithubError::Conflict) when one is already open
    /// for `head`, or `head` is gone (another run deleted it meanwhile).
    fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<(u64, String)>> + Send;
    /// The open issues (pull requests left out) carrying `label`, oldest first.
    fn open_issues(&self, label: &str, deadline: Instant) -> impl Future<Output = Result<Vec<Issue>>> + Send;
    /// Opens an issue with `labels`.
    fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> impl Future<Output = Result<(u64, String)>> + Send;
    /// Closes an issue, its body replaced by `body` in the same write.
    fn close_issue(&self, number: u64, body: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Title, body and the whole label set of a pull request or an issue, in one write.
    fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Adds labels; the pull request keeps the ones it has.
    fn add_labels(&self, number: u64, labels: &[String], deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// A comment on the pull request's conversation.
    fn comment(&self, number: u64, body: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Closes the pull request, its body replaced by `body` in the same write.
    fn close_pull(&self, number: u64, body: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
}
