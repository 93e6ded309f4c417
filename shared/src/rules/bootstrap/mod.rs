//! First Flux bootstrap of a new EKS cluster, create-if-missing.
//!
//! One run: find the cell (tag, else the fleet repo's `cell-metadata.yaml`), wait for the
//! cluster to be ACTIVE, build the plan (Namespace, CRDs, components, Git secret, sync objects)
//! and validate the Git credentials before touching anything, get temporary access through
//! an EKS access entry, and server-side apply the plan unless Flux is already there. Every step
//! is idempotent, so a run that died half-way is completed by the next one.
//!
//! Files: `config.rs` (the settings), `report.rs` (what a run answers), `error.rs` (why it
//! failed), `cut.rs` (a run the deadline stopped), and the steps of a run: `eks.rs`, `access.rs`,
//! `plan.rs`, `gitsecret/`; after it, `follow.rs` (the checks) and `rekey.rs` (corrected Git
//! credentials applied by a check). The job around
//! it (each cluster of an event, the sweep of expired access after it, the command line's local
//! run) is [`crate::jobs::bootstrap`]; the server-side apply is [`crate::adapters::kube`].

pub mod access;
pub mod active;
pub mod config;
mod cut;
pub mod error;
pub mod follow;
mod laptop;
mod operator;
pub mod rekey;
pub mod report;
mod which;

use std::path::Path;
use std::time::Instant;

use tracing::Instrument as _;

pub use crate::pure::bootstrap::gitsecret::CredentialKind;
pub use crate::pure::bootstrap::plan::{KubeRef, Phase};
use crate::pure::bootstrap::{gitsecret, plan};

pub use error::BootstrapError;

pub use crate::pure::events::bootstrap::Request;

use super::cells as cell;
use crate::ports::cluster::eks;
use crate::ports::cluster::kube::{Applied, ClusterAuth, Observe};
use crate::ports::cluster::{Accounts, ClusterApi as _, KubeApi, KubeConnect};
use crate::ports::secrets::SecretStore;
use crate::pure::events::bootstrap::Recheck;
use crate::pure::fleet::FleetRead;
use crate::shell::lambda::CHAIN;
pub use config::Settings;
use follow::{FluxReport, Start};
pub use report::{AccessReport, BootstrapOutcome, Report};

/// Where the Kubernetes API is.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The EKS cluster of the request, found through the AWS API.
    Eks,
    /// A kubeconfig file (the command line's `--kubeconfig`): EKS is not used at all.
    Kubeconfig(&'a Path),
}

