//! Merge queues, as GitHub runs them where a base branch requires one (branch protection's or a
//! ruleset's "Require merge queue"):
//!
//! - "If a merge queue is required by the branch protection setting for the branch, you can add
//!   your pull requests to a merge queue and GitHub will merge the pull requests for you once all
//!   required checks have passed" ("Incorporating changes from a pull request",
//!   <https://docs.github.com/articles/incorporating-changes-from-a-pull-request>).
//! - An entry is tested as a merge group: "The merge queue creates temporary branches with a
//!   special prefix to validate pull request changes. The changes in the pull request are then
//!   grouped into a `merge_group` with the latest version of the `base_branch` ... GitHub will
//!   merge all these changes into `base_branch` once the checks required by the branch
//!   protections of `base_branch` pass" ("Managing a merge queue", github/docs
//!   `content/repositories/configuring-branches-and-merges-in-your-repository/configuring-pull-request-merges/managing-a-merge-queue.md`).
//!   The double makes the group's commit as the queue's method merges the entry's head on the
//!   base's head, on the branch `gh-readonly-queue/<base>/pr-<number>-<base sha>` (the prefix:
//!   ibid.; the whole name as CI sees it: <https://github.com/pulumi/pulumi/pull/18488>,
//!   <https://github.com/moka-rs/moka/issues/233>), a branch like any other. [`MemGroup`] is what
//!   the `merge_group` event says of it (the `merge-group` schema of GitHub's REST description).
//!   Once every context the base's protection requires reads passed on the group's commit
//!   (a commit status or a check run, as on heads), the base moves to that commit and the pull
//!   request reads merged by the entry's enqueuer; "if there are failed required status checks
//!   or conflicts with the base branch, the pull request will be removed from the queue"
//!   ("Managing a merge queue", #failing-ci, quoted in
//!   <https://github.com/aranya-project/aranya-core/pull/363>): a required check failed on the
//!   group, or a group that cannot be made, ends the entry and deletes its branch. A base that
//!   moved meanwhile gets a new group, checked again. So a head behind its base is no reason to
//!   wait: the queue tests the merge with the latest base. Not modelled, as in the HTTP fake:
//!   groups of several entries (each is tested on the base alone), the status check timeout.
//! - In the queue a pull request's auto-merge is over: "once a PR is in the merge queue, REST
//!   `pull.auto_merge` reads `null`" (<https://github.com/objectstack-ai/objectstack/issues/14605>).
//! - Auto-merge queues a pull request when a requirement turns met (a status or a check passing,
//!   an approval), not on a passive change: "GitHub only enqueues a PR on specific triggers (new
//!   commit, review, label, or an explicit `enable-auto-merge` call) — not on a passive change to
//!   *why* a PR became mergeable" such as a ruleset relaxed
//!   (<https://github.com/osac-project/osac/pull/924>): branch protection changed or a queue
//!   required leaves an armed pull request out of the queue.
//! - An entry is for the head it was added with: a later push takes it out ("GitHub also
//!   auto-dequeues on a later push", <https://github.com/cncf/prow-github-actions/pull/166>).
//! - `enablePullRequestAutoMerge` takes no merge method where a queue is required: "The merge
//!   strategy for main is set by the merge queue" refuses one
//!   (<https://github.com/osac-project/osac/pull/924>,
//!   <https://github.com/kunchenguid/firstmate/pull/3335>); without one it adds the pull request to
//!   the queue once every requirement is met ([`Store::settle`]; at once when only being up to
//!   date is missing), the entry's enqueuer being whoever enabled it. A pull request with nothing
//!   to wait for is refused as without a queue ("Pull request is in clean status"): GitHub's own
//!   client adds such a one with `enqueuePullRequest` instead ("If required checks have not yet
//!   passed, auto-merge will be enabled. If required checks have passed, the pull request will be
//!   added to the merge queue", `gh pr merge --help`, quoted in
//!   <https://github.com/stella/stella/pull/2985>, where GitHub "can reject it because the pull
//!   request is already clean"; <https://github.com/rust-lang/triagebot/pull/2450>). It still
//!   needs "Allow auto-merge" ("GraphQL: Auto merge is not allowed for this repository
//!   (enablePullRequestAutoMerge)" where a queue is required and the setting off,
//!   <https://github.com/cli/cli/pull/14379>).
//! - The entry's `enqueuer` for a pull request auto-merge queued is whoever enabled auto-merge:
//!   GitHub's answer for that case is not documented; the double (as the HTTP fake) takes the
//!   enabler, as it takes the enabler for the merger of what auto-merge merges.
//! - `enqueuePullRequest` needs no "Allow auto-merge" (the same pull request) but every
//!   requirement met: "Pull request Waiting on code owner review from ..."
//!   (<https://github.com/github/app/issues/93>), "Pull request Required workflow '...' is not
//!   satisfied" (<https://github.com/devantler-tech/platform/pull/3138>); the double answers
//!   "Pull request " and the protection's own message. Twice is refused with "Pull request is
//!   already in the queue" (<https://github.com/ClickHouse/ClickHouse/pull/109183>).
//! - "Merge a pull request" is refused with 405 "Changes must be made through the merge queue."
//!   (<https://github.com/cncf/prow-github-actions/pull/166>,
//!   <https://github.com/pascalgn/automerge-action/issues/235>).
//! - `dequeuePullRequest` of a pull request not in the queue: GitHub's words are not documented;
//!   the double answers as the adapter reads "not in the merge queue" (already out).

