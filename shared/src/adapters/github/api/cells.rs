//! What a cell's proposal reads before its first write, over GraphQL in one request: the
//! branch's newest pull request, the open issues carrying a label, the base commit's tree, and
//! whether the base branch requires signed commits.

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{Value, json};

use crate::adapters::github::operations as ops;
use crate::ports::github::{CellReading, Issue, PullRequest, PullState};
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

impl GithubFleet {
    pub(super) async fn cell_reading(
        &self,
        branch: &str,
        label: &str,
        base: &str,
        base_sha: &str,
        deadline: Instant,
    ) -> Result<CellReading> {
        let what =
            format!("reading the pull requests of {branch}, the issues labelled {label} and the tree of {base_sha}");
        let variables = json!({"owner": self.owner, "name": self.repo, "head": branch, "labels": [label],
            "base": base_sha, "baseRef": format!("refs/heads/{base}")});
        let short = ops::cell_reading_without_rules();
        let answer = if self.reading_without_rules.load(Ordering::Relaxed) {
            self.graphql_document(&what, &ops::GRAPHQL_CELL_READING, &short, variables, deadline)
                .await?
        } else {
            let answer = self
                .graphql(&what, &ops::GRAPHQL_CELL_READING, variables.clone(), deadline)
                .await?;
            if answer.errors.iter().any(ops::lacks_ref_rules) {
                // A GitHub without `Ref.rules` refuses the whole document for it, for good: every
                // cell's reading would fail. Without it, the reading tells required signatures
                // only by classic protection, and the separate detection asks the rest.
                self.reading_without_rules.store(true, Ordering::Relaxed);
                self.graphql_document(&what, &ops::GRAPHQL_CELL_READING, &short, variables, deadline)
                    .await?
            } else {
                answer
            }
        };
        if let Some(e) = answer.errors.first() {
            return Err(e.as_error(&what));
        }
        let repo = &answer.data["repository"];
        let pulls = &repo["pullRequests"];
        let mut latest = self.own_pull(pulls, branch, &what)?;
        // Forks' pull requests newer than the cell's own may fill the first page: the next, until
        // one is this repository's or there are no more (none at all in the ordinary case).
        if latest.is_none() && pulls["pageInfo"]["hasNextPage"] == true {
            latest = self
                .own_pull_after(branch, &pulls["pageInfo"]["endCursor"], &what, deadline)
                .await?;
        }
        let mut labelled = issues_of(&repo["issues"]);
        let mut page = repo["issues"]["pageInfo"].clone();
        // A fleet may have many refused cells at once: every page, 100 at a time.
        while page["hasNextPage"] == true {
            let more = self
                .graphql(
                    &what,
                    &ops::GRAPHQL_LABELLED_ISSUES,
                    json!({"owner": self.owner, "name": self.repo, "labels": [label], "after": page["endCursor"]}),
                    deadline,
                )
                .await?;
            if let Some(e) = more.errors.first() {
                return Err(e.as_error(&what));
            }
            let issues = &more.data["repository"]["issues"];
            labelled.extend(issues_of(issues));
            page = issues["pageInfo"].clone();
        }
        self.note_signatures(base, &repo["ref"]);
        // `object(expression:)` is null for a commit GitHub does not have.
        let base_tree = repo["object"]["tree"]["oid"]
            .as_str()
            .ok_or_else(|| GithubError::Protocol {
                what: what.clone(),
                detail: format!("no commit {base_sha} in the repository"),
            })?
            .to_owned();
        Ok(CellReading {
            latest,
            labelled,
            base_tree,
        })
    }
}

