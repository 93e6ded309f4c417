//! Checks and merging as GitHub gates it: commit statuses and check runs, branch protection,
//! GitHub's merge state and its auto-merge.
//!
//! - a status needs an existing commit and a description of at most
//!   [`STATUS_DESCRIPTION_MAX`] characters (422,
//!   <https://docs.github.com/rest/commits/statuses#create-a-commit-status>);
//! - A pull request's `mergeStateStatus` (<https://docs.github.com/graphql/reference/enums#mergestatestatus>)
//!   is derived from the store: DIRTY when it cannot merge (the three-way rule of `merges`), BEHIND
//!   when the base's protection is `strict` ("Require branches to be up to date before merging",
//!   <https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging>)
//!   and the head lacks the base's head, BLOCKED when a required check of the head is missing,
//!   pending or failed, or fewer approving reviews stand than required, UNSTABLE when only checks
//!   that are not required do not pass ("Mergeable with non-passing commit status"), else CLEAN.
//! - A check of a commit is a commit status (cellbridge's, `set_status`) or a check run people's
//!   CI reports ([`MemGithub::post_check`]); `isRequired(pullRequestNumber:)` is true for those
//!   the base's protection names, and only checks that exist on the head are listed.
//! - Auto-merge (<https://docs.github.com/pull-requests/collaborating-with-pull-requests/incorporating-changes-from-a-pull-request/automatically-merging-a-pull-request>):
//!   "the pull request will merge automatically when all required reviews are met and all
//!   required status checks have passed" ([`Store::settle`], after every change that can meet
//!   them); it needs the repository's "Allow auto-merge" ("Before you can use auto-merge with a
//!   pull request, auto-merge must be enabled for the repository"); closing the pull request
//!   cancels it. `enablePullRequestAutoMerge` refuses a pull request that can merge now with
//!   "Pull request is in clean status" (or "unstable status"), as GitHub answers it (quoted in
//!   <https://github.com/peter-evans/enable-pull-request-automerge/issues/343> and
//!   <https://github.com/peter-evans/enable-pull-request-automerge/issues/1118>), a repository that
//!   does not allow it with "Auto merge is not allowed for this repository" (quoted in
//!   <https://github.com/indexable-inc/index/issues/2948>), and a closed one with GitHub's generic
//!   "Can't enable auto-merge for this pull request." (quoted in
//!   <https://github.com/peter-evans/enable-pull-request-automerge/issues/310>).
//!   Not modelled: auto-merge disabled by a push from someone without write permission (every
//!   person here has it).
//! - "Merge a pull request" (<https://docs.github.com/rest/pulls/pulls#merge-a-pull-request>) is 405
//!   when a protection is not met, with GitHub's messages as clients quote them: `Required
//!   status check "X" is expected.` (<https://github.com/claroline/Distribution/issues/492>),
//!   "At least 1 approving review is required by reviewers with write access."
//!   (<https://github.com/Reviewable/Reviewable/issues/561>), "N of N required status checks are
//!   expected." for a head that is behind a strict base
//!   (<https://github.com/RakuenSoftware/aimee/pull/2460>); 409 "Head branch was modified. Review
//!   and try the merge again." when `sha` is not the head (the description's example).
use std::collections::BTreeMap;

use super::merge_queue::actor_of;
use super::merges::three_way;
use super::pulls::MemPull;
use super::{GithubError, MemGithub, Result, Store, api};
use crate::adapters::github::answers::{self, GraphqlError};
use crate::adapters::github::operations::{self as ops, Operation};
use crate::ports::github::{
    AutoMergeAnswer, AutoMergeRequest, CheckState, MergeMethod, MergeState, MergeStateStatus, PullNode, QueueAnswer,
    RequiredCheck,
};
use crate::pure::plan::STATUS_DESCRIPTION_MAX;

/// The login cellbridge's credentials act as (GraphQL `viewer`): an App installation's bot.
pub const VIEWER: &str = "cellbridge[bot]";

/// GitHub's auto-merge on a pull request (`autoMergeRequest`): who enabled it, and how it merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemAutoMerge {
    pub enabled_by: String,
    pub method: MergeMethod,
}

