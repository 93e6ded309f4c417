//! A refused state, or a final failure to publish one, told where the cell's team works: on the
//! cell's open pull request (a failing `cellbridge/contract` status on its head and one comment
//! per reason), else in one issue labelled `cellbridge-refused`, updated in place and closed by
//! the next state that syncs. The reason names the key and what is wrong, never a value: it is
//! the error text, which never holds one (the contract's errors name keys only).
//!
//! Failures of GitHub access itself (credentials refused, a permission missing, the App not
//! installed) are not reported here: GitHub refuses cellbridge, so only the metric and its alarm
//! can reach anyone ([`crate::ports::github::GithubError::is_access`]).

use std::time::Instant;

use sha1::Digest as _;

use crate::ports::github::Result;
use crate::ports::github::{CloseReason, GithubRepo, Issue, PullRequest, PullState};
use crate::pure::fleet::object_id::hex;
use crate::pure::plan;
use crate::pure::plan::STATUS_DESCRIPTION_MAX;

/// The commit status that says whether the cell's latest state kept the contract.
pub const CONTRACT_CONTEXT: &str = "cellbridge/contract";
/// The label of the issue that reports a cell's refused state when no pull request is open.
pub const LABEL_REFUSED: &str = "cellbridge-refused";

/// What was refused, and why.
#[derive(Debug, Clone)]
pub struct Refusal<'a> {
    pub cell: &'a str,
    /// Where the state came from (`s3://bucket/key`, with its version when known).
    pub source: &'a str,
    /// The error, which names the key and the reason, never a value.
    pub reason: &'a str,
}

impl Refusal<'_> {
    /// Tells one reason from another in the markers, so that a repeated event writes nothing.
    fn digest(&self) -> String {
        let mut h = sha1::Sha1::new();
        h.update(self.reason.as_bytes());
        hex(&h.finalize())[..12].to_owned()
    }
}

/// Where a refusal was reported.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "on", rename_all = "kebab-case")]
pub enum Reported {
    /// The cell's open pull request: its head's `cellbridge/contract` status (and the comment,
    /// once per reason).
    PullRequest { number: u64, url: String },
    /// The cell's `cellbridge-refused` issue (`created` when this report opened it).
    Issue { number: u64, url: String, created: bool },
}

/// The open `cellbridge-refused` issues of the repository, listed at most once per invocation
/// (whatever the number of cells it reports or resolves) and kept as this invocation changes
/// them. Another invocation's issue opened since is not seen: the duplicate it makes is closed
/// by the next report of that cell (one issue per cell, found by its marker).
#[derive(Debug, Default)]
pub struct RefusedIssues(tokio::sync::Mutex<Option<Vec<Issue>>>);

impl RefusedIssues {
    /// The cell's open issues, oldest first.
    async fn of_cell<G: GithubRepo>(&self, gh: &G, cell: &str, deadline: Instant) -> Result<Vec<Issue>> {
        let mut listed = self.0.lock().await;
        if listed.is_none() {
            *listed = Some(gh.open_issues(LABEL_REFUSED, deadline).await?);
        }
        let mark = issue_marker(cell);
        Ok(listed
            .iter()
            .flatten()
            .filter(|i| i.body.contains(&mark))
            .cloned()
            .collect())
    }

    /// The open issues as a cell's reading gave them, unless this invocation listed them
    /// already (its own writes since are in that list, and GitHub's listing may not show them
    /// yet).
    pub async fn seed(&self, issues: Vec<Issue>) {
        let mut listed = self.0.lock().await;
        if listed.is_none() {
            *listed = Some(issues);
        }
    }

    /// What this invocation did to an issue: opened (`Some`, new), rewritten (`Some`), closed
    /// (`None`).
    async fn wrote(&self, number: u64, now: Option<Issue>) {
        if let Some(listed) = self.0.lock().await.as_mut() {
            listed.retain(|i| i.number != number);
            listed.extend(now);
            listed.sort_by_key(|i| i.number);
        }
    }
}

/// Reports `refusal` on the cell's open pull request, else in its `cellbridge-refused` issue
/// (found in `issues`). Only what is missing is written: a replayed event writes nothing.
pub async fn report<G: GithubRepo>(
    gh: &G,
    refusal: &Refusal<'_>,
    issues: &RefusedIssues,
    deadline: Instant,
) -> Result<Reported> {
    let branch = plan::branch_for(refusal.cell);
    match gh.latest_pull(&branch, deadline).await? {
        Some(pr) if pr.state == PullState::Open => on_pull_request(gh, refusal, pr, deadline).await,
        _ => in_issue(gh, refusal, issues, deadline).await,
    }
}

async fn on_pull_request<G: GithubRepo>(
    gh: &G,
    refusal: &Refusal<'_>,
    pr: PullRequest,
    deadline: Instant,
) -> Result<Reported> {
    let description = status_description(refusal.reason);
    if gh.status(&pr.head_sha, CONTRACT_CONTEXT, deadline).await? != Some((false, description.clone())) {
        gh.set_status(&pr.head_sha, false, CONTRACT_CONTEXT, &description, deadline)
            .await?;
    }
    let digest = refusal.digest();
    if crate::pure::record::field(&pr.body, "refused").as_deref() != Some(digest.as_str()) {
        let text = format!(
            "cellbridge refused the Terraform state of cell `{}` ({}) and wrote nothing:\n\n> {}\n\nThis pull request keeps the values it had. `{CONTRACT_CONTEXT}` fails until a state that keeps the contract arrives; that state updates this pull request and sets the status back to success.",
            refusal.cell,
            refusal.source,
            refusal.reason.replace('\n', "\n> ")
        );
        gh.comment(pr.number, &text, deadline).await?;
        // Recorded after the comment: a run cut off in between comments again, rather than never.
        let body = crate::pure::record::with_field(&pr.body, "refused", Some(&digest));
        super::pull_request::write_text(gh, &pr, &pr.title, &body, &pr.labels, deadline).await?;
    }
    Ok(Reported::PullRequest {
        number: pr.number,
        url: pr.url,
    })
}

