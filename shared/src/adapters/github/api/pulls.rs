//! Pull requests: the newest of a branch, opening, closing, and (`open.rs`) the open ones the
//! dashboard lists.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;

use super::issues::label_names;
use crate::adapters::github::answers;
use crate::adapters::github::operations as ops;
use crate::adapters::github::transport::url_query;
use crate::ports::github::{PullRequest, PullState};
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

impl GithubFleet {
    pub(super) async fn latest_pull(&self, branch: &str, deadline: Instant) -> Result<Option<PullRequest>> {
        let what = format!("listing the pull requests of {branch}");
        let q: String = url_query(&[
            ("state", "all"),
            ("head", &format!("{}:{branch}", self.owner)),
            ("sort", "created"),
            ("direction", "desc"),
            ("per_page", "1"),
        ]);
        let r = self
            .repo_call(&what, &ops::PULLS_LIST, &format!("/pulls?{q}"), None, deadline)
            .await?;
        let list = r.json(&what)?;
        let Some(pr) = list.as_array().and_then(|a| a.first()) else {
            return Ok(None);
        };
        let state = match (pr["state"].as_str(), pr["merged_at"].is_string()) {
            (_, true) => PullState::Merged,
            (Some("open"), _) => PullState::Open,
            _ => PullState::Closed,
        };
        Ok(Some(PullRequest {
            number: pr["number"].as_u64().ok_or_else(|| GithubError::Protocol {
                what: what.clone(),
                detail: "pull request without number".into(),
            })?,
            url: pr["html_url"].as_str().unwrap_or_default().to_owned(),
            branch: branch.to_owned(),
            title: pr["title"].as_str().unwrap_or_default().to_owned(),
            state,
            head_sha: pr["head"]["sha"].as_str().unwrap_or_default().to_owned(),
            labels: label_names(pr),
            body: pr["body"].as_str().unwrap_or_default().to_owned(),
            node_id: pr["node_id"].as_str().map(str::to_owned),
        }))
    }

    pub(super) async fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        deadline: Instant,
    ) -> Result<(u64, String)> {
        let what = format!("opening the pull request for {head}");
        let r = self
            .repo_send(
                &what,
                &ops::PULLS_CREATE,
                "/pulls",
                Some(
                    &json!({"title": title, "head": head, "base": base, "body": body, "maintainer_can_modify": false}),
                ),
                deadline,
            )
            .await?;
        if let Some(lost) = answers::lost_opening(&what, r.status.as_u16(), &r.message()) {
            return Err(lost);
        }
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        let pr = r.json(&what)?;
        let number = pr["number"].as_u64().ok_or_else(|| GithubError::Protocol {
            what: what.clone(),
            detail: "no number".into(),
        })?;
        Ok((number, pr["html_url"].as_str().unwrap_or_default().to_owned()))
    }

    pub(super) async fn close_pull(&self, number: u64, body: &str, deadline: Instant) -> Result<()> {
        let what = format!("closing pull request #{number}");
        self.repo_call(
            &what,
            &ops::PULLS_UPDATE,
            &format!("/pulls/{number}"),
            Some(&json!({"state": "closed", "body": body})),
            deadline,
        )
        .await?;
        Ok(())
    }
}

impl GithubFleet {
    pub(super) async fn newest_pulls(
        &self,
        branches: &[String],
        deadline: Instant,
    ) -> Result<BTreeMap<String, PullRequest>> {
        let mut found = BTreeMap::new();
        for chunk in branches.chunks(ops::NEWEST_PULLS_PER_QUERY) {
            let what = format!(
                "reading the newest pull requests of {} branches ({}...)",
                chunk.len(),
                chunk[0]
            );
            let mut variables = json!({"owner": self.owner, "name": self.repo});
            for (i, b) in chunk.iter().enumerate() {
                variables[format!("b{i}")] = json!(b);
            }
            let document = ops::newest_pulls_document(chunk.len());
            let answer = self
                .graphql_document(&what, &ops::GRAPHQL_NEWEST_PULLS, &document, variables, deadline)
                .await?;
            // One refused alias (a field the token may not read) refuses the read: a row shown
            // as "nothing declined" for a branch that was not read would be wrong.
            if let Some(e) = answer.errors.first() {
                return Err(e.as_error(&what));
            }
            for (i, branch) in chunk.iter().enumerate() {
                let nodes = answer.data["repository"][format!("b{i}")]["nodes"]
                    .as_array()
                    .ok_or_else(|| GithubError::Protocol {
                        what: what.clone(),
                        detail: format!("no pull requests answered for {branch}"),
                    })?;
                let ours = nodes.iter().find(|pr| {
                    pr["isCrossRepository"] == json!(false) && pr["headRefName"].as_str() == Some(branch.as_str())
                });
                if let Some(pr) = ours {
                    found.insert(branch.clone(), super::cells::pull_of(pr, branch, &what)?);
                    continue;
                }
                // Five forks' pull requests of the same head name newer than the cell's own would
                // hide it (a declined cell shown as nothing declined): read on past them.
                let page = &answer.data["repository"][format!("b{i}")]["pageInfo"];
                if page["hasNextPage"] == true
                    && let Some(pr) = self.own_pull_after(branch, &page["endCursor"], &what, deadline).await?
                {
                    found.insert(branch.clone(), pr);
                }
            }
        }
        Ok(found)
    }
}
