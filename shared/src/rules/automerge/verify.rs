//! The one reading of a pull request's merge state that every auto-merge decision goes through,
//! and what cellbridge does when it cannot be read. Fail closed: an error, a field GitHub refused
//! inside an answer of HTTP 200, a `null` where a value decides, or a value cellbridge does not
//! know (the adapter reads each as an error) leaves GitHub's auto-merge as cellbridge did not
//! turn it on, posts no passing status on the head (`pending`, saying what could not be
//! verified), and fails the cell: retryably when GitHub failed for now, finally otherwise. A lost
//! race stays a lost race (the sync is redone on a fresh read).

use std::time::Instant;

use super::{Done, Run};
use crate::ports::github::{GithubError, MergeState, Merges, Result};
use crate::pure::plan;
use crate::shell::error::{Class, Classify};

impl Run {
    /// The merge state of pull request `number`, whose head is `head`; when it cannot be read,
    /// `head` gets a `pending` status saying so and the error is returned.
    pub(super) async fn read<G: Merges>(
        &mut self,
        gh: &G,
        number: u64,
        head: &str,
        deadline: Instant,
    ) -> Result<MergeState> {
        match gh.merge_state(number, deadline).await {
            Ok(st) => Ok(st),
            Err(e @ GithubError::Conflict { .. }) => Err(e),
            Err(e) => Err(self.not_verified(gh, number, head, e, deadline).await),
        }
    }

    async fn not_verified<G: Merges>(
        &mut self,
        gh: &G,
        number: u64,
        head: &str,
        error: GithubError,
        deadline: Instant,
    ) -> GithubError {
        let retry = error.class() == Class::Retryable;
        tracing::warn!(
            cell = %self.cell,
            pull_request = number,
            head,
            error = %error,
            retryable = retry,
            "the merge state could not be read: no auto-merge, no passing status on this head"
        );
        self.done = Done::Refused;
        self.detail = Some(error.to_string());
        // The answer may still name the pull request: cellbridge's own auto-merge goes (a
        // person's stays theirs; the pending status below holds what waits for it).
        if let GithubError::Unreadable { pull: Some(p), .. } = &error
            && (p.auto_merge_by_viewer || self.ours)
        {
            match gh.disable_auto_merge(&p.node_id, deadline).await {
                Ok(()) => {
                    tracing::info!(cell = %self.cell, pull_request = number, "auto-merge disabled: the merge state could not be read");
                    self.ours = false;
                }
                Err(e) => {
                    tracing::warn!(cell = %self.cell, pull_request = number, error = %e, "cellbridge's auto-merge could not be disabled");
                }
            }
        }
        if let Err(e) = gh
            .set_pending(head, plan::STATUS_CONTEXT, &pending_description(retry), deadline)
            .await
        {
            // The status cellbridge meant to post is not there either: nothing passes.
            tracing::warn!(cell = %self.cell, pull_request = number, head, error = %e, "the pending status could not be posted");
        }
        error
    }
}

/// The `pending` status of a head whose merge state could not be read (a status's description
/// holds 140 characters: the cause is in the log).
pub(crate) fn pending_description(retry: bool) -> String {
    format!(
        "not verified: GitHub's merge state of this pull request could not be read ({})",
        if retry { "retrying" } else { "see cellbridge's log" }
    )
}