fn issue_marker(cell: &str) -> String {
    format!("<!-- cellbridge:refused-cell={cell} -->")
}

fn issue_title(cell: &str) -> String {
    format!("cellbridge: the Terraform state of cell {cell} was refused")
}

fn issue_body(refusal: &Refusal<'_>) -> String {
    format!(
        "cellbridge refused the Terraform state of cell `{}` and wrote nothing to the fleet repo.\n\n- state: `{}`\n- reason:\n\n> {}\n\nNo pull request is open for this cell, so it is reported here. The next state of this cell that keeps the contract closes this issue; `cellbridge plan --state FILE --fleet DIR` shows the same check locally.\n\n{}\n<!-- cellbridge:reason={} -->\n",
        refusal.cell,
        refusal.source,
        refusal.reason.replace('\n', "\n> "),
        issue_marker(refusal.cell),
        refusal.digest()
    )
}

async fn in_issue<G: GithubRepo>(
    gh: &G,
    refusal: &Refusal<'_>,
    listed: &RefusedIssues,
    deadline: Instant,
) -> Result<Reported> {
    let body = issue_body(refusal);
    let mut issues = listed.of_cell(gh, refusal.cell, deadline).await?.into_iter();
    let Some(first) = issues.next() else {
        let labels = [LABEL_REFUSED.to_owned()];
        let title = issue_title(refusal.cell);
        let (number, url) = gh.create_issue(&title, &body, &labels, deadline).await?;
        let issue = Issue {
            number,
            url: url.clone(),
            title,
            body: body.clone(),
            labels: labels.to_vec(),
        };
        listed.wrote(number, Some(issue)).await;
        return Ok(Reported::Issue {
            number,
            url,
            created: true,
        });
    };
    // Two runs racing may each have opened one: the oldest stays, the others are closed.
    for dup in issues {
        let note = format!("{}\n\nDuplicate of #{}.", dup.body.trim_end(), first.number);
        gh.close_issue(dup.number, &note, CloseReason::Duplicate, deadline)
            .await?;
        listed.wrote(dup.number, None).await;
    }
    if crate::pure::record::field(&first.body, "reason").as_deref() != Some(refusal.digest().as_str()) {
        gh.update_pull_text(first.number, &issue_title(refusal.cell), &body, &first.labels, deadline)
            .await?;
        let rewritten = Issue {
            body: body.clone(),
            ..first.clone()
        };
        listed.wrote(first.number, Some(rewritten)).await;
    }
    Ok(Reported::Issue {
        number: first.number,
        url: first.url,
        created: false,
    })
}

/// The cell's state synced: its `cellbridge-refused` issues, if any, are closed. Returns the
/// issues closed.
pub async fn resolve_issue<G: GithubRepo>(
    gh: &G,
    cell: &str,
    source: &str,
    listed: &RefusedIssues,
    deadline: Instant,
) -> Result<Vec<u64>> {
    let mut closed = Vec::new();
    for issue in listed.of_cell(gh, cell, deadline).await? {
        let body = format!(
            "{}\n\nResolved: the state `{source}` kept the contract and synced.",
            issue.body.trim_end()
        );
        gh.close_issue(issue.number, &body, CloseReason::Completed, deadline)
            .await?;
        listed.wrote(issue.number, None).await;
        closed.push(issue.number);
    }
    Ok(closed)
}

/// A status description within GitHub's limit, cut on a character boundary.
fn status_description(reason: &str) -> String {
    // The state object is in the comment and the issue; GitHub's few characters go to the reason.
    let reason = match reason.strip_prefix("s3://") {
        Some(rest) => rest.split_once(": ").map_or(reason, |(_, r)| r),
        None => reason,
    };
    let one_line = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = format!("refused: {one_line}");
    if text.chars().count() <= STATUS_DESCRIPTION_MAX {
        return text;
    }
    let cut: String = text.chars().take(STATUS_DESCRIPTION_MAX - 1).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_fit_github_s_limit() {
        let long = "cell_metadata.x: ".repeat(40);
        let d = status_description(&long);
        assert_eq!(d.chars().count(), STATUS_DESCRIPTION_MAX);
        assert!(d.starts_with("refused: cell_metadata.x:"));
        assert_eq!(status_description("a\n  b"), "refused: a b");
        assert_eq!(
            status_description("s3://b/cells/c/terraform.tfstate (version v1): cell_metadata.x: missing"),
            "refused: cell_metadata.x: missing"
        );
    }

    #[test]
    fn an_issue_body_reads_back_its_reason_and_cell() {
        let r = Refusal {
            cell: "prod-eu-west-1",
            source: "s3://b/k",
            reason: "cell_metadata.token: looks like a secret",
        };
        let body = issue_body(&r);
        assert_eq!(crate::pure::record::field(&body, "reason"), Some(r.digest()));
        assert!(body.contains(&issue_marker("prod-eu-west-1")));
        assert!(
            !body.contains(&issue_marker("prod-eu")),
            "a cell's marker is not a prefix of another's"
        );
    }
}
