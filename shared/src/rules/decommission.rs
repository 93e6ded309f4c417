//! A destroyed cell's decommission pull request on GitHub: one commit on the base that removes
//! exactly `clusters/<cell>/` (every file and symlink the base has there, as tree entries whose
//! `sha` is null), on the cell's own branch `cellbridge/<cell>`, labelled `cellbridge` and
//! `decommission`. cellbridge never merges it (auto-merge never applies to it either): a
//! person reviews and merges.
//!
//! What [`crate::pure::decommission`] plans is converged here as the metadata pull request is in
//! [`super::pull_request`], both through [`super::proposal::converge`]: found again by its
//! record's kind (`kind=decommission`, [`crate::pure::record`]), rewritten only when what it removes changed, a person's close
//! declining it for as long as it would remove the same files, a moved base merged in (never
//! reset). A metadata pull request open for the cell is closed (as cellbridge's own close) and
//! the decommission takes the branch; a later apply that brings the cell back closes the
//! decommission in turn ([`super::proposal::converge`]), and so does EKS showing the
//! cluster again ([`withdraw`]).

use super::signing::{Signing, Writer};
use std::collections::BTreeSet;
use std::time::Instant;

use super::branch::{self, Owner};
use super::pull_request::{
    Claimed, claim_branch, close_as_own, closed_body, recorded_base, recorded_digest, recreate, trailers, write_text,
};
use crate::ports::github::{BranchCommit, GithubRepo, Merge, PullRequest, PullState};
use crate::ports::github::{GithubError, Result, Snapshot};
use crate::pure::decommission::{Decommission, LABEL_DECOMMISSION};
use crate::pure::plan::{self, LABEL_CELLBRIDGE};
use crate::pure::record::{self, Kind, Record};

/// The status on a decommission's head: branch protection that requires the strict check gets
/// an answer, and it says why there is nothing to substitute.
const STATUS_DESCRIPTION: &str = "decommission: the cell's directory is removed; no layer left to check";

/// What converging a decommission did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Decommissioned {
    /// A new decommission pull request (an open metadata one closed first, when there was one:
    /// `superseded`).
    Opened {
        number: u64,
        url: String,
        commit: String,
        superseded: Option<u64>,
    },
    /// The open decommission pull request now removes what the base has under the cell.
    Updated { number: u64, url: String, commit: String },
    /// It already removes exactly that: nothing was written.
    Unchanged { number: u64, url: String },
    /// A person closed the decommission that removed these very files: it stays closed.
    Declined { number: u64, url: String },
    /// The base cannot be merged into the branch (a person and the base changed the same
    /// file): left as it is, one comment asks for **Update branch**.
    Conflicted { number: u64, url: String },
    /// The cell's metadata pull request holds someone else's commit: left open for a person
    /// to merge or close (told once in a comment); nothing is proposed until then.
    Held { number: u64, url: String },
    /// An open pull request records a newer serial of this state's lineage.
    Stale {
        proposed_serial: u64,
        number: u64,
        url: String,
    },
}

/// Whether `pr` is a decommission cellbridge opened (closed or not).
pub fn is_decommission(pr: &PullRequest) -> bool {
    Record::read(&pr.body).kind() == Kind::Decommission
}

/// Converges the cell's decommission pull request to `d`, which EKS confirmed
/// ([`Decommission::confirmed`]), from `latest`, the newest pull request of its branch as
/// [`super::proposal::converge`] read it (never an open metadata pull request:
/// [`supersede`]'s).
pub(super) async fn converge_from<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    d: &Decommission,
    latest: Option<PullRequest>,
    deadline: Instant,
) -> Result<Decommissioned> {
    debug_assert!(
        d.confirmed,
        "a decommission is converged only once EKS confirmed the cluster gone"
    );
    let digest = d.digest();
    match latest {
        Some(pr) if pr.state == PullState::Open => update(gh, snap, d, pr, &digest, deadline).await,
        Some(pr)
            if pr.state == PullState::Closed
                && is_decommission(&pr)
                && !Record::read(&pr.body).closed_by_cellbridge()
                && Record::read(&pr.body).get("values") == Some(digest.as_str()) =>
        {
            Ok(Decommissioned::Declined {
                number: pr.number,
                url: pr.url,
            })
        }
        previous => open(gh, snap, d, &digest, previous, deadline).await,
    }
}