impl GithubFleet {
    /// This repository's pull request among a `pullRequests(headRefName:)` page's nodes:
    /// `headRefName` also matches a fork's branch of that name, and only this repository's head
    /// is the cell's (REST's `head=owner:branch` said so itself).
    fn own_pull(&self, pulls: &Value, branch: &str, what: &str) -> Result<Option<PullRequest>> {
        let own = format!("{}/{}", self.owner, self.repo);
        pulls["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| {
                p["headRepository"]["nameWithOwner"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(&own))
            })
            .map(|p| pull_of(p, branch, what))
            .transpose()
    }

    /// `branch`'s newest pull request of this repository's after `cursor` (`branchPulls`, a
    /// page of ten a request), read on while the pages hold only forks' and have more.
    pub(super) async fn own_pull_after(
        &self,
        branch: &str,
        cursor: &Value,
        what: &str,
        deadline: Instant,
    ) -> Result<Option<PullRequest>> {
        let mut cursor = cursor.clone();
        loop {
            let more = self
                .graphql(
                    what,
                    &ops::GRAPHQL_BRANCH_PULLS,
                    json!({"owner": self.owner, "name": self.repo, "head": branch, "after": cursor}),
                    deadline,
                )
                .await?;
            if let Some(e) = more.errors.first() {
                return Err(e.as_error(what));
            }
            let pulls = &more.data["repository"]["pullRequests"];
            let latest = self.own_pull(pulls, branch, what)?;
            if latest.is_some() || pulls["pageInfo"]["hasNextPage"] != true {
                return Ok(latest);
            }
            cursor = pulls["pageInfo"]["endCursor"].clone();
        }
    }

    /// Whether `base` requires signed commits, as the reading's `ref` tells it (a ruleset's
    /// `REQUIRED_SIGNATURES` rule, classic protection's `requiresSignatures`: what
    /// `requires_signatures` asks over two requests otherwise), kept as its answer. Not kept when
    /// the reading cannot tell: no such branch, or more rules than the page held, or no `rules`
    /// read at all (a GitHub without the field) unless classic protection already requires them.
    fn note_signatures(&self, base: &str, reference: &Value) {
        if reference.is_object() && reference.get("rules").is_none() {
            if reference["refUpdateRule"]["requiresSignatures"] == true {
                self.keep_signatures(base, true);
            }
            return;
        }
        let rules = &reference["rules"];
        let Some(nodes) = rules["nodes"].as_array() else { return };
        let by_ruleset = nodes.iter().any(|r| r["type"] == "REQUIRED_SIGNATURES");
        if !by_ruleset && rules["pageInfo"]["hasNextPage"] == true {
            return;
        }
        let required = by_ruleset || reference["refUpdateRule"]["requiresSignatures"] == true;
        self.keep_signatures(base, required);
    }
}

/// A pull request as GraphQL's `PullRequest` gives it (`PullRequestState`: `OPEN`, `CLOSED`,
/// `MERGED`): the reading's, `branchPulls`' and `newestPulls`'.
pub(super) fn pull_of(p: &Value, branch: &str, what: &str) -> Result<PullRequest> {
    let state = match p["state"].as_str() {
        Some("OPEN") => PullState::Open,
        Some("MERGED") => PullState::Merged,
        _ => PullState::Closed,
    };
    Ok(PullRequest {
        number: p["number"].as_u64().ok_or_else(|| GithubError::Protocol {
            what: what.to_owned(),
            detail: "pull request without number".into(),
        })?,
        branch: branch.to_owned(),
        url: p["url"].as_str().unwrap_or_default().to_owned(),
        title: p["title"].as_str().unwrap_or_default().to_owned(),
        state,
        head_sha: p["headRefOid"].as_str().unwrap_or_default().to_owned(),
        labels: names(&p["labels"]),
        body: p["body"].as_str().unwrap_or_default().to_owned(),
        node_id: p["id"].as_str().map(str::to_owned),
    })
}

fn issues_of(connection: &Value) -> Vec<Issue> {
    connection["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            Some(Issue {
                number: i["number"].as_u64()?,
                url: i["url"].as_str().unwrap_or_default().to_owned(),
                title: i["title"].as_str().unwrap_or_default().to_owned(),
                body: i["body"].as_str().unwrap_or_default().to_owned(),
                labels: names(&i["labels"]),
            })
        })
        .collect()
}

/// The names of a `labels(first:)` connection.
pub(super) fn names(labels: &Value) -> Vec<String> {
    labels["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["name"].as_str().map(str::to_owned))
        .collect()
}
