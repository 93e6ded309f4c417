//! The text cellbridge writes on a pull request and reads back: its body with the marker that
//! records what it was computed from, its labels, the digests of what it proposes, the commit
//! message's trailers, and the write that never leaves a merged pull request saying something
//! else.

use std::collections::BTreeMap;
use std::time::Instant;

use sha1::Digest as _;

use crate::ports::github::{GithubError, Result};
use crate::ports::github::{GithubRepo, PullRequest, PullState};
use crate::pure::fleet::object_id::hex;
use crate::pure::plan::{self, Plan};
use crate::pure::record::{self, Record};
use crate::rules::automerge::Run;
use crate::rules::report::CONTRACT_CONTEXT;

/// Labels cellbridge manages; any other label a human put on the pull request stays.
pub(super) const MANAGED_LABELS: [&str; 3] = [plan::LABEL_CELLBRIDGE, plan::LABEL_NEW_CELL, plan::LABEL_SCHEMA_CHANGE];

/// Writes the text of `pr`, read open: when GitHub's answer shows it merged or closed meanwhile
/// (a person merged it while this run computed), its text is put back as it was read, so that a
/// merged pull request keeps saying what it said when it was merged, and the run is redone on a
/// fresh read.
pub(crate) async fn write_text<G: GithubRepo>(
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
pub(crate) fn closed_body(body: &str, note: Option<&str>) -> String {
    let note = note.map(|n| format!("\n\n{n}")).unwrap_or_default();
    record::with_field(&format!("{}{note}\n", body.trim_end()), record::CLOSED, Some("in-sync"))
}

/// The body cellbridge writes: the plan's, with what it was computed from and left behind.
pub(super) fn body_for(
    plan: &Plan,
    digest: &str,
    base: &str,
    head: &str,
    previous: Option<&PullRequest>,
    am: &Run,
) -> String {
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
pub(super) fn with_marker_fields(body: &str, am: &Run) -> String {
    let fields = am.marker_fields();
    let mut out = record::with_field(body, "automerge", None);
    out = record::with_field(&out, "automerge-by", None);
    out = record::with_field(&out, "queued", None);
    out = record::with_field(&out, crate::rules::automerge::WAIT_FIELD, None);
    for field in fields.split_whitespace() {
        if let Some((k, v)) = field.split_once('=') {
            out = record::with_field(&out, k, Some(v));
        }
    }
    out
}

/// The pull request's labels: a person's kept, cellbridge's as the plan says.
pub(super) fn labels_for(plan: &Plan, pr: &PullRequest) -> Vec<String> {
    let mut labels: Vec<String> = pr
        .labels
        .iter()
        .filter(|l| !MANAGED_LABELS.contains(&l.as_str()))
        .cloned()
        .collect();
    labels.extend(plan.labels.iter().cloned());
    labels
}

/// Whether a person closed `pr` without merging it while it proposed the values of
/// `values_digest` ([`values_digest_of`]): then those values were declined.
pub(crate) fn declined(pr: &PullRequest, values_digest: &str) -> bool {
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
pub(super) async fn clear_refusal<G: GithubRepo>(
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

pub(crate) fn recorded_digest(body: &str) -> Option<String> {
    record::field(body, "digest")
}

pub(crate) fn recorded_base(body: &str) -> Option<String> {
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

pub(crate) fn message_for(plan: &Plan, digest: &str) -> String {
    format!(
        "{}\n\nTerraform state {}\n\nCellbridge-Serial: {}\nCellbridge-Lineage: {}\nCellbridge-Digest: {digest}\n",
        plan.title, plan.source, plan.serial, plan.lineage
    )
}

pub(crate) fn trailers(msg: &str) -> BTreeMap<String, String> {
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
        assert!(fitted.chars().count() < crate::pure::status::BODY_LIMIT);
        assert_eq!(plan::recorded_serial(&fitted), Some((7, "L".into())));
        assert_eq!(fit_body("short", 1, "L"), "short");
    }
}