/// A base branch's protection, as "Update branch protection" sets it
/// (<https://docs.github.com/rest/branches/branch-protection#update-branch-protection>):
/// `required_status_checks.contexts` and `.strict` ("Require branches to be up to date before
/// merging"), `required_pull_request_reviews.required_approving_review_count`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    pub contexts: Vec<String>,
    pub strict: bool,
    pub approvals: u32,
}

/// A commit status as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemStatus {
    pub context: String,
    pub success: bool,
    /// `pending`: neither passing nor failing (a check not finished, or not verified).
    pub pending: bool,
    pub description: String,
    /// When it was posted, in seconds since the Unix epoch (GitHub's `createdAt`).
    pub created_at: u64,
}

/// The state a commit status is posted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Posted {
    Success,
    Failure,
    Pending,
}

impl Store {
    /// The latest state of every check of `sha`: cellbridge's statuses and people's check runs.
    pub(super) fn check_states(&self, sha: &str) -> BTreeMap<String, CheckState> {
        let mut out = self.status_states(sha);
        for (name, state) in self.checks.get(sha).into_iter().flatten() {
            out.insert(name.clone(), *state);
        }
        out
    }

    /// The latest state of every commit status of `sha`.
    fn status_states(&self, sha: &str) -> BTreeMap<String, CheckState> {
        let mut out = BTreeMap::new();
        for st in self.statuses.get(sha).into_iter().flatten() {
            out.insert(
                st.context.clone(),
                if st.success {
                    CheckState::Passed
                } else if st.pending {
                    CheckState::Pending
                } else {
                    CheckState::Failed
                },
            );
        }
        out
    }

    /// Why the base's protection does not let `pr` merge (GitHub's 405 message), or `None`.
    pub(super) fn unmet(&self, pr: &MemPull, head: &str, base: &str) -> Option<String> {
        if self.unsigned_in(pr, head, base).is_some() {
            return Some(super::signing::UNSIGNED.to_owned());
        }
        let p = self.branch_protection.get(&pr.base)?;
        if p.strict && !p.contexts.is_empty() && !self.is_ancestor(base, head) {
            let n = p.contexts.len();
            return Some(format!("{n} of {n} required status checks are expected."));
        }
        let checks = self.check_states(head);
        for ctx in &p.contexts {
            match checks.get(ctx) {
                Some(CheckState::Passed) => {}
                Some(CheckState::Failed) => return Some(format!("Required status check \"{ctx}\" is failing.")),
                _ => return Some(format!("Required status check \"{ctx}\" is expected.")),
            }
        }
        if (pr.approvals.len() as u32) < p.approvals {
            return Some(format!(
                "At least {} approving review{} required by reviewers with write access.",
                p.approvals,
                if p.approvals == 1 { " is" } else { "s are" }
            ));
        }
        None
    }

    pub(super) fn merge_state_of(&self, pr: &MemPull) -> MergeStateStatus {
        if self.merge_not_computed.contains(&pr.number) {
            return MergeStateStatus::Unknown;
        }
        let (Some(head), Some(base)) = (self.refs.get(&pr.head), self.refs.get(&pr.base)) else {
            return MergeStateStatus::Unknown;
        };
        let mergeable = self
            .merge_base(base, head)
            .is_some_and(|since| three_way(&self.files_at(&since), &self.files_at(base), &self.files_at(head)).is_ok());
        if !mergeable {
            return MergeStateStatus::Dirty;
        }
        if let Some(p) = self.branch_protection.get(&pr.base)
            && p.strict
            && !p.contexts.is_empty()
            && !self.is_ancestor(base, head)
        {
            return MergeStateStatus::Behind;
        }
        if self.unmet(pr, head, base).is_some() {
            return MergeStateStatus::Blocked;
        }
        if self.check_states(head).values().any(|c| *c != CheckState::Passed) {
            return MergeStateStatus::Unstable;
        }
        MergeStateStatus::Clean
    }

    /// GitHub's auto-merge: every open pull request whose auto-merge is on and whose
    /// requirements are now met merges, by the method it was enabled with, as the one who
    /// enabled it.
    pub(super) fn settle(&mut self) {
        self.settle_with(true);
    }

