//! The typed calls: GitHub's primitives ([`GithubRepo`](crate::ports::github::GithubRepo)) over the REST API,
//! one documented operation of [`super::operations`] each, naming what they do in their errors.
//!
//! One file per area of GitHub's API: `repository` (the repository, the App installation's
//! permissions, commit statuses), `git` (trees, commits, blobs, refs), `pulls`, `issues` (and
//! labels and comments, which GitHub serves as the issues'), `merges` (comparisons, merges,
//! merge state and auto-merge), `signing` (whether a branch requires signed commits, and the
//! commits and merges GitHub signs whatever the credentials), and `graphql` (the GraphQL endpoint
//! those use). What GitHub's
//! refusals mean is read in [`super::answers`], the same reading the in-memory double applies.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::ports::github::{
    AutoMergeAnswer, CellReading, CloseReason, Comparison, GitData, Issue, Issues, Merge, MergeAnswer, MergeMethod,
    MergeState, Merges, OpenPull, PullRequest, Pulls, QueueAnswer, TreeFiles,
};
use crate::pure::fleet::{FileWrite, Keep};
use crate::{
    adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result, ports::github::Snapshot,
};

mod cells;
mod git;
mod graphql;
mod issues;
mod merges;
mod open;
mod pulls;
mod repository;
mod signing;

/// Each primitive (of every slice) is the inherent method of the same name in its area's file:
/// method resolution takes an inherent method before a trait's, so none of these calls itself.
impl GitData for GithubFleet {
    fn write_room(&self, deadline: Instant) -> Result<()> {
        self.pacer.room_before(deadline).map_err(|too_soon| GithubError::Transient {
            what: "pacing writes".into(),
            detail: format!(
                "paced: the next write keeps GitHub's limits on content-creating requests only in {} s, after the deadline; nothing was read",
                too_soon.wait.as_secs()
            ),
        })
    }

    async fn read_base(&self, keep: &Keep, deadline: Instant) -> Result<Snapshot> {
        self.download_snapshot(keep, deadline).await
    }

    async fn check_write_access(&self, deadline: Instant) -> Result<()> {
        self.check_write_access(deadline).await
    }

    fn token_expires_at(&self) -> Option<std::time::SystemTime> {
        GithubFleet::token_expires_at(self)
    }

    async fn compare(&self, base: &str, head: &str, deadline: Instant) -> Result<Comparison> {
        self.compare(base, head, deadline).await
    }

    async fn tree_files(&self, commit: &str, deadline: Instant) -> Result<TreeFiles> {
        self.tree_files(commit, deadline).await
    }

    async fn read_blob(&self, blob: &str, deadline: Instant) -> Result<Vec<u8>> {
        self.read_blob(blob, deadline).await
    }

    async fn create_tree(
        &self,
        on: &str,
        tree: Option<&str>,
        files: &[FileWrite],
        removed: &[String],
        deadline: Instant,
    ) -> Result<String> {
        self.create_tree(on, tree, files, removed, deadline).await
    }

    async fn create_commit(&self, tree: &str, parents: &[String], message: &str, deadline: Instant) -> Result<String> {
        self.create_commit(tree, parents, message, deadline).await
    }

    async fn move_branch(&self, branch: &str, from: &str, commit: &str, deadline: Instant) -> Result<()> {
        self.move_branch(branch, from, commit, deadline).await
    }

    async fn create_branch(&self, branch: &str, commit: &str, deadline: Instant) -> Result<bool> {
        self.create_branch(branch, commit, deadline).await
    }

    async fn branch_head(&self, branch: &str, deadline: Instant) -> Result<Option<(String, String)>> {
        self.branch_head(branch, deadline).await
    }

    async fn merge_into(&self, branch: &str, commit: &str, message: &str, deadline: Instant) -> Result<Merge> {
        self.merge_into(branch, commit, message, deadline).await
    }

    async fn delete_branch_at(&self, branch: &str, head: &str, deadline: Instant) -> Result<bool> {
        self.delete_branch_at(branch, head, deadline).await
    }

    async fn signs_git_data(&self, deadline: Instant) -> Result<bool> {
        self.signs_git_data(deadline).await
    }

    async fn requires_signatures(&self, branch: &str, deadline: Instant) -> Result<bool> {
        self.requires_signatures(branch, deadline).await
    }

