//! First Flux bootstrap of a new EKS cluster, create-if-missing.
//!
//! One run: find the cell (tag, else the fleet repo's `cell-metadata.yaml`), wait for the
//! cluster to be ACTIVE, build the plan (Namespace, CRDs, components, Git secret, sync objects)
//! and validate the Git credentials before touching anything, get temporary access through
//! an EKS access entry, and server-side apply the plan unless Flux is already there. Every step
//! is idempotent, so a run that died half-way is completed by the next one.

pub mod access;
pub mod apply;
pub mod cell;
pub mod config;
pub mod eks;
pub mod gitsecret;
pub mod handler;
pub mod plan;
pub mod token;

use std::path::{Path, PathBuf};
use std::time::Instant;

use aws_config::{Region, SdkConfig};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use serde::Serialize;

pub use apply::{Applied, SourceStatus, Tuning};
pub use config::Settings;
pub use gitsecret::CredentialKind;
pub use plan::{KubeRef, Phase};

pub use crate::events::bootstrap::Request;

use crate::error::{Class, Classify};
use crate::fleet::FleetRead;
use crate::template::{self, SyncSource};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BootstrapOutcome {
    /// Flux was installed (or completed) by this run.
    Bootstrapped,
    /// The Kustomization `flux-system` exists: Flux owns the cluster, nothing was written.
    AlreadyBootstrapped,
    /// `dry_run`: `objects` lists what would be applied, in order.
    Planned,
    /// The cluster belongs to no cell: skipped.
    NotACell,
    /// The cluster is still being created; run again later.
    ClusterNotReady,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessReport {
    pub principal_arn: String,
    /// The entry was cellbridge's for this run (and deleted after it).
    pub temporary: bool,
    pub removed: bool,
}

/// The result of a run. It names objects and files, never a value of the Git secret.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cluster: String,
    pub region: String,
    pub cell: Option<String>,
    pub outcome: BootstrapOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub components_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialKind>,
    /// Applied (or, for a dry run, to be applied), in order.
    pub objects: Vec<Applied>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_entry: Option<AccessReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_repository: Option<SourceStatus>,
    pub duration_ms: u64,
}

