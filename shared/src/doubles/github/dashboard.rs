//! The open pull requests as the fleet dashboard lists them.
//!
//! - `openCellPulls` reads the open ones a page of a hundred a request, oldest first, each with
//!   its head's status of one context, its place in the merge queue and its merge state.
//! - `newestPulls` reads the newest pull request of a hundred branches a request (GraphQL's
//!   `Repository.pullRequests(headRefName:)`, aliased: `adapters/github/operations.rs`).

use std::collections::BTreeMap;

use super::{GithubError, MemGithub, MemPull, Result, Store};
use crate::adapters::github::operations::{self as ops, Operation};
use crate::adapters::github::transport::GRAPHQL_TIMEOUT;
use crate::ports::github::{HeadStatus, OpenPull, PullRequest, StatusState};

static GRAPHQL_NEWEST_PULLS: Operation = ops::GRAPHQL_NEWEST_PULLS.as_operation();
static GRAPHQL_BRANCH_PULLS: Operation = ops::GRAPHQL_BRANCH_PULLS.as_operation();
static GRAPHQL_OPEN_CELL_PULLS: Operation = ops::GRAPHQL_OPEN_CELL_PULLS.as_operation();

/// Now, in seconds since the epoch: when a pull request opened through the port was opened.
pub(super) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Store {
    /// A page of a hundred a call, as the adapter's `openCellPulls` (faults, smaller pages after
    /// a timeout, and request counts as the adapter's).
    pub(super) fn open_pulls(&mut self, head_prefix: &str, context: &str) -> Result<Vec<OpenPull>> {
        let all_open = self.pulls.iter().filter(|p| p.open).count();
        let (mut read, mut first) = (0, ops::OPEN_CELL_PULLS_PER_QUERY);
        loop {
            match self.enter(&GRAPHQL_OPEN_CELL_PULLS) {
                // As the adapter: a page GitHub could not answer in time is asked smaller.
                Err(GithubError::Transient { detail, .. })
                    if detail.contains(GRAPHQL_TIMEOUT) && first > ops::OPEN_CELL_PULLS_SMALLEST =>
                {
                    first /= 2;
                    continue;
                }
                other => other?,
            }
            read += first;
            if read >= all_open {
                break;
            }
        }
        let open: Vec<&MemPull> = self
            .pulls
            .iter()
            .filter(|p| p.open && p.own() && p.head.starts_with(head_prefix))
            .collect();
        Ok(open
            .iter()
            .map(|p| {
                let head_sha = self.refs.get(&p.head).cloned().unwrap_or_default();
                let status = self
                    .statuses
                    .get(&head_sha)
                    .and_then(|l| l.iter().rev().find(|st| st.context == context))
                    // As GitHub's `StatusContext`: its `state`, `description` and `createdAt`.
                    .map(|st| HeadStatus {
                        state: if st.success {
                            StatusState::Success
                        } else if st.pending {
                            StatusState::Pending
                        } else {
                            StatusState::Failure
                        },
                        description: st.description.clone(),
                        created_at: st.created_at,
                    });
                OpenPull {
                    number: p.number,
                    url: format!("https://github.example/acme/fleet/pull/{}", p.number),
                    head: p.head.clone(),
                    head_sha,
                    created_at: self.pull_created.get(&p.number).copied().unwrap_or_else(now_secs),
                    labels: p.labels.clone(),
                    body: p.body.clone(),
                    status,
                    queued: self.entry_of(p).is_some(),
                    auto_merge: p.auto_merge.is_some(),
                    merge_state: self.merge_state_of(p),
                }
            })
            .collect())
    }

    pub(super) fn newest_pulls(&mut self, branches: &[String]) -> Result<BTreeMap<String, PullRequest>> {
        let mut found = BTreeMap::new();
        for chunk in branches.chunks(ops::NEWEST_PULLS_PER_QUERY) {
            self.enter(&GRAPHQL_NEWEST_PULLS)?;
            for b in chunk {
                // As the adapter: a branch whose first five were all forks' is read on with
                // `branchPulls`, ten at a time, until this repository's or the last.
                for _ in 0..self.pages_past_forks(b, ops::NEWEST_PULLS_READ) {
                    self.enter(&GRAPHQL_BRANCH_PULLS)?;
                }
            }
            found.extend(chunk.iter().filter_map(|b| Some((b.clone(), self.newest_of(b)?))));
        }
        Ok(found)
    }
}

impl MemGithub {
    /// Pull request `number` was opened `days` days ago (as if).
    pub fn opened_days_ago(&self, number: u64, days: u64) {
        self.with(|s| s.pull_created.insert(number, now_secs().saturating_sub(days * 86_400)));
    }

    /// GitHub has not computed pull request `number`'s merge state yet (after a push to it or
    /// its base): it answers `UNKNOWN` until it has.
    pub fn merge_state_not_computed(&self, number: u64) {
        self.with(|s| s.merge_not_computed.insert(number));
    }
}

/// What the cap on cellbridge's pull requests in flight is checked against: the double's own
/// record, never cellbridge's report.
impl Store {
    /// Open pull requests of `cellbridge/` branches now in a merge queue or auto-merging.
    pub(super) fn in_flight(&self) -> usize {
        self.pulls
            .iter()
            .filter(|p| p.open && p.own() && p.head.starts_with("cellbridge/"))
            .filter(|p| p.auto_merge.is_some() || self.entry_of(p).is_some())
            .count()
    }
}

impl MemGithub {
    /// The most of cellbridge's pull requests that were in a merge queue or auto-merging at
    /// once since the repository was made (or [`MemGithub::reset_peak_in_flight`]), as seen after
    /// every request and every person's act.
    pub fn peak_in_flight(&self) -> usize {
        self.with(|s| s.peak_in_flight)
    }

    /// Starts [`MemGithub::peak_in_flight`] again from what is in flight now.
    pub fn reset_peak_in_flight(&self) {
        self.with(|s| s.peak_in_flight = 0);
    }

    /// How many of cellbridge's pull requests are in a merge queue or auto-merging now.
    pub fn in_flight(&self) -> usize {
        self.with(|s| s.in_flight())
    }
}
