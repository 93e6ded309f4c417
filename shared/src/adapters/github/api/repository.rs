//! The repository and the App installation: "Get a repository" (the base branch, the node id),
//! the installation's permissions, and the commit statuses cellbridge posts.

use std::time::Instant;

use serde_json::{Value, json};

use crate::adapters::github::operations as ops;
use crate::adapters::github::permissions;
use crate::adapters::github::transport::url_query;
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

impl GithubFleet {
    pub(crate) async fn base_branch(&self, deadline: Instant) -> Result<String> {
        self.base_branch
            .get_or_try_init(|| self.repository_field("default_branch", deadline))
            .await
            .cloned()
    }

    /// The repository's GraphQL node id, which `updateRefs` takes: its REST answer's `node_id`,
    /// read once per client (the base branch's lookup keeps it too).
    pub(super) async fn repository_id(&self, deadline: Instant) -> Result<String> {
        self.repository_id
            .get_or_try_init(|| self.repository_field("node_id", deadline))
            .await
            .cloned()
    }

    /// One field of "Get a repository"; the node id is kept for [`Self::repository_id`] whatever
    /// field was asked for.
    async fn repository_field(&self, field: &str, deadline: Instant) -> Result<String> {
        let what = format!("reading repository {}", self.repo_name());
        let r = self.repo_call(&what, &ops::REPOS_GET, "", None, deadline).await?;
        let v = r.json(&what)?;
        if let Some(id) = v.get("node_id").and_then(Value::as_str) {
            let _ = self.repository_id.set(id.to_owned());
        }
        v.get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| GithubError::Protocol {
                what,
                detail: format!("no {field}"),
            })
    }

    pub(super) async fn check_write_access(&self, deadline: Instant) -> Result<()> {
        let Some(id) = self.installation(deadline).await? else {
            // A token's permissions cannot be read: a 403 names the one missing.
            return Ok(());
        };
        if *self.access_checked.lock().unwrap_or_else(|e| e.into_inner()) == Some(id) {
            return Ok(());
        }
        // "Get an installation for the authenticated app"
        // (https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app):
        // the permissions the installation was granted, read with the App's JWT.
        let what = format!("reading the permissions of GitHub App installation {id}");
        let path = format!("/app/installations/{id}");
        let r = self
            .send(
                &what,
                ops::APPS_GET_INSTALLATION.method.clone(),
                &path,
                None,
                None,
                deadline,
            )
            .await?;
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        let granted = r.json(&what)?["permissions"].clone();
        let missing = permissions::missing(&granted);
        if !missing.is_empty() {
            let mut listed: Vec<String> = granted
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                        .collect()
                })
                .unwrap_or_default();
            listed.sort();
            return Err(GithubError::MissingPermissions {
                installation: id,
                missing,
                granted: if listed.is_empty() {
                    "none".into()
                } else {
                    listed.join(", ")
                },
            });
        }
        *self.access_checked.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
        Ok(())
    }

    pub(super) async fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> Result<()> {
        let what = format!("setting status {context} on {commit}");
        let state = if success { "success" } else { "failure" };
        let body = json!({"state": state, "context": context, "description": description});
        self.repo_call(
            &what,
            &ops::REPOS_CREATE_COMMIT_STATUS,
            &format!("/statuses/{commit}"),
            Some(&body),
            deadline,
        )
        .await?;
        Ok(())
    }

    pub(super) async fn status(
        &self,
        commit: &str,
        context: &str,
        deadline: Instant,
    ) -> Result<Option<(bool, String)>> {
        let what = format!("reading the statuses of {commit}");
        let q = url_query(&[("per_page", "100")]);
        let r = self
            .repo_call(
                &what,
                &ops::REPOS_LIST_COMMIT_STATUSES_FOR_REF,
                &format!("/commits/{commit}/statuses?{q}"),
                None,
                deadline,
            )
            .await?;
        // Newest first, as GitHub lists them.
        Ok(r.json(&what)?.as_array().and_then(|list| {
            list.iter().find(|s| s["context"].as_str() == Some(context)).map(|s| {
                (
                    s["state"].as_str() == Some("success"),
                    s["description"].as_str().unwrap_or_default().to_owned(),
                )
            })
        }))
    }
}