    /// [`Store::settle`] after a change that is no trigger for auto-merge into a merge queue (a
    /// rule relaxed, a queue required: see `merge_queue`).
    pub(super) fn settle_with(&mut self, triggered: bool) {
        // Where a queue is required, auto-merge adds to the queue instead (`merge_queue`).
        self.settle_queues(triggered);
        loop {
            let ready = self.pulls.iter().find_map(|p| {
                let am = p.auto_merge.as_ref()?;
                (p.open && !self.queued_base(p) && self.merge_state_of(p).mergeable_now())
                    .then(|| (p.number, am.clone()))
            });
            let Some((number, am)) = ready else { return };
            if self.merge_pr(number, am.method, None, &am.enabled_by, true).is_err() {
                // Cannot happen (the state said mergeable); never loop on it.
                if let Some(p) = self.pulls.iter_mut().find(|p| p.number == number) {
                    p.auto_merge = None;
                }
            }
        }
    }

    /// `enablePullRequestAutoMerge` for `by` (see the module's rules).
    pub(super) fn enable(
        &mut self,
        number: u64,
        expected_head: Option<&str>,
        method: MergeMethod,
        by: &str,
    ) -> Result<AutoMergeAnswer> {
        let Some(pr) = self.pulls.iter().find(|p| p.number == number).cloned() else {
            return Err(api(
                &GRAPHQL_ENABLE,
                404,
                "Could not resolve to a node with the global id",
            ));
        };
        let what = format!("enabling auto-merge on pull request #{number}");
        // GitHub's refusals, as GraphQL errors of type UNPROCESSABLE, read as the adapter reads them.
        let refused = |message: String| {
            answers::enable_answer(
                &what,
                &GraphqlError {
                    kind: "UNPROCESSABLE".into(),
                    message,
                    ..GraphqlError::default()
                },
            )
        };
        if !pr.open {
            return refused("Can't enable auto-merge for this pull request.".into());
        }
        if !self.allow_auto_merge {
            return refused("Auto merge is not allowed for this repository".into());
        }
        let head = self.refs.get(&pr.head).cloned().unwrap_or_default();
        if expected_head.is_some_and(|e| e != head) {
            return Err(GithubError::Conflict {
                what: what.clone(),
                detail: format!("the head is {head}, not the one checked"),
            });
        }
        if self.queued_base(&pr) {
            // A method where the queue sets it (`merge_queue`).
            return refused(format!("The merge strategy for {} is set by the merge queue", pr.base));
        }
        let state = self.merge_state_of(&pr);
        if state.mergeable_now() {
            let word = if state == MergeStateStatus::Unstable {
                "unstable"
            } else {
                "clean"
            };
            return refused(format!("Pull request is in {word} status"));
        }
        let p = self.pulls.iter_mut().find(|p| p.number == number).expect("found above");
        p.auto_merge = Some(MemAutoMerge {
            enabled_by: by.to_owned(),
            method,
        });
        self.journal.push(format!("#{number} auto-merge enabled by {by}"));
        Ok(AutoMergeAnswer::Enabled)
    }
}

static GRAPHQL_MERGE_STATE: Operation = ops::GRAPHQL_MERGE_STATE.as_operation();
static GRAPHQL_ENABLE: Operation = ops::GRAPHQL_ENABLE_AUTO_MERGE.as_operation();
static GRAPHQL_DISABLE: Operation = ops::GRAPHQL_DISABLE_AUTO_MERGE.as_operation();

/// A pull request's node id (`PullRequest.id`), as the store hands it out.
pub(super) fn node_id(number: u64) -> String {
    format!("PR_kwDOfleet{number}")
}

pub(super) fn number_of(node: &str) -> Option<u64> {
    node.strip_prefix("PR_kwDOfleet")?.parse().ok()
}

/// The port's statuses, merge state and auto-merge.
impl Store {
    pub(super) fn set_status(&mut self, commit: &str, success: bool, context: &str, description: &str) -> Result<()> {
        let state = if success { Posted::Success } else { Posted::Failure };
        self.post_status(commit, state, context, description)
    }

