//! After the apply: following the cluster until Flux has taken over or the deadline passes.
//!
//! One check reads what the cluster reports and [`confirm::classify`] decides (`ready`, a named
//! reason, or `confirming`); the outcome is recorded on the EKS cluster as two tags
//! ([`record`]). The bootstrap's own run makes the first check, looking again for up to
//! [`Tuning::ready_timeout`](crate::ports::cluster::kube::Tuning::ready_timeout) while it holds
//! the cluster; after that each re-check is a message the function sends to its own queue with
//! a delay ([`record::next_delay`]), and runs as one check under a fresh temporary access entry,
//! deleted at its end. A re-check reads no fleet repo: everything it needs is in its message
//! ([`Recheck`]); it reads the Git secret only when the source refuses the credentials, to apply
//! corrected ones ([`super::rekey`]).

use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::report::{AccessReport, BootstrapOutcome, Report};
use super::{BootstrapError, Bootstrapper, Request, Target, access};
use crate::ports::cluster::eks::ClusterInfo;
use crate::ports::cluster::kube::{ApplyError, ClusterAuth, Observe};
use crate::ports::cluster::{Accounts, ClusterApi, KubeApi, KubeConnect};
use crate::ports::secrets::SecretStore;
use crate::pure::bootstrap::confirm::{self, Outcome, Timing, Verdict};
use crate::pure::bootstrap::record::{self, FluxRecord};
use crate::pure::events::bootstrap::Recheck;
use crate::pure::redact::Secret;

/// What the checks of a bootstrap found, in its report (`flux`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FluxReport {
    /// `ready`, a reason, or `confirming` (a re-check is queued, or the caller goes on).
    pub outcome: Outcome,
    /// Kubernetes' or Flux's own words for it, redacted.
    pub sentence: String,
    /// While confirming: what is still awaited.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub awaited: Vec<String>,
    /// While confirming: the reason seen that is not final yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspect: Option<Outcome>,
    /// Flux refused a post-build substitution under strict mode: the strict check, which passed
    /// this content before the merge, and Flux disagree.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict_substitution: bool,
    /// When the apply finished (RFC 3339): the grace and the deadline count from it.
    pub since: String,
    pub elapsed_secs: u64,
    /// This check's number (the bootstrap's own is 1).
    pub check: u32,
    /// The outcome is on the cluster's tags (EKS clusters only; a failed TagResource is logged).
    pub recorded: bool,
    /// While confirming: when the next check is due, seconds from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_check_secs: Option<u64>,
    /// What the check did about credentials the source refused: compared with Secrets Manager's,
    /// applied again or not, and why ([`super::rekey`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_secret: Option<super::rekey::GitSecretCheck>,
}

impl FluxReport {
    fn new(verdict: Verdict, since: SystemTime, elapsed: Duration, check: u32) -> Self {
        FluxReport {
            outcome: verdict.outcome,
            sentence: verdict.sentence,
            awaited: verdict.awaited,
            suspect: verdict.suspect,
            strict_substitution: verdict.strict_substitution,
            since: record::format_time(since),
            elapsed_secs: elapsed.as_secs(),
            check,
            recorded: false,
            next_check_secs: None,
            git_secret: None,
        }
    }

    pub fn is_final(&self) -> bool {
        self.outcome != Outcome::Confirming
    }

    /// A check that could not read the cluster (or ran out of the invocation's time): still
    /// confirming, so that the next check is queued.
    /// Past the deadline it is `timed-out`, saying why.
    pub(super) fn unread(from: Start, why: &str, deadline: Duration) -> Self {
        let elapsed = SystemTime::now().duration_since(from.since).unwrap_or_default();
        tracing::warn!(check = from.check, "Flux's state could not be read: {why}");
        FluxReport {
            outcome: if elapsed >= deadline {
                Outcome::TimedOut
            } else {
                Outcome::Confirming
            },
            sentence: format!("the cluster's state could not be read: {why}"),
            awaited: Vec::new(),
            suspect: None,
            strict_substitution: false,
            since: record::format_time(from.since),
            elapsed_secs: elapsed.as_secs(),
            check: from.check,
            recorded: false,
            next_check_secs: None,
            git_secret: None,
        }
    }

    /// A check of a cluster Flux already owns that the invocation's deadline stopped: checked,
    /// not finished; nothing was left to apply, so the next check goes on from here.
    pub(super) fn cut(from: Start, deadline: Duration) -> Self {
        let mut flux = Self::unread(from, CHECK_CUT, deadline);
        flux.sentence = format!("Checked, not finished: {CHECK_CUT}.");
        flux
    }
}

/// Why a check ended early: the invocation's deadline.
const CHECK_CUT: &str =
    "the invocation's deadline came during the check of a cluster Flux already owns; the next check goes on";

/// Where a run's checks start from: the apply that just finished, or (Flux already there) the
/// record an earlier run left on the cluster.
#[derive(Debug, Clone, Copy)]
pub(super) struct Start {
    pub since: SystemTime,
    pub check: u32,
}

