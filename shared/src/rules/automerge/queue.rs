//! Auto-merge where the base branch requires a merge queue: GitHub merges what is in the queue,
//! by the queue's own method, once the queue's checks of it merged with the latest base pass. An
//! eligible head is put in the queue the way the repository allows, an ineligible one cellbridge
//! queued is taken out before its status is posted, a person's queueing is left alone.
//!
//! - Every requirement met (but being up to date, which the queue sees to): `enqueuePullRequest`
//!   for the head checked, as GitHub's own client does ("If required checks have passed, the pull
//!   request will be added to the merge queue", `gh pr merge --help`); auto-merge would be refused
//!   ("Pull request is in clean status"), or, already on, never fire ("`--auto` silently no-ops.
//!   The PR is never queued", <https://github.com/loopdive/js2/pull/931>).
//! - A requirement still missing and "Allow auto-merge" on: `enablePullRequestAutoMerge` without a
//!   merge method (the queue sets it, and GitHub refuses another: "The merge strategy for main is
//!   set by the merge queue"), for the head checked; GitHub queues it once every requirement is
//!   met. Off: nothing yet (GitHub refuses to enqueue it: "Pull request Waiting on code owner
//!   review ..."); the next event adds it.
//! - Never "Merge a pull request" (refused: "Changes must be made through the merge queue."), and
//!   never an update of a head that is behind: the queue tests the merge with the latest base.
//! - Who queued it, GitHub's `enqueuer` tells (auto-merge queues as whoever enabled it); never the
//!   body, which a person can edit.
//! - Never queued where it would only stall the queue. A queue waits for its required checks on
//!   the merge group's commit ("A merge queue will wait for required checks to be reported before
//!   it can proceed with merging. You must update your CI configuration to trigger and report on
//!   merge group events when requiring a merge queue", "Managing a merge queue"); the
//!   `merge_group` event's `head_sha` is the commit that "should be validated and have status
//!   reported on" (GitHub changelog, "merge_group" event). cellbridge posts
//!   `cellbridge/strict-substitution` on pull requests' heads only, never on a merge group's
//!   commit: where the base requires it (the head's `isRequired` contexts) and a queue, every
//!   entry would wait until the status-check timeout and be dropped ("every queue entry stalls in
//!   `AWAITING_CHECKS` and fails after the 60-minute check-response timeout",
//!   <https://github.com/Ed-Fi-Alliance-OSS/Data-Management-Service/pull/1098>). So cellbridge does
//!   not queue it (and takes back its own queueing or auto-merge), and says which check to
//!   require instead: the fleet workflow's [`WORKFLOW_CHECK`].
//! - Any other required check, GitHub does not say whether something reports it on merge groups.
//!   A ruleset's `required_status_checks` names a `context` and at most the `integration_id` it
//!   "must originate from" (REST description, `repository-rule-params-status-check-configuration`):
//!   which App, not which events it answers. An App may post a check on pull requests and never on
//!   merge groups (<https://github.com/eclipse-apoapsis/.eclipsefdn/issues/3>: the ECA App "is not
//!   triggered by the `merge_group` event and therefore the checks in the merge queue time out"),
//!   and a workflow's `on: merge_group` says nothing of a job skipped or an external CI. Guessing
//!   from workflow files or a pull request's body would be a guess. What is known is cellbridge's
//!   own status, refused above; for the rest the queue itself fails closed (nothing merges without
//!   its checks), and the pacing bounds what one such check can hold up to the cap.

use std::time::Instant;

use super::{Done, Run, Wait, quote};
use crate::ports::github::Result;
use crate::ports::github::{MergeState, MergeStateStatus, Merges, Pulls, QueueAnswer};
use crate::pure::markdown;
use crate::pure::plan::STATUS_CONTEXT;

/// The check the fleet repository's own workflow reports on pull requests and merge groups
/// (`examples/github-actions/cellbridge-check.yml`): what a base with a merge queue requires
/// instead of cellbridge's status.
pub const WORKFLOW_CHECK: &str = "cellbridge fleet check";

