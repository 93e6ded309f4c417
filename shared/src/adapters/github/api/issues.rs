//! Issues, and what GitHub serves through the issues endpoints for pull requests too: title,
//! body and labels in one write, labels added, comments.

use std::time::Instant;

use serde_json::{Value, json};

use crate::adapters::github::operations as ops;
use crate::adapters::github::transport::url_query;
use crate::ports::github::{CloseReason, Issue};
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

impl GithubFleet {
    pub(super) async fn open_issues(&self, label: &str, deadline: Instant) -> Result<Vec<Issue>> {
        let what = format!("listing the open issues labelled {label}");
        let mut issues = Vec::new();
        // A fleet may have many refused cells at once: every page, 100 at a time.
        for page in 1.. {
            let page = page.to_string();
            let q = url_query(&[
                ("state", "open"),
                ("labels", label),
                ("sort", "created"),
                ("direction", "asc"),
                ("per_page", "100"),
                ("page", &page),
            ]);
            let r = self
                .repo_call(
                    &what,
                    &ops::ISSUES_LIST_FOR_REPO,
                    &format!("/issues?{q}"),
                    None,
                    deadline,
                )
                .await?;
            let list = r.json(&what)?;
            let items = list.as_array().cloned().unwrap_or_default();
            let full = items.len() == 100;
            // "GitHub's REST API considers every pull request an issue": those carry a
            // `pull_request` key (https://docs.github.com/rest/issues/issues#list-repository-issues).
            issues.extend(
                items
                    .iter()
                    .filter(|i| i.get("pull_request").is_none())
                    .filter_map(|i| {
                        Some(Issue {
                            number: i["number"].as_u64()?,
                            url: i["html_url"].as_str().unwrap_or_default().to_owned(),
                            title: i["title"].as_str().unwrap_or_default().to_owned(),
                            body: i["body"].as_str().unwrap_or_default().to_owned(),
                            labels: label_names(i),
                        })
                    }),
            );
            if !full {
                break;
            }
        }
        Ok(issues)
    }

    pub(super) async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> Result<(u64, String)> {
        let what = format!("opening issue {title:?}");
        let r = self
            .repo_call(
                &what,
                &ops::ISSUES_CREATE,
                "/issues",
                Some(&json!({"title": title, "body": body, "labels": labels})),
                deadline,
            )
            .await?;
        let v = r.json(&what)?;
        let number = v["number"].as_u64().ok_or_else(|| GithubError::Protocol {
            what: what.clone(),
            detail: "no number".into(),
        })?;
        Ok((number, v["html_url"].as_str().unwrap_or_default().to_owned()))
    }

    pub(super) async fn close_issue(
        &self,
        number: u64,
        body: &str,
        reason: CloseReason,
        deadline: Instant,
    ) -> Result<()> {
        let what = format!("closing issue #{number} ({})", reason.state_reason());
        self.repo_call(
            &what,
            &ops::ISSUES_UPDATE,
            &format!("/issues/{number}"),
            Some(&json!({"state": "closed", "state_reason": reason.state_reason(), "body": body})),
            deadline,
        )
        .await?;
        Ok(())
    }

    pub(super) async fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> Result<bool> {
        let what = format!("updating pull request #{number}");
        // The issues endpoint sets title, body and labels in one request; its answer is the
        // issue as it now is, `state` included (a merged pull request is `closed`).
        let r = self
            .repo_call(
                &what,
                &ops::ISSUES_UPDATE,
                &format!("/issues/{number}"),
                Some(&json!({"title": title, "body": body, "labels": labels})),
                deadline,
            )
            .await?;
        Ok(r.json(&what)?["state"].as_str() != Some("closed"))
    }

    /// Adds labels to a pull request (GitHub keeps the ones it already has).
    pub(super) async fn add_labels(&self, number: u64, labels: &[String], deadline: Instant) -> Result<()> {
        let what = format!("labelling pull request #{number}");
        self.repo_call(
            &what,
            &ops::ISSUES_ADD_LABELS,
            &format!("/issues/{number}/labels"),
            Some(&json!({ "labels": labels })),
            deadline,
        )
        .await?;
        Ok(())
    }

    pub(super) async fn comment(&self, number: u64, body: &str, deadline: Instant) -> Result<()> {
        let what = format!("commenting on pull request #{number}");
        self.repo_call(
            &what,
            &ops::ISSUES_CREATE_COMMENT,
            &format!("/issues/{number}/comments"),
            Some(&json!({ "body": body })),
            deadline,
        )
        .await?;
        Ok(())
    }
}

/// The names of an issue's or a pull request's labels.
pub(super) fn label_names(item: &Value) -> Vec<String> {
    item["labels"]
        .as_array()
        .map(|ls| {
            ls.iter()
                .filter_map(|l| l["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
