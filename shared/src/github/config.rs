//! The fleet repo on GitHub as both functions configure it: which repository, which branch,
//! which API, and the credentials in Secrets Manager, read when GitHub is first needed and read
//! again when GitHub refuses them (rotated while the execution environment kept the old ones).

use std::sync::Arc;
use std::time::Instant;

use crate::config::{self, ConfigError};
use crate::error::Classify;
use crate::plan::Plan;
use crate::secrets;

use super::{Credentials, FleetRepo, GithubError, GithubFleet, Published, Snapshot};

/// github.com's API; GitHub Enterprise Server's is `https://HOST/api/v3`.
pub const DEFAULT_GITHUB_API_URL: &str = "https://api.github.com";

/// `CELLBRIDGE_FLEET_REPO`, `CELLBRIDGE_BASE_BRANCH`, `CELLBRIDGE_GITHUB_SECRET` and
/// `GITHUB_API_URL`, checked; no client yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubConfig {
    pub owner: String,
    pub repo: String,
    /// Unset: the repository's default branch, asked of GitHub once per process.
    pub base_branch: Option<String>,
    /// Name or ARN of the Secrets Manager secret with the credentials (App or token).
    pub secret: String,
    pub api_url: String,
}

impl GithubConfig {
    /// Reads and checks every variable; the error names the variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        let repo_var = config::required("CELLBRIDGE_FLEET_REPO", "set it to the fleet repository, owner/name")?;
        let (owner, repo) = config::repo("CELLBRIDGE_FLEET_REPO", &repo_var)?;
        let secret = config::required(
            "CELLBRIDGE_GITHUB_SECRET",
            "set it to the name or ARN of the Secrets Manager secret with the GitHub credentials",
        )?;
        let api_url = config::optional("GITHUB_API_URL").unwrap_or_else(|| DEFAULT_GITHUB_API_URL.to_owned());
        Self::checked(owner, repo, config::optional("CELLBRIDGE_BASE_BRANCH"), secret, api_url)
    }

    /// The same checks on values given directly (tests, embedders), naming the variable each
    /// value stands for.
    pub fn checked(
        owner: String,
        repo: String,
        base_branch: Option<String>,
        secret: String,
        api_url: String,
    ) -> Result<Self, ConfigError> {
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            return Err(ConfigError::Invalid {
                name: "GITHUB_API_URL",
                value: api_url,
                reason: "expected an http(s) URL".into(),
            });
        }
        if let Some(b) = &base_branch
            && (b.contains("..") || b.starts_with('/') || b.contains(' '))
        {
            return Err(ConfigError::Invalid {
                name: "CELLBRIDGE_BASE_BRANCH",
                value: b.clone(),
                reason: "not a branch name".into(),
            });
        }
        Ok(Self {
            owner,
            repo,
            base_branch,
            secret,
            api_url,
        })
    }
}

/// The fleet repo with credentials from Secrets Manager: the secret is read when a request first
/// needs GitHub (not at cold start) and the client kept for the life of the process; when GitHub
/// answers 401, the secret is read again and the request tried once more.
pub struct LazyGithub {
    config: GithubConfig,
    secrets: aws_sdk_secretsmanager::Client,
    fleet: tokio::sync::Mutex<Option<Arc<GithubFleet>>>,
}

impl LazyGithub {
    pub fn new(config: GithubConfig, secrets: aws_sdk_secretsmanager::Client) -> Self {
        Self {
            config,
            secrets,
            fleet: tokio::sync::Mutex::new(None),
        }
    }

    pub async fn get(&self, deadline: Instant) -> Result<Arc<GithubFleet>, GithubError> {
        let mut slot = self.fleet.lock().await;
        if let Some(f) = slot.as_ref() {
            return Ok(f.clone());
        }
        let c = &self.config;
        let setup = |reason: String| GithubError::Setup {
            api_url: c.api_url.clone(),
            reason,
        };
        // Secrets Manager has its own retries; the deadline bounds them so the record goes
        // back to SQS as a retryable failure instead of the function being killed.
        let left = deadline.saturating_duration_since(Instant::now());
        let secret = tokio::time::timeout(left, secrets::fetch_json(&self.secrets, &c.secret))
            .await
            .map_err(|_| GithubError::Transient {
                what: "reading its credentials".into(),
                detail: "Secrets Manager did not answer before the function's deadline".into(),
            })?
            .map_err(|e| {
                if e.retryable() {
                    GithubError::Transient {
                        what: "reading its credentials".into(),
                        detail: e.to_string(),
                    }
                } else {
                    setup(e.to_string())
                }
            })?;
        let creds: Credentials = secrets::github_credentials(&secret).map_err(|e| setup(e.to_string()))?;
        let fleet = Arc::new(GithubFleet::new(
            &c.api_url,
            &c.owner,
            &c.repo,
            c.base_branch.clone(),
            &creds,
        )?);
        *slot = Some(fleet.clone());
        Ok(fleet)
    }

    /// Drops the client, so the next use reads the secret again.
    async fn forget(&self) {
        *self.fleet.lock().await = None;
    }
}

fn bad_credentials<T>(r: &Result<T, GithubError>) -> bool {
    matches!(r, Err(GithubError::Api { status: 401, .. }))
}

// Credentials GitHub refuses were probably rotated in Secrets Manager while this process kept
// the old ones: read the secret again and try once more.
impl FleetRepo for LazyGithub {
    async fn snapshot(&self, deadline: Instant) -> Result<Snapshot, GithubError> {
        let r = self.get(deadline).await?.snapshot(deadline).await;
        if !bad_credentials(&r) {
            return r;
        }
        tracing::warn!("GitHub refused the credentials; reading the secret again");
        self.forget().await;
        self.get(deadline).await?.snapshot(deadline).await
    }

    async fn publish(&self, snapshot: &Snapshot, plan: &Plan, deadline: Instant) -> Result<Published, GithubError> {
        let r = self.get(deadline).await?.publish(snapshot, plan, deadline).await;
        if !bad_credentials(&r) {
            return r;
        }
        tracing::warn!("GitHub refused the credentials; reading the secret again");
        self.forget().await;
        self.get(deadline).await?.publish(snapshot, plan, deadline).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(branch: Option<&str>, url: &str) -> Result<GithubConfig, ConfigError> {
        GithubConfig::checked(
            "acme".into(),
            "fleet".into(),
            branch.map(str::to_owned),
            "s".into(),
            url.into(),
        )
    }

    #[test]
    fn bad_values_name_their_variable() {
        assert!(cfg(Some("main"), "https://github.example/api/v3").is_ok());
        let e = cfg(None, "ftp://github.example").unwrap_err().to_string();
        assert!(e.starts_with("GITHUB_API_URL="), "{e}");
        let e = cfg(Some("../main"), DEFAULT_GITHUB_API_URL).unwrap_err().to_string();
        assert!(e.starts_with("CELLBRIDGE_BASE_BRANCH="), "{e}");
    }
}
