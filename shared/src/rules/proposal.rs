//! The one proposal machine. What cellbridge proposes for a cell is one of two kinds on the one
//! branch `cellbridge/<cell>`: Terraform's values ([`Proposal::Values`], the metadata pull
//! request, [`super::pull_request`]) or the removal of a destroyed cell's directory
//! ([`Proposal::Removal`], the decommission, [`super::decommission`]). [`converge`] reads what
//! GitHub holds on the branch once and decides for both kinds in one table; each kind's module
//! only writes its own pull request.
//!
//! | open on the branch | values | removal |
//! |---|---|---|
//! | a newer serial of the state's lineage | stale | stale |
//! | the other kind | the decommission is withdrawn (cellbridge's own close), then the values | a metadata pull request of cellbridge's alone is closed and the decommission takes the branch; one holding someone else's commit is left open, told once |
//! | the same kind | updated in place | updated in place |
//! | nothing (or closed, merged) | opened, unless a person declined these very values | opened, unless a person declined this very removal |
//!
//! The branch rule is the same for both ([`super::branch`]): a branch whose commits beyond the
//! base are all cellbridge's is recreated from the base, one holding anyone else's commit is
//! never deleted, reset, taken over or built on.

use std::time::Instant;

use super::decommission::{self, Decommissioned};
use super::pull_request::{self, Converged, close_as_own, closed_body};
use crate::ports::github::{GithubRepo, PullRequest, PullState};
use crate::ports::github::{Published, Result, Snapshot};
use crate::pure::decommission::Decommission;
use crate::pure::plan::{self, Plan};
use crate::pure::record::{Kind, Record};
use crate::rules::report::{LABEL_REFUSED, RefusedIssues};

/// What cellbridge proposes for a cell.
#[derive(Debug, Clone, Copy)]
pub enum Proposal<'a> {
    /// The values of the cell's latest state, planned against the base.
    Values(&'a Plan),
    /// The removal of `clusters/<cell>/`, once EKS confirmed the cluster gone.
    Removal(&'a Decommission),
}

/// What converging a proposal did, by its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposed {
    Values(Converged),
    Removal(Decommissioned),
}

impl Proposal<'_> {
    fn branch(&self) -> &str {
        match self {
            Proposal::Values(p) => &p.branch,
            Proposal::Removal(d) => &d.branch,
        }
    }

    fn lineage(&self) -> (u64, &str) {
        match self {
            Proposal::Values(p) => (p.serial, &p.lineage),
            Proposal::Removal(d) => (d.serial, &d.lineage),
        }
    }
}

/// Converges the cell's pull request to `proposal`, computed against `snap`. The one read of
/// GitHub before deciding also gives the open `cellbridge-refused` issues (kept in `refused`,
/// for closing a stale one once the cell synced) and the base's tree (kept in `snap`, for a tree
/// built on the base): a new cell's three reads in one request.
#[tracing::instrument(target = "cellbridge::chain", level = "trace", name = "proposal.converge", skip_all)]
pub async fn converge<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    proposal: Proposal<'_>,
    refused: &RefusedIssues,
    deadline: Instant,
) -> Result<Proposed> {
    let reading = gh
        .cell_reading(
            proposal.branch(),
            LABEL_REFUSED,
            &snap.base_branch,
            &snap.base_sha,
            deadline,
        )
        .await?;
    // The same commit has the same tree: another cell of this base set it already, or not.
    let _ = snap.base_tree.set(reading.base_tree);
    refused.seed(reading.labelled).await;
    let latest = reading.latest;
    let open = latest.as_ref().filter(|p| p.state == PullState::Open);
    // An older event than what the open pull request holds (same lineage) is old news, whichever
    // kind of pull request it is.
    if let Some(pr) = open {
        let (serial, lineage) = proposal.lineage();
        if let Some((theirs, their_lineage)) = plan::recorded_serial(&pr.body)
            && their_lineage == lineage
            && theirs > serial
        {
            return Ok(stale(proposal, pr, theirs));
        }
    }
    let open_kind = open.map(|p| Record::read(&p.body).kind());
    match (proposal, latest, open_kind) {
        (Proposal::Values(plan), Some(pr), Some(Kind::Decommission)) => {
            // The cell is back (a later apply wrote `cell_metadata` again): its decommission is
            // withdrawn, as cellbridge's own close, and the values take the branch.
            let note = format!(
                "Closed by cellbridge: the cell is back. The Terraform state `{}` (serial {}) has `cell_metadata` again, so `clusters/{}/` stays.",
                plan.source, plan.serial, plan.cell
            );
            close_as_own(gh, &pr, &plan.branch, Some(&note), deadline).await?;
            let closed = PullRequest {
                state: PullState::Closed,
                body: closed_body(&pr.body, None),
                ..pr
            };
            let mut report = None;
            let published =
                pull_request::converge_from(gh, snap, plan, Some(closed), true, &mut report, deadline).await?;
            Ok(Proposed::Values(Converged {
                published,
                auto_merge: report,
            }))
        }
        (Proposal::Values(plan), latest, _) => {
            let mut report = None;
            let published = pull_request::converge_from(gh, snap, plan, latest, false, &mut report, deadline).await?;
            Ok(Proposed::Values(Converged {
                published,
                auto_merge: report,
            }))
        }
        (Proposal::Removal(d), Some(pr), Some(Kind::Metadata)) => Ok(Proposed::Removal(
            decommission::supersede(gh, snap, d, pr, deadline).await?,
        )),
        (Proposal::Removal(d), latest, _) => Ok(Proposed::Removal(
            decommission::converge_from(gh, snap, d, latest, deadline).await?,
        )),
    }
}

/// The open pull request `pr` records serial `theirs` of this proposal's lineage, newer than
/// the proposal's: nothing is written.
fn stale(proposal: Proposal<'_>, pr: &PullRequest, theirs: u64) -> Proposed {
    match proposal {
        Proposal::Values(_) => Proposed::Values(Converged {
            published: Published::Stale {
                proposed_serial: theirs,
                number: Some(pr.number),
                url: Some(pr.url.clone()),
            },
            auto_merge: None,
        }),
        Proposal::Removal(_) => Proposed::Removal(Decommissioned::Stale {
            proposed_serial: theirs,
            number: pr.number,
            url: pr.url.clone(),
        }),
    }
}
