//! The one reading of a pull request's merge state that every auto-merge decision goes through,
//! and what cellbridge does when it cannot be read. Fail closed: an error, a field GitHub refused
//! inside an answer of HTTP 200, a `null` where a value decides, or a value cellbridge does not
//! know (the adapter reads each as an error) leaves GitHub's auto-merge as cellbridge did not
//! turn it on, takes cellbridge's queueing out of a merge queue, posts no passing status on the
//! head (`pending`, saying what could not be verified), and fails the cell: retryably when GitHub failed for now, finally otherwise. A lost
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
        // cellbridge's own auto-merge goes (a person's stays theirs; the pending status below
        // holds what waits for it). Whose it is, the answer tells when it still names the pull
        // request; when it carries no data at all (a 5xx, an error with no `data`), the record
        // does (`automerge-by=cellbridge`), with the node id this run read the pull request by.
        let node = match &error {
            GithubError::Unreadable { pull: Some(p), .. } => {
                (p.auto_merge_by_viewer || self.ours).then(|| p.node_id.clone())
            }
            _ => self.node_id.clone().filter(|_| self.ours),
        };
        if let Some(node) = node {
            match gh.disable_auto_merge(&node, deadline).await {
                Ok(()) => {
                    tracing::info!(cell = %self.cell, pull_request = number, "auto-merge disabled: the merge state could not be read");
                    self.ours = false;
                }
                Err(e) => {
                    // The pending status still stands; the cell fails by the read's cause.
                    tracing::warn!(cell = %self.cell, pull_request = number, error = %e, "cellbridge's auto-merge could not be disabled");
                }
            }
        }
        // cellbridge's own queueing goes too: in a merge queue, the queue merges it whatever its
        // head's status says. Whose it is, the entry's `enqueuer` tells when the answer holds it
        // (a person's stays theirs, as their auto-merge does). When it does not (the field refused
        // or cut, an answer with no data), nothing tells whether it is queued at all, nor by whom:
        // it is asked out of the queue all the same (fail closed: an unverified head does not
        // merge by cellbridge's doing; a person can add it again), and a pull request that is not
        // in it is answered as already out.
        let queued = match &error {
            GithubError::Unreadable { pull: Some(p), .. } => match p.queued_by_viewer {
                Some(ours) => ours.then(|| p.node_id.clone()),
                None => Some(p.node_id.clone()),
            },
            _ => self.node_id.clone(),
        };
        if let Some(node) = queued {
            match gh.dequeue(&node, deadline).await {
                Ok(()) => {
                    tracing::info!(cell = %self.cell, pull_request = number, "out of the merge queue: the merge state could not be read");
                    self.ours = false;
                }
                Err(e) => {
                    // No queue on the base, or GitHub failing still: the cell fails by the read's
                    // cause, and the pending status below holds what is not in a queue.
                    tracing::info!(cell = %self.cell, pull_request = number, error = %e, "nothing taken out of the merge queue");
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
        "{NOT_VERIFIED} ({})",
        if retry { "retrying" } else { "see cellbridge's log" }
    )
}

/// How [`pending_description`] begins, whatever the cause.
const NOT_VERIFIED: &str = "not verified: GitHub's merge state of this pull request could not be read";

/// Whether a `pending` status's description is [`pending_description`]'s: the dashboard shows
/// it as GitHub's failure (what it shows is read by people, never decided on).
pub(crate) fn is_not_verified(description: &str) -> bool {
    description.starts_with(NOT_VERIFIED)
}
