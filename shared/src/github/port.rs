//! GitHub as the pull-request logic sees it: the primitives of one repository (read the base,
//! trees and commits, refs, pull requests, statuses, labels), not "publish a plan". The logic
//! above ([`super::pull_request`]) runs the same whatever implements this: [`super::GithubFleet`]
//! over the REST API, or the in-memory store of the `test-support` feature.
//!
//! Each method answers what GitHub answers, classified: a ref that moved under a fast-forward
//! is [`Conflict`](super::GithubError::Conflict) (redo on a fresh base), a 5xx or rate limit
//! that outlived the retries is [`Transient`](super::GithubError::Transient), a refusal is
//! [`Api`](super::GithubError::Api).

use std::future::Future;
use std::time::Instant;

use super::{Result, Snapshot};

/// An open pull request of a cell, as far as cellbridge needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenPull {
    pub number: u64,
    pub url: String,
    pub head_sha: String,
    pub labels: Vec<String>,
    pub body: String,
}

/// The primitives of one GitHub repository.
pub trait GithubRepo: Send + Sync {
    /// The base branch's files, head commit and root tree.
    fn read_base(&self, deadline: Instant) -> impl Future<Output = Result<Snapshot>> + Send;
    /// The open pull request whose head is `branch`, if any.
    fn open_pull(&self, branch: &str, deadline: Instant) -> impl Future<Output = Result<Option<OpenPull>>> + Send;
    /// A tree: the snapshot's root tree with `files` (path, content) written over it.
    fn create_tree(
        &self,
        snap: &Snapshot,
        files: &[(String, String)],
        deadline: Instant,
    ) -> impl Future<Output = Result<String>> + Send;
    fn create_commit(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<String>> + Send;
    /// Moves `branch` to `commit` by fast-forward only; [`Conflict`](super::GithubError::Conflict) otherwise.
    fn move_branch(&self, branch: &str, commit: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
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
    fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Opens a pull request; [`Conflict`](super::GithubError::Conflict) when one is already open for `head`.
    fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<(u64, String)>> + Send;
    /// Title, body and the whole label set, in one write.
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
    fn close_pull(&self, number: u64, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
}
