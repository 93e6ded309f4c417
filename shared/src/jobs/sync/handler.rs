//! state-sync as Lambda runs it: the service built once per execution environment (the mains
//! answer each invocation with [`crate::shell::lambda::handler`]), and the same handler on an event file
//! for the command line.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{ClusterAccess, SyncConfig, SyncError, Syncer};
use crate::adapters::github::GithubFleet;
use crate::adapters::probe::EksProbe;
use crate::adapters::s3::S3States;
use crate::shell::config::{self, ConfigError};
use crate::shell::lambda::{Invocation, Shell};

/// The real service: S3 states and the GitHub fleet repo, configured from the environment.
pub type SyncService = Syncer<S3States, GithubFleet>;

/// The service for a checked configuration: the AWS configuration and its clients. No network
/// call; the cost is the HTTPS client's trust store (see `crate::shell::lambda`).
pub async fn service_with(config: SyncConfig) -> SyncService {
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    // Checked at init (`SyncConfig::from_env`).
    let role = state_role_from_env().ok().flatten();
    let secrets = aws_sdk_secretsmanager::Client::new(&aws);
    let service = Syncer::new(
        config.clone(),
        state_source(&aws, role.as_deref()).await,
        GithubFleet::from_config(&config.github, secrets),
    )
    .with_clusters(cluster_access(&aws));
    // Checked at init too.
    match super::fanout::queue_url_from_env().ok().flatten() {
        Some(url) => service.with_queue(crate::jobs::queue::SqsQueue::new(&aws, url)),
        None => service,
    }
}

/// EKS as state-sync asks it whether a destroyed cell's cluster is gone: with the function's
/// own role, or, for a cell of another account, state-sync's describe-only role there
/// (`CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES`), in session `cellbridge-state-sync`.
pub fn cluster_access(aws: &aws_config::SdkConfig) -> ClusterAccess {
    ClusterAccess {
        probe: EksProbe::new(aws.clone(), "cellbridge-state-sync").into(),
        // Checked at init (`SyncConfig::from_env`).
        describe_roles: crate::rules::cells::describe_roles_from_env().unwrap_or_default(),
    }
}

/// `CELLBRIDGE_STATE_ROLE_ARN`: the role state-sync assumes to read the state bucket when the
/// bucket lives in another account; unset, the function's own role reads it.
pub fn state_role_from_env() -> Result<Option<String>, ConfigError> {
    let Some(role) = config::optional("CELLBRIDGE_STATE_ROLE_ARN") else {
        return Ok(None);
    };
    if crate::rules::cells::role_account(&role).is_none() {
        return Err(ConfigError::Invalid {
            name: "CELLBRIDGE_STATE_ROLE_ARN",
            value: role,
            reason: "expected an IAM role ARN, arn:aws:iam::<account>:role/<name>".into(),
        });
    }
    Ok(Some(role))
}

/// The state bucket's reader: with the function's credentials, or through `role` (assumed
/// lazily by the SDK on the first read, session `cellbridge-state-sync`, and refreshed before
/// it expires). The role's trust policy must name the function's role, and the bucket's policy
/// (and its KMS key's) must let the role read: `infra/README.md`, "State bucket in another account".
pub async fn state_source(aws: &aws_config::SdkConfig, role: Option<&str>) -> S3States {
    match role {
        None => S3States::from_conf(aws),
        Some(role) => {
            let provider = aws_config::sts::AssumeRoleProvider::builder(role)
                .session_name("cellbridge-state-sync")
                .configure(aws)
                .build()
                .await;
            let conf = aws
                .to_builder()
                .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(provider))
                .build();
            S3States::from_conf(&conf)
        }
    }
}

/// The service for a checked configuration and a given AWS configuration.
pub fn service_for(config: SyncConfig, aws: &aws_config::SdkConfig) -> SyncService {
    let secrets = aws_sdk_secretsmanager::Client::new(aws);
    Syncer::new(
        config.clone(),
        S3States::from_conf(aws),
        GithubFleet::from_config(&config.github, secrets),
    )
    .with_clusters(cluster_access(aws))
}

/// Configuration and clients from the environment, at once (the command line).
pub async fn service_from_env() -> Result<SyncService, SyncError> {
    Ok(service_with(SyncConfig::from_env()?).await)
}

/// `cellbridge invoke state-sync --event FILE`: runs the handler locally on an event file
/// against whatever `AWS_ENDPOINT_URL` and `GITHUB_API_URL` point at. The deadline is
/// `CELLBRIDGE_DEADLINE_SECS` from now (default 900, Lambda's longest).
pub async fn invoke_from_file(path: &Path) -> Result<Invocation, SyncError> {
    let text = std::fs::read_to_string(path).map_err(|e| SyncError::EventFile {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let event: Value = serde_json::from_str(&text).map_err(|e| SyncError::EventFile {
        path: path.display().to_string(),
        reason: format!("not JSON: {e}"),
    })?;
    let secs = match config::optional("CELLBRIDGE_DEADLINE_SECS") {
        None => 900,
        Some(v) => v.parse::<u64>().map_err(|_| ConfigError::Invalid {
            name: "CELLBRIDGE_DEADLINE_SECS",
            value: v,
            reason: "expected seconds".into(),
        })?,
    };
    let service = service_from_env().await?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    crate::shell::lambda::handler(&service, &event, deadline, &Shell::command_line()).await
}