    pub(super) fn post_status(&mut self, commit: &str, state: Posted, context: &str, description: &str) -> Result<()> {
        self.enter(&ops::REPOS_CREATE_COMMIT_STATUS)?;
        if !self.commits.contains_key(commit) {
            return Err(api(
                &ops::REPOS_CREATE_COMMIT_STATUS,
                422,
                format!("No commit found for SHA: {commit}"),
            ));
        }
        if description.chars().count() > STATUS_DESCRIPTION_MAX {
            return Err(api(
                &ops::REPOS_CREATE_COMMIT_STATUS,
                422,
                format!("description is too long (maximum is {STATUS_DESCRIPTION_MAX} characters)"),
            ));
        }
        let list = self.statuses.entry(commit.to_owned()).or_default();
        list.retain(|st| st.context != context);
        list.push(MemStatus {
            context: context.to_owned(),
            success: state == Posted::Success,
            pending: state == Posted::Pending,
            description: description.to_owned(),
            created_at: super::dashboard::now_secs(),
        });
        // The last required status turning success is what GitHub's auto-merge waits for.
        self.settle();
        Ok(())
    }

    pub(super) fn status(&mut self, commit: &str, context: &str) -> Result<Option<(bool, String)>> {
        self.enter(&ops::REPOS_LIST_COMMIT_STATUSES_FOR_REF)?;
        Ok(self
            .statuses
            .get(commit)
            .and_then(|l| l.iter().rev().find(|st| st.context == context))
            .map(|st| (st.success, st.description.clone())))
    }

    fn pull_node(&self, number: u64) -> Option<PullNode> {
        let pr = self.pulls.iter().find(|p| p.number == number)?;
        Some(PullNode {
            node_id: node_id(number),
            auto_merge_by_viewer: pr.auto_merge.as_ref().is_some_and(|a| a.enabled_by == VIEWER),
            queued_by_viewer: Some(self.entry_of(pr).is_some_and(|e| e.enqueuer == VIEWER)),
        })
    }

    pub(super) fn merge_state(&mut self, number: u64) -> Result<MergeState> {
        if let Err(e) = self.enter(&GRAPHQL_MERGE_STATE) {
            // Answered with HTTP 200 (a field refused, a value that cannot be read): GitHub's
            // `data` still holds the pull request itself, as the adapter reads it.
            let answered = matches!(
                e,
                GithubError::Access { status: 200, .. } | GithubError::Protocol { .. }
            );
            let pull = answered.then(|| self.pull_node(number)).flatten();
            return Err(if answered {
                GithubError::Unreadable {
                    source: Box::new(e),
                    pull,
                }
            } else {
                e
            });
        }
        let Some(pr) = self.pulls.iter().find(|p| p.number == number) else {
            return Err(api(
                &GRAPHQL_MERGE_STATE,
                404,
                format!("Could not resolve to a PullRequest with the number of {number}."),
            ));
        };
        // A closed or merged pull request keeps the head it had then (`closed_head`).
        let head = pr
            .closed_head
            .clone()
            .filter(|_| !pr.open)
            .or_else(|| self.refs.get(&pr.head).cloned())
            .unwrap_or_default();
        let required_names: Vec<String> = self
            .branch_protection
            .get(&pr.base)
            .map(|p| p.contexts.clone())
            .unwrap_or_default();
        // Credentials without `checks: read` are asked the commit statuses alone (the adapter's
        // document without check runs): people's check runs are not read.
        let reads_check_runs = self.reads_check_runs();
        let states = if reads_check_runs {
            self.check_states(&head)
        } else {
            self.status_states(&head)
        };
        let required = states
            .into_iter()
            .filter(|(name, _)| required_names.contains(name))
            .map(|(name, state)| RequiredCheck { name, state })
            .collect();
        Ok(MergeState {
            node_id: node_id(number),
            state: pr.state(),
            head_sha: head,
            merge_state: self.merge_state_of(pr),
            auto_merge_allowed: self.allow_auto_merge,
            // GraphQL names an App as a `Bot` by its slug, without the `[bot]` suffix of its
            // REST login and of `viewer.login` (see `port::Actor`).
            auto_merge: pr.auto_merge.as_ref().map(|a| AutoMergeRequest {
                enabled_by: Some(actor_of(&a.enabled_by)),
                method: a.method,
            }),
            viewer: VIEWER.to_owned(),
            required,
            checks_complete: reads_check_runs,
            queue: self.queue_of(pr),
            queued: self.queue_entry(pr),
        })
    }