impl Report {
    fn new(req: &Request, outcome: BootstrapOutcome) -> Self {
        Report {
            cluster: req.cluster.clone(),
            region: req.region.clone(),
            cell: None,
            outcome,
            cluster_status: None,
            components_file: None,
            credentials: None,
            objects: Vec::new(),
            access_entry: None,
            git_repository: None,
            duration_ms: 0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Cell(#[from] cell::CellError),
    #[error(transparent)]
    Eks(#[from] eks::EksError),
    #[error(transparent)]
    Access(#[from] access::AccessError),
    #[error(transparent)]
    Plan(#[from] plan::BootstrapPlanError),
    #[error(transparent)]
    Template(#[from] template::TemplateError),
    #[error(transparent)]
    GitSecret(#[from] gitsecret::GitSecretError),
    #[error("cluster {cluster} (cell {cell}): {source}")]
    Apply {
        cluster: String,
        cell: String,
        #[source]
        source: Box<apply::ApplyError>,
    },
    #[error("CELLBRIDGE_FLUX_GIT_SECRET is not set: name the Secrets Manager secret that holds Flux's Git credentials")]
    NoGitSecret,
    #[error("kubeconfig {path}: {reason}")]
    Kubeconfig { path: String, reason: String },
    #[error(
        "cluster {cluster}: no cell given and none found in the fleet repo (clusters/*/cell-metadata.yaml with cluster_name and aws_region); pass --cell"
    )]
    NoCell { cluster: String },
    #[error("invalid request: {0}")]
    Event(#[from] crate::events::bootstrap::BootstrapEventError),
    #[error("invalid request: {what} {value:?} is not {expected}")]
    InvalidRequest {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A file or folder named on the command line cannot be used.
    #[error("{path}: {reason}")]
    Input { path: String, reason: String },
    #[error("cannot read the fleet repo: {0}")]
    Fleet(#[from] crate::github::GithubError),
}

impl Classify for BootstrapError {
    fn class(&self) -> Class {
        match self {
            BootstrapError::Eks(e) => e.class(),
            BootstrapError::Access(e) => e.class(),
            BootstrapError::GitSecret(e) => e.class(),
            BootstrapError::Apply { source, .. } => source.class(),
            BootstrapError::Fleet(e) => e.class(),
            BootstrapError::Event(_) | BootstrapError::InvalidRequest { .. } | BootstrapError::Input { .. } => {
                Class::InvalidInput
            }
            BootstrapError::Config(_)
            | BootstrapError::Cell(_)
            | BootstrapError::Plan(_)
            | BootstrapError::Template(_)
            | BootstrapError::NoGitSecret
            | BootstrapError::Kubeconfig { .. }
            | BootstrapError::NoCell { .. } => Class::Final,
        }
    }
}

/// Whether assuming the cell's role may work later: STS throttling, server errors and no answer
/// at all, not a refusal (the role's trust policy) or a broken configuration.
fn assume_role_retryable(e: &aws_credential_types::provider::error::CredentialsError) -> bool {
    use aws_credential_types::provider::error::CredentialsError;
    use aws_sdk_sts::operation::assume_role::AssumeRoleError;
    match e {
        CredentialsError::ProviderTimedOut(_) => true,
        CredentialsError::ProviderError(_) => std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<aws_sdk_sts::error::SdkError<AssumeRoleError>>())
            .is_none_or(access::sts_retryable),
        _ => false,
    }
}

/// Where the Kubernetes API is.
pub enum Target<'a> {
    /// The EKS cluster of the request, found through the AWS API.
    Eks,
    /// A kubeconfig file (the command line's `--kubeconfig`): EKS is not used at all.
    Kubeconfig(&'a Path),
}

/// Runs bootstraps; built once per process.
pub struct Bootstrapper {
    aws: SdkConfig,
    settings: Settings,
}

fn check_request(req: &Request) -> Result<(), BootstrapError> {
    let ok_name = !req.cluster.is_empty()
        && req.cluster.len() <= 100
        && req
            .cluster
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok_name {
        return Err(BootstrapError::InvalidRequest {
            what: "cluster name",
            value: req.cluster.clone(),
            expected: "an EKS cluster name",
        });
    }
    let ok_region = !req.region.is_empty()
        && req
            .region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok_region {
        return Err(BootstrapError::InvalidRequest {
            what: "region",
            value: req.region.clone(),
            expected: "an AWS region",
        });
    }
    Ok(())
}

struct Prepared {
    steps: Vec<plan::Step>,
    components_file: String,
    credentials: Option<CredentialKind>,
}

impl Prepared {
    /// Notes what will be installed in the report; for a dry run, the whole plan, and says the
    /// run is over (true).
    fn record(&self, report: &mut Report, dry_run: bool) -> bool {
        report.components_file = Some(self.components_file.clone());
        report.credentials = self.credentials;
        if dry_run {
            report.outcome = BootstrapOutcome::Planned;
            report.objects = self
                .steps
                .iter()
                .map(|s| Applied {
                    phase: s.phase,
                    target: s.target.clone(),
                })
                .collect();
        }
        dry_run
    }
}

impl Bootstrapper {
    pub fn new(aws: SdkConfig, settings: Settings) -> Self {
        // Without a timeout an AWS call that hangs holds the run until the Lambda deadline;
        // with one, the SDK's retries get another go.
        let has_attempt_timeout = aws
            .timeout_config()
            .and_then(|t| t.operation_attempt_timeout())
            .is_some();
        let aws = if has_attempt_timeout {
            aws
        } else {
            let t = aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(std::time::Duration::from_secs(5))
                .operation_attempt_timeout(std::time::Duration::from_secs(20))
                .operation_timeout(std::time::Duration::from_secs(90))
                .build();
            aws.to_builder().timeout_config(t).build()
        };
        Self { aws, settings }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// One bootstrap. Errors carry whether a retry may help ([`BootstrapError::retryable`]).
    pub async fn run(
        &self,
        fleet: &dyn FleetRead,
        req: &Request,
        target: Target<'_>,
    ) -> Result<Report, BootstrapError> {
        self.run_until(fleet, req, target, None).await
    }

    /// Like [`Self::run`], waiting at most `cluster_wait` (else the configured time) for a
    /// cluster that is still being created: what is left of a Lambda invocation.
    pub async fn run_until(
        &self,
        fleet: &dyn FleetRead,
        req: &Request,
        target: Target<'_>,
        cluster_wait: Option<std::time::Duration>,
    ) -> Result<Report, BootstrapError> {
        let start = Instant::now();
        check_request(req)?;
        let wait = cluster_wait.map_or(self.settings.cluster_wait, |w| w.min(self.settings.cluster_wait));
        let mut report = match target {
            Target::Eks => Box::pin(self.run_eks(fleet, req, wait)).await?,
            Target::Kubeconfig(path) => Box::pin(self.run_kubeconfig(fleet, req, path)).await?,
        };
        report.duration_ms = start.elapsed().as_millis() as u64;
        tracing::info!(
            cluster = %report.cluster,
            cell = report.cell.as_deref().unwrap_or(""),
            outcome = ?report.outcome,
            objects = report.objects.len(),
            duration_ms = report.duration_ms,
            "bootstrap finished"
        );
        Ok(report)
    }

    /// The cell named in the request, else the fleet repo's match for cluster and region.
    fn cell_from_fleet(&self, fleet: &dyn FleetRead, req: &Request) -> Result<Option<cell::Cell>, BootstrapError> {
        match &req.cell {
            Some(name) => Ok(Some(cell::named(fleet, &req.cluster, name, "the request")?)),
            None => Ok(cell::find_by_cluster(fleet, &req.cluster, &req.region)?),
        }
    }

    async fn regional_config(&self, region: &str, role: Option<&str>) -> Result<SdkConfig, BootstrapError> {
        let regional = self.aws.to_builder().region(Region::new(region.to_owned())).build();
        let Some(role) = role else { return Ok(regional) };
        tracing::info!(role, "assuming the cell's bootstrap role");
        let provider = aws_config::sts::AssumeRoleProvider::builder(role)
            .session_name("cellbridge-bootstrap")
            .configure(&regional)
            .build()
            .await;
        // Assumed once, here, so that a failure names the call and the role (rather than
        // surfacing as "an error occurred while loading credentials" in whatever call came
        // first), and the AWS clients and the EKS token share one session: a run is far
        // shorter than the session's hour.
        let creds = provider.provide_credentials().await.map_err(|e| {
            BootstrapError::Access(access::AccessError::AssumeRole {
                role: role.to_owned(),
                reason: aws_sdk_sts::error::DisplayErrorContext(&e).to_string(),
                retryable: assume_role_retryable(&e),
            })
        })?;
        Ok(regional
            .to_builder()
            .credentials_provider(SharedCredentialsProvider::new(creds))
            .build())
    }

    /// Everything that can be checked without the cluster: manifests, sync objects, and the
    /// Git credentials (fetched and validated here, before anything is applied).
    async fn prepare(&self, fleet: &dyn FleetRead, cell: &str) -> Result<Prepared, BootstrapError> {
        let (file, text) = plan::components_file(fleet, cell)?;
        let components = plan::parse_objects(&text, &file)?;
        let explicit = self.settings.flux_git_url.as_ref().map(|url| SyncSource {
            url: url.clone(),
            branch: self.settings.flux_git_branch.clone(),
        });
        let source = template::sync_source(fleet, explicit.as_ref())?;
        let sync_text = template::render_gotk_sync(cell, &source);
        let sync = plan::parse_objects(&sync_text, "gotk-sync.yaml (rendered)")?;
        let secret_name = self
            .settings
            .flux_git_secret
            .as_deref()
            .ok_or(BootstrapError::NoGitSecret)?;
        // The secret is cellbridge's own (its account, its region), not the cell's.
        let sm = aws_sdk_secretsmanager::Client::new(&self.aws);
        let secret_text = gitsecret::fetch(&sm, secret_name).await?;
        let credentials = gitsecret::parse(secret_name, &secret_text, &source.url)?;
        let kind = Some(credentials.kind);
        let steps = plan::build(components, Some(&credentials), sync);
        Ok(Prepared {
            steps,
            components_file: file,
            credentials: kind,
        })
    }

    async fn run_eks(
        &self,
        fleet: &dyn FleetRead,
        req: &Request,
        wait: std::time::Duration,
    ) -> Result<Report, BootstrapError> {
        let mut report = Report::new(req, BootstrapOutcome::NotACell);
        let fleet_cell = self.cell_from_fleet(fleet, req)?;
        let role = fleet_cell
            .as_ref()
            .and_then(|c| c.bootstrap_role_arn())
            .map(str::to_owned);
        let conf = self.regional_config(&req.region, role.as_deref()).await?;
        let eks_client = aws_sdk_eks::Client::new(&conf);

        let info = match eks::wait_active(&eks_client, &req.cluster, &req.region, wait, self.settings.cluster_poll)
            .await?
        {
            eks::Waited::Active(info) => info,
            eks::Waited::StillCreating(info) => {
                tracing::info!(cluster = %req.cluster, status = info.status.as_str(), "cluster not ACTIVE yet; handing the event back to be retried later");
                report.outcome = BootstrapOutcome::ClusterNotReady;
                report.cluster_status = Some(info.status.as_str().to_owned());
                return Ok(report);
            }
        };
        report.cluster_status = Some(info.status.as_str().to_owned());

        let cell = match (&req.cell, info.tags.get(cell::CELL_TAG)) {
            (Some(_), _) => fleet_cell,
            (None, Some(tag)) => {
                let c = cell::named(fleet, &req.cluster, tag, "the cluster's tag")?;
                if c.bootstrap_role_arn().is_some() && c.bootstrap_role_arn() != role.as_deref() {
                    tracing::warn!(cell = %c.name, "the tagged cell names a bootstrap role the cluster lookup did not use");
                }
                Some(c)
            }
            (None, None) => fleet_cell,
        };
        let Some(cell) = cell else {
            tracing::info!(cluster = %req.cluster, region = %req.region, "cluster belongs to no cell (no {} tag, no cell-metadata.yaml names it): skipped", cell::CELL_TAG);
            return Ok(report);
        };
        report.cell = Some(cell.name.clone());
        info.check_access_entries()?;
        let (endpoint, ca_pem) = info.connection()?;

        let prepared = self.prepare(fleet, &cell.name).await?;
        if prepared.record(&mut report, req.dry_run) {
            return Ok(report);
        }

        // The session ARN STS reports has lost the role's path; a known full ARN is better.
        let principal = match role.as_deref().or(self.settings.access_principal_arn.as_deref()) {
            Some(arn) => arn.to_owned(),
            None => access::caller_principal(&aws_sdk_sts::Client::new(&conf)).await?,
        };
        let grant = access::ensure(&eks_client, &req.cluster, &principal).await?;
        let credentials = conf.credentials_provider().ok_or_else(|| {
            BootstrapError::Access(access::AccessError::Sts {
                reason: "no AWS credentials configured".into(),
                retryable: false,
            })
        })?;
        let auth = apply::ClusterAuth::Eks {
            credentials,
            region: req.region.clone(),
            cluster: req.cluster.clone(),
            sts_endpoint: token::sts_endpoint(&req.region, conf.endpoint_url()),
            url: endpoint,
            ca_pem,
        };
        let result = self
            .install(auth, grant.temporary, &cell.name, req, prepared, &mut report)
            .await;
        // Access is given back whatever happened.
        let released = access::release(&eks_client, &req.cluster, &grant).await;
        let removed = match &released {
            Ok(r) => *r,
            Err(e) => {
                tracing::error!(cluster = %req.cluster, error = %e, "could not delete the temporary access entry");
                false
            }
        };
        report.access_entry = Some(AccessReport {
            principal_arn: grant.principal_arn.clone(),
            temporary: grant.temporary,
            removed,
        });
        result?;
        // Installed, but cellbridge's cluster-admin entry is still there: the run fails (retryably
        // when EKS may answer later), so the event comes back and the next run, finding Flux
        // installed, deletes the entry it recognises by its tag. A success would leave it for good.
        released?;
        Ok(report)
    }

    async fn run_kubeconfig(
        &self,
        fleet: &dyn FleetRead,
        req: &Request,
        path: &Path,
    ) -> Result<Report, BootstrapError> {
        let mut report = Report::new(req, BootstrapOutcome::NotACell);
        let cell = self
            .cell_from_fleet(fleet, req)?
            .ok_or_else(|| BootstrapError::NoCell {
                cluster: req.cluster.clone(),
            })?;
        report.cell = Some(cell.name.clone());
        let prepared = self.prepare(fleet, &cell.name).await?;
        if prepared.record(&mut report, req.dry_run) {
            return Ok(report);
        }
        let kerr = |reason: String| BootstrapError::Kubeconfig {
            path: path.display().to_string(),
            reason,
        };
        let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| kerr(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| kerr(e.to_string()))?;
        self.install(
            apply::ClusterAuth::Config(Box::new(config)),
            false,
            &cell.name,
            req,
            prepared,
            &mut report,
        )
        .await?;
        Ok(report)
    }

    async fn install(
        &self,
        auth: apply::ClusterAuth,
        fresh_entry: bool,
        cell: &str,
        req: &Request,
        prepared: Prepared,
        report: &mut Report,
    ) -> Result<(), BootstrapError> {
        let wrap = |source: apply::ApplyError| BootstrapError::Apply {
            cluster: req.cluster.clone(),
            cell: cell.to_owned(),
            source: Box::new(source),
        };
        let session = apply::Session::connect(auth, self.settings.tuning.clone(), fresh_entry)
            .await
            .map_err(wrap)?;
        let mut applier = apply::Applier::new(session);
        let kustomization = prepared
            .steps
            .iter()
            .find(|s| s.phase == Phase::Sync && s.target.kind == "Kustomization");
        if let Some(k) = kustomization {
            let ns = k.target.namespace.as_deref().unwrap_or(plan::FLUX_NAMESPACE);
            if applier
                .exists(
                    &k.target.api_version,
                    "Kustomization",
                    "kustomizations",
                    ns,
                    &k.target.name,
                )
                .await
                .map_err(wrap)?
                && !req.force
            {
                tracing::info!(cluster = %req.cluster, cell, "Kustomization flux-system exists: Flux owns this cluster, nothing to do");
                report.outcome = BootstrapOutcome::AlreadyBootstrapped;
                return Ok(());
            }
        }
        let crds: Vec<String> = prepared
            .steps
            .iter()
            .filter(|s| s.phase == Phase::Crd)
            .map(|s| s.target.name.clone())
            .collect();
        let mut waited = false;
        for step in &prepared.steps {
            if step.phase > Phase::Crd && !waited {
                applier.wait_established(&crds).await.map_err(wrap)?;
                waited = true;
            }
            let applied = applier.apply(step).await.map_err(wrap)?;
            report.objects.push(applied);
        }
        report.outcome = BootstrapOutcome::Bootstrapped;
        if let Some(repo) = prepared
            .steps
            .iter()
            .find(|s| s.phase == Phase::Sync && s.target.kind == "GitRepository")
        {
            let status = applier.wait_source_ready(&repo.target).await.map_err(wrap)?;
            match status.ready {
                Some(true) => tracing::info!(
                    revision = status.revision.as_deref().unwrap_or(""),
                    "GitRepository flux-system is Ready"
                ),
                Some(false) => tracing::warn!(
                    reason = status.reason.as_deref().unwrap_or(""),
                    message = status.message.as_deref().unwrap_or(""),
                    "GitRepository flux-system is not Ready"
                ),
                None => tracing::warn!("GitRepository flux-system reported no Ready condition in time"),
            }
            report.git_repository = Some(status);
        }
        Ok(())
    }
}

/// What the command line's `cellbridge bootstrap` passes.
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    pub cluster: String,
    pub region: String,
    pub cell: Option<String>,
    /// Talk to this cluster directly; EKS is not used.
    pub kubeconfig: Option<PathBuf>,
    pub dry_run: bool,
    pub force: bool,
}

/// `cellbridge bootstrap` from a laptop: the same code as the Lambda, configured from the
/// environment, against a fleet the caller opened (a local checkout or a GitHub snapshot).
pub async fn run_local(fleet: &dyn FleetRead, opts: &LocalOptions) -> Result<Report, BootstrapError> {
    crate::telemetry::install_crypto_provider();
    let settings = Settings::from_env()?;
    // The profile's region is cellbridge's home (where the Git secret lives); the cluster's
    // region is used for EKS whatever it is.
    let mut aws = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    if aws.region().is_none() {
        aws = aws.to_builder().region(Region::new(opts.region.clone())).build();
    }
    let req = Request {
        cluster: opts.cluster.clone(),
        region: opts.region.clone(),
        cell: opts.cell.clone(),
        force: opts.force,
        dry_run: opts.dry_run,
    };
    let target = match &opts.kubeconfig {
        Some(p) => Target::Kubeconfig(p),
        None => Target::Eks,
    };
    Bootstrapper::new(aws, settings).run(fleet, &req, target).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_assume_role_is_final_a_throttled_or_failed_one_is_retried() {
        use aws_credential_types::provider::error::CredentialsError;
        use aws_sdk_sts::config::http::HttpResponse;
        use aws_sdk_sts::error::{ErrorMetadata, SdkError};
        use aws_sdk_sts::operation::assume_role::AssumeRoleError;
        let sts = |status: u16, code: &str| {
            let err = AssumeRoleError::generic(ErrorMetadata::builder().code(code).build());
            CredentialsError::provider_error(SdkError::service_error(
                err,
                HttpResponse::new(status.try_into().unwrap(), "".into()),
            ))
        };
        assert!(assume_role_retryable(&sts(400, "Throttling")));
        assert!(assume_role_retryable(&sts(503, "ServiceUnavailable")));
        assert!(!assume_role_retryable(&sts(403, "AccessDenied")));
        let timeout = SdkError::<AssumeRoleError, HttpResponse>::timeout_error("attempt timeout");
        assert!(assume_role_retryable(&CredentialsError::provider_error(timeout)));
        assert!(!assume_role_retryable(&CredentialsError::invalid_configuration("no")));
    }
}