/// Runs bootstraps; built once per process, over the outside services' [`ports`](crate::ports::cluster).
pub struct Bootstrapper<A, K, S> {
    accounts: A,
    kube: K,
    secrets: S,
    settings: Settings,
    /// Where the function runs ([`config::network_from_env`]); an invalid setting is reported
    /// by every run, as a final configuration error.
    network: Result<Option<eks::Network>, (&'static str, String, String)>,
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
    if let Some(a) = &req.account
        && !crate::pure::events::bootstrap::is_account_id(a)
    {
        return Err(BootstrapError::InvalidRequest {
            what: "account",
            value: a.clone(),
            expected: "a 12-digit AWS account id",
        });
    }
    Ok(())
}

struct Prepared {
    steps: Vec<plan::Step>,
    components_file: String,
    sync_file: String,
    credentials: Option<CredentialKind>,
    /// What the checks after the apply read: the controllers the plan applies.
    observe: Observe,
    /// The Git credentials' values, never to appear in what a check reports.
    secrets: Vec<crate::pure::redact::Secret<String>>,
    /// What says Flux is already there (create-if-missing): the Kustomization `flux-system`, or
    /// a Flux Operator cell's FluxInstance.
    owner: Option<plan::Owner>,
    /// Where the checks of a Flux found already there count from: the record an earlier run
    /// left on the cluster, else now.
    prior: Start,
}

impl Prepared {
    /// Notes what will be installed in the report; for a dry run, the whole plan, and says the
    /// run is over (true).
    fn record(&self, report: &mut Report, dry_run: bool) -> bool {
        report.components_file = Some(self.components_file.clone());
        report.sync_file = Some(self.sync_file.clone());
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

impl<A: Accounts, K: KubeConnect, S: SecretStore> Bootstrapper<A, K, S> {
    pub fn with_ports(accounts: A, kube: K, secrets: S, settings: Settings) -> Self {
        Self {
            accounts,
            kube,
            secrets,
            settings,
            network: Ok(None),
        }
    }

    /// Where the function runs: with it, a cluster whose endpoint configuration excludes it
    /// fails before anything is created ([`eks::ClusterInfo::check_reachable`]).
    pub fn with_network(mut self, network: Option<eks::Network>) -> Self {
        self.network = Ok(network);
        self
    }

    /// Where the function runs, as its settings say ([`config::network_from_env`]); an invalid
    /// setting is kept and reported by every run, as a final configuration error.
    pub fn with_network_from_env(mut self) -> Self {
        self.network = config::network_from_env().map_err(|e| match e {
            crate::shell::config::ConfigError::Invalid { name, value, reason } => (name, value, reason),
            crate::shell::config::ConfigError::Missing { name, hint } => (name, String::new(), hint.to_owned()),
        });
        self
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn accounts(&self) -> &A {
        &self.accounts
    }

    pub fn kube(&self) -> &K {
        &self.kube
    }

    pub fn secrets(&self) -> &S {
        &self.secrets
    }

    /// One bootstrap. Errors carry what a retry may do ([`Classify`](crate::shell::error::Classify)). The name of the branch
    /// `fleet` was read from is not known here: for a cell whose pull request is open, a
    /// template `gotk-sync.yaml` that names no branch then needs `CELLBRIDGE_FLUX_GIT_BRANCH`
    /// (see [`Self::run_until`]).
    pub async fn run(
        &self,
        fleet: &dyn FleetRead,
        req: &Request,
        target: Target<'_>,
    ) -> Result<Report, BootstrapError> {
        self.run_until(fleet, None, req, target, None).await
    }

    /// Like [`Self::run`], with the name of the branch `fleet` was read from (GitHub's default
    /// branch unless `CELLBRIDGE_BASE_BRANCH` names another): the branch Flux follows when
    /// neither the configuration nor the template's `gotk-sync.yaml` names one
    /// ([`crate::pure::template::FluxGit::branch_for`]). Waits at most `cluster_wait` (else the configured
    /// time) for a cluster that is still being created: what is left of a Lambda invocation.
    pub async fn run_until(
        &self,
        fleet: &dyn FleetRead,
        base_branch: Option<&str>,
        req: &Request,
        target: Target<'_>,
        cluster_wait: Option<std::time::Duration>,
    ) -> Result<Report, BootstrapError> {
        self.run_before(fleet, base_branch, req, target, cluster_wait, None)
            .await
    }

    /// [`Self::run_until`] within a Lambda invocation ending at `deadline`: the install (apply
    /// and waits) stops [`RELEASE_RESERVE`] before it, so that the temporary access entry is
    /// still deleted in time; a run cut short fails retryably naming what is left
    /// ([`crate::ports::cluster::kube::ApplyError::OutOfTime`]), and the next delivery completes it.
    #[tracing::instrument(
        target = "cellbridge::chain",
        level = "trace",
        name = "Bootstrapper.run_before",
        skip_all
    )]
    pub async fn run_before(
        &self,
        fleet: &dyn FleetRead,
        base_branch: Option<&str>,
        req: &Request,
        target: Target<'_>,
        cluster_wait: Option<std::time::Duration>,
        deadline: Option<Instant>,
    ) -> Result<Report, BootstrapError> {
        // Every line of the run carries the cluster and its region, whoever runs it (the
        // Lambda, `cellbridge bootstrap`): operators filter on them.
        let span = tracing::info_span!("bootstrap", cluster = %req.cluster, region = %req.region);
        async move {
            let start = Instant::now();
            check_request(req)?;
            let wait = cluster_wait.map_or(self.settings.cluster_wait, |w| w.min(self.settings.cluster_wait));
            let install_by = deadline.map(|d| d.checked_sub(RELEASE_RESERVE).unwrap_or(start));
            let mut report = match target {
                Target::Eks => Box::pin(self.run_eks(fleet, base_branch, req, wait, install_by)).await?,
                Target::Kubeconfig(path) => Box::pin(self.run_kubeconfig(fleet, base_branch, req, path)).await?,
            };
            report.duration_ms = start.elapsed().as_millis() as u64;
            tracing::info!(
                cluster = %report.cluster,
                cell = report.cell.as_deref().unwrap_or(""),
                outcome = report.outcome.as_str(),
                objects = report.objects.len(),
                duration_ms = report.duration_ms,
                "bootstrap finished"
            );
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// The cluster's endpoint and CA, checked before the Git secret is read or an access entry
    /// created: a cluster this function cannot reach fails once, finally, saying why.
    fn endpoint(&self, info: &eks::ClusterInfo) -> Result<(String, Vec<u8>), BootstrapError> {
        let network = self
            .network
            .clone()
            .map_err(|(name, value, reason)| crate::shell::config::ConfigError::Invalid { name, value, reason })?;
        info.check_reachable(network.as_ref())?;
        Ok(info.connection()?)
    }

    /// The principal the temporary access entry is made for: the role reaching the cluster, else
    /// the configured ARN (the session ARN STS reports has lost the role's path; a known full
    /// ARN is better), else STS's answer.
    async fn principal(&self, api: &A::Api, role: Option<&str>) -> Result<String, BootstrapError> {
        Ok(match role.or(self.settings.access_principal_arn.as_deref()) {
            Some(arn) => arn.to_owned(),
            None => api.caller_principal().await?,
        })
    }

    /// The cell named in the request, else the fleet repo's match for cluster and region.
    fn cell_from_fleet(&self, fleet: &dyn FleetRead, req: &Request) -> Result<Option<cell::Cell>, BootstrapError> {
        match &req.cell {
            Some(name) => Ok(Some(cell::named(fleet, &req.cluster, name, "the request")?)),
            None => Ok(cell::find_by_cluster(fleet, &req.cluster, &req.region)?),
        }
    }

    /// The role that reaches the cluster (`None`: cellbridge's own identity), decided only by
    /// the configuration and the fleet's base branch, never by a pull request:
    /// - the cluster's account is the request's (the event's), else the account of the merged
    ///   `bootstrap_role_arn`, else cellbridge's own;
    /// - an account of `CELLBRIDGE_ACCOUNT_ROLES` is reached through its role there; a merged
    ///   `bootstrap_role_arn` that names another role is refused (configuration decides, and a
    ///   disagreement is a mistake to correct, not to guess at);
    /// - otherwise a merged `bootstrap_role_arn` in that account is used (as before the map);
    /// - otherwise the account must be cellbridge's own (STS GetCallerIdentity): an event from
    ///   any other account is refused, naming the account and the variable, and nothing is
    ///   looked up (never the home account's cluster of the same name).
    ///
    /// `merged_role`: the cell and its merged `bootstrap_role_arn`; for a re-check, the role its
    /// message names, held to the same rule rather than taken on the message's word.
    async fn role_for(
        &self,
        req: &Request,
        merged_role: Option<(&str, &str)>,
    ) -> Result<Option<String>, BootstrapError> {
        use super::cells::RoleError;
        let refuse = |source: RoleError| BootstrapError::Account {
            cluster: req.cluster.clone(),
            source: Box::new(source),
        };
        let account = match (&req.account, merged_role) {
            (Some(a), _) => Some(a.clone()),
            (None, Some((_, role))) => super::cells::role_account(role).map(str::to_owned),
            (None, None) => None,
        };
        let Some(account) = account else {
            return match merged_role {
                Some((cell, role)) => Err(refuse(RoleError::NotARole {
                    cell: cell.to_owned(),
                    role: role.to_owned(),
                })),
                None => Ok(None),
            };
        };
        if let Some(configured) = self.settings.account_roles.get(&account) {
            if let Some((cell, role)) = merged_role
                && role != configured
            {
                return Err(refuse(RoleError::Differs {
                    cell: cell.to_owned(),
                    merged: role.to_owned(),
                    configured: configured.clone(),
                    account,
                }));
            }
            return Ok(Some(configured.clone()));
        }
        if let Some((cell, role)) = merged_role {
            if super::cells::role_account(role) == Some(account.as_str()) {
                return Ok(Some(role.to_owned()));
            }
            return Err(refuse(RoleError::OtherAccount {
                account,
                cell: cell.to_owned(),
                role: role.to_owned(),
            }));
        }
        let home = self.accounts.home_account().await?;
        if account == home {
            return Ok(None);
        }
        Err(refuse(RoleError::Unmapped { account, home }))
    }

    /// Everything that can be checked without the cluster: manifests, sync objects, and the
    /// Git credentials (fetched and validated here, before anything is applied). The sync
    /// objects are every document of the cell's `gotk-sync.yaml` ([`plan::sync_file`]), applied
    /// unchanged; the credentials are checked against its GitRepository `flux-system`. A cell
    /// holding a FluxInstance (or, before its own `flux-system/` exists, whose template holds one)
    /// is the Flux Operator's ([`Self::prepare_operator`]).
    async fn prepare(
        &self,
        fleet: &dyn FleetRead,
        base_branch: Option<&str>,
        cell: &str,
    ) -> Result<Prepared, BootstrapError> {
        if let Some(prepared) = self.prepare_operator(fleet, base_branch, cell).await? {
            return Ok(prepared);
        }
        let (file, text) = plan::components_file(fleet, cell)?;
        let components = plan::parse_objects(&text, &file)?;
        let (sync_file, sync_text) = plan::sync_file(fleet, cell, &self.settings.flux_git(base_branch))?;
        let sync = plan::parse_objects(&sync_text, &sync_file)?;
        let repo = plan::sync_repository(&sync, &sync_file)?;
        plan::check_sync_kinds(&components, &file, &sync, &sync_file)?;
        let secret_name = self
            .settings
            .flux_git_secret
            .as_deref()
            .ok_or(BootstrapError::NoGitSecret)?;
        let secret_text = self.secrets.secret_string(secret_name).await?;
        let credentials = gitsecret::parse(secret_name, secret_text.expose(), &repo)?;
        let kind = Some(credentials.kind);
        let secrets = credentials
            .values()
            .map(|v| crate::pure::redact::Secret::new(v.to_owned()))
            .collect();
        let steps = plan::build(components, Some(&credentials), sync);
        let git_secret = plan::git_secret_of(&steps);
        let owner = plan::Owner::of_sync(&steps);
        let controllers = steps
            .iter()
            .filter(|s| s.target.kind == "Deployment" && s.target.namespace.as_deref() == Some(plan::FLUX_NAMESPACE))
            .map(|s| s.target.name.clone())
            .collect();
        Ok(Prepared {
            steps,
            components_file: file,
            sync_file,
            credentials: kind,
            observe: Observe {
                git_secret,
                ..Observe::flux_system(controllers)
            },
            secrets,
            owner,
            prior: Start::now(),
        })
    }

    #[tracing::instrument(
        target = "cellbridge::chain",
        level = "trace",
        name = "Bootstrapper.run_eks",
        skip_all
    )]
    async fn run_eks(
        &self,
        fleet: &dyn FleetRead,
        base_branch: Option<&str>,
        req: &Request,
        wait: std::time::Duration,
        install_by: Option<Instant>,
    ) -> Result<Report, BootstrapError> {
        let mut report = Report::new(req, BootstrapOutcome::NotACell);
        let fleet_cell = match self.cell_from_fleet(fleet, req) {
            // Cells of two accounts naming one cluster name: its tag decides ([`which`]).
            Err(BootstrapError::Cell(cell::CellError::Ambiguous { .. })) if req.cell.is_none() => None,
            other => other?,
        };
        // The cluster is looked up in the account the event names, as the role decided there.
        let merged_role = fleet_cell
            .as_ref()
            .and_then(|c| c.bootstrap_role_arn().map(|r| (c.name.as_str(), r)));
        let role = self.role_for(req, merged_role).await?;
        let api = self.accounts.open(&req.region, role.as_deref()).await?;

        let info = match active::wait_active(&api, &req.cluster, &req.region, wait, self.settings.cluster_poll).await? {
            active::Waited::Active(info) => info,
            active::Waited::StillCreating(info) => {
                tracing::info!(cluster = %req.cluster, status = info.status.as_str(), "cluster not ACTIVE yet; handing the event back to be retried later");
                report.outcome = BootstrapOutcome::ClusterNotReady;
                report.cluster_status = Some(info.status.as_str().to_owned());
                return Ok(report);
            }
        };
        report.cluster_status = Some(info.status.as_str().to_owned());

        let tag = info.tags.get(cell::CELL_TAG).map(String::as_str);
        let tagged = match tag {
            // A new cell's tag (its pull request still open) names a cell whose metadata
            // is not merged yet: the role was decided without it, which is the point.
            Some(tag) => {
                let c = cell::named(fleet, &req.cluster, tag, "the cluster's tag")?;
                if let Some(merged) = c.bootstrap_role_arn()
                    && Some(merged) != role.as_deref()
                {
                    return Err(BootstrapError::Account {
                        cluster: req.cluster.clone(),
                        source: Box::new(super::cells::RoleError::NotReachedWith {
                            cell: c.name.clone(),
                            merged: merged.to_owned(),
                            reached: role.clone(),
                        }),
                    });
                }
                Some(c)
            }
            None => None,
        };
        let cell = which::proven(&self.accounts, fleet, req, tag, tagged, role.as_deref()).await?;
        let Some(cell) = cell else {
            tracing::info!(cluster = %req.cluster, region = %req.region, "cluster belongs to no cell (no {} tag, no cell-metadata.yaml names it): skipped", cell::CELL_TAG);
            return Ok(report);
        };
        report.cell = Some(cell.name.clone());
        info.check_access_entries()?;
        let (endpoint, ca_pem) = self.endpoint(&info)?;

        let prepared = self.prepare(fleet, base_branch, &cell.name).await?;
        if prepared.record(&mut report, req.dry_run) {
            return Ok(report);
        }
        let observe = prepared.observe.clone();

        let principal = self.principal(&api, role.as_deref()).await?;
        let grant = access::ensure(&api, &req.cluster, &principal).await?;
        let result = match api.kube_auth(&req.cluster, endpoint, ca_pem).await {
            Ok(auth) => {
                let steps: Vec<String> = prepared.steps.iter().map(|s| s.target.to_string()).collect();
                let prior = Start::prior(Some(&info));
                let prepared = Prepared { prior, ..prepared };
                let install = self.install(auth, grant.temporary, &cell.name, req, prepared, &mut report);
                match install_by {
                    None => install.await,
                    // Bounded, so that the access entry below is deleted before the invocation
                    // ends (a Lambda timeout would leave it until the next run).
                    Some(by) => match tokio::time::timeout_at(by.into(), install).await {
                        Ok(r) => r,
                        Err(_) => cut::cut_short(req, &cell.name, &steps, &mut report, prior, &self.settings.confirm),
                    },
                }
            }
            Err(e) => Err(e.into()),
        };
        // Access is given back whatever happened.
        let released = access::release(&api, &req.cluster, &grant).await;
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
            adopted: grant.adopted,
            removed,
        });
        result?;
        self.follow_up(&mut report, req, &cell.name, role.clone(), &observe);
        if let Some(flux) = report.flux.as_mut() {
            follow::record_on(&api, &info, flux).await;
        }
        // Installed, but cellbridge's cluster-admin entry is still there: the run fails (retryably
        // when EKS may answer later), so the event comes back and the next run, finding Flux
        // installed, deletes the entry it recognises by its tag. A success would leave it for good.
        released?;
        Ok(report)
    }

