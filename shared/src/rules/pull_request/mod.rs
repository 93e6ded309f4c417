//! The cell's pull request: what to write so that it holds the plan, built on what GitHub has
//! (the pull request, its head, what it recorded), and when to close it instead.
//!
//! Ownership: cellbridge owns `clusters/<cell>/cell-metadata.yaml`. A new cell's first commit
//! also holds the files copied from the template; from then on they are the reviewers'. An
//! update is a commit on the pull request's current head that rewrites cellbridge's file only;
//! a base that moved on is merged in (GitHub's merge, as "Update branch"), never reset. With a
//! token on a base requiring signed commits, commits and merges go the ways GitHub signs
//! (`crate::rules::signing`). Every head gets the strict-substitution status, computed on that
//! head's content. A pull request a person closed stays closed while the values are the ones it
//! proposed; a merged one is never written to again.
//!
//! The files: this one converges (which of open, update, close, or leave alone); `opening` (a
//! new pull request, and the claim on its branch), `updating` (the open pull request made to
//! hold the plan), `changes` (what the head holds, checked as the head's own content), `text` (the body,
//! labels, digests and markers cellbridge writes and reads back).

use std::time::Instant;

use super::automerge::{self as auto_merge, AutoMergeReport, OptInFile};
use crate::ports::github::{GithubError, Published, Result, Snapshot};
use crate::ports::github::{GithubRepo, PullRequest, PullState};
use crate::pure::configmap;
use crate::pure::fleet::FleetRead;
use crate::pure::plan::{self, Outcome, Plan};
use crate::pure::record;

mod changes;
mod opening;
mod text;
mod updating;

pub(crate) use opening::open;
pub(super) use opening::{Claimed, claim_branch, recreate};
pub use text::{CONTRACT_KEPT, plan_digest, values_digest, values_digest_of};
pub(super) use text::{closed_body, declined, recorded_base, recorded_digest, trailers, write_text};
// Named at this path by `branch`'s documentation of whose commits a branch holds.
#[allow(unused_imports)]
pub(super) use text::message_for;

use changes::{HeadChanges, checked_head, post_status};
use text::{clear_refusal, with_marker_fields};
use updating::update;

/// What converging did, and what auto-merge decided and did for the pull request
/// ([`super::automerge`]; `None` when no open metadata pull request was left).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converged {
    pub published: Published,
    pub auto_merge: Option<AutoMergeReport>,
}

/// Converges the cell's metadata pull request to `plan`, computed against `snap`, from `latest`,
/// the newest pull request of its branch as [`super::proposal::converge`] read it (never an open
/// decommission: that one was closed first, `withdrawn`): opens it, updates it in place, leaves
/// it alone when it already holds the plan, or closes it when the base branch holds the plan.
/// `report` gets what auto-merge decided for the pull request left open.
#[tracing::instrument(
    target = "cellbridge::chain",
    level = "trace",
    name = "pull_request.converge_from",
    skip_all
)]
pub(crate) async fn converge_from<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    latest: Option<PullRequest>,
    withdrawn: bool,
    report: &mut Option<AutoMergeReport>,
    deadline: Instant,
) -> Result<Published> {
    let open_pr = latest.as_ref().filter(|p| p.state == PullState::Open);
    if let Some(pr) = open_pr {
        if let Some(key) = record::field(&pr.body, "key")
            && key != record::value(&plan.source.key)
            && plan::recorded_serial(&pr.body).is_some_and(|(_, lineage)| lineage != plan.lineage)
        {
            return Ok(Published::Claimed {
                number: pr.number,
                url: pr.url.clone(),
                other_key: record::unvalue(&key),
            });
        }
        // A run that read the base before the pull request was last written must not write
        // what it computed: that would undo what was merged in between.
        if let Some(base) = recorded_base(&pr.body)
            && base != snap.base_sha
            && !gh
                .compare(&base, &snap.base_sha, deadline)
                .await?
                .relation
                .contains_base()
            // Unless the base branch itself no longer has it (a person rewrote its history):
            // then no read will ever contain it, and what was read is the base to build on.
            && gh
                .compare(&base, &snap.base_branch, deadline)
                .await?
                .relation
                .contains_base()
        {
            return Err(GithubError::Conflict {
                what: format!("pull request #{}", pr.number),
                detail: format!(
                    "it was written from base {base}, newer than the base read ({})",
                    snap.base_sha
                ),
            });
        }
    }
    match plan.outcome {
        Outcome::Stale => Ok(Published::Stale {
            proposed_serial: plan.base_serial.unwrap_or_default(),
            number: open_pr.map(|p| p.number),
            url: open_pr.map(|p| p.url.clone()),
        }),
        Outcome::InSync => match (open_pr, &latest) {
            (Some(pr), _) => close(gh, snap, plan, pr, report, deadline).await,
            (None, Some(pr)) if withdrawn => Ok(Published::Closed {
                number: pr.number,
                url: pr.url.clone(),
            }),
            (None, _) => Ok(Published::InSync),
        },
        Outcome::Change => {
            let digest = plan_digest(plan);
            match latest {
                Some(pr) if pr.state == PullState::Open => update(gh, snap, plan, pr, &digest, report, deadline).await,
                Some(pr) if declined(&pr, &values_digest(plan)) => {
                    // A person closed it: these values were declined.
                    Ok(Published::Declined {
                        number: pr.number,
                        url: pr.url,
                    })
                }
                previous => open(gh, snap, plan, &digest, previous, report, deadline).await,
            }
        }
    }
}