use std::collections::BTreeMap;

use super::auto_merge::VIEWER;
use super::pulls::MemPull;
use super::{GithubError, MemGithub, Result, Store, api};
use crate::adapters::github::answers::{self, GraphqlError};
use crate::adapters::github::operations::{self as ops, Operation};
use crate::ports::github::{Actor, CheckState, MergeMethod, MergeQueue, MergeStateStatus, QueueAnswer, QueueEntry};

/// A pull request's entry in a merge queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemQueueEntry {
    /// Who added it (the enabler, when auto-merge added it).
    pub enqueuer: String,
    /// The head it was added with: an entry is for that head only.
    pub head: String,
    /// Its merge group, once made.
    pub group: Option<MemGroup>,
}

/// A merge group as the `merge_group` event's `merge_group` object names it (GitHub's REST
/// description, `components/schemas/merge-group`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemGroup {
    /// "The SHA of the merge group": the commit CI checks and reports on.
    pub head_sha: String,
    /// "The full ref of the merge group": `refs/heads/gh-readonly-queue/<base>/pr-<n>-<base sha>`.
    pub head_ref: String,
    /// "The SHA of the merge group's parent commit".
    pub base_sha: String,
    /// "The full ref of the branch the merge group will be merged into".
    pub base_ref: String,
}

/// What the store keeps of merge queues.
#[derive(Debug, Default)]
pub(super) struct Queues {
    /// Base branch → the method its queue merges by.
    pub(super) required: BTreeMap<String, MergeMethod>,
    /// Pull request → its entry.
    pub(super) entries: BTreeMap<u64, MemQueueEntry>,
}

static GRAPHQL_QUEUE_AUTO_MERGE: Operation = ops::GRAPHQL_QUEUE_AUTO_MERGE.as_operation();
static GRAPHQL_ENQUEUE: Operation = ops::GRAPHQL_ENQUEUE.as_operation();
static GRAPHQL_DEQUEUE: Operation = ops::GRAPHQL_DEQUEUE.as_operation();

/// The message of "Merge a pull request" where a queue is required.
pub(super) const THROUGH_THE_QUEUE: &str = "Changes must be made through the merge queue.";

/// GraphQL's `Actor` for a login (an App as a `Bot` by its slug, see `port::Actor`).
pub(super) fn actor_of(login: &str) -> Actor {
    match login.strip_suffix("[bot]") {
        Some(slug) => Actor {
            login: slug.to_owned(),
            bot: true,
        },
        None => Actor {
            login: login.to_owned(),
            bot: false,
        },
    }
}

impl Store {
    /// The queue `pr`'s base requires, if any.
    pub(super) fn queue_of(&self, pr: &MemPull) -> Option<MergeQueue> {
        self.queues
            .required
            .get(&pr.base)
            .map(|m| MergeQueue { method: Some(*m) })
    }

    /// `pr`'s entry, while it stands: open, its base still queued, its head the one added.
    pub(super) fn entry_of(&self, pr: &MemPull) -> Option<&MemQueueEntry> {
        let e = self.queues.entries.get(&pr.number)?;
        (pr.open && self.queues.required.contains_key(&pr.base) && self.refs.get(&pr.head) == Some(&e.head))
            .then_some(e)
    }

    /// The entry as GraphQL's `mergeQueueEntry` reads.
    pub(super) fn queue_entry(&self, pr: &MemPull) -> Option<QueueEntry> {
        self.entry_of(pr).map(|e| QueueEntry {
            enqueuer: actor_of(&e.enqueuer),
            state: "AWAITING_CHECKS".to_owned(),
        })
    }