    async fn run_kubeconfig(
        &self,
        fleet: &dyn FleetRead,
        base_branch: Option<&str>,
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
        let prepared = self.prepare(fleet, base_branch, &cell.name).await?;
        if prepared.record(&mut report, req.dry_run) {
            return Ok(report);
        }
        let auth = ClusterAuth::Kubeconfig(path.to_owned());
        let observe = prepared.observe.clone();
        self.install(auth, false, &cell.name, req, prepared, &mut report)
            .await?;
        self.follow_up(&mut report, req, &cell.name, None, &observe);
        Ok(report)
    }

    /// What follows an apply (or a Flux found there): a run whose time ran out before its first
    /// check is still confirming; one still confirming gets its next re-check
    /// ([`follow::next`]), for the caller to queue (the function) or to make (the command line).
    fn follow_up(&self, report: &mut Report, req: &Request, cell: &str, role: Option<String>, observe: &Observe) {
        let applied = matches!(
            report.outcome,
            BootstrapOutcome::Bootstrapped | BootstrapOutcome::AlreadyBootstrapped
        );
        if !applied || self.settings.confirm.skip {
            return;
        }
        let flux = report.flux.get_or_insert_with(|| {
            FluxReport::unread(
                Start::now(),
                "the invocation's time ran out before the first check",
                self.settings.confirm.deadline,
            )
        });
        // The next check's number and clock are the flux report's (`follow::next`).
        let template = Recheck {
            cluster: req.cluster.clone(),
            region: req.region.clone(),
            account: req.account.clone(),
            cell: cell.to_owned(),
            role,
            since: String::new(),
            check: 0,
            controllers: observe.controllers.clone(),
            flux_instance: observe.flux_instance.clone(),
            sync: observe.flux_instance.is_some().then(|| observe.kustomization.clone()),
            git_secret: observe.git_secret.clone(),
        };
        report.recheck = follow::next(flux, &self.settings.confirm, &template);
    }

