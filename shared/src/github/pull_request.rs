//! The cell's pull request: what to write so that it holds the plan, built on what GitHub has
//! (the pull request, its head, what it recorded), and when to close it instead.
//!
//! Ownership: cellbridge owns `clusters/<cell>/cell-metadata.yaml`. A new cell's first commit
//! also holds the files copied from the template; from then on they are the reviewers'. An
//! update is a commit on the pull request's current head that rewrites cellbridge's file only;
//! a base that moved on is merged in (GitHub's merge, as "Update branch"), never reset. Every
//! head gets the strict-substitution status, computed on that head's content. A pull request a
//! person closed stays closed while the values are the ones it proposed; a merged one is never
//! written to again.

use std::collections::BTreeMap;
use std::time::Instant;

use sha1::Digest as _;

use super::archive::{git_object_id, hex};
use super::auto_merge::{self, AutoMergeReport, OptInFile, Run};
use super::port::{Comparison, GithubRepo, Merge, PullRequest, PullState};
use super::report::CONTRACT_CONTEXT;
use super::{GithubError, Published, Result, Snapshot};
use crate::configmap;
use crate::fleet::{FileMode, FileWrite, FleetRead, Overlay};
use crate::plan::{self, Outcome, Plan};
use crate::record::{self, Kind, Record};

/// Labels cellbridge manages; any other label a human put on the pull request stays.
pub(super) const MANAGED_LABELS: [&str; 3] = [plan::LABEL_CELLBRIDGE, plan::LABEL_NEW_CELL, plan::LABEL_SCHEMA_CHANGE];

/// Converges the cell's pull request to `plan`, computed against `snap`: opens it, updates it in
/// place, leaves it alone when it already holds the plan, or closes it when the base branch
/// holds the plan.
pub async fn converge<G: GithubRepo>(gh: &G, snap: &Snapshot, plan: &Plan, deadline: Instant) -> Result<Published> {
    Ok(converge_reporting(gh, snap, plan, deadline).await?.published)
}

// auto-merge (issue 16)
/// What converging did, and what auto-merge decided and did for the pull request
/// ([`super::auto_merge`]; `None` when no open metadata pull request was left).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converged {
    pub published: Published,
    pub auto_merge: Option<AutoMergeReport>,
}

/// [`converge`], with auto-merge's report.
pub async fn converge_reporting<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    deadline: Instant,
) -> Result<Converged> {
    let mut report = None;
    let published = converge_inner(gh, snap, plan, &mut report, deadline).await?;
    Ok(Converged {
        published,
        auto_merge: report,
    })
}

