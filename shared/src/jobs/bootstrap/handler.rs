//! The cluster-bootstrap function as Lambda and the command line build it: its configuration,
//! its service (the bootstrapper and where it reads the fleet repo), and the one handler
//! ([`crate::shell::lambda::handler`], the [`crate::shell::lambda::Job`] of `job.rs`) on an event file for
//! `cellbridge invoke cluster-bootstrap --event FILE`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use serde_json::Value;

use crate::adapters::aws::AwsAccounts;
use crate::adapters::kube::Kubes;

use crate::ports::fleet::{BaseFleet, FleetSource};
use crate::pure::fleet::{Keep, LocalFleet};
use crate::shell::config::ConfigError;
use crate::shell::lambda::{Invocation, Shell};
use crate::shell::metrics;
use crate::shell::pause;
use crate::{
    adapters::github::GithubConfig, adapters::github::GithubFleet, ports::github::GitData, ports::github::GithubError,
};
use crate::{rules::bootstrap::BootstrapError, rules::bootstrap::Bootstrapper, rules::bootstrap::config::Settings};

/// The fleet source a service holds: a checkout, GitHub, or the in-memory fleet of the
/// `test-support` feature ([`crate::doubles::cluster::MemSource`]).
pub enum Fleets {
    Local(LocalSource),
    Github(Box<GithubSource>),
    #[cfg(feature = "test-support")]
    Mem(crate::doubles::cluster::MemSource),
}

impl From<LocalSource> for Fleets {
    fn from(s: LocalSource) -> Self {
        Fleets::Local(s)
    }
}

impl From<GithubSource> for Fleets {
    fn from(s: GithubSource) -> Self {
        Fleets::Github(Box::new(s))
    }
}

#[cfg(feature = "test-support")]
impl From<crate::doubles::cluster::MemSource> for Fleets {
    fn from(s: crate::doubles::cluster::MemSource) -> Self {
        Fleets::Mem(s)
    }
}

impl FleetSource for Fleets {
    async fn fleet(&self, keep: &Keep, deadline: Instant) -> Result<BaseFleet, GithubError> {
        match self {
            Fleets::Local(s) => s.fleet(keep, deadline).await,
            Fleets::Github(s) => s.fleet(keep, deadline).await,
            #[cfg(feature = "test-support")]
            Fleets::Mem(s) => s.fleet(keep, deadline).await,
        }
    }
}

/// A checked-out fleet repo (the command line); its base branch is
/// [`crate::rules::bootstrap::config::checkout_base_branch`].
pub struct LocalSource(pub LocalFleet);

impl FleetSource for LocalSource {
    async fn fleet(&self, _keep: &Keep, _deadline: Instant) -> Result<BaseFleet, GithubError> {
        Ok(BaseFleet {
            fleet: Arc::new(self.0.clone()),
            branch: crate::rules::bootstrap::config::checkout_base_branch(self.0.root()),
        })
    }
}

/// The fleet repo on GitHub, read the way state-sync reads it (one configuration, one client
/// set-up, credentials read again when GitHub refuses them).
pub struct GithubSource(GithubFleet);

impl GithubSource {
    pub fn new(config: GithubConfig, aws: &aws_config::SdkConfig) -> Self {
        Self(GithubFleet::from_config(
            &config,
            aws_sdk_secretsmanager::Client::new(aws),
        ))
    }

    pub fn from_env(aws: &aws_config::SdkConfig) -> Result<Self, ConfigError> {
        Ok(Self::new(GithubConfig::from_env()?, aws))
    }
}

impl FleetSource for GithubSource {
    async fn fleet(&self, keep: &Keep, deadline: Instant) -> Result<BaseFleet, GithubError> {
        let snap = self.0.read_base(keep, deadline).await?;
        Ok(BaseFleet {
            fleet: Arc::new(snap.fleet),
            branch: Some(snap.base_branch),
        })
    }
}

/// The function: configuration and clients, built once per process.
pub struct BootstrapService<
    A = crate::adapters::aws::AwsAccounts,
    K = crate::adapters::kube::Kubes,
    S = aws_sdk_secretsmanager::Client,