    /// Why `pr` cannot enter its queue yet (the protection's message), or `None`: every
    /// requirement met but being up to date, which the queue sees to.
    fn queue_unmet(&self, pr: &MemPull) -> Option<String> {
        let head = self.refs.get(&pr.head)?;
        match self.merge_state_of(pr) {
            s if s.mergeable_now() => None,
            MergeStateStatus::Behind => {
                let p = self.branch_protection.get(&pr.base)?;
                let checks = self.check_states(head);
                if let Some(c) = p.contexts.iter().find(|c| checks.get(*c) != Some(&CheckState::Passed)) {
                    return Some(format!("Required status check \"{c}\" is expected."));
                }
                ((pr.approvals.len() as u32) < p.approvals)
                    .then(|| format!("At least {} approving review is required.", p.approvals))
            }
            MergeStateStatus::Dirty => Some("Merge conflict".to_owned()),
            _ => Some(
                self.unmet(pr, head, self.refs.get(&pr.base)?)
                    .unwrap_or_else(|| "is not mergeable".to_owned()),
            ),
        }
    }

    /// Before GitHub's auto-merge acts: entries whose head moved or whose pull request closed
    /// are gone, and, after a change that can trigger it (`triggered`), pull requests whose
    /// auto-merge is on and whose requirements are met enter their queue, enqueued by their
    /// enabler.
    pub(super) fn settle_queues(&mut self, triggered: bool) {
        let stale: Vec<u64> = self
            .queues
            .entries
            .keys()
            .copied()
            .filter(|n| {
                self.pulls
                    .iter()
                    .find(|p| p.number == *n)
                    .is_none_or(|p| self.entry_of(p).is_none())
            })
            .collect();
        for n in stale {
            self.leave_queue(n, "");
        }
        if triggered {
            self.queue_ready();
        }
        self.run_groups();
    }

    /// Pull requests whose auto-merge is on and whose requirements are met enter their queue,
    /// enqueued by their enabler.
    fn queue_ready(&mut self) {
        let ready: Vec<(u64, String, String)> = self
            .pulls
            .iter()
            .filter(|p| p.open && self.queues.required.contains_key(&p.base) && self.queue_unmet(p).is_none())
            .filter_map(|p| {
                Some((
                    p.number,
                    p.auto_merge.as_ref()?.enabled_by.clone(),
                    self.refs.get(&p.head)?.clone(),
                ))
            })
            .collect();
        for (n, by, head) in ready {
            self.queues.entries.insert(
                n,
                MemQueueEntry {
                    enqueuer: by.clone(),
                    head,
                    group: None,
                },
            );
            if let Some(p) = self.pulls.iter_mut().find(|p| p.number == n) {
                p.auto_merge = None;
            }
            self.journal
                .push(format!("#{n} added to the merge queue by {by}'s auto-merge"));
        }
    }

    /// Entry `number` ends (`why`, for the journal): out of the queue, its group's branch deleted.
    fn leave_queue(&mut self, number: u64, why: &str) {
        if let Some(group) = self.queues.entries.remove(&number).and_then(|e| e.group) {
            self.refs.remove(branch_of(&group.head_ref));
        }
        self.journal
            .push(format!("#{number} removed from the merge queue{why}"));
    }