/// The cell's open metadata pull request `pr`, values for a cell whose stack is gone: one that
/// holds someone else's commit is theirs to merge or close (left open, told once); one of
/// cellbridge's alone is closed as cellbridge's own, and the decommission takes the branch.
pub(super) async fn supersede<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    d: &Decommission,
    pr: PullRequest,
    deadline: Instant,
) -> Result<Decommissioned> {
    let cmp = gh.compare(&snap.base_branch, &pr.head_sha, deadline).await?;
    if let Owner::Someone(c) = branch::owner(&cmp, &snap.base_branch, &d.branch) {
        return held(gh, d, pr, &c, deadline).await;
    }
    let note = format!(
        "Closed by cellbridge: the Terraform stack of cell `{}` was destroyed and EKS confirms its cluster is gone; a decommission pull request takes this branch.",
        d.cell
    );
    close_as_own(gh, &pr, &d.branch, Some(&note), deadline).await?;
    let superseded = pr.number;
    let mut opened = open(gh, snap, d, &d.digest(), Some(pr), deadline).await?;
    if let Decommissioned::Opened { superseded: s, .. } = &mut opened {
        *s = Some(superseded);
    }
    Ok(opened)
}

/// The cell's open metadata pull request holds someone else's commit `theirs`: it stays open,
/// one comment says that the stack is destroyed and the cluster gone (recorded in its body as
/// `decommission=asked`), and the decommission waits until it is merged or closed.
async fn held<G: GithubRepo>(
    gh: &G,
    d: &Decommission,
    pr: PullRequest,
    theirs: &BranchCommit,
    deadline: Instant,
) -> Result<Decommissioned> {
    if record::field(&pr.body, ASKED).is_none() {
        let gone = match &d.cluster {
            Some(c) => format!(
                "EKS confirms that its cluster `{}` is gone from `{}`",
                c.cluster, c.region
            ),
            None => "EKS confirms that its cluster is gone".to_owned(),
        };
        let text = format!(
            "The Terraform stack of cell `{}` was destroyed (state serial {}) and {gone}. This pull request holds {}, which cellbridge did not write, so cellbridge leaves it open: merge it or close it. Once it is merged or closed, the next state event proposes removing `clusters/{}/` in a pull request of its own.",
            d.cell,
            d.serial,
            branch::describe(theirs),
            d.cell
        );
        gh.comment(pr.number, &text, deadline).await?;
        // Recorded after the comment: a run cut off in between comments again, rather than never.
        let body = record::with_field(&pr.body, ASKED, Some("asked"));
        write_text(gh, &pr, &pr.title, &body, &pr.labels, deadline).await?;
    }
    Ok(Decommissioned::Held {
        number: pr.number,
        url: pr.url,
    })
}

/// The record field of a metadata pull request told that its cell's stack is destroyed.
const ASKED: &str = "decommission";

/// The cluster is there after all (a state that looks destroyed while the cluster runs): an open
/// decommission of the cell is closed, as cellbridge's own close, saying why. Returns the pull
/// request closed.
pub async fn withdraw<G: GithubRepo>(
    gh: &G,
    cell: &str,
    why: &str,
    deadline: Instant,
) -> Result<Option<(u64, String)>> {
    let branch = plan::branch_for(cell);
    match gh.latest_pull(&branch, deadline).await? {
        Some(pr) if pr.state == PullState::Open && is_decommission(&pr) => {
            close_as_own(gh, &pr, &branch, Some(why), deadline).await?;
            Ok(Some((pr.number, pr.url)))
        }
        _ => Ok(None),
    }
}