> {
    pub bootstrapper: Bootstrapper<A, K, S>,
    pub fleets: Fleets,
    /// The function's own queue, where a run still confirming sends its next re-check
    /// (`CELLBRIDGE_CONFIRM_QUEUE_URL`); `None`: no re-checks are queued.
    pub rechecks: Option<crate::jobs::queue::Queue>,
}

/// `CELLBRIDGE_CONFIRM_QUEUE_URL`: cluster-bootstrap's own queue, for its re-checks.
pub fn recheck_queue_url_from_env() -> Result<Option<String>, ConfigError> {
    match crate::shell::config::optional("CELLBRIDGE_CONFIRM_QUEUE_URL") {
        None => Ok(None),
        Some(u) if u.starts_with("https://") || u.starts_with("http://") => Ok(Some(u)),
        Some(u) => Err(ConfigError::Invalid {
            name: "CELLBRIDGE_CONFIRM_QUEUE_URL",
            value: u,
            reason: "expected the queue's URL, https://sqs.<region>.amazonaws.com/<account>/<name>".into(),
        }),
    }
}

/// The function's configuration, read and checked from the environment without building any
/// client: what the Lambda's init phase does, so that a bad variable fails the cold start with
/// an error that names it.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Settings,
    pub github: GithubConfig,
    pub recheck_queue: Option<String>,
}

impl Config {
    pub fn from_env() -> Result<Self, BootstrapError> {
        // Read again by each invocation; checked here so a bad value fails the cold start.
        pause::from_env()?;
        metrics::namespace_from_env()?;
        crate::rules::bootstrap::access::ttl_from_env()?;
        crate::shell::backoff::Backoff::from_env()?;
        Ok(Self {
            settings: Settings::from_env()?,
            github: GithubConfig::from_env()?,
            recheck_queue: recheck_queue_url_from_env()?,
        })
    }
}

/// The service for a checked configuration: the AWS configuration and its clients. No network
/// call; the cost is the HTTPS client's trust store (see `crate::shell::lambda`).
pub async fn service_with(config: Config) -> BootstrapService {
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    let fleets = GithubSource::new(config.github, &aws).into();
    let rechecks = config
        .recheck_queue
        .map(|url| crate::jobs::queue::SqsQueue::new(&aws, url).into());
    BootstrapService {
        bootstrapper: Bootstrapper::new(aws, config.settings),
        fleets,
        rechecks,
    }
}

/// Configuration and clients from the environment, at once (the command line).
pub async fn service_from_env() -> Result<BootstrapService, BootstrapError> {
    Ok(service_with(Config::from_env()?).await)
}

/// `cellbridge invoke cluster-bootstrap --event FILE [--fleet DIR]`: the handler on an event
/// file, against whatever `AWS_ENDPOINT_URL` and `GITHUB_API_URL` point at, or a local fleet.
pub async fn invoke_from_file(path: &Path, fleet_dir: Option<&Path>) -> Result<Invocation, BootstrapError> {
    let bad = |reason: String| BootstrapError::Input {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let event: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    crate::shell::telemetry::install_crypto_provider();
    let settings = Settings::from_env()?;
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    let fleets = match fleet_dir {
        Some(d) => Fleets::Local(LocalSource(LocalFleet::open(d).map_err(|e| bad(e.to_string()))?)),
        None => GithubSource::from_env(&aws)?.into(),
    };
    let rechecks = recheck_queue_url_from_env()?.map(|url| crate::jobs::queue::SqsQueue::new(&aws, url).into());
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(aws, settings),
        fleets,
        rechecks,
    };
    let deadline = Instant::now() + Duration::from_secs(900);
    crate::shell::lambda::handler(&service, &event, deadline, &Shell::command_line()).await
}

/// The real services: cluster-bootstrap's bootstrapper.
impl Bootstrapper<AwsAccounts, Kubes, aws_sdk_secretsmanager::Client> {
    /// The real services: the AWS SDK (EKS, STS, Secrets Manager) and kube-rs.
    pub fn new(aws: SdkConfig, settings: Settings) -> Self {
        let accounts = AwsAccounts::new(aws);
        // The Git secret is cellbridge's own (its account, its region), not the cell's.
        let secrets = aws_sdk_secretsmanager::Client::new(accounts.config());
        Self::with_ports(accounts, Kubes, secrets, settings).with_network_from_env()
    }
}
