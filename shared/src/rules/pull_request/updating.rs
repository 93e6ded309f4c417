//! The open pull request made to hold the plan: the base merged in when needed, cellbridge's
//! file rewritten, the head's status, and the text; or, when the base cannot be merged in, the
//! conflict said once.

use std::time::Instant;

use super::changes::{HeadChanges, checked_head, post_status};
use super::text::{body_for, clear_refusal, labels_for, message_for, recorded_digest, with_marker_fields, write_text};
use crate::ports::github::{GithubError, Published, Result, Snapshot};
use crate::ports::github::{GithubRepo, Merge, Merges, PullRequest};
use crate::pure::configmap;
use crate::pure::fleet::{FileWrite, FleetRead};
use crate::pure::plan::{self, Plan};
use crate::pure::record;
use crate::rules::automerge::{self as auto_merge, AutoMergeReport, OptInFile};
use crate::rules::signing::{self, Signing, Writer};

pub(super) async fn set_status<G: Merges>(gh: &G, commit: &str, plan: &Plan, deadline: Instant) -> Result<()> {
    gh.set_status(
        commit,
        plan.status_ok(),
        plan::STATUS_CONTEXT,
        &plan.status_description(),
        deadline,
    )
    .await
}

/// The open pull request, made to hold the plan: the base merged in when it moved on and the
/// values must be written, one commit rewriting cellbridge's file when it differs, then the
/// status of whatever the head is, and the body and labels describing it.
///
/// A cell auto-merge covers (or covered when the pull request was last written) has its head
/// judged again on every run, from the head itself: whether GitHub may merge it is never read
/// back from the body. Any other pull request left as cellbridge wrote it costs no more reads.
#[allow(clippy::too_many_arguments)]
pub(super) async fn update<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    pr: PullRequest,
    digest: &str,
    report: &mut Option<AutoMergeReport>,
    deadline: Instant,
) -> Result<Published> {
    let opt_in = OptInFile::read(&snap.fleet);
    let as_written = recorded_digest(&pr.body).as_deref() == Some(digest)
        && record::field(&pr.body, "head").as_deref() == Some(pr.head_sha.as_str());
    if as_written && !opt_in.in_play(&pr.body, &plan.cell) && opt_in.unchanged_since(&pr.body, &plan.cell) {
        // As cellbridge left it. A run cut off between opening the pull request and labelling
        // it left the labels out; the status was set before the body, so it is there.
        let missing: Vec<String> = plan.labels.iter().filter(|l| !pr.labels.contains(l)).cloned().collect();
        if !missing.is_empty() {
            gh.add_labels(pr.number, &missing, deadline).await?;
        }
        if let Some(body) = clear_refusal(gh, &pr, &pr.head_sha, deadline).await? {
            write_text(gh, &pr, &pr.title, &body, &labels_for(plan, &pr), deadline).await?;
        }
        // Not covered now nor then: not eligible, whatever the body says.
        *report = Some(opt_in.judge(plan, Some(&pr)).report());
        return Ok(Published::Unchanged {
            number: pr.number,
            url: pr.url,
        });
    }
    let cm = configmap::path_for(&plan.cell);
    let ours = plan
        .files
        .iter()
        .find(|f| f.path == cm)
        .map(|f| f.new.as_str())
        .unwrap_or_default();
    let mut head = pr.head_sha.clone();
    let mut cmp = gh.compare(&snap.base_sha, &head, deadline).await?;
    let mut changes = HeadChanges::of(gh, &cmp, &head, deadline).await?;
    let base_cm = snap.fleet.read_text(&cm).ok().flatten();
    let wrote = !changes.holds(&cm, ours, base_cm.as_deref());
    let mut signing = Signing::default();
    if wrote && !cmp.relation.contains_base() {
        // The values are written on the base as it is: it is merged in first (as Update branch).
        match merge_base_into(gh, snap, plan, &pr, &head, &mut signing, deadline).await? {
            Ok(merged) => head = merged,
            Err(conflict) => return Ok(conflict),
        }
        cmp = gh.compare(&snap.base_sha, &head, deadline).await?;
        changes = HeadChanges::of(gh, &cmp, &head, deadline).await?;
    }
    if wrote {
        let file = [FileWrite::regular(cm.clone(), ours)];
        let message = message_for(plan, digest);
        head = match signing.writer(gh, &snap.base_branch, deadline).await? {
            Writer::GitData => {
                let tree = gh
                    .create_tree(&head, cmp.head_tree.as_deref(), &file, &[], deadline)
                    .await?;
                let commit = gh
                    .create_commit(&tree, std::slice::from_ref(&head), &message, deadline)
                    .await?;
                gh.move_branch(&plan.branch, &head, &commit, deadline).await?;
                commit
            }
            Writer::Signed => {
                gh.commit_on_branch(&plan.branch, &head, &file, &[], &message, deadline)
                    .await?
            }
        };
    }
    // Someone else's commit GitHub did not verify, on a base requiring signatures, blocks the
    // pull request whatever cellbridge writes: said in the body, naming it.
    let unsigned = signing::unsigned_commit(gh, &cmp, &snap.base_branch, &plan.branch, deadline).await?;
    // The status goes before the body: once the body records this head, later runs take the
    // pull request as complete, so everything else must already be there. A head that is not
    // eligible loses cellbridge's auto-merge before its status could let GitHub merge it; an
    // eligible one gets it once its status is there.
    let checked = checked_head(gh, snap, plan, &changes, ours, deadline).await?;
    let mut run = opt_in.judge(&checked, Some(&pr));
    run.before_status(gh, pr.number, &head, deadline).await?;
    post_status(gh, &head, &checked, wrote, deadline).await?;
    run.after_status(gh, pr.number, &head, &snap.base_branch, deadline)
        .await?;
    if run.behind() {
        // Branch protection requires the head to be up to date with the base, and GitHub's
        // auto-merge never updates a branch: brought up to date as Update branch does, the
        // merge's content being what was just checked (the head's changes on the base read).
        match merge_base_into(gh, snap, plan, &pr, &head, &mut signing, deadline).await? {
            Ok(merged) => {
                head = merged;
                run.brought_up_to_date();
                post_status(gh, &head, &checked, true, deadline).await?;
                run.after_status(gh, pr.number, &head, &snap.base_branch, deadline)
                    .await?;
            }
            Err(conflict) => return Ok(conflict),
        }
    }
    // The body written below drops the refusal's marker.
    let cleared = clear_refusal(gh, &pr, &head, deadline).await?;
    let (title, body) = if as_written {
        // The same proposal: the person's edits to the text stay; the record follows the head.
        let body = auto_merge::with_run_block(cleared.as_deref().unwrap_or(&pr.body), &run);
        let body = record::with_field(&with_marker_fields(&body, &run), "head", Some(&head));
        (
            pr.title.clone(),
            record::with_field(&body, "base", Some(&snap.base_sha)),
        )
    } else {
        (
            plan.title.clone(),
            body_for(plan, digest, &snap.base_sha, &head, None, &run),
        )
    };
    let body = signing::with_unsigned(&body, unsigned.as_ref(), &snap.base_branch);
    let labels = labels_for(plan, &pr);
    let same_labels = {
        let (mut now, mut then) = (labels.clone(), pr.labels.clone());
        now.sort();
        then.sort();
        now == then
    };
    if body != pr.body || title != pr.title || !same_labels {
        write_text(gh, &pr, &title, &body, &labels, deadline).await?;
    }
    if let Some(block) = run.finish(gh, pr.number, deadline).await? {
        let refused = auto_merge::with_block(&body, &block);
        gh.update_pull_text(pr.number, &title, &refused, &labels, deadline)
            .await?;
    }
    *report = Some(run.report());
    Ok(if head != pr.head_sha {
        Published::Updated {
            number: pr.number,
            url: pr.url,
            commit: head,
        }
    } else {
        Published::Unchanged {
            number: pr.number,
            url: pr.url,
        }
    })
}

