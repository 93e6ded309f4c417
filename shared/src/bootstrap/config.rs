//! The bootstrap's configuration, from the environment (the same names as state-sync for the
//! fleet repo and GitHub, plus Flux's Git URL and credentials secret).

use std::time::Duration;

use super::apply::Tuning;
use crate::config::{ConfigError, optional};

/// Settings of one deployment; read once at cold start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `CELLBRIDGE_FLUX_GIT_URL`: the URL Flux syncs from. Unset: the URL in the template's
    /// `gotk-sync.yaml`.
    pub flux_git_url: Option<String>,
    /// `CELLBRIDGE_BASE_BRANCH`: the branch Flux follows (default `main`).
    pub flux_git_branch: String,
    /// `CELLBRIDGE_FLUX_GIT_SECRET`: Secrets Manager name or ARN of Flux's Git credentials.
    pub flux_git_secret: Option<String>,
    /// `CELLBRIDGE_CLUSTER_WAIT_SECS`: how long one invocation waits for a CREATING cluster
    /// before handing the event back (default 600).
    pub cluster_wait: Duration,
    /// `CELLBRIDGE_CLUSTER_POLL_SECS`: DescribeCluster interval while waiting (default 20).
    pub cluster_poll: Duration,
    /// `CELLBRIDGE_ACCESS_PRINCIPAL_ARN`: the function role's full ARN (with its path) for the
    /// access entry. Unset: derived from STS GetCallerIdentity (path-less).
    pub access_principal_arn: Option<String>,
    pub tuning: Tuning,
}

fn secs(name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
    match optional(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s < 86_400.0)
            .map(Duration::from_secs_f64)
            .ok_or(ConfigError::Invalid {
                name,
                value: v,
                reason: "expected a number of seconds".into(),
            }),
    }
}

impl Settings {
    pub fn from_env() -> Result<Settings, ConfigError> {
        let d = Tuning::default();
        let tuning = Tuning {
            request_timeout: secs("CELLBRIDGE_KUBE_TIMEOUT_SECS", d.request_timeout)?,
            crd_timeout: secs("CELLBRIDGE_CRD_TIMEOUT_SECS", d.crd_timeout)?,
            ready_timeout: secs("CELLBRIDGE_READY_TIMEOUT_SECS", d.ready_timeout)?,
            ..d
        };
        let flux_git_url = optional("CELLBRIDGE_FLUX_GIT_URL");
        if let Some(u) = &flux_git_url
            && !(u.starts_with("https://") || u.starts_with("ssh://") || u.starts_with("http://"))
        {
            return Err(ConfigError::Invalid {
                name: "CELLBRIDGE_FLUX_GIT_URL",
                value: u.clone(),
                reason: "expected an ssh:// or https:// URL (Flux does not take scp-style git@host:path)".into(),
            });
        }
        Ok(Settings {
            flux_git_url,
            flux_git_branch: optional("CELLBRIDGE_BASE_BRANCH").unwrap_or_else(|| "main".into()),
            flux_git_secret: optional("CELLBRIDGE_FLUX_GIT_SECRET"),
            cluster_wait: secs("CELLBRIDGE_CLUSTER_WAIT_SECS", Duration::from_secs(600))?,
            cluster_poll: secs("CELLBRIDGE_CLUSTER_POLL_SECS", Duration::from_secs(20))?,
            access_principal_arn: optional("CELLBRIDGE_ACCESS_PRINCIPAL_ARN"),
            tuning,
        })
    }
}