/// Back in sync: the pull request is closed (as cellbridge's own close) and its branch deleted,
/// unless people changed other files on it, which then stay open for review.
async fn close<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    pr: &PullRequest,
    report: &mut Option<AutoMergeReport>,
    deadline: Instant,
) -> Result<Published> {
    let cm = configmap::path_for(&plan.cell);
    let cmp = gh.compare(&snap.base_sha, &pr.head_sha, deadline).await?;
    if !cmp.lists_every_file() || cmp.files.iter().any(|f| f.path != cm) {
        // People's work stays open for review, its head checked like any other; nothing of
        // cellbridge's is left to merge, so its auto-merge goes before the status.
        let base_cm = snap.fleet.read_text(&cm).ok().flatten().unwrap_or_default();
        let changes = HeadChanges::of(gh, &cmp, &pr.head_sha, deadline).await?;
        let checked = checked_head(gh, snap, plan, &changes, &base_cm, deadline).await?;
        let mut run = OptInFile::read(&snap.fleet).judge(&checked, Some(pr));
        run.before_status(gh, pr.number, &pr.head_sha, deadline).await?;
        post_status(gh, &pr.head_sha, &checked, false, deadline).await?;
        let cleared = clear_refusal(gh, pr, &pr.head_sha, deadline).await?;
        let body = auto_merge::with_run_block(cleared.as_deref().unwrap_or(&pr.body), &run);
        let body = with_marker_fields(&body, &run);
        let unsigned =
            crate::rules::signing::unsigned_commit(gh, &cmp, &snap.base_branch, &plan.branch, deadline).await?;
        let body = crate::rules::signing::with_unsigned(&body, unsigned.as_ref(), &snap.base_branch);
        if body != pr.body {
            write_text(gh, pr, &pr.title, &body, &pr.labels, deadline).await?;
        }
        *report = Some(run.report());
        return Ok(Published::Unchanged {
            number: pr.number,
            url: pr.url.clone(),
        });
    }
    close_as_own(gh, pr, &plan.branch, None, deadline).await?;
    Ok(Published::Closed {
        number: pr.number,
        url: pr.url.clone(),
    })
}

/// Closes `pr` as cellbridge's own close (marked, so never taken for a person's), `note` added
/// to its body, and deletes its branch unless someone pushed to it since `pr` was read.
pub(super) async fn close_as_own<G: GithubRepo>(
    gh: &G,
    pr: &PullRequest,
    branch: &str,
    note: Option<&str>,
    deadline: Instant,
) -> Result<()> {
    gh.close_pull(pr.number, &closed_body(&pr.body, note), deadline).await?;
    // Only the head that was read goes: a push that landed since keeps the branch (and the pull
    // request can be reopened with it).
    gh.delete_branch_at(branch, &pr.head_sha, deadline).await?;
    Ok(())
}
