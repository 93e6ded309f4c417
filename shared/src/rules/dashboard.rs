//! The fleet dashboard on GitHub: one issue labelled `cellbridge-dashboard`, found by
//! the marker its body ends with, opened only when none is open, rewritten only when what it
//! shows changed, and a duplicate (two runs that raced to open it) closed pointing at the oldest;
//! and what GitHub holds for the cells it shows: the open `cellbridge/*` pull requests (one paged
//! listing, each with its head's strict-substitution status, queue and merge state), and whether
//! a pending cell's values were declined.
//!
//! What the body shows is computed elsewhere ([`crate::pure::status`], from S3 and the base branch:
//! `jobs/sync/dashboard.rs`); it holds nothing that changes from one run to the next by itself (no
//! time of generation), so that a run over an unchanged fleet writes nothing.

use std::collections::BTreeMap;
use std::time::Instant;

use super::automerge::is_not_verified;
use super::pull_request::declined;
use crate::ports::github::Result;
use crate::ports::github::{CloseReason, Issues, OpenPull, Pulls, StatusState};
use crate::pure::plan;
use crate::pure::status::HeadCheck;

/// The label of the dashboard issue.
pub const LABEL_DASHBOARD: &str = "cellbridge-dashboard";

/// The line that tells cellbridge's dashboard of `base_branch` from any other issue with the
/// label: one dashboard per base branch, so two deployments following two branches of one fleet
/// repo keep one each.
pub fn marker(base_branch: &str) -> String {
    format!("<!-- cellbridge:dashboard={base_branch} -->")
}

pub fn title(base_branch: &str) -> String {
    format!("cellbridge: fleet dashboard ({base_branch})")
}

/// What publishing wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Written {
    /// No dashboard was open: this one was opened.
    Created,
    /// Its title or body differed: rewritten in one write.
    Updated,
    /// It already showed this: nothing written.
    Unchanged,
}

/// The dashboard issue after publishing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Published {
    pub number: u64,
    pub url: String,
    pub written: Written,
    /// Duplicates closed by this run (newer issues with the marker, another run's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub closed_duplicates: Vec<u64>,
}

/// Makes the open dashboard of `base_branch` show `body` (which ends with [`marker`]): found
/// among the open issues labelled [`LABEL_DASHBOARD`], opened when there is none, rewritten only
/// when its title or body differ. Newer ones with the marker are closed as duplicates of the
/// oldest, which stays (its number is the one people have bookmarked).
pub async fn publish<G: Issues + Pulls>(gh: &G, base_branch: &str, body: &str, deadline: Instant) -> Result<Published> {
    let mark = marker(base_branch);
    let title = title(base_branch);
    let mut found: Vec<_> = gh
        .open_issues(LABEL_DASHBOARD, deadline)
        .await?
        .into_iter()
        .filter(|i| i.body.contains(&mark))
        .collect();
    found.sort_by_key(|i| i.number);
    let mut found = found.into_iter();
    let Some(first) = found.next() else {
        let (number, url) = gh
            .create_issue(&title, body, &[LABEL_DASHBOARD.to_owned()], deadline)
            .await?;
        tracing::info!(issue = number, "fleet dashboard opened");
        return Ok(Published {
            number,
            url,
            written: Written::Created,
            closed_duplicates: Vec::new(),
        });
    };
    let mut closed_duplicates = Vec::new();
    for dup in found {
        // The marker goes with the old body: reopened by hand, it is no dashboard any more.
        let note = format!(
            "Duplicate of #{}: cellbridge keeps one fleet dashboard for `{base_branch}`; another run opened this one at the same time.",
            first.number
        );
        gh.close_issue(dup.number, &note, CloseReason::Duplicate, deadline)
            .await?;
        tracing::info!(
            issue = dup.number,
            kept = first.number,
            "a duplicate fleet dashboard closed"
        );
        closed_duplicates.push(dup.number);
    }
    let written = if first.body == body && first.title == title {
        Written::Unchanged
    } else {
        // A person's labels stay.
        gh.update_pull_text(first.number, &title, body, &first.labels, deadline)
            .await?;
        Written::Updated
    };
    Ok(Published {
        number: first.number,
        url: first.url,
        written,
        closed_duplicates,
    })
}

/// The open pull requests on cellbridge's branches (`cellbridge/<cell>`), by cell, each with its
/// head's `cellbridge/strict-substitution` status, its place in the merge queue and its merge
/// state: a hundred a request, whatever the number of cells ([`Pulls::open_pulls`]).
pub async fn open_cell_pulls<G: Pulls>(gh: &G, deadline: Instant) -> Result<BTreeMap<String, OpenPull>> {
    let prefix = plan::branch_for("");
    Ok(gh
        .open_pulls(&prefix, plan::STATUS_CONTEXT, deadline)
        .await?
        .into_iter()
        .filter_map(|p| Some((p.head.strip_prefix(&prefix)?.to_owned(), p)))
        // One open pull request per head branch (GitHub refuses a second): by cell is by head.
        .collect())
}

/// What a row shows of the strict-substitution status on an open pull request's head.
/// cellbridge's own `pending` "not verified" (GitHub's merge state could not be read) is GitHub's
/// failure, shown with the time it was posted; any other state that is not `SUCCESS` (a value
/// GitHub added since too) does not pass.
pub fn head_check(pull: &OpenPull) -> HeadCheck {
    let Some(status) = &pull.status else {
        return HeadCheck::NotPosted;
    };
    match status.state {
        StatusState::Success => HeadCheck::Passes,
        StatusState::Pending if is_not_verified(&status.description) => HeadCheck::NotVerified {
            since: status.created_at,
        },
        _ => HeadCheck::Fails {
            description: status.description.clone(),
        },
    }
}

/// Of `cells` (each with [`values_digest_of`](super::pull_request::values_digest_of) of its
/// state's map), those whose newest pull request a person closed without merging while it
/// proposed those values: declined, and cellbridge opens nothing for them. Every cell is read,
/// a hundred a request ([`Pulls::newest_pulls`]).
pub async fn declined_pulls<G: Pulls>(
    gh: &G,
    cells: &[(String, String)],
    deadline: Instant,
) -> Result<BTreeMap<String, (u64, String)>> {
    let branches: Vec<String> = cells.iter().map(|(cell, _)| plan::branch_for(cell)).collect();
    let newest = gh.newest_pulls(&branches, deadline).await?;
    Ok(cells
        .iter()
        .zip(&branches)
        .filter_map(|((cell, digest), branch)| {
            let pr = newest.get(branch).filter(|pr| declined(pr, digest))?;
            Some((cell.clone(), (pr.number, pr.url.clone())))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_branch_s_marker_is_not_another_s() {
        assert_eq!(marker("main"), "<!-- cellbridge:dashboard=main -->");
        assert!(!marker("main-2").contains(&marker("main")));
        assert!(!marker("main").contains(&marker("mai")), "{}", marker("main"));
    }
}
