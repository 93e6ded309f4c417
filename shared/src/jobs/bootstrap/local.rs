//! `cellbridge bootstrap`: the Lambda's bootstrap from a laptop, against a fleet checkout.

use std::path::PathBuf;

use aws_config::Region;

use crate::ports::cluster::{Accounts, KubeConnect};
use crate::ports::secrets::SecretStore;
use crate::pure::fleet::LocalFleet;
use crate::{
    rules::bootstrap::BootstrapError, rules::bootstrap::Bootstrapper, rules::bootstrap::Request,
    rules::bootstrap::Target, rules::bootstrap::config, rules::bootstrap::config::Settings,
    rules::bootstrap::report::Report,
};

/// What the command line's `cellbridge bootstrap` passes.
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    pub cluster: String,
    pub region: String,
    pub cell: Option<String>,
    /// The account the cluster is in (default: the profile's, or the merged role's).
    pub account: Option<String>,
    /// Talk to this cluster directly; EKS is not used.
    pub kubeconfig: Option<PathBuf>,
    pub dry_run: bool,
    pub force: bool,
    /// Stop after the apply: no check of whether Flux takes over.
    pub no_wait: bool,
}

/// `cellbridge bootstrap` from a laptop: the same code as the Lambda, configured from the
/// environment, against a fleet checkout; its base branch is [`config::checkout_base_branch`].
pub async fn run_local(fleet: &LocalFleet, opts: &LocalOptions) -> Result<Report, BootstrapError> {
    crate::shell::telemetry::install_crypto_provider();
    let mut settings = Settings::from_env()?;
    settings.confirm.skip = opts.no_wait;
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
        account: opts.account.clone(),
        force: opts.force,
        dry_run: opts.dry_run,
    };
    let target = match &opts.kubeconfig {
        Some(p) => Target::Kubeconfig(p),
        None => Target::Eks,
    };
    let base_branch = config::checkout_base_branch(fleet.root());
    let bootstrapper = Bootstrapper::new(aws, settings);
    let report = bootstrapper
        .run_until(fleet, base_branch.as_deref(), &req, target, None)
        .await?;
    let mut report = follow(&bootstrapper, report, target).await?;
    if opts.kubeconfig.is_some() {
        bootstrapper.record_after_kubeconfig(&req, &mut report).await;
    }
    Ok(report)
}

/// The command line's wait: the re-checks the function would queue, made here in turn, each
/// after its delay (each with its own temporary access entry on EKS), until the outcome is
/// final or the deadline (`CELLBRIDGE_CONFIRM_DEADLINE_SECS`) passes.
pub async fn follow<A: Accounts, K: KubeConnect, S: SecretStore>(
    bootstrapper: &Bootstrapper<A, K, S>,
    mut report: Report,
    target: Target<'_>,
) -> Result<Report, BootstrapError> {
    while let Some((next, delay)) = report.recheck.take() {
        tracing::info!(
            cluster = %next.cluster,
            "Flux has not taken over yet; checking again in {} s",
            delay.as_secs()
        );
        tokio::time::sleep(delay).await;
        let checked = bootstrapper.recheck(&next, target, None).await?;
        report.flux = checked.flux;
        report.recheck = checked.recheck;
        if checked.access_entry.is_some() {
            report.access_entry = checked.access_entry;
        }
    }
    Ok(report)
}