/// The open metadata pull request of a cell the base branch does not have (its first one, never
/// merged), with its head's `cell-metadata.yaml` (empty when the head has none): what tells which
/// cluster to ask EKS about once the cell's stack is destroyed.
pub async fn unmerged_pull<G: GithubRepo>(
    gh: &G,
    cell: &str,
    deadline: Instant,
) -> Result<Option<(PullRequest, String)>> {
    let branch = plan::branch_for(cell);
    let Some(pr) = gh
        .latest_pull(&branch, deadline)
        .await?
        .filter(|p| p.state == PullState::Open && !is_decommission(p))
    else {
        return Ok(None);
    };
    let tree = gh.tree_files(&pr.head_sha, deadline).await?;
    let text = match tree.files.get(&crate::pure::configmap::path_for(cell)) {
        Some(blob) => String::from_utf8(gh.read_blob(blob, deadline).await?).unwrap_or_default(),
        None => String::new(),
    };
    Ok(Some((pr, text)))
}

/// Closes `pr`, the first pull request of `cell`, whose stack is destroyed and whose cluster EKS
/// confirms gone, with the comment `text`, as cellbridge's own close. Its branch goes with it
/// while it holds only cellbridge's commits; one people committed to stays (the closed pull
/// request keeps their commits either way, and "Restore branch" brings a deleted one back).
pub async fn close_unmerged<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    cell: &str,
    pr: &PullRequest,
    text: &str,
    deadline: Instant,
) -> Result<()> {
    let branch = plan::branch_for(cell);
    let cmp = gh.compare(&snap.base_branch, &pr.head_sha, deadline).await?;
    let ours = matches!(branch::owner(&cmp, &snap.base_branch, &branch), Owner::Cellbridge);
    gh.comment(pr.number, text, deadline).await?;
    if ours {
        close_as_own(gh, pr, &branch, None, deadline).await
    } else {
        gh.close_pull(pr.number, &closed_body(&pr.body, None), deadline).await
    }
}

fn body_for(d: &Decommission, digest: &str, base: &str, head: &str, previous: Option<&PullRequest>) -> String {
    let mut body = d.body.trim_end().to_owned();
    match previous {
        // The cell's values, closed by this very proposal.
        Some(prev) if prev.state == PullState::Open => {
            body.push_str(&format!(
                "\n\nSupersedes #{}, whose values were for a cell whose stack is gone.",
                prev.number
            ));
        }
        Some(prev) if is_decommission(prev) => {
            let what = match prev.state {
                PullState::Merged => "merged",
                _ => "closed",
            };
            body.push_str(&format!(
                "\n\nFollows #{}, an earlier decommission ({what}).",
                prev.number
            ));
        }
        _ => {}
    }
    format!(
        "{body}\n{}\n{}\n",
        record::line(&[("serial", &d.serial.to_string()), ("lineage", &d.lineage)]),
        record::line(&[
            ("kind", Kind::Decommission.name()),
            ("digest", digest),
            ("base", base),
            ("head", head),
            ("values", digest),
            ("key", &record::value(&d.source.key)),
        ])
    )
}

fn message_for(d: &Decommission, digest: &str) -> String {
    format!(
        "{}\n\nTerraform state {} (destroyed)\n\nCellbridge-Serial: {}\nCellbridge-Lineage: {}\nCellbridge-Digest: {digest}\nCellbridge-Kind: decommission\n",
        d.title, d.source, d.serial, d.lineage
    )
}

fn labels() -> Vec<String> {
    vec![LABEL_CELLBRIDGE.to_owned(), LABEL_DECOMMISSION.to_owned()]
}

