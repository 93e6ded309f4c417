//! The repository and the App installation: "Get a repository" (the base branch, the node id),
//! the installation's token and permissions, and the commit statuses cellbridge posts.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use serde_json::{Value, json};

use crate::adapters::github::app::{self, App, Minted};
use crate::adapters::github::operations as ops;
use crate::adapters::github::permissions;
use crate::adapters::github::transport::url_query;
use crate::pure::redact::Secret;
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

    /// A GitHub App installation's permissions, before the first write: those of the token
    /// cellbridge minted, narrowed to exactly what it writes with. GitHub refuses such a token
    /// outright when the installation lacks a permission or the repository
    /// ([`Self::installation_token`]), so nothing is written then; the check of the 201's
    /// `permissions` stays for a GitHub that grants less than asked.
    pub(super) async fn check_write_access(&self, deadline: Instant) -> Result<()> {
        let Some(app) = self.installation(deadline).await? else {
            // A token's permissions cannot be read: a 403 names the one missing.
            return Ok(());
        };
        let granted = self.installation_token(app.clone(), deadline).await?.permissions;
        let missing = permissions::missing(&granted);
        if missing.is_empty() {
            return Ok(());
        }
        Err(GithubError::MissingPermissions {
            installation: app.installation_id,
            missing,
            granted: listed(&granted),
        })
    }

    /// The App installation's token for the fleet repository, minted when there is none or it is
    /// about to expire ("Create an installation access token for an app",
    /// <https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app>):
    /// `repositories` the fleet repository alone, `permissions` exactly cellbridge's. GitHub's
    /// 422 for permissions the installation lacks is [`GithubError::MissingPermissions`], naming
    /// them from the installation's own ("Get an installation for the authenticated app",
    /// <https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app>);
    /// its 422 for a repository it cannot see is [`GithubError::NotInstalled`]. Boxed: the
    /// transport asks for it, and it sends through the transport.
    pub(crate) fn installation_token(
        &self,
        app: Arc<App>,
        deadline: Instant,
    ) -> Pin<Box<dyn Future<Output = Result<Minted>> + Send + '_>> {
        Box::pin(async move {
            if let Some(m) = app.cached(SystemTime::now()) {
                return Ok(m);
            }
            let _one = app.minting.lock().await;
            if let Some(m) = app.cached(SystemTime::now()) {
                return Ok(m);
            }
            let id = app.installation_id;
            let what = format!(
                "creating a token of GitHub App installation {id} for {}",
                self.repo_name()
            );
            let r = loop {
                let checks = !app.no_checks.load(std::sync::atomic::Ordering::Relaxed);
                let r = self
                    .send(
                        &what,
                        ops::APPS_CREATE_INSTALLATION_ACCESS_TOKEN.method.clone(),
                        &format!("/app/installations/{id}/access_tokens"),
                        Some(&app::token_request(&self.repo, checks)),
                        None,
                        deadline,
                    )
                    .await?;
                if r.status.as_u16() != 422 || !app::permissions_refused(&r.message()) {
                    break r;
                }
                match self.missing_permissions(id, &what, r.message(), deadline).await? {
                    // Only the check runs' permission is missing: asked for again without it.
                    None if checks => {
                        tracing::warn!(scope = "fleet", installation = id, repository = %self.repo_name(), "the GitHub App installation does not grant checks=read: the merge state is read without check runs (cellbridge never merges a pull request itself; GitHub's auto-merge still waits for the required checks)");
                        app.no_checks.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    None => break r,
                    Some(e) => return Err(e),
                }
            };
            if r.status.as_u16() == 422 {
                let message = r.message();
                if app::repository_refused(&message) {
                    return Err(GithubError::NotInstalled {
                        installation: id,
                        repository: self.repo_name(),
                        message,
                    });
                }
            }
            if !r.status.is_success() {
                return Err(r.api_error(&what));
            }
            let v = r.json(&what)?;
            let protocol = |detail: &str| GithubError::Protocol {
                what: what.clone(),
                detail: detail.to_owned(),
            };
            let token = v["token"].as_str().ok_or_else(|| protocol("no token"))?;
            let expires_at = v["expires_at"]
                .as_str()
                .and_then(app::parse_time)
                .ok_or_else(|| protocol("no expires_at"))?;
            let minted = Minted {
                token: Secret::new(token.to_owned()),
                expires_at,
                permissions: v["permissions"].clone(),
            };
            if permissions::reads_checks(&minted.permissions) {
                tracing::info!(installation = id, repository = %self.repo_name(), "the GitHub App installation grants checks=read: the merge state reads the head's check runs");
            }
            app.store(minted.clone());
            Ok(minted)
        })
    }

    /// What the installation lacks of cellbridge's permissions, read with the App's JWT, after
    /// GitHub refused a token asking for them; `None` when it lacks only
    /// [`permissions::CHECKS`], which cellbridge does without.
    async fn missing_permissions(
        &self,
        id: u64,
        minting: &str,
        refusal: String,
        deadline: Instant,
    ) -> Result<Option<GithubError>> {
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
        if missing.is_empty() && !permissions::reads_checks(&granted) {
            return Ok(None);
        }
        if missing.is_empty() {
            // The installation grants them all, yet GitHub refused: what it said, as it said it.
            return Ok(Some(GithubError::Api {
                what: minting.to_owned(),
                status: 422,
                message: format!("{refusal} (the installation grants {})", listed(&granted)),
            }));
        }
        Ok(Some(GithubError::MissingPermissions {
            installation: id,
            missing,
            granted: listed(&granted),
        }))
    }

    pub(super) async fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> Result<()> {
        let state = if success { "success" } else { "failure" };
        self.post_status(commit, state, context, description, deadline).await
    }

    /// "Create a commit status": `state` one of `error`, `failure`, `pending`, `success`.
    pub(super) async fn post_status(
        &self,
        commit: &str,
        state: &str,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> Result<()> {
        let what = format!("setting status {context} on {commit}");
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

/// Permissions as `name=level`, sorted; `none` for none.
fn listed(granted: &Value) -> String {
    let mut listed: Vec<String> = granted
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    listed.sort();
    if listed.is_empty() {
        "none".into()
    } else {
        listed.join(", ")
    }
}