impl Run {
    /// After the status of an eligible head `head` whose base requires a merge queue (`st`
    /// read after the status): the head in the queue, or what is awaited.
    pub(super) async fn queue_eligible<G: Merges + Pulls>(
        &mut self,
        gh: &G,
        number: u64,
        head: &str,
        st: &MergeState,
        base_branch: &str,
        deadline: Instant,
    ) -> Result<()> {
        if st.required.iter().any(|c| c.name == STATUS_CONTEXT) {
            return self.unqueueable(gh, number, st, base_branch, deadline).await;
        }
        if let Some(q) = &st.queued {
            self.ours = st.queued_by_viewer();
            self.queued(format!(
                "in the merge queue ({}), added by {}",
                q.state.to_lowercase().replace('_', " "),
                q.enqueuer.display()
            ));
            return Ok(());
        }
        // Auto-merge on (anyone's) queues it only when a requirement turns met; one that was met
        // meanwhile leaves it armed and out of the queue ("GitHub only enqueues a PR on specific
        // triggers ... not on a passive change", https://github.com/osac-project/osac/pull/924):
        // a head that is ready is enqueued whatever auto-merge says.
        if let Some(a) = st.auto_merge.as_ref().filter(|_| !ready(st)) {
            self.done = Done::AlreadyEnabled;
            self.detail = Some(format!(
                "GitHub adds it to the merge queue once branch protection is satisfied (enabled by {})",
                a.enabled_by
                    .as_ref()
                    .map_or_else(|| "a person".to_owned(), |b| b.display())
            ));
            return Ok(());
        }
        if st.merge_state == MergeStateStatus::Dirty {
            self.done = Done::Waiting;
            self.detail = Some("the pull request conflicts with the base branch".to_owned());
            return Ok(());
        }
        if !ready(st) && !st.auto_merge_allowed {
            // GitHub refuses to queue it before then, and with auto-merge off nothing of
            // GitHub's queues it later: the next event does.
            self.done = Done::Waiting;
            self.detail = Some(format!(
                "the merge queue takes it once every requirement is met (it is {}); \"Allow auto-merge\" is off, so the next event adds it",
                st.merge_state.name()
            ));
            return Ok(());
        }
        let Some(place) = self.take_turn(gh, number, deadline).await else {
            return Ok(());
        };
        let answer = if ready(st) {
            gh.enqueue(&st.node_id, head, deadline).await?
        } else {
            match gh.queue_auto_merge(&st.node_id, head, deadline).await? {
                // It became ready since it was read: added now, for the same head.
                QueueAnswer::MergeableNow(why) => {
                    tracing::info!(pull_request = number, answer = %why, "auto-merge refused: the pull request can be queued now");
                    gh.enqueue(&st.node_id, head, deadline).await?
                }
                a => a,
            }
        };
        match answer {
            QueueAnswer::Queued => {
                tracing::info!(pull_request = number, head, "added to the merge queue");
                self.ours = true;
                self.queued("added to the merge queue, which merges it by its own method".to_owned());
                self.kept_turn(place, gh, number, &st.node_id, deadline).await?;
            }
            QueueAnswer::Armed => {
                tracing::info!(pull_request = number, head, "auto-merge enabled: GitHub queues it");
                self.ours = true;
                self.done = Done::Enabled;
                self.detail = Some(format!(
                    "GitHub adds it to the merge queue once branch protection is satisfied (it was {})",
                    st.merge_state.name()
                ));
                self.kept_turn(place, gh, number, &st.node_id, deadline).await?;
            }
            QueueAnswer::NotAllowed(why) => self.not_allowed(&why),
            QueueAnswer::MergeableNow(why) | QueueAnswer::Refused(why) => {
                tracing::warn!(pull_request = number, answer = %why, "GitHub refused to queue it");
                self.done = Done::Refused;
                self.note = Some(format!(
                    "GitHub refused to add it to the merge queue: \"{}\". cellbridge tries again at the next event; a person can add it.",
                    quote(&why)
                ));
                self.detail = Some(why);
            }
        }
        Ok(())
    }

