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
use tracing::Instrument as _;

use super::archive::{git_object_id, hex};
use super::auto_merge::{self, AutoMergeReport, OptInFile, Run};
use super::port::{Comparison, GithubRepo, Merge, PullRequest, PullState};
use super::report::CONTRACT_CONTEXT;
use super::{GithubError, Published, Result, Snapshot};
use crate::configmap;
use crate::fleet::{FileMode, FileWrite, FleetRead, Overlay};
use crate::plan::{self, Outcome, Plan};
use crate::record::{self, Record};

/// Labels cellbridge manages; any other label a human put on the pull request stays.
pub(super) const MANAGED_LABELS: [&str; 3] = [plan::LABEL_CELLBRIDGE, plan::LABEL_NEW_CELL, plan::LABEL_SCHEMA_CHANGE];

/// What converging did, and what auto-merge decided and did for the pull request
/// ([`super::auto_merge`]; `None` when no open metadata pull request was left).
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
        let mut run = OptInFile::read(&snap.fleet).judge(&checked, Some(&pr.body));
        run.before_status(gh, pr.number, deadline).await?;
        post_status(gh, &pr.head_sha, &checked, false, deadline).await?;
        let cleared = clear_refusal(gh, pr, &pr.head_sha, deadline).await?;
        let body = auto_merge::with_run_block(cleared.as_deref().unwrap_or(&pr.body), &run);
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
/// merged pull request keeps saying what it said when it was merged, and the run is redone on a
/// fresh read.
pub(super) async fn write_text<G: GithubRepo>(
    gh: &G,
    pr: &PullRequest,
    title: &str,
    body: &str,
    labels: &[String],
    deadline: Instant,
) -> Result<()> {
    // A head that moved since the text was written (a person's push, or another run of
    // cellbridge between its commit and its text) may have a writer in flight: the text is read
    // again, and written only if it is still the one read, so that what is put back below is the
    // text the pull request had (GitHub has no conditional write for it; the window left is
    // this read to the write).
    if record::field(&pr.body, "head").as_deref() != Some(pr.head_sha.as_str()) {
        let now = gh.latest_pull(&pr.branch, deadline).await?;
        if now
            .as_ref()
            .is_none_or(|p| p.number != pr.number || p.title != pr.title || p.body != pr.body)
        {
            return Err(GithubError::Conflict {
                what: format!("pull request #{}", pr.number),
                detail: "its text changed since it was read".into(),
            });
        }
    }
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
    // Why the head is or is not eligible for auto-merge.
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

// auto-merge
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

/// What a head changed since its merge base with the base: every file it added or changed,
/// by blob id, and every file it removed. The comparison tells when it lists every file; past
/// the 300 files GitHub lists, the two commits' whole trees do (`git/trees?recursive=1`; a
/// `truncated` answer is a failure, never a shorter list), so that nothing the head holds
/// escapes its status or auto-merge.
pub(super) struct HeadChanges {
    changed: BTreeMap<String, String>,
    removed: Vec<String>,
    /// Taken from a comparison's list (which names a gitlink like a file), not from the trees.
    listed: bool,
    merge_base: String,
    head: String,
}

impl HeadChanges {
    pub(super) async fn of<G: GithubRepo>(gh: &G, cmp: &Comparison, head: &str, deadline: Instant) -> Result<Self> {
        if !cmp.lists_every_file() {
            return Self::from_trees(gh, &cmp.merge_base, head, deadline).await;
        }
        let mut changed = BTreeMap::new();
        let mut removed = Vec::new();
        for f in &cmp.files {
            match &f.blob {
                Some(blob) => {
                    changed.insert(f.path.clone(), blob.clone());
                }
                None => removed.push(f.path.clone()),
            }
        }
        Ok(Self {
            changed,
            removed,
            listed: true,
            merge_base: cmp.merge_base.clone(),
            head: head.to_owned(),
        })
    }

    /// From the whole trees of `merge_base` and `head` (gitlinks are no files there).
    async fn from_trees<G: GithubRepo>(gh: &G, merge_base: &str, head: &str, deadline: Instant) -> Result<Self> {
        let at_head = gh.tree_files(head, deadline).await?.files;
        let at_base = gh.tree_files(merge_base, deadline).await?.files;
        let removed = at_base.keys().filter(|p| !at_head.contains_key(*p)).cloned().collect();
        let changed = at_head
            .into_iter()
            .filter(|(path, blob)| at_base.get(path) != Some(blob))
            .collect();
        Ok(Self {
            changed,
            removed,
            listed: false,
            merge_base: merge_base.to_owned(),
            head: head.to_owned(),
        })
    }

    /// Whether the head holds `text` at `path`, the base's file at `path` being `base`.
    fn holds(&self, path: &str, text: &str, base: Option<&str>) -> bool {
        match self.changed.get(path) {
            Some(blob) => *blob == blob_id(text),
            None if self.removed.iter().any(|p| p == path) => false,
            None => base == Some(text),
        }
    }

    /// Every path the head added, changed or removed.
    fn paths(&self) -> impl Iterator<Item = &str> {
        self.changed
            .keys()
            .map(String::as_str)
            .chain(self.removed.iter().map(String::as_str))
    }
}

/// The head's content as it would merge: the base with every file the branch changed since
/// their merge base (`written` is cellbridge's file as it now stands on the branch). A file
/// whose blob is one cellbridge wrote is not read again, and keeps the mode cellbridge gave it
/// (a comparison names no mode: another changed file is taken as a regular one).
async fn head_content<G: GithubRepo>(
    gh: &G,
    plan: &Plan,
    changes: &HeadChanges,
    written: (&str, &str),
    deadline: Instant,
) -> Result<Vec<(String, FileMode, Vec<u8>)>> {
    let mut files = Vec::new();
    for (path, blob) in &changes.changed {
        if *path == written.0 {
            continue;
        }
        let known = plan
            .files
            .iter()
            .find(|p| p.path == *path && blob_id(&p.new) == *blob)
            .map(|p| (p.mode, p.new.clone()));
        // Bytes as they are: a file that is not UTF-8 stays opaque, read (and then a finding
        // naming it) only if a layer reads it.
        let (mode, bytes) = match known {
            Some((mode, text)) => (mode, text.into_bytes()),
            None => (FileMode::Regular, gh.read_blob(blob, deadline).await?),
        };
        files.push((path.clone(), mode, bytes));
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
    changes: &HeadChanges,
    ours: &str,
    deadline: Instant,
) -> Result<Plan> {
    let cm = configmap::path_for(&plan.cell);
    let from_trees;
    let (content, changes) = match head_content(gh, plan, changes, (&cm, ours), deadline).await {
        // A path the comparison lists whose blob the repository does not have is a gitlink (a
        // submodule's commit, which a comparison lists like a file): the two trees, which tell
        // gitlinks apart, are read instead, and the submodule is no file of the head.
        Err(GithubError::Access { status: 404, .. }) if changes.listed => {
            from_trees = HeadChanges::from_trees(gh, &changes.merge_base, &changes.head, deadline).await?;
            (
                head_content(gh, plan, &from_trees, (&cm, ours), deadline).await?,
                &from_trees,
            )
        }
        other => (other?, changes),
    };
    // What the head deleted is gone from what is checked: a deleted layer no longer fails the
    // check, a deleted variable source no longer passes it.
    let deleted = changes.removed.iter().filter(|p| **p != cm).cloned();
    let view = Overlay::with_modes(&snap.fleet as &dyn FleetRead, content).without(deleted);
    let mut checked = plan.rechecked(&view);
    let mut files: Vec<plan::FileChange> = changes
        .paths()
        .filter(|p| *p != cm)
        .map(|p| plan::FileChange {
            path: p.to_owned(),
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

/// The open pull request, made to hold the plan: the base merged in when it moved on and the
/// values must be written, one commit rewriting cellbridge's file when it differs, then the
/// status of whatever the head is, and the body and labels describing it.
///
/// A cell auto-merge covers (or covered when the pull request was last written) has its head
/// judged again on every run, from the head itself: whether GitHub may merge it is never read
/// back from the body. Any other pull request left as cellbridge wrote it costs no more reads.
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
        *report = Some(opt_in.judge(plan, Some(&pr.body)).report());
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
    if wrote && !cmp.relation.contains_base() {
        // The values are written on the base as it is: it is merged in first (as Update branch).
        match merge_base_into(gh, snap, plan, &pr, deadline).await? {
            Ok(merged) => head = merged,
            Err(conflict) => return Ok(conflict),
        }
        cmp = gh.compare(&snap.base_sha, &head, deadline).await?;
        changes = HeadChanges::of(gh, &cmp, &head, deadline).await?;
    }
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
    let checked = checked_head(gh, snap, plan, &changes, ours, deadline).await?;
    let mut run = opt_in.judge(&checked, Some(&pr.body));
    run.before_status(gh, pr.number, deadline).await?;
    post_status(gh, &head, &checked, wrote, deadline).await?;
    run.after_status(gh, pr.number, &head, &snap.base_branch, deadline)
        .await?;
    if run.behind() {
        // Branch protection requires the head to be up to date with the base, and GitHub's
        // auto-merge never updates a branch: brought up to date as Update branch does, the
        // merge's content being what was just checked (the head's changes on the base read).
        match merge_base_into(gh, snap, plan, &pr, deadline).await? {
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

/// The base as read merged into the pull request's branch (GitHub's merge, as Update branch):
/// the new head, or, when a person and the base changed the same file, what
/// [`conflicted`] made of it.
async fn merge_base_into<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    pr: &PullRequest,
    deadline: Instant,
) -> Result<std::result::Result<String, Published>> {
    let message = super::branch::merge_message(&snap.base_branch, &plan.branch);
    match gh.merge_into(&plan.branch, &snap.base_sha, &message, deadline).await? {
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
