//! A new pull request, and the claim on its branch: a branch someone else's work holds is never
//! built on, reset or deleted.

use std::time::Instant;

use tracing::Instrument as _;

use super::text::{body_for, message_for, trailers, with_marker_fields};
use super::updating::set_status;
use crate::ports::github::{GithubError, Published, Result, Snapshot};
use crate::ports::github::{GithubRepo, PullRequest, PullState};
use crate::pure::fleet::FileWrite;
use crate::pure::plan::{self, Plan};
use crate::rules::automerge::{self as auto_merge, AutoMergeReport, OptInFile};
use crate::rules::signing::{self, Signing, Writer};

/// A new pull request: its branch (recreated from the base when it was a closed or merged pull
/// request's, or the branch a cut-off run left), its status, the pull request, its labels.
#[tracing::instrument(target = "cellbridge::chain", level = "trace", name = "pull_request.open", skip_all)]
pub(crate) async fn open<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    digest: &str,
    previous: Option<PullRequest>,
    report: &mut Option<AutoMergeReport>,
    deadline: Instant,
) -> Result<Published> {
    let branch = &plan.branch;
    // Before any write: a file GitHub could not sign as it must be written is refused now.
    let writer = Signing::default().writer(gh, &snap.base_branch, deadline).await?;
    if writer == Writer::Signed {
        signing::writable(plan, &snap.base_branch)?;
    }
    if let Some(prev) = previous.as_ref().filter(|p| p.state == PullState::Merged) {
        // A base read before that pull request merged would propose again what it merged (a new
        // cell's whole directory on a base without it): its head in the base branch now but not
        // in the base read tells. A squash or rebase merge leaves no such trace: taken as read.
        if !prev.head_sha.is_empty()
            && !gh
                .compare(&prev.head_sha, &snap.base_sha, deadline)
                .await?
                .relation
                .contains_base()
            && gh
                .compare(&prev.head_sha, &snap.base_branch, deadline)
                .await?
                .relation
                .contains_base()
        {
            return Err(GithubError::Conflict {
                what: format!("pull request #{}", prev.number),
                detail: "it was merged after the base was read".into(),
            });
        }
        // A merged pull request's branch: everything on it was merged, and its history is not
        // this pull request's (a squash or rebase merge leaves nothing a fast-forward can
        // follow). Only the old pull request's branch goes: one another run just recreated
        // stays. A closed one's branch is judged by whose commits it holds, below.
        gh.delete_branch_at(branch, &prev.head_sha, deadline).await?;
    }
    let message = message_for(plan, digest);
    let files: Vec<FileWrite> = plan.files.iter().map(plan::FileChange::write).collect();
    // Through the Git data API the commit is made first and the branch created at it; through
    // `createCommitOnBranch`, which commits on a branch, the branch is created at the base and
    // the commit made on it once the branch is claimed.
    let fresh = match writer {
        Writer::GitData => {
            let tree = gh
                .create_tree(
                    &snap.base_sha,
                    snap.base_tree.get().map(String::as_str),
                    &files,
                    &[],
                    deadline,
                )
                .await?;
            gh.create_commit(&tree, std::slice::from_ref(&snap.base_sha), &message, deadline)
                .await?
        }
        Writer::Signed => snap.base_sha.clone(),
    };
    let commit = match claim_branch(gh, snap, branch, &fresh, deadline).await? {
        Claimed::Created => fresh,
        Claimed::Held { head, message } => {
            let t = trailers(&message);
            if let (Some(s), Some(l)) = (
                t.get("Cellbridge-Serial").and_then(|s| s.parse::<u64>().ok()),
                t.get("Cellbridge-Lineage"),
            ) && *l == plan.lineage
                && s > plan.serial
            {
                return Ok(Published::Stale {
                    proposed_serial: s,
                    number: None,
                    url: None,
                });
            }
            let previous_head = previous.as_ref().map(|p| p.head_sha.as_str());
            if t.get("Cellbridge-Digest").map(String::as_str) == Some(digest) && previous_head != Some(head.as_str()) {
                // A cut-off run left this very proposal: opened as it is.
                head
            } else {
                // A closed pull request's branch, or a cut-off run's other proposal (older
                // values, a decommission): cellbridge's alone, so recreated from the base, never
                // built on.
                recreate(gh, branch, &head, &fresh, deadline).await?;
                fresh
            }
        }
    };
    let commit = if writer == Writer::Signed && commit == snap.base_sha {
        gh.commit_on_branch(branch, &commit, &files, &[], &message, deadline)
            .await?
    } else {
        commit
    };

    set_status(gh, &commit, plan, deadline).await?;
    // A new pull request's head is cellbridge's own commit: the plan's files are its files.
    let mut run = OptInFile::read(&snap.fleet).judge(plan, None);
    let body = body_for(plan, digest, &snap.base_sha, &commit, previous.as_ref(), &run);
    let (number, url) = gh
        .create_pull(branch, &snap.base_branch, &plan.title, &body, deadline)
        .instrument(tracing::trace_span!(target: "cellbridge::chain", "GithubRepo.create_pull"))
        .await?;
    gh.add_labels(number, &plan.labels, deadline).await?;
    run.after_status(gh, number, &commit, &snap.base_branch, deadline)
        .await?;
    let mut body = body;
    let now = with_marker_fields(&auto_merge::with_block(&body, &run.block()), &run);
    if now != body {
        body = now;
        gh.update_pull_text(number, &plan.title, &body, &plan.labels, deadline)
            .await?;
    }
    if let Some(block) = run.finish(gh, number, deadline).await? {
        let refused = auto_merge::with_block(&body, &block);
        gh.update_pull_text(number, &plan.title, &refused, &plan.labels, deadline)
            .await?;
    }
    *report = Some(run.report());
    Ok(Published::Opened { number, url, commit })
}