/// A new decommission: the removal committed on the base, its branch (recreated when it was a
/// closed or merged pull request's), the status, the pull request, its labels.
async fn open<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    d: &Decommission,
    digest: &str,
    previous: Option<PullRequest>,
    deadline: Instant,
) -> Result<Decommissioned> {
    let branch = &d.branch;
    let writer = Signing::default().writer(gh, &snap.base_branch, deadline).await?;
    if let Some(prev) = previous.as_ref().filter(|p| p.state == PullState::Merged) {
        // A merged pull request's branch: everything on it was merged, and its history is not
        // this proposal's.
        gh.delete_branch_at(branch, &prev.head_sha, deadline).await?;
    }
    // As a new cell's (`pull_request::open`): through `createCommitOnBranch`, the branch is
    // created at the base and the removal committed on it once claimed.
    let fresh = match writer {
        Writer::GitData => {
            let tree = gh
                .create_tree(
                    &snap.base_sha,
                    snap.base_tree.get().map(String::as_str),
                    &[],
                    &d.removed,
                    deadline,
                )
                .await?;
            gh.create_commit(
                &tree,
                std::slice::from_ref(&snap.base_sha),
                &message_for(d, digest),
                deadline,
            )
            .await?
        }
        Writer::Signed => snap.base_sha.clone(),
    };
    let commit = match claim_branch(gh, snap, branch, &fresh, deadline).await? {
        Claimed::Created => fresh,
        Claimed::Held { head, message } => {
            let previous_head = previous.as_ref().map(|p| p.head_sha.as_str());
            if trailers(&message).get("Cellbridge-Digest").map(String::as_str) == Some(digest)
                && previous_head != Some(head.as_str())
            {
                // A run cut off between the branch and the pull request left this very removal.
                head
            } else {
                // cellbridge's alone (a closed proposal, a cut-off run's values): recreated
                // from the base, never built on.
                recreate(gh, branch, &head, &fresh, deadline).await?;
                fresh
            }
        }
    };
    let commit = if writer == Writer::Signed && commit == snap.base_sha {
        gh.commit_on_branch(branch, &commit, &[], &d.removed, &message_for(d, digest), deadline)
            .await?
    } else {
        commit
    };
    gh.set_status(&commit, true, plan::STATUS_CONTEXT, STATUS_DESCRIPTION, deadline)
        .await?;
    let body = body_for(d, digest, &snap.base_sha, &commit, previous.as_ref());
    let (number, url) = gh
        .create_pull(branch, &snap.base_branch, &d.title, &body, deadline)
        .await?;
    gh.add_labels(number, &labels(), deadline).await?;
    Ok(Decommissioned::Opened {
        number,
        url,
        commit,
        superseded: None,
    })
}