    /// The queue's work on every entry, oldest first: its merge group made on the base's head
    /// (again when the base moved), then merged or dropped by the base's required checks on
    /// the group's commit (see the module).
    fn run_groups(&mut self) {
        let numbers: Vec<u64> = self.queues.entries.keys().copied().collect();
        for number in numbers {
            let Some(pr) = self.pulls.iter().find(|p| p.number == number).cloned() else {
                continue;
            };
            let Some(entry) = self.entry_of(&pr).cloned() else {
                continue;
            };
            let Some(base) = self.refs.get(&pr.base).cloned() else {
                self.leave_queue(number, ": the base branch is gone");
                continue;
            };
            let group = match entry.group {
                Some(g) if g.base_sha == base => g,
                old => {
                    if let Some(g) = old {
                        self.refs.remove(branch_of(&g.head_ref));
                    }
                    let method = self.queues.required[&pr.base];
                    let Ok(sha) = self.merged_commit(&pr, method, &base, &entry.head) else {
                        self.leave_queue(number, ": conflicts with the base");
                        continue;
                    };
                    let branch = format!("gh-readonly-queue/{}/pr-{number}-{base}", pr.base);
                    self.refs.insert(branch.clone(), sha.clone());
                    let g = MemGroup {
                        head_sha: sha,
                        head_ref: format!("refs/heads/{branch}"),
                        base_sha: base.clone(),
                        base_ref: format!("refs/heads/{}", pr.base),
                    };
                    self.queues.entries.get_mut(&number).expect("an entry").group = Some(g.clone());
                    g
                }
            };
            let checks = self.check_states(&group.head_sha);
            let required = self
                .branch_protection
                .get(&pr.base)
                .map(|p| p.contexts.clone())
                .unwrap_or_default();
            if required.iter().any(|c| checks.get(c) == Some(&CheckState::Failed)) {
                self.leave_queue(number, ": checks failed");
                continue;
            }
            if required.iter().any(|c| checks.get(c) != Some(&CheckState::Passed)) {
                continue; // awaiting its checks
            }
            // A requirement of the pull request's own that no longer holds (a required check of
            // its head failed since) ends the entry as a failed check of the group does.
            if self.queue_unmet(&pr).is_some() {
                self.leave_queue(number, ": the pull request's requirements");
                continue;
            }
            self.queues.entries.remove(&number);
            self.refs.remove(branch_of(&group.head_ref));
            self.refs.insert(pr.base.clone(), group.head_sha.clone());
            self.merged(&pr, &entry.enqueuer, &entry.head, &base, &group.head_sha);
        }
    }

    /// Whether `pr`'s base requires a queue (auto-merge and "Merge a pull request" then defer to it).
    pub(super) fn queued_base(&self, pr: &MemPull) -> bool {
        self.queues.required.contains_key(&pr.base)
    }

    /// `enablePullRequestAutoMerge` without a merge method where a queue is required, for `by`.
    pub(super) fn queue_auto_merge_for(
        &mut self,
        number: u64,
        expected_head: Option<&str>,
        by: &str,
    ) -> Result<QueueAnswer> {
        let pr = match self.queued_pull(number, expected_head, &GRAPHQL_QUEUE_AUTO_MERGE)? {
            Ok(pr) => pr,
            Err(answer) => return Ok(answer),
        };
        if !self.allow_auto_merge {
            return refused("Auto merge is not allowed for this repository");
        }
        if self.entry_of(&pr).is_some() {
            return Ok(QueueAnswer::Queued);
        }
        // Nothing to wait for: refused as without a queue (see the module).
        let state = self.merge_state_of(&pr);
        if state.mergeable_now() {
            let word = if state == MergeStateStatus::Unstable {
                "unstable"
            } else {
                "clean"
            };
            return refused(&format!("Pull request is in {word} status"));
        }
        let p = self.pulls.iter_mut().find(|p| p.number == number).expect("found above");
        p.auto_merge = Some(super::MemAutoMerge {
            enabled_by: by.to_owned(),
            method: self.queues.required[&pr.base],
        });
        self.journal.push(format!("#{number} auto-merge enabled by {by}"));
        self.queue_ready();
        let answer = if self.entry_of(&pr).is_some() {
            QueueAnswer::Queued
        } else {
            QueueAnswer::Armed
        };
        // The queue starts on the entry after the answer (its merge group).
        self.run_groups();
        Ok(answer)
    }

    /// `enqueuePullRequest` for `by`.
    pub(super) fn enqueue_for(&mut self, number: u64, expected_head: Option<&str>, by: &str) -> Result<QueueAnswer> {
        let pr = match self.queued_pull(number, expected_head, &GRAPHQL_ENQUEUE)? {
            Ok(pr) => pr,
            Err(answer) => return Ok(answer),
        };
        if self.entry_of(&pr).is_some() {
            return refused("Pull request is already in the queue");
        }
        if let Some(why) = self.queue_unmet(&pr) {
            return refused(&format!("Pull request {why}"));
        }
        let head = self.refs[&pr.head].clone();
        self.queues.entries.insert(
            number,
            MemQueueEntry {
                enqueuer: by.to_owned(),
                head,
                group: None,
            },
        );
        // In the queue, auto-merge is over (see the module).
        if let Some(p) = self.pulls.iter_mut().find(|p| p.number == number) {
            p.auto_merge = None;
        }
        self.journal.push(format!("#{number} added to the merge queue by {by}"));
        self.run_groups();
        Ok(QueueAnswer::Queued)
    }