impl Start {
    pub(super) fn now() -> Self {
        Start {
            since: SystemTime::now(),
            check: 1,
        }
    }

    /// An earlier run's record, else now.
    pub(super) fn prior(info: Option<&ClusterInfo>) -> Self {
        match info.and_then(|i| FluxRecord::from_tags(&i.tags)) {
            Some(Ok(r)) => Start {
                since: r.since,
                check: 1,
            },
            _ => Start::now(),
        }
    }
}

/// Checks until the verdict is final or `wait` has passed; one check at least.
pub(super) async fn watch<K: KubeApi>(
    kube: &mut K,
    what: &Observe,
    from: Start,
    settings: &super::config::Confirm,
    wait: Duration,
    secrets: &[Secret<String>],
) -> Result<FluxReport, ApplyError> {
    let start = Instant::now();
    loop {
        let mut snapshot = kube.observe(what).await?;
        snapshot.secrets = secrets.to_vec();
        let elapsed = SystemTime::now().duration_since(from.since).unwrap_or_default();
        let timing = Timing {
            elapsed,
            grace: settings.grace,
            deadline: settings.deadline,
        };
        let verdict = confirm::classify(&snapshot, &timing);
        if verdict.is_final() || start.elapsed() + settings.poll > wait {
            let flux = FluxReport::new(verdict, from.since, elapsed, from.check);
            log(&flux);
            return Ok(flux);
        }
        tokio::time::sleep(settings.poll).await;
    }
}

/// The line a final outcome gets (a `confirming` one is said at info level, once per check).
fn log(flux: &FluxReport) {
    let (outcome, sentence) = (flux.outcome.as_str(), flux.sentence.as_str());
    match flux.outcome {
        Outcome::Ready => tracing::info!(
            flux = outcome,
            check = flux.check,
            elapsed_secs = flux.elapsed_secs,
            "Flux has taken over: {sentence}"
        ),
        Outcome::Confirming => tracing::info!(
            flux = outcome,
            check = flux.check,
            elapsed_secs = flux.elapsed_secs,
            suspect = flux.suspect.map_or("", Outcome::as_str),
            "Flux has not taken over yet: {sentence}"
        ),
        _ if flux.strict_substitution => tracing::error!(
            flux = outcome,
            check = flux.check,
            "the strict check and Flux disagree: Flux refused a post-build substitution in content the check passed: {sentence}"
        ),
        _ => tracing::error!(
            flux = outcome,
            check = flux.check,
            elapsed_secs = flux.elapsed_secs,
            "bootstrap stuck: {sentence}"
        ),
    }
}

/// Writes the outcome on the cluster; best effort (the outcome is in the log and the metric
/// whatever happens), so a failure is logged and the report says `recorded: false`.
pub(super) async fn record_on<A: ClusterApi>(api: &A, info: &ClusterInfo, flux: &mut FluxReport) {
    let Some(arn) = info.arn.as_deref() else {
        tracing::warn!(cluster = %info.name, "DescribeCluster gave no ARN: the bootstrap's outcome is not recorded on the cluster");
        return;
    };
    let since = record::parse_time(&flux.since).unwrap_or_else(SystemTime::now);
    let tags = FluxRecord {
        outcome: flux.outcome,
        since,
    }
    .to_tags();
    match api.tag_cluster(&info.name, arn, &tags).await {
        Ok(()) => flux.recorded = true,
        Err(e) => {
            tracing::warn!(cluster = %info.name, error = %e, "could not record the bootstrap's outcome on the cluster (TagResource)")
        }
    }
}

/// The next re-check of a run that is still confirming, and its delay; `None` when the run's
/// verdict is final.
pub(super) fn next(
    flux: &mut FluxReport,
    settings: &super::config::Confirm,
    req: &Recheck,
) -> Option<(Recheck, Duration)> {
    if flux.is_final() {
        return None;
    }
    let delay = record::next_delay(flux.check, Duration::from_secs(flux.elapsed_secs), settings.deadline)?;
    flux.next_check_secs = Some(delay.as_secs());
    Some((
        Recheck {
            check: flux.check + 1,
            since: flux.since.clone(),
            ..req.clone()
        },
        delay,
    ))
}

impl<A: Accounts, K: KubeConnect, S: SecretStore> Bootstrapper<A, K, S> {
    /// One re-check of a bootstrap's confirmation: the cluster described, a fresh temporary
    /// access entry, one look at what the cluster reports, the entry deleted, the outcome
    /// recorded; with the next re-check when it is still confirming. No GitHub request; the Git
    /// secret is read only when the source refuses the credentials ([`super::rekey`]).
    pub async fn recheck(
        &self,
        r: &Recheck,
        target: Target<'_>,
        deadline: Option<Instant>,
    ) -> Result<Report, BootstrapError> {
        let span = tracing::info_span!("bootstrap", cluster = %r.cluster, region = %r.region, cell = %r.cell);
        tracing::Instrument::instrument(self.recheck_in(r, target, deadline), span).await
    }

