//! The cell's pull request: what to write so that it holds the plan, built on what GitHub has
//! (the open pull request, its recorded digest and base), and when to close it instead.

use std::collections::BTreeMap;
use std::time::Instant;

use sha1::Digest as _;

use super::archive::hex;
use super::port::{GithubRepo, OpenPull};
use super::{GithubError, Published, Result, Snapshot};
use crate::plan::{self, Outcome, Plan};

/// Labels cellbridge manages; any other label a human put on the pull request stays.
pub(super) const MANAGED_LABELS: [&str; 3] = [plan::LABEL_CELLBRIDGE, plan::LABEL_NEW_CELL, plan::LABEL_SCHEMA_CHANGE];

/// Converges the cell's pull request to `plan`, computed against `snap`: opens it, updates it in
/// place, leaves it alone when it already holds the plan, or closes it when the base branch
/// holds the plan.
pub async fn converge<G: GithubRepo>(gh: &G, snap: &Snapshot, plan: &Plan, deadline: Instant) -> Result<Published> {
    let existing = gh.open_pull(&plan.branch, deadline).await?;
    if let Some(pr) = &existing
        && let Some((serial, lineage)) = plan::recorded_serial(&pr.body)
        && lineage == plan.lineage
        && serial > plan.serial
    {
        return Ok(Published::Stale {
            proposed_serial: serial,
            number: Some(pr.number),
            url: Some(pr.url.clone()),
        });
    }
    match plan.outcome {
        Outcome::Stale => Ok(Published::Stale {
            proposed_serial: plan.base_serial.unwrap_or_default(),
            number: existing.as_ref().map(|p| p.number),
            url: existing.map(|p| p.url),
        }),
        Outcome::InSync => match existing {
            Some(pr) => {
                gh.close_pull(pr.number, deadline).await?;
                gh.delete_branch(&plan.branch, deadline).await?;
                Ok(Published::Closed {
                    number: pr.number,
                    url: pr.url,
                })
            }
            None => Ok(Published::InSync),
        },
        Outcome::Change => {
            let digest = plan_digest(plan);
            if let Some(pr) = &existing
                && recorded_digest(&pr.body).as_deref() == Some(digest.as_str())
            {
                // A run cut off between opening the pull request and labelling it left the
                // labels out; the status was set before the body, so it is there.
                let missing: Vec<String> = plan.labels.iter().filter(|l| !pr.labels.contains(l)).cloned().collect();
                if !missing.is_empty() {
                    gh.add_labels(pr.number, &missing, deadline).await?;
                }
                return Ok(Published::Unchanged {
                    number: pr.number,
                    url: pr.url.clone(),
                });
            }
            match existing {
                Some(pr) => update(gh, snap, plan, pr, &digest, deadline).await,
                None => open(gh, snap, plan, &digest, deadline).await,
            }
        }
    }
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

/// The commit message, the body (with the digest and base recorded) and the tree that hold
/// the plan on top of `snap`.
async fn content<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    digest: &str,
    deadline: Instant,
) -> Result<(String, String, String)> {
    let message = commit_message(plan, digest);
    let body = format!(
        "{}\n<!-- cellbridge:digest={digest} base={} -->\n",
        fit_body(&plan.body, plan.serial, &plan.lineage),
        snap.base_sha
    );
    let files: Vec<(String, String)> = plan.files.iter().map(|f| (f.path.clone(), f.new.clone())).collect();
    let tree = gh.create_tree(snap, &files, deadline).await?;
    Ok((message, body, tree))
}

/// The open pull request, made to hold the plan: one commit on its branch, then its status,
/// title, body and labels.
async fn update<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    pr: OpenPull,
    digest: &str,
    deadline: Instant,
) -> Result<Published> {
    let (message, body, tree) = content(gh, snap, plan, digest, deadline).await?;
    // Merging the fresh base in keeps the pull request's diff exactly the plan's files,
    // and keeps the branch moving forward so the update can be compare-and-swap.
    let parents = if recorded_base(&pr.body).as_deref() == Some(snap.base_sha.as_str()) {
        vec![pr.head_sha.clone()]
    } else {
        vec![pr.head_sha.clone(), snap.base_sha.clone()]
    };
    let commit = gh.create_commit(&tree, &parents, &message, deadline).await?;
    gh.move_branch(&plan.branch, &commit, deadline).await?;
    let mut labels: Vec<String> = pr
        .labels
        .iter()
        .filter(|l| !MANAGED_LABELS.contains(&l.as_str()))
        .cloned()
        .collect();
    labels.extend(plan.labels.iter().cloned());
    // The status goes first: once the body carries the new digest, later runs take the
    // pull request as complete, so everything else must already be there.
    set_status(gh, &commit, plan, deadline).await?;
    gh.update_pull_text(pr.number, &plan.title, &body, &labels, deadline)
        .await?;
    Ok(Published::Updated {
        number: pr.number,
        url: pr.url,
        commit,
    })
}

/// A new pull request: its branch (or the branch a cut-off run left), its status, the pull
/// request itself, its labels.
async fn open<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    digest: &str,
    deadline: Instant,
) -> Result<Published> {
    let branch = &plan.branch;
    let (message, body, tree) = content(gh, snap, plan, digest, deadline).await?;
    let fresh = gh
        .create_commit(&tree, std::slice::from_ref(&snap.base_sha), &message, deadline)
        .await?;
    let commit = if gh.create_branch(branch, &fresh, deadline).await? {
        fresh
    } else {
        // The branch exists without an open pull request: a sync running right now, or one
        // that stopped between the branch and the pull request, or a closed pull request's.
        match gh.branch_head(branch, deadline).await? {
            None => {
                return Err(GithubError::Conflict {
                    what: format!("creating branch {branch}"),
                    detail: "the branch vanished".into(),
                });
            }
            Some((head, msg)) => {
                let t = trailers(&msg);
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
                if t.get("Cellbridge-Digest").map(String::as_str) == Some(digest) {
                    head
                } else {
                    let merged = gh
                        .create_commit(&tree, &[head, snap.base_sha.clone()], &message, deadline)
                        .await?;
                    gh.move_branch(branch, &merged, deadline).await?;
                    merged
                }
            }
        }
    };

    set_status(gh, &commit, plan, deadline).await?;
    let (number, url) = gh
        .create_pull(branch, &snap.base_branch, &plan.title, &body, deadline)
        .await?;
    gh.add_labels(number, &plan.labels, deadline).await?;
    Ok(Published::Opened { number, url, commit })
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
    }
    let mut labels = plan.labels.clone();
    labels.sort();
    h.update(labels.join(",").as_bytes());
    h.update(if plan.status_ok() { b"|ok" } else { b"|ko" });
    hex(&h.finalize())
}

pub(super) fn marker(body: &str, field: &str) -> Option<String> {
    let start = body.rfind("<!-- cellbridge:digest=")?;
    let line = &body[start..];
    let line = &line[..line.find("-->")?];
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{field}=")).map(str::to_owned))
        .filter(|s| !s.is_empty())
}

pub(super) fn recorded_digest(body: &str) -> Option<String> {
    marker(body, "cellbridge:digest")
}

pub(super) fn recorded_base(body: &str) -> Option<String> {
    marker(body, "base")
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

pub(super) fn commit_message(plan: &Plan, digest: &str) -> String {
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