/// The base as read merged into the pull request's branch at `head` (GitHub's merge, as Update
/// branch; with a token on a base requiring signatures, "Update branch" itself, whose merge
/// commit GitHub signs, and which merges the base branch as it is now): the new head, or, when a
/// person and the base changed the same file, what [`conflicted`] made of it.
async fn merge_base_into<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    pr: &PullRequest,
    head: &str,
    signing: &mut Signing,
    deadline: Instant,
) -> Result<std::result::Result<String, Published>> {
    let message = crate::rules::branch::merge_message(&snap.base_branch, &plan.branch);
    let merged = match signing.writer(gh, &snap.base_branch, deadline).await? {
        Writer::GitData => gh.merge_into(&plan.branch, &snap.base_sha, &message, deadline).await?,
        Writer::Signed => gh.update_pull_branch(pr.number, &plan.branch, head, deadline).await?,
    };
    match merged {
        Merge::Merged(sha) => Ok(Ok(sha)),
        // Someone brought it up to date meanwhile: start over from what is there now.
        Merge::UpToDate => Err(GithubError::Conflict {
            what: format!("updating branch {}", plan.branch),
            detail: "the branch moved while it was compared".into(),
        }),
        Merge::Conflict => Ok(Err(conflicted(gh, snap, plan, pr.clone(), deadline).await?)),
    }
}

/// The base cannot be merged into the branch: a person and the base changed the same file. The
/// branch is left as it is; its status says so, and one comment asks for "Update branch".
async fn conflicted<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    pr: PullRequest,
    deadline: Instant,
) -> Result<Published> {
    let description = format!(
        "conflicts with {}: resolve with Update branch, then cellbridge writes the new values",
        snap.base_branch
    );
    if gh.status(&pr.head_sha, plan::STATUS_CONTEXT, deadline).await? != Some((false, description.clone())) {
        gh.set_status(&pr.head_sha, false, plan::STATUS_CONTEXT, &description, deadline)
            .await?;
    }
    let mut body = clear_refusal(gh, &pr, &pr.head_sha, deadline)
        .await?
        .unwrap_or_else(|| pr.body.clone());
    if record::field(&pr.body, "conflict").is_none() {
        let text = format!(
            "This branch conflicts with `{}`, so cellbridge cannot bring it up to date with new Terraform values ({}). Please resolve the conflict (**Update branch**, or merge `{}` into `{}`); the next state event then writes the values.",
            snap.base_branch, plan.title, snap.base_branch, plan.branch
        );
        gh.comment(pr.number, &text, deadline).await?;
        body = record::with_field(&body, "conflict", Some("asked"));
    }
    if body != pr.body {
        write_text(gh, &pr, &plan.title, &body, &pr.labels, deadline).await?;
    }
    Ok(Published::Conflicted {
        number: pr.number,
        url: pr.url,
    })
}