    async fn recheck_in(
        &self,
        r: &Recheck,
        target: Target<'_>,
        deadline: Option<Instant>,
    ) -> Result<Report, BootstrapError> {
        let start = Instant::now();
        let req = Request {
            cluster: r.cluster.clone(),
            region: r.region.clone(),
            cell: Some(r.cell.clone()),
            account: r.account.clone(),
            force: false,
            dry_run: false,
        };
        super::check_request(&req)?;
        let since = record::parse_time(&r.since).ok_or_else(|| BootstrapError::InvalidRequest {
            what: "re-check since",
            value: r.since.clone(),
            expected: "an RFC 3339 time",
        })?;
        let from = Start { since, check: r.check };
        let mut observe = Observe {
            flux_instance: r.flux_instance.clone(),
            git_secret: r.git_secret.clone(),
            ..Observe::flux_system(r.controllers.clone())
        };
        if let Some(sync) = &r.sync {
            observe.git_repository = sync.clone();
            observe.kustomization = sync.clone();
        }
        let mut report = Report::new(&req, BootstrapOutcome::Checked);
        report.cell = Some(r.cell.clone());
        if let Target::Kubeconfig(path) = target {
            let mut kube = self
                .kube
                .connect(ClusterAuth::Kubeconfig(path.to_owned()), &self.settings.tuning, false)
                .await
                .map_err(|e| apply_error(&req, e))?;
            let flux = watch(&mut kube, &observe, from, &self.settings.confirm, Duration::ZERO, &[])
                .await
                .map_err(|e| apply_error(&req, e))?;
            let wait = self.settings.tuning.ready_timeout;
            let mut flux = self
                .rekey(&mut kube, &observe, from, flux, wait)
                .await
                .map_err(|e| apply_error(&req, e))?;
            report.recheck = next(&mut flux, &self.settings.confirm, r);
            report.flux = Some(flux);
            report.duration_ms = start.elapsed().as_millis() as u64;
            return Ok(report);
        }
        // The message's role is held to the bootstrap's own rule, never taken on its word.
        let role = self
            .role_for(&req, r.role.as_deref().map(|role| (r.cell.as_str(), role)))
            .await?;
        let api = self.accounts.open(&r.region, role.as_deref()).await?;
        let Some(info) = api.describe_cluster(&r.cluster).await? else {
            tracing::info!("the cluster no longer exists: its confirmation ends");
            report.outcome = BootstrapOutcome::NotACell;
            return Ok(report);
        };
        report.cluster_status = Some(info.status.as_str().to_owned());
        let (endpoint, ca_pem) = self.endpoint(&info)?;
        let principal = self.principal(&api, role.as_deref()).await?;
        let grant = access::ensure(&api, &r.cluster, &principal).await?;
        let look = async {
            let auth: ClusterAuth = api.kube_auth(&r.cluster, endpoint, ca_pem).await?;
            let mut kube = self
                .kube
                .connect(auth, &self.settings.tuning, grant.temporary)
                .await
                .map_err(|e| apply_error(&req, e))?;
            let flux = watch(&mut kube, &observe, from, &self.settings.confirm, Duration::ZERO, &[])
                .await
                .map_err(|e| apply_error(&req, e))?;
            self.rekey(&mut kube, &observe, from, flux, self.settings.tuning.ready_timeout)
                .await
                .map_err(|e| apply_error(&req, e))
        };
        let deadline_secs = self.settings.confirm.deadline;
        let looked = match deadline.map(|d| d.checked_sub(super::RELEASE_RESERVE).unwrap_or(start)) {
            None => look.await,
            Some(by) => match tokio::time::timeout_at(by.into(), look).await {
                Ok(looked) => looked,
                Err(_) => Ok(FluxReport::cut(from, deadline_secs)),
            },
        };
        let released = access::release(&api, &r.cluster, &grant).await;
        report.access_entry = Some(AccessReport {
            principal_arn: grant.principal_arn.clone(),
            temporary: grant.temporary,
            adopted: grant.adopted,
            removed: matches!(released, Ok(true)),
        });
        if let Err(e) = &released {
            tracing::error!(error = %e, "could not delete the temporary access entry");
        }
        // What the cluster would not say is not the re-check's failure: the chain goes on (or,
        // at the deadline, ends `timed-out` saying why).
        let mut flux =
            looked.unwrap_or_else(|e| FluxReport::unread(from, &e.to_string(), self.settings.confirm.deadline));
        record_on(&api, &info, &mut flux).await;
        report.recheck = next(&mut flux, &self.settings.confirm, r);
        report.flux = Some(flux);
        released?;
        report.duration_ms = start.elapsed().as_millis() as u64;
        Ok(report)
    }
}

fn apply_error(req: &Request, source: ApplyError) -> BootstrapError {
    BootstrapError::Apply {
        cluster: req.cluster.clone(),
        cell: req.cell.clone().unwrap_or_default(),
        source: Box::new(source),
    }
}