/// What [`claim_branch`] found.
pub(crate) enum Claimed {
    /// The branch was created at the fresh commit.
    Created,
    /// It exists with no open pull request, and every commit it has beyond the base is
    /// cellbridge's, or it is the head of a closed pull request that keeps them: its head and
    /// that commit's message.
    Held { head: String, message: String },
}

/// Creates `branch` at `fresh` (built on the base), or tells what holds it. A branch with a pull
/// request open on it now (another run opened it) is [`GithubError::Conflict`]: the caller's run
/// is redone on a fresh read. A branch that holds someone else's commit that no pull request
/// shows is never built on, reset or deleted: [`GithubError::Foreign`], final, naming the commit
/// and what to do.
pub(crate) async fn claim_branch<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    branch: &str,
    fresh: &str,
    deadline: Instant,
) -> Result<Claimed> {
    if gh.create_branch(branch, fresh, deadline).await? {
        return Ok(Claimed::Created);
    }
    // The branch exists: another sync opened the pull request meanwhile (people may already be
    // pushing to it), or one is running right now, or one stopped between the branch and the
    // pull request, or someone pushed a branch of that name. Whose commits it holds is read
    // first and whether a pull request is open last, so that one opened in between is seen.
    let Some((head, message)) = gh.branch_head(branch, deadline).await? else {
        return Err(GithubError::Conflict {
            what: format!("creating branch {branch}"),
            detail: "the branch vanished".into(),
        });
    };
    // Against the base branch as it is now, not the snapshot: a commit a person pushed to main
    // since, which the branch may already contain, is nobody's work on the branch.
    let cmp = gh.compare(&snap.base_branch, &head, deadline).await?;
    let owner = crate::rules::branch::owner(&cmp, &snap.base_branch, branch);
    match gh.latest_pull(branch, deadline).await? {
        Some(p) if p.state == PullState::Open => {
            return Err(GithubError::Conflict {
                what: format!("creating branch {branch}"),
                detail: format!("pull request #{} was opened on it meanwhile", p.number),
            });
        }
        // Merged meanwhile, with the head read: what was read is history; redo on a fresh read.
        Some(p) if p.state == PullState::Merged && p.head_sha == head => {
            return Err(GithubError::Conflict {
                what: format!("creating branch {branch}"),
                detail: format!("pull request #{} was merged meanwhile", p.number),
            });
        }
        // The head of a pull request a person closed: its commits are that pull request's, which
        // GitHub keeps with it (its commits stay listed, and "Restore branch" brings the branch
        // back), so the close released the branch.
        Some(p) if p.state == PullState::Closed && p.head_sha == head => {
            return Ok(Claimed::Held { head, message });
        }
        // The same, with cellbridge's own commits on top (a run that read the pull request open
        // wrote after the close): what is not cellbridge's is the closed pull request's.
        Some(p)
            if p.state == PullState::Closed
                && matches!(owner, crate::rules::branch::Owner::Someone(_))
                && !p.head_sha.is_empty() =>
        {
            let since = gh.compare(&p.head_sha, &head, deadline).await?;
            let after_close: std::collections::HashSet<&str> = since.commits.iter().map(|c| c.sha.as_str()).collect();
            let theirs_after_close = cmp
                .commits
                .iter()
                .filter(|c| !crate::rules::branch::nobodys_work(c, &snap.base_branch, branch))
                .any(|c| after_close.contains(c.sha.as_str()));
            if since.relation == crate::ports::github::Relation::Ahead
                && since.total_commits == since.commits.len()
                && cmp.total_commits == cmp.commits.len()
                && !theirs_after_close
            {
                return Ok(Claimed::Held { head, message });
            }
        }
        _ => {}
    }
    match owner {
        crate::rules::branch::Owner::Cellbridge => Ok(Claimed::Held { head, message }),
        crate::rules::branch::Owner::Someone(c) => {
            // Final only for the branch as read: one that moved since is read again.
            let now = gh.branch_head(branch, deadline).await?.map(|(sha, _)| sha);
            if now.as_deref() != Some(head.as_str()) {
                return Err(GithubError::Conflict {
                    what: format!("creating branch {branch}"),
                    detail: "the branch moved while it was read".into(),
                });
            }
            Err(GithubError::Foreign {
                branch: branch.to_owned(),
                commit: crate::rules::branch::describe(&c),
            })
        }
    }
}

/// `branch`, all cellbridge's and headed by `head`, recreated at `fresh`: deleted only while its
/// head is still `head` (a push since keeps it, and the creation below loses the race), then
/// created again.
pub(crate) async fn recreate<G: GithubRepo>(
    gh: &G,
    branch: &str,
    head: &str,
    fresh: &str,
    deadline: Instant,
) -> Result<()> {
    gh.delete_branch_at(branch, head, deadline).await?;
    if gh.create_branch(branch, fresh, deadline).await? {
        Ok(())
    } else {
        Err(GithubError::Conflict {
            what: format!("recreating branch {branch}"),
            detail: "someone wrote to it meanwhile".into(),
        })
    }
}