async fn converge_inner<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    report: &mut Option<AutoMergeReport>,
    deadline: Instant,
) -> Result<Published> {
    let latest = gh.latest_pull(&plan.branch, deadline).await?;
    let open_pr = latest.as_ref().filter(|p| p.state == PullState::Open);
    if let Some(pr) = open_pr {
        if let Some((serial, lineage)) = plan::recorded_serial(&pr.body)
            && lineage == plan.lineage
            && serial > plan.serial
        {
            return Ok(Published::Stale {
                proposed_serial: serial,
                number: Some(pr.number),
                url: Some(pr.url.clone()),
            });
        }
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
    // The cell is back (a later apply wrote `cell_metadata` again): its decommission is
    // withdrawn, as cellbridge's own close, and the values take the branch.
    let (latest, withdrawn) = match latest {
        Some(pr) if pr.state == PullState::Open && Record::read(&pr.body).kind() == Kind::Decommission => {
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
            (Some(closed), true)
        }
        other => (other, false),
    };
    let open_pr = latest.as_ref().filter(|p| p.state == PullState::Open);
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
    if cmp.files.iter().any(|f| f.path != cm) {
        // People's work stays open for review, its head checked like any other; nothing of
        // cellbridge's is left to merge, so its auto-merge goes before the status.
        let base_cm = snap.fleet.read_text(&cm).ok().flatten().unwrap_or_default();
        let checked = checked_head(gh, snap, plan, &cmp, &base_cm, deadline).await?;
        let mut run = OptInFile::read(&snap.fleet).judge(&checked, Some(&pr.body));
        run.before_status(gh, pr.number, deadline).await?;
        post_status(gh, &pr.head_sha, &checked, false, deadline).await?;
        let cleared = clear_refusal(gh, pr, &pr.head_sha, deadline).await?;
        let body = auto_merge::with_block(cleared.as_deref().unwrap_or(&pr.body), &run.block());
        let body = with_marker_fields(&body, &run);
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

/// Writes the text of `pr`, read open: when GitHub's answer shows it merged or closed meanwhile
/// (a person merged it while this run computed), its text is put back as it was read, so that a
/// merged pull request keeps saying what it merged, and the run is redone on a fresh read.
pub(super) async fn write_text<G: GithubRepo>(
    gh: &G,
    pr: &PullRequest,
    title: &str,
    body: &str,
    labels: &[String],
    deadline: Instant,
) -> Result<()> {
    if gh.update_pull_text(pr.number, title, body, labels, deadline).await? {
        return Ok(());
    }
    gh.update_pull_text(pr.number, &pr.title, &pr.body, &pr.labels, deadline)
        .await?;
    Err(GithubError::Conflict {
        what: format!("pull request #{}", pr.number),
        detail: "it was merged or closed while this run wrote it; its text is as it was".into(),
    })
}

/// `body` as cellbridge closes it: `note` added, and the record saying the close is
/// cellbridge's own.
pub(super) fn closed_body(body: &str, note: Option<&str>) -> String {
    let note = note.map(|n| format!("\n\n{n}")).unwrap_or_default();
    record::with_field(&format!("{}{note}\n", body.trim_end()), record::CLOSED, Some("in-sync"))
}

async fn set_status<G: GithubRepo>(gh: &G, commit: &str, plan: &Plan, deadline: Instant) -> Result<()> {
    gh.set_status(
        commit,
        plan.status_ok(),
        plan::STATUS_CONTEXT,
        &plan.status_description(),
        deadline,
    )
    .await
}

/// The body cellbridge writes: the plan's, with what it was computed from and left behind.
fn body_for(plan: &Plan, digest: &str, base: &str, head: &str, previous: Option<&PullRequest>, am: &Run) -> String {
    let mut body = fit_body(&plan.body, plan.serial, &plan.lineage);
    // Why the head is or is not eligible for auto-merge (issue 16).
    body.push_str("\n\n");
    body.push_str(&am.block());
    if let Some(prev) = previous {
        let what = match prev.state {
            PullState::Merged => "merged",
            _ => "closed without merging",
        };
        body.push_str(&format!("\n\nFollows #{} ({what}).", prev.number));
    }
    format!(
        "{body}\n<!-- cellbridge:kind=metadata digest={digest} base={base} head={head} values={} key={}{} -->\n",
        values_digest(plan),
        record::value(&plan.source.key),
        am.marker_fields()
    )
}

// auto-merge (issue 16)
/// `body` with the marker fields of `am` (`optin=`, `automerge=`) as they are now.
fn with_marker_fields(body: &str, am: &Run) -> String {
    let fields = am.marker_fields();
    let mut out = record::with_field(body, "automerge", None);
    out = record::with_field(&out, "automerge-by", None);
    for field in fields.split_whitespace() {
        if let Some((k, v)) = field.split_once('=') {
            out = record::with_field(&out, k, Some(v));
        }
    }
    out
}

/// The pull request's labels: a person's kept, cellbridge's as the plan says.
fn labels_for(plan: &Plan, pr: &PullRequest) -> Vec<String> {
    let mut labels: Vec<String> = pr
        .labels
        .iter()
        .filter(|l| !MANAGED_LABELS.contains(&l.as_str()))
        .cloned()
        .collect();
    labels.extend(plan.labels.iter().cloned());
    labels
}

/// The head's content as it would merge: the base with every file the branch changed since
/// their merge base (`written` is cellbridge's file as it now stands on the branch). A file
/// whose blob is one cellbridge wrote is not read again, and keeps the mode cellbridge gave it
/// (a comparison names no mode: another changed file is taken as a regular one).
async fn head_content<G: GithubRepo>(
    gh: &G,
    plan: &Plan,
    cmp: &Comparison,
    written: (&str, &str),
    deadline: Instant,
) -> Result<Vec<(String, FileMode, Vec<u8>)>> {
    let mut files = Vec::new();
    for f in &cmp.files {
        if f.path == written.0 {
            continue;
        }
        if let Some(blob) = &f.blob {
            let known = plan
                .files
                .iter()
                .find(|p| p.path == f.path && blob_id(&p.new) == *blob)
                .map(|p| (p.mode, p.new.clone()));
            // Bytes as they are: a file that is not UTF-8 stays opaque, read (and then a finding
            // naming it) only if a layer reads it.
            let (mode, bytes) = match known {
                Some((mode, text)) => (mode, text.into_bytes()),
                None => (FileMode::Regular, gh.read_blob(blob, deadline).await?),
            };
            files.push((f.path.clone(), mode, bytes));
        }
    }
    files.push((written.0.to_owned(), FileMode::Regular, written.1.as_bytes().to_vec()));
    Ok(files)
}

/// A blob's id as git computes it: what GitHub's comparison names a file's content by.
fn blob_id(text: &str) -> String {
    hex(&git_object_id("blob", text.as_bytes()))
}

/// The plan as checked on `head`'s own content (`ours`: cellbridge's file as it stands there):
/// the check run on the base with every file the head changed, and those files as the plan's,
/// so that auto-merge's rules see what people pushed too (a removed file included).
async fn checked_head<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    cmp: &Comparison,
    ours: &str,
    deadline: Instant,
) -> Result<Plan> {
    let cm = configmap::path_for(&plan.cell);
    let content = head_content(gh, plan, cmp, (&cm, ours), deadline).await?;
    // What the head deleted is gone from what is checked: a deleted layer no longer fails the
    // check, a deleted variable source no longer passes it.
    let deleted = cmp
        .files
        .iter()
        .filter(|f| f.blob.is_none() && f.path != cm)
        .map(|f| f.path.clone());
    let view = Overlay::with_modes(&snap.fleet as &dyn FleetRead, content).without(deleted);
    let mut checked = plan.rechecked(&view);
    let mut files: Vec<plan::FileChange> = cmp
        .files
        .iter()
        .filter(|f| f.path != cm)
        .map(|f| plan::FileChange {
            path: f.path.clone(),
            old: None,
            new: String::new(),
            mode: FileMode::Regular,
        })
        .collect();
    if let Some(ours) = plan.files.iter().find(|f| f.path == cm) {
        files.push(ours.clone());
    }
    checked.files = files;
    Ok(checked)
}

/// The status of `head` as `checked` says, posted unless the newest one says the same
/// (`fresh`: a commit just made has none).
async fn post_status<G: GithubRepo>(gh: &G, head: &str, checked: &Plan, fresh: bool, deadline: Instant) -> Result<()> {
    let posted = if fresh {
        None
    } else {
        gh.status(head, plan::STATUS_CONTEXT, deadline).await?
    };
    if posted != Some((checked.status_ok(), checked.status_description())) {
        set_status(gh, head, checked, deadline).await?;
    }
    Ok(())
}

/// The open pull request, made to hold the plan: the base merged in when it moved on, one
/// commit rewriting cellbridge's file when it differs, then the status of whatever the head is,
/// and the body and labels describing it.
#[allow(clippy::too_many_arguments)]
async fn update<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    pr: PullRequest,
    digest: &str,
    report: &mut Option<AutoMergeReport>,
    deadline: Instant,
) -> Result<Published> {
    let opt_in = OptInFile::read(&snap.fleet);
    if recorded_digest(&pr.body).as_deref() == Some(digest)
        && record::field(&pr.body, "head").as_deref() == Some(pr.head_sha.as_str())
        && opt_in.unchanged_since(&pr.body, &plan.cell)
    {
        // As cellbridge left it. A run cut off between opening the pull request and labelling
        // it left the labels out; the status was set before the body, so it is there.
        let missing: Vec<String> = plan.labels.iter().filter(|l| !pr.labels.contains(l)).cloned().collect();
        if !missing.is_empty() {
            gh.add_labels(pr.number, &missing, deadline).await?;
        }
        // The head's verdict is the one the body records; an eligible head's auto-merge is
        // looked at again (a run cut off before enabling it, checks that passed since).
        let mut run = opt_in.recorded(plan, &pr.body);
        run.after_status(gh, pr.number, &pr.head_sha, &snap.base_branch, deadline)
            .await?;
        let cleared = clear_refusal(gh, &pr, &pr.head_sha, deadline).await?;
        let body = auto_merge::with_block(cleared.as_deref().unwrap_or(&pr.body), &run.block());
        let body = with_marker_fields(&body, &run);
        if body != pr.body {
            write_text(gh, &pr, &pr.title, &body, &labels_for(plan, &pr), deadline).await?;
        }
        if let Some(block) = run.finish(gh, pr.number, deadline).await? {
            let refused = auto_merge::with_block(&body, &block);
            gh.update_pull_text(pr.number, &pr.title, &refused, &labels_for(plan, &pr), deadline)
                .await?;
        }
        *report = Some(run.report());
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
    if !cmp.relation.contains_base() {
        let message = super::branch::merge_message(&snap.base_branch, &plan.branch);
        match gh.merge_into(&plan.branch, &snap.base_sha, &message, deadline).await? {
            Merge::Merged(sha) => head = sha,
            // Someone brought it up to date meanwhile: start over from what is there now.
            Merge::UpToDate => {
                return Err(GithubError::Conflict {
                    what: format!("updating branch {}", plan.branch),
                    detail: "the branch moved while it was compared".into(),
                });
            }
            Merge::Conflict => return conflicted(gh, snap, plan, pr, deadline).await,
        }
        cmp = gh.compare(&snap.base_sha, &head, deadline).await?;
    }
    // Whether the branch holds cellbridge's file as the plan has it: its blob id tells.
    let holds_ours = match cmp.files.iter().find(|f| f.path == cm) {
        Some(f) => f.blob.as_deref() == Some(blob_id(ours).as_str()),
        // The branch leaves the file as the base has it.
        None => snap.fleet.read_text(&cm).ok().flatten().as_deref() == Some(ours),
    };
    let wrote = !holds_ours;
    if wrote {
        let tree = gh
            .create_tree(
                &head,
                cmp.head_tree.as_deref(),
                &[FileWrite::regular(cm.clone(), ours)],
                &[],
                deadline,
            )
            .await?;
        let commit = gh
            .create_commit(&tree, std::slice::from_ref(&head), &message_for(plan, digest), deadline)
            .await?;
        gh.move_branch(&plan.branch, &head, &commit, deadline).await?;
        head = commit;
    }
    // The status goes before the body: once the body records this head, later runs take the
    // pull request as complete, so everything else must already be there. A head that is not
    // eligible loses cellbridge's auto-merge before its status could let GitHub merge it; an
    // eligible one gets it once its status is there.
    let checked = checked_head(gh, snap, plan, &cmp, ours, deadline).await?;
    let mut run = opt_in.judge(&checked, Some(&pr.body));
    run.before_status(gh, pr.number, deadline).await?;
    post_status(gh, &head, &checked, wrote, deadline).await?;
    run.after_status(gh, pr.number, &head, &snap.base_branch, deadline)
        .await?;
    // The body written below drops the refusal's marker.
    clear_refusal(gh, &pr, &head, deadline).await?;
    let body = body_for(plan, digest, &snap.base_sha, &head, None, &run);
    write_text(gh, &pr, &plan.title, &body, &labels_for(plan, &pr), deadline).await?;
    if let Some(block) = run.finish(gh, pr.number, deadline).await? {
        let refused = auto_merge::with_block(&body, &block);
        gh.update_pull_text(pr.number, &plan.title, &refused, &labels_for(plan, &pr), deadline)
            .await?;
    }
    *report = Some(run.report());
    Ok(if wrote || head != pr.head_sha {
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

/// A new pull request: its branch (recreated from the base when it was a closed or merged pull
/// request's, or the branch a cut-off run left), its status, the pull request, its labels.
async fn open<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    digest: &str,
    previous: Option<PullRequest>,
    report: &mut Option<AutoMergeReport>,
    deadline: Instant,
) -> Result<Published> {
    let branch = &plan.branch;
    if let Some(prev) = previous.as_ref().filter(|p| p.state == PullState::Merged) {
        // A merged pull request's branch: everything on it was merged, and its history is not
        // this pull request's (a squash or rebase merge leaves nothing a fast-forward can
        // follow). Only the old pull request's branch goes: one another run just recreated
        // stays. A closed one's branch is judged by whose commits it holds, below.
        gh.delete_branch_at(branch, &prev.head_sha, deadline).await?;
    }
    let message = message_for(plan, digest);
    let files: Vec<FileWrite> = plan.files.iter().map(plan::FileChange::write).collect();
    let tree = gh
        .create_tree(&snap.base_sha, snap.base_tree.as_deref(), &files, &[], deadline)
        .await?;
    let fresh = gh
        .create_commit(&tree, std::slice::from_ref(&snap.base_sha), &message, deadline)
        .await?;
    let commit = match claim_branch(gh, snap, branch, &fresh, deadline).await? {
        Claimed::Created => fresh,
        Claimed::OpenedMeanwhile => {
            return Err(GithubError::Conflict {
                what: format!("creating branch {branch}"),
                detail: "its pull request was opened meanwhile".into(),
            });
        }
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

    set_status(gh, &commit, plan, deadline).await?;
    // A new pull request's head is cellbridge's own commit: the plan's files are its files.
    let mut run = OptInFile::read(&snap.fleet).judge(plan, None);
    let body = body_for(plan, digest, &snap.base_sha, &commit, previous.as_ref(), &run);
    let (number, url) = gh
        .create_pull(branch, &snap.base_branch, &plan.title, &body, deadline)
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
pub(super) enum Claimed {
    /// The branch was created at the fresh commit.
    Created,
    /// It exists and a pull request is open on it now: another run opened it.
    OpenedMeanwhile,
    /// It exists with no open pull request, and every commit it has beyond the base is
    /// cellbridge's, or it is the head of a closed pull request that keeps them: its head and
    /// that commit's message.
    Held { head: String, message: String },
}

/// Creates `branch` at `fresh` (built on the base), or tells what holds it. A branch that holds
/// someone else's commit that no pull request shows is never built on, reset or deleted:
/// [`GithubError::Foreign`], final, naming the commit and what to do.
pub(super) async fn claim_branch<G: GithubRepo>(
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
    let owner = super::branch::owner(&cmp, &snap.base_branch, branch);
    match gh.latest_pull(branch, deadline).await? {
        Some(p) if p.state == PullState::Open => return Ok(Claimed::OpenedMeanwhile),
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
                && matches!(owner, super::branch::Owner::Someone(_))
                && !p.head_sha.is_empty() =>
        {
            let since = gh.compare(&p.head_sha, &head, deadline).await?;
            let after_close: std::collections::HashSet<&str> = since.commits.iter().map(|c| c.sha.as_str()).collect();
            let theirs_after_close = cmp
                .commits
                .iter()
                .filter(|c| !super::branch::nobodys_work(c, &snap.base_branch, branch))
                .any(|c| after_close.contains(c.sha.as_str()));
            if since.relation == super::port::Relation::Ahead
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
        super::branch::Owner::Cellbridge => Ok(Claimed::Held { head, message }),
        super::branch::Owner::Someone(c) => {
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
                commit: super::branch::describe(&c),
            })
        }
    }
}

/// `branch`, all cellbridge's and headed by `head`, recreated at `fresh`: deleted only while its
/// head is still `head` (a push since keeps it, and the creation below loses the race), then
/// created again.
pub(super) async fn recreate<G: GithubRepo>(
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

/// Whether a person closed `pr` without merging it while it proposed the values of
/// `values_digest` ([`values_digest_of`]): then those values were declined.
pub(super) fn declined(pr: &PullRequest, values_digest: &str) -> bool {
    let r = Record::read(&pr.body);
    pr.state == PullState::Closed && !r.closed_by_cellbridge() && r.get("values") == Some(values_digest)
}

/// The values the plan proposes, whatever the serial: what a person's close declined.
pub fn values_digest(plan: &Plan) -> String {
    values_digest_of(&plan.data)
}

/// [`values_digest`] of a cell's metadata map.
pub fn values_digest_of(data: &BTreeMap<String, String>) -> String {
    let mut h = sha1::Sha1::new();
    for (k, v) in data {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    hex(&h.finalize())
}

/// What the pull request must hold: its files, labels and check verdict. The serial and the
/// state version are left out on purpose: an apply that changes nothing in the map changes
/// nothing in Git.
pub fn plan_digest(plan: &Plan) -> String {
    let mut h = sha1::Sha1::new();
    for f in &plan.files {
        h.update(f.path.as_bytes());
        h.update([0]);
        h.update(f.new.as_bytes());
        h.update([0]);
        // Only a mode other than a plain file's counts, so digests of earlier releases hold.
        if !f.mode.is_regular() {
            h.update(f.mode.git_mode().as_bytes());
            h.update([0]);
        }
    }
    let mut labels = plan.labels.clone();
    labels.sort();
    h.update(labels.join(",").as_bytes());
    h.update(if plan.status_ok() { b"|ok" } else { b"|ko" });
    hex(&h.finalize())
}

/// A good state after a refused one: the head's `cellbridge/contract` status back to success.
/// Returns the body without the refusal's marker, to be written with the rest; `None` when
/// nothing was refused.
async fn clear_refusal<G: GithubRepo>(
    gh: &G,
    pr: &PullRequest,
    head: &str,
    deadline: Instant,
) -> Result<Option<String>> {
    if record::field(&pr.body, "refused").is_none() {
        return Ok(None);
    }
    gh.set_status(head, true, CONTRACT_CONTEXT, CONTRACT_KEPT, deadline)
        .await?;
    Ok(Some(record::with_field(&pr.body, "refused", None)))
}

/// The `cellbridge/contract` description once a state keeps the contract again.
pub const CONTRACT_KEPT: &str = "the latest Terraform state keeps the contract";

pub(super) fn recorded_digest(body: &str) -> Option<String> {
    record::field(body, "digest")
}

pub(super) fn recorded_base(body: &str) -> Option<String> {
    record::field(body, "base")
}

/// GitHub refuses a body over 65,536 characters; a long findings table is cut, keeping the
/// serial marker cellbridge reads back.
pub(super) fn fit_body(body: &str, serial: u64, lineage: &str) -> String {
    pub(super) const MAX: usize = 60_000;
    let body = body.trim_end();
    if body.chars().count() <= MAX {
        return body.to_owned();
    }
    let cut: String = body.chars().take(MAX).collect();
    let cut = cut.rsplit_once('\n').map_or(cut.as_str(), |(head, _)| head);
    format!(
        "{cut}\n\n… (cut to fit GitHub's limit; `cellbridge plan` prints the whole report)\n<!-- cellbridge:serial={serial} lineage={lineage} -->"
    )
}

pub(super) fn message_for(plan: &Plan, digest: &str) -> String {
    format!(
        "{}\n\nTerraform state {}\n\nCellbridge-Serial: {}\nCellbridge-Lineage: {}\nCellbridge-Digest: {digest}\n",
        plan.title, plan.source, plan.serial, plan.lineage
    )
}

pub(super) fn trailers(msg: &str) -> BTreeMap<String, String> {
    msg.lines()
        .filter_map(|l| l.split_once(": "))
        .filter(|(k, _)| k.starts_with("Cellbridge-"))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_trailers_read_back() {
        let body = "text\n<!-- cellbridge:serial=3 lineage=L -->\n<!-- cellbridge:digest=abc base=def -->\n";
        assert_eq!(recorded_digest(body).as_deref(), Some("abc"));
        assert_eq!(recorded_base(body).as_deref(), Some("def"));
        assert_eq!(recorded_digest("no marker"), None);
        let t = trailers("title\n\nCellbridge-Serial: 4\nCellbridge-Digest: ff\n");
        assert_eq!(t["Cellbridge-Serial"], "4");
    }

    #[test]
    fn long_bodies_are_cut_but_keep_the_serial() {
        let body = format!(
            "{}\n<!-- cellbridge:serial=7 lineage=L -->\n",
            "| row |\n".repeat(20_000)
        );
        let fitted = fit_body(&body, 7, "L");
        assert!(fitted.chars().count() < 65_536);
        assert_eq!(plan::recorded_serial(&fitted), Some((7, "L".into())));
        assert_eq!(fit_body("short", 1, "L"), "short");
    }
}
