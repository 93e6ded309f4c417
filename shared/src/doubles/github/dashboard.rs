//! The open pull requests as the fleet dashboard lists them.
//!
//! - "List pull requests" lists the open ones, oldest first with `direction=asc`, each with the
//!   time it was opened (`created_at`, <https://docs.github.com/rest/pulls/pulls#list-pull-requests>).
//! - `newestPulls` reads the newest pull request of a hundred branches a request (GraphQL's
//!   `Repository.pullRequests(headRefName:)`, aliased: `adapters/github/operations.rs`).

use std::collections::BTreeMap;

use super::{MemGithub, Result, Store};
use crate::adapters::github::operations::{self as ops, Operation};
use crate::ports::github::{OpenPull, PullRequest};

static GRAPHQL_NEWEST_PULLS: Operation = ops::GRAPHQL_NEWEST_PULLS.as_operation();
static GRAPHQL_HEAD_STATUSES: Operation = ops::GRAPHQL_HEAD_STATUSES.as_operation();

/// Now, in seconds since the epoch: when a pull request opened through the port was opened.
pub(super) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Store {
    pub(super) fn open_pulls(&mut self, head_prefix: &str) -> Result<Vec<OpenPull>> {
        self.enter(&ops::PULLS_LIST)?;
        Ok(self
            .pulls
            .iter()
            .filter(|p| p.open && p.own() && p.head.starts_with(head_prefix))
            .map(|p| OpenPull {
                number: p.number,
                url: format!("https://github.example/acme/fleet/pull/{}", p.number),
                head: p.head.clone(),
                head_sha: self.refs.get(&p.head).cloned().unwrap_or_default(),
                created_at: self.pull_created.get(&p.number).copied().unwrap_or_else(now_secs),
                labels: p.labels.clone(),
                body: p.body.clone(),
            })
            .collect())
    }

    pub(super) fn head_statuses(
        &mut self,
        commits: &[String],
        context: &str,
    ) -> Result<BTreeMap<String, (bool, String)>> {
        let mut found = BTreeMap::new();
        for chunk in commits.chunks(ops::NEWEST_PULLS_PER_QUERY) {
            self.enter(&GRAPHQL_HEAD_STATUSES)?;
            for c in chunk {
                let newest = self
                    .statuses
                    .get(c)
                    .and_then(|l| l.iter().rev().find(|st| st.context == context));
                if let Some(st) = newest {
                    found.insert(c.clone(), (st.success, st.description.clone()));
                }
            }
        }
        Ok(found)
    }

    pub(super) fn newest_pulls(&mut self, branches: &[String]) -> Result<BTreeMap<String, PullRequest>> {
        let mut found = BTreeMap::new();
        for chunk in branches.chunks(ops::NEWEST_PULLS_PER_QUERY) {
            self.enter(&GRAPHQL_NEWEST_PULLS)?;
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
}