    /// The plan, applied in order unless Flux is already there: CRDs Established before any
    /// later phase; then the first check of whether Flux takes over ([`follow::watch`]).
    #[tracing::instrument(
        target = "cellbridge::chain",
        level = "trace",
        name = "Bootstrapper.install",
        skip_all
    )]
    async fn install(
        &self,
        auth: ClusterAuth,
        fresh_entry: bool,
        cell: &str,
        req: &Request,
        prepared: Prepared,
        report: &mut Report,
    ) -> Result<(), BootstrapError> {
        let wrap = |source: crate::ports::cluster::kube::ApplyError| BootstrapError::Apply {
            cluster: req.cluster.clone(),
            cell: cell.to_owned(),
            source: Box::new(source),
        };
        let mut kube = self
            .kube
            .connect(auth, &self.settings.tuning, fresh_entry)
            .await
            .map_err(wrap)?;
        if let Some(owner) = &prepared.owner
            && kube.exists(&owner.target, owner.plural).await.map_err(wrap)?
            && !req.force
        {
            tracing::info!(cluster = %req.cluster, cell, owner = %owner.target, "{} {} exists: Flux owns this cluster, nothing to apply", owner.target.kind, owner.target.name);
            report.outcome = BootstrapOutcome::AlreadyBootstrapped;
            self.first_check(&mut kube, &prepared, prepared.prior, report).await;
            return Ok(());
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
                kube.wait_established(&crds).await.map_err(wrap)?;
                waited = true;
            }
            let applied = kube
                .apply(step)
                .instrument(tracing::trace_span!(target: CHAIN, "KubeApi.apply"))
                .await
                .map_err(wrap)?;
            report.objects.push(applied);
        }
        report.outcome = BootstrapOutcome::Bootstrapped;
        self.first_check(&mut kube, &prepared, Start::now(), report).await;
        Ok(())
    }

    /// The bootstrap's own check, for up to `CELLBRIDGE_READY_TIMEOUT_SECS` while it holds the
    /// cluster. What the cluster would not say leaves the run confirming: the apply is done.
    async fn first_check<C: KubeApi>(&self, kube: &mut C, prepared: &Prepared, from: Start, report: &mut Report) {
        if self.settings.confirm.skip {
            return;
        }
        let confirm = &self.settings.confirm;
        let wait = self.settings.tuning.ready_timeout;
        let flux = match follow::watch(kube, &prepared.observe, from, confirm, wait, &prepared.secrets).await {
            // A Flux found there may refuse credentials changed in Secrets Manager since its apply.
            Ok(seen) if report.outcome == BootstrapOutcome::AlreadyBootstrapped => {
                self.rekey(kube, &prepared.observe, from, seen, wait).await
            }
            other => other,
        };
        report.flux = Some(flux.unwrap_or_else(|e| FluxReport::unread(from, &e.to_string(), confirm.deadline)));
    }
}

/// Time kept at the end of an invocation to delete the temporary access entry (DeleteAccessEntry,
/// with the SDK's retries) after an install the deadline cut short.
pub const RELEASE_RESERVE: std::time::Duration = std::time::Duration::from_secs(30);