    /// Before the status of a head that is not eligible: taken out of the merge queue when
    /// cellbridge put it there, left alone when a person did. Whether the queue decided (nothing
    /// else to do).
    pub(super) async fn out_of_queue<G: Merges>(
        &mut self,
        gh: &G,
        number: u64,
        st: &MergeState,
        deadline: Instant,
    ) -> Result<bool> {
        let Some(q) = &st.queued else { return Ok(false) };
        if st.queued_by_viewer() {
            gh.dequeue(&st.node_id, deadline).await?;
            tracing::info!(
                pull_request = number,
                "removed from the merge queue: the head is not eligible"
            );
            // GitHub ends auto-merge when it queues a pull request; one of cellbridge's still on
            // would queue it again.
            if st.enabled_by_viewer() {
                gh.disable_auto_merge(&st.node_id, deadline).await?;
            }
            self.ours = false;
            self.done = Done::Dequeued;
            self.note = Some(
                "cellbridge took this pull request out of the merge queue it had added it to: this head is not eligible."
                    .to_owned(),
            );
        } else {
            let who = q.enqueuer.display();
            self.done = Done::LeftAlone;
            self.detail = Some(format!("added to the merge queue by {who}"));
            self.note = Some(format!(
                "{} added this pull request to the merge queue: cellbridge leaves a person's choice alone, and the queue's checks still decide.",
                markdown::code(&who)
            ));
        }
        Ok(true)
    }

    /// An eligible head whose base requires a merge queue and cellbridge's own status, which no
    /// merge group ever gets: not queued, cellbridge's own queueing or auto-merge taken back (a
    /// person's left alone), and the paragraph says what to require instead.
    async fn unqueueable<G: Merges>(
        &mut self,
        gh: &G,
        number: u64,
        st: &MergeState,
        base_branch: &str,
        deadline: Instant,
    ) -> Result<()> {
        if st.queued_by_viewer() {
            gh.dequeue(&st.node_id, deadline).await?;
        }
        if st.enabled_by_viewer() {
            gh.disable_auto_merge(&st.node_id, deadline).await?;
        }
        tracing::warn!(
            pull_request = number,
            check = STATUS_CONTEXT,
            "not queued: the base requires a merge queue and a check no merge group reports"
        );
        self.ours = false;
        self.done = Done::Unqueueable;
        self.wait = Some(Wait::Stall);
        self.detail = Some(format!(
            "`{base_branch}` requires a merge queue and {STATUS_CONTEXT}, which is never reported on a merge group: require {WORKFLOW_CHECK:?} instead"
        ));
        let person = match &st.queued {
            Some(q) if !st.queued_by_viewer() => format!(
                " {} added it to the queue: cellbridge leaves that alone.",
                markdown::code(&q.enqueuer.display())
            ),
            _ => String::new(),
        };
        self.note = Some(format!(
            "**Not queued.** `{base_branch}` requires a merge queue and the check {}. cellbridge posts that status on pull requests' heads only, never on a merge group's commit, so the queue would wait for it until its status-check timeout and drop this pull request, each time, holding up the entries behind it. An administrator can require {} instead: the fleet workflow reports it on pull requests and merge groups (cellbridge's `docs/merge-queue.md`, \"Which check to require\"). cellbridge then queues this pull request at its next event.{person}",
            markdown::code(STATUS_CONTEXT),
            markdown::code(WORKFLOW_CHECK),
        ));
        Ok(())
    }

    fn queued(&mut self, detail: String) {
        self.done = Done::Queued;
        self.detail = Some(detail);
        self.note = Some(
            "**Queued.** This pull request is in the merge queue of its base branch: GitHub merges it, by the queue's merge method, once the queue's checks of it merged with the latest base pass. A push to it takes it out."
                .to_owned(),
        );
    }
}

/// Every requirement GitHub holds a pull request to before it may enter the queue is met: it
/// could merge now, or only being up to date is missing (the queue sees to that), and every
/// required check of the head passed.
fn ready(st: &MergeState) -> bool {
    (st.merge_state.mergeable_now() || st.merge_state == MergeStateStatus::Behind) && st.required_passed()
}