/// The open decommission made to remove what the base now has under the cell: the base merged
/// in when it moved on, then one commit removing whatever of the cell's directory the head still
/// has (people may have pushed to the branch; their commits stay).
async fn update<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    d: &Decommission,
    pr: PullRequest,
    digest: &str,
    deadline: Instant,
) -> Result<Decommissioned> {
    let as_left = recorded_digest(&pr.body).as_deref() == Some(digest)
        && record::field(&pr.body, "head").as_deref() == Some(pr.head_sha.as_str());
    // As cellbridge left it, on the base it was written from, or on a base that changed nothing
    // under the cell's directory since (a replay writes nothing, whatever else moved on main:
    // no merge commit, no new status, no approval dismissed).
    let quiet = as_left
        && match recorded_base(&pr.body) {
            Some(base) if base == snap.base_sha => true,
            Some(base) => {
                let since = gh.compare(&base, &snap.base_sha, deadline).await?;
                let dir = format!("clusters/{}/", d.cell);
                // GitHub lists at most 300 files of a comparison ("Compare two commits"): a longer
                // list cannot show that the directory is untouched.
                since.relation == crate::ports::github::Relation::Ahead
                    && since.lists_every_file()
                    && !since.files.iter().any(|f| f.path.starts_with(&dir))
            }
            None => false,
        };
    if quiet {
        let missing: Vec<String> = labels().into_iter().filter(|l| !pr.labels.contains(l)).collect();
        if !missing.is_empty() {
            gh.add_labels(pr.number, &missing, deadline).await?;
        }
        return Ok(Decommissioned::Unchanged {
            number: pr.number,
            url: pr.url,
        });
    }
    let mut head = pr.head_sha.clone();
    let cmp = gh.compare(&snap.base_sha, &head, deadline).await?;
    let mut signing = Signing::default();
    if !cmp.relation.contains_base() {
        let message = super::branch::merge_message(&snap.base_branch, &d.branch);
        let merged = match signing.writer(gh, &snap.base_branch, deadline).await? {
            Writer::GitData => gh.merge_into(&d.branch, &snap.base_sha, &message, deadline).await?,
            Writer::Signed => gh.update_pull_branch(pr.number, &d.branch, &head, deadline).await?,
        };
        match merged {
            Merge::Merged(sha) => head = sha,
            Merge::UpToDate => {
                return Err(GithubError::Conflict {
                    what: format!("updating branch {}", d.branch),
                    detail: "the branch moved while it was compared".into(),
                });
            }
            Merge::Conflict => return conflicted(gh, snap, d, pr, deadline).await,
        }
    }
    // What the head still has of the cell's directory, from its whole tree: a comparison lists at
    // most 300 files, and a large cell's removal would be taken for undone and redone (a 422 for
    // every path already gone).
    let at_head = gh.tree_files(&head, deadline).await?;
    let dir = format!("clusters/{}/", d.cell);
    let left: BTreeSet<String> = at_head.files.keys().filter(|p| p.starts_with(&dir)).cloned().collect();
    let wrote = !left.is_empty();
    if wrote {
        let left: Vec<String> = left.into_iter().collect();
        let message = message_for(d, digest);
        head = match signing.writer(gh, &snap.base_branch, deadline).await? {
            Writer::GitData => {
                let tree = gh.create_tree(&head, Some(&at_head.tree), &[], &left, deadline).await?;
                let commit = gh
                    .create_commit(&tree, std::slice::from_ref(&head), &message, deadline)
                    .await?;
                gh.move_branch(&d.branch, &head, &commit, deadline).await?;
                commit
            }
            Writer::Signed => {
                gh.commit_on_branch(&d.branch, &head, &[], &left, &message, deadline)
                    .await?
            }
        };
    }
    let posted = if wrote {
        None
    } else {
        gh.status(&head, plan::STATUS_CONTEXT, deadline).await?
    };
    if posted != Some((true, STATUS_DESCRIPTION.to_owned())) {
        gh.set_status(&head, true, plan::STATUS_CONTEXT, STATUS_DESCRIPTION, deadline)
            .await?;
    }
    let mut labels = pr.labels.clone();
    for l in self::labels() {
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    let body = body_for(d, digest, &snap.base_sha, &head, None);
    write_text(gh, &pr, &d.title, &body, &labels, deadline).await?;
    Ok(if head != pr.head_sha {
        Decommissioned::Updated {
            number: pr.number,
            url: pr.url,
            commit: head,
        }
    } else {
        Decommissioned::Unchanged {
            number: pr.number,
            url: pr.url,
        }
    })
}

/// The base cannot be merged into the decommission's branch: the branch is left as it is, and
/// one comment asks for **Update branch** (recorded in the body's marker).
async fn conflicted<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    d: &Decommission,
    pr: PullRequest,
    deadline: Instant,
) -> Result<Decommissioned> {
    if record::field(&pr.body, "conflict").is_none() {
        let text = format!(
            "This branch conflicts with `{}`, so cellbridge cannot bring the decommission of `clusters/{}/` up to date. Please resolve the conflict (**Update branch**); the next event then removes what the base has added there.",
            snap.base_branch, d.cell
        );
        gh.comment(pr.number, &text, deadline).await?;
        let body = record::with_field(&pr.body, "conflict", Some("asked"));
        write_text(gh, &pr, &pr.title, &body, &pr.labels, deadline).await?;
    }
    Ok(Decommissioned::Conflicted {
        number: pr.number,
        url: pr.url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decommission_is_told_apart_by_its_marker_even_once_closed() {
        let pr = |body: &str| PullRequest {
            number: 1,
            url: "u".into(),
            branch: "cellbridge/c".into(),
            title: "t".into(),
            state: PullState::Closed,
            head_sha: "h".into(),
            labels: vec![],
            body: body.into(),
            node_id: None,
        };
        let body = "text\n<!-- cellbridge:kind=decommission digest=d base=b head=h values=d key=k -->\n";
        assert!(is_decommission(&pr(body)));
        assert_eq!(record::field(body, "values").as_deref(), Some("d"));
        let closed = crate::rules::pull_request::closed_body(body, Some("why"));
        assert!(is_decommission(&pr(&closed)));
        // A field set later (a conflict, a refusal) never hides the kind.
        let conflicted = record::with_field(body, "conflict", Some("asked"));
        assert!(is_decommission(&pr(&conflicted)));
        let old_release = "text\n<!-- cellbridge:refused=r kind=decommission digest=d -->\n";
        assert!(is_decommission(&pr(old_release)));
        assert!(!is_decommission(&pr(
            "text\n<!-- cellbridge:digest=d base=b head=h values=v key=k -->\n"
        )));
    }
}