    /// The open pull request `number` of a queued base, with the head expected; GitHub's
    /// refusal otherwise.
    fn queued_pull(
        &self,
        number: u64,
        expected_head: Option<&str>,
        op: &'static Operation,
    ) -> Result<std::result::Result<MemPull, QueueAnswer>> {
        let Some(pr) = self.pulls.iter().find(|p| p.number == number).cloned() else {
            return Err(api(op, 404, "Could not resolve to a node with the global id"));
        };
        if !pr.open {
            return refused("Pull request is not open").map(Err);
        }
        if !self.queued_base(&pr) {
            return refused(&format!("Pull request's base branch {} has no merge queue", pr.base)).map(Err);
        }
        let head = self.refs.get(&pr.head).cloned().unwrap_or_default();
        if expected_head.is_some_and(|e| e != head) {
            return Err(GithubError::Conflict {
                what: format!("queueing pull request #{number}"),
                detail: format!("the head is {head}, not the expected head oid"),
            });
        }
        Ok(Ok(pr))
    }
}

/// The branch a full ref (`refs/heads/<branch>`) names.
fn branch_of(full_ref: &str) -> &str {
    full_ref.strip_prefix("refs/heads/").unwrap_or(full_ref)
}

/// GitHub's refusal, as a GraphQL error of type UNPROCESSABLE, read as the adapter reads it.
fn refused(message: &str) -> Result<QueueAnswer> {
    answers::queue_answer(
        "queueing a pull request",
        &GraphqlError {
            kind: "UNPROCESSABLE".into(),
            message: message.to_owned(),
            ..GraphqlError::default()
        },
    )
}

/// The port's merge queue.
impl Store {
    pub(super) fn queue_auto_merge(&mut self, node: &str, expected_head: &str) -> Result<QueueAnswer> {
        self.enter(&GRAPHQL_QUEUE_AUTO_MERGE)?;
        let number = super::auto_merge::number_of(node)
            .ok_or_else(|| api(&GRAPHQL_QUEUE_AUTO_MERGE, 404, "Could not resolve to a node"))?;
        self.queue_auto_merge_for(number, Some(expected_head), VIEWER)
    }

    pub(super) fn enqueue(&mut self, node: &str, expected_head: &str) -> Result<QueueAnswer> {
        self.enter(&GRAPHQL_ENQUEUE)?;
        let number = super::auto_merge::number_of(node)
            .ok_or_else(|| api(&GRAPHQL_ENQUEUE, 404, "Could not resolve to a node"))?;
        self.enqueue_for(number, Some(expected_head), VIEWER)
    }

    pub(super) fn dequeue(&mut self, node: &str) -> Result<()> {
        self.enter(&GRAPHQL_DEQUEUE)?;
        let number = super::auto_merge::number_of(node)
            .ok_or_else(|| api(&GRAPHQL_DEQUEUE, 404, "Could not resolve to a node"))?;
        if self.queues.entries.contains_key(&number) {
            self.leave_queue(number, &format!(" by {VIEWER}"));
        }
        Ok(())
    }
}

/// What administrators, people and the queue's CI do.
impl MemGithub {
    /// An administrator requires a merge queue on `branch`, merging by `method` (`None`: no
    /// queue).
    pub fn require_merge_queue(&self, branch: &str, method: Option<MergeMethod>) {
        self.with(|s| {
            match method {
                Some(m) => s.queues.required.insert(branch.to_owned(), m),
                None => s.queues.required.remove(branch),
            };
            s.settle_with(false);
        });
    }

    /// A person (`login`) adds pull request `number` to the merge queue ("Merge when ready"
    /// where auto-merge is off: `enqueuePullRequest`); GitHub's answer.
    pub fn enqueue_as(&self, number: u64, login: &str) -> Result<QueueAnswer> {
        self.with(|s| s.enqueue_for(number, None, login))
    }

    /// The merge group of pull request `number`'s entry while it awaits its checks: what the
    /// `merge_group` event tells CI.
    pub fn merge_group(&self, number: u64) -> Option<MemGroup> {
        self.with(|s| {
            let pr = s.pulls.iter().find(|p| p.number == number)?;
            s.entry_of(pr)?.group.clone()
        })
    }

    /// Who added pull request `number` to the merge queue, while it is in it.
    pub fn queued_by(&self, number: u64) -> Option<String> {
        self.with(|s| {
            let pr = s.pulls.iter().find(|p| p.number == number)?;
            s.entry_of(pr).map(|e| e.enqueuer.clone())
        })
    }
}