    pub(super) fn enable_auto_merge(
        &mut self,
        node: &str,
        expected_head: &str,
        method: MergeMethod,
    ) -> Result<AutoMergeAnswer> {
        self.enter(&GRAPHQL_ENABLE)?;
        let number = number_of(node).ok_or_else(|| api(&GRAPHQL_ENABLE, 404, "Could not resolve to a node"))?;
        self.enable(number, Some(expected_head), method, VIEWER)
    }

    pub(super) fn disable_auto_merge(&mut self, node: &str) -> Result<()> {
        self.enter(&GRAPHQL_DISABLE)?;
        let number = number_of(node).ok_or_else(|| api(&GRAPHQL_DISABLE, 404, "Could not resolve to a node"))?;
        if let Some(p) = self.pulls.iter_mut().find(|p| p.number == number)
            && p.auto_merge.take().is_some()
        {
            self.journal.push(format!("#{number} auto-merge disabled by {VIEWER}"));
        }
        Ok(())
    }
}

/// What administrators, reviewers and people's CI do, and what the tests read of it.
impl MemGithub {
    /// The repository's "Allow auto-merge" setting, as an administrator sets it ("Managing
    /// auto-merge for pull requests in your repository",
    /// <https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/configuring-pull-request-merges/managing-auto-merge-for-pull-requests-in-your-repository>).
    pub fn allow_auto_merge(&self, allow: bool) {
        self.with(|s| s.allow_auto_merge = allow);
    }

    /// An administrator protects `branch` (`None`: removes its protection).
    pub fn protect_branch(&self, branch: &str, protection: Option<Protection>) {
        self.with(|s| {
            match protection {
                Some(p) => s.branch_protection.insert(branch.to_owned(), p),
                None => s.branch_protection.remove(branch),
            };
            s.settle_with(false);
        });
    }

    /// `login` approves pull request `number` ("Create a review for a pull request" with `event:
    /// APPROVE`, <https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request>).
    pub fn approve(&self, number: u64, login: &str) {
        self.with(|s| {
            if let Some(p) = s.pulls.iter_mut().find(|p| p.number == number && p.open) {
                if !p.approvals.iter().any(|a| a == login) {
                    p.approvals.push(login.to_owned());
                }
                s.journal.push(format!("#{number} approved by {login}"));
            }
            s.settle();
        });
    }

    /// People's CI reports check `name` on commit `sha` (a check run: "Create a check run",
    /// <https://docs.github.com/rest/checks/runs#create-a-check-run>).
    pub fn post_check(&self, sha: &str, name: &str, state: CheckState) {
        self.with(|s| {
            let list = s.checks.entry(sha.to_owned()).or_default();
            list.retain(|(n, _)| n != name);
            list.push((name.to_owned(), state));
            s.journal.push(format!("check {name} {state:?} on {sha}"));
            s.settle();
        });
    }

    /// A person (`login`) enables auto-merge on pull request `number` for its current head, in
    /// the web interface; GitHub's answer.
    pub fn enable_auto_merge_as(&self, number: u64, login: &str) -> Result<AutoMergeAnswer> {
        self.with(|s| {
            // The web interface sends no method where a queue sets it.
            if s.pulls.iter().any(|p| p.number == number && s.queued_base(p)) {
                return s.queue_auto_merge_for(number, None, login).map(|a| match a {
                    QueueAnswer::Queued | QueueAnswer::Armed => AutoMergeAnswer::Enabled,
                    QueueAnswer::NotAllowed(why) => AutoMergeAnswer::NotAllowed(why),
                    QueueAnswer::MergeableNow(why) => AutoMergeAnswer::MergeableNow(why),
                    QueueAnswer::Refused(why) => AutoMergeAnswer::Refused(why),
                });
            }
            s.enable(number, None, MergeMethod::Merge, login)
        })
    }

    /// The latest state of every check of `sha` (statuses and people's check runs).
    pub fn check_states(&self, sha: &str) -> BTreeMap<String, CheckState> {
        self.with(|s| s.check_states(sha))
    }

    /// The merge state GitHub would report for pull request `number`.
    pub fn merge_state_of(&self, number: u64) -> Option<MergeStateStatus> {
        self.with(|s| s.pulls.iter().find(|p| p.number == number).map(|p| s.merge_state_of(p)))
    }

    pub fn statuses(&self, commit: &str) -> Vec<MemStatus> {
        self.with(|s| s.statuses.get(commit).cloned().unwrap_or_default())
    }
}