    async fn commit_on_branch(
        &self,
        branch: &str,
        expected_head: &str,
        files: &[FileWrite],
        removed: &[String],
        message: &str,
        deadline: Instant,
    ) -> Result<String> {
        self.commit_on_branch(branch, expected_head, files, removed, message, deadline)
            .await
    }

    async fn update_pull_branch(
        &self,
        number: u64,
        branch: &str,
        expected_head: &str,
        deadline: Instant,
    ) -> Result<Merge> {
        self.update_pull_branch(number, branch, expected_head, deadline).await
    }
}

impl Pulls for GithubFleet {
    async fn latest_pull(&self, branch: &str, deadline: Instant) -> Result<Option<PullRequest>> {
        self.latest_pull(branch, deadline).await
    }

    async fn close_pull(&self, number: u64, body: &str, deadline: Instant) -> Result<()> {
        self.close_pull(number, body, deadline).await
    }

    async fn comment(&self, number: u64, body: &str, deadline: Instant) -> Result<()> {
        self.comment(number, body, deadline).await
    }

    async fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        deadline: Instant,
    ) -> Result<(u64, String)> {
        self.create_pull(head, base, title, body, deadline).await
    }

    async fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> Result<bool> {
        self.update_pull_text(number, title, body, labels, deadline).await
    }

    async fn add_labels(&self, number: u64, labels: &[String], deadline: Instant) -> Result<()> {
        self.add_labels(number, labels, deadline).await
    }

    async fn open_pulls(&self, head_prefix: &str, context: &str, deadline: Instant) -> Result<Vec<OpenPull>> {
        self.open_pulls(head_prefix, context, deadline).await
    }

    async fn cell_reading(
        &self,
        branch: &str,
        label: &str,
        base: &str,
        base_sha: &str,
        deadline: Instant,
    ) -> Result<CellReading> {
        self.cell_reading(branch, label, base, base_sha, deadline).await
    }

    async fn newest_pulls(&self, branches: &[String], deadline: Instant) -> Result<BTreeMap<String, PullRequest>> {
        self.newest_pulls(branches, deadline).await
    }
}

impl Issues for GithubFleet {
    async fn open_issues(&self, label: &str, deadline: Instant) -> Result<Vec<Issue>> {
        self.open_issues(label, deadline).await
    }

    async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> Result<(u64, String)> {
        self.create_issue(title, body, labels, deadline).await
    }

    async fn close_issue(&self, number: u64, body: &str, reason: CloseReason, deadline: Instant) -> Result<()> {
        self.close_issue(number, body, reason, deadline).await
    }
}

impl Merges for GithubFleet {
    async fn set_pending(&self, commit: &str, context: &str, description: &str, deadline: Instant) -> Result<()> {
        self.post_status(commit, "pending", context, description, deadline)
            .await
    }

    async fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> Result<()> {
        self.set_status(commit, success, context, description, deadline).await
    }

    async fn status(&self, commit: &str, context: &str, deadline: Instant) -> Result<Option<(bool, String)>> {
        self.status(commit, context, deadline).await
    }

    async fn merge_state(&self, number: u64, deadline: Instant) -> Result<MergeState> {
        self.merge_state(number, deadline).await
    }

    async fn enable_auto_merge(
        &self,
        node_id: &str,
        expected_head: &str,
        method: MergeMethod,
        deadline: Instant,
    ) -> Result<AutoMergeAnswer> {
        self.enable_auto_merge(node_id, expected_head, method, deadline).await
    }

    async fn disable_auto_merge(&self, node_id: &str, deadline: Instant) -> Result<()> {
        self.disable_auto_merge(node_id, deadline).await
    }

    async fn merge_pull(&self, number: u64, sha: &str, method: MergeMethod, deadline: Instant) -> Result<MergeAnswer> {
        self.merge_pull(number, sha, method, deadline).await
    }

    async fn queue_auto_merge(&self, node_id: &str, expected_head: &str, deadline: Instant) -> Result<QueueAnswer> {
        self.queue_auto_merge(node_id, expected_head, deadline).await
    }

    async fn enqueue(&self, node_id: &str, expected_head: &str, deadline: Instant) -> Result<QueueAnswer> {
        self.enqueue(node_id, expected_head, deadline).await
    }

    async fn dequeue(&self, node_id: &str, deadline: Instant) -> Result<()> {
        self.dequeue(node_id, deadline).await
    }
}
