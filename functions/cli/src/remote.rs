//! `invoke` and `bootstrap`: the Lambda handlers on a laptop, against whatever AWS
//! (`AWS_ENDPOINT_URL`, profiles) and GitHub (`GITHUB_API_URL`) the environment points at.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cellbridge::jobs::bootstrap::local::LocalOptions;
use cellbridge::pure::fleet::LocalFleet;
use cellbridge::rules::bootstrap;
use cellbridge::shell::error::{Class, Classify};

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Function {
    StateSync,
    ClusterBootstrap,
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(transparent)]
    Sync(#[from] cellbridge::jobs::sync::SyncError),
    #[error(transparent)]
    Bootstrap(#[from] bootstrap::BootstrapError),
    #[error(transparent)]
    Fleet(#[from] cellbridge::pure::fleet::FleetError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

impl Classify for RemoteError {
    fn class(&self) -> Class {
        match self {
            RemoteError::Sync(e) => e.class(),
            RemoteError::Bootstrap(e) => e.class(),
            // The fleet checkout named on the command line cannot be read.
            RemoteError::Fleet(_) => Class::InvalidInput,
            RemoteError::Runtime(_) => Class::Final,
        }
    }
}

impl RemoteError {
    pub fn exit_code(&self) -> u8 {
        self.class().exit_code()
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, RemoteError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RemoteError::Runtime)
}

pub fn invoke(function: Function, event: &Path, fleet: Option<&Path>) -> Result<ExitCode, RemoteError> {
    let rt = runtime()?;
    let (response, class) = match function {
        Function::StateSync => {
            let inv = rt.block_on(cellbridge::jobs::sync::invoke_from_file(event))?;
            (inv.response, inv.class)
        }
        Function::ClusterBootstrap => {
            let inv = rt.block_on(cellbridge::jobs::bootstrap::handler::invoke_from_file(event, fleet))?;
            (inv.response, inv.class)
        }
    };
    // The handler's answer is what Lambda would return: print it as it is, for people and jq alike.
    println!("{}", serde_json::to_string_pretty(&response).expect("json"));
    Ok(class.map_or(ExitCode::SUCCESS, |c| ExitCode::from(c.exit_code())))
}

#[derive(clap::Args)]
pub struct BootstrapArgs {
    /// The EKS cluster's name.
    #[arg(long)]
    cluster: String,
    /// The cluster's region.
    #[arg(long)]
    region: String,
    /// The cell, when the cluster's `cellbridge.dev/cell` tag cannot be read (with --kubeconfig).
    #[arg(long)]
    cell: Option<String>,
    /// The AWS account the cluster is in, when not the profile's: reached through its role in
    /// CELLBRIDGE_ACCOUNT_ROLES (or the cell's merged bootstrap_role_arn).
    #[arg(long)]
    account: Option<String>,
    /// Talk to the cluster through this kubeconfig instead of EKS (no access entry, no token).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The fleet repository checkout that holds the cell's Flux manifests.
    #[arg(long, default_value = ".")]
    fleet: PathBuf,
    /// List every object in apply order; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Re-apply even when the Kustomization `flux-system` already exists.
    #[arg(long)]
    force: bool,
    /// Stop after the apply instead of waiting (up to CELLBRIDGE_CONFIRM_DEADLINE_SECS) for Flux
    /// to take over.
    #[arg(long)]
    no_wait: bool,
}

pub fn bootstrap(args: &BootstrapArgs, json: bool) -> Result<ExitCode, RemoteError> {
    let fleet = LocalFleet::open(&args.fleet)?;
    let opts = LocalOptions {
        cluster: args.cluster.clone(),
        region: args.region.clone(),
        cell: args.cell.clone(),
        account: args.account.clone(),
        kubeconfig: args.kubeconfig.clone(),
        dry_run: args.dry_run,
        force: args.force,
        no_wait: args.no_wait,
    };
    let report = runtime()?.block_on(cellbridge::jobs::bootstrap::local::run_local(&fleet, &opts))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    } else {
        let outcome = serde_json::to_value(report.outcome).expect("json");
        println!(
            "cluster {} ({}), cell {}: {}",
            report.cluster,
            report.region,
            report.cell.as_deref().unwrap_or("none"),
            outcome.as_str().unwrap_or_default()
        );
        for (i, o) in report.objects.iter().enumerate() {
            println!("{:>4}. {:<26} {}", i + 1, o.phase.describe(), o.target);
        }
        if let Some(f) = &report.flux {
            println!(
                "Flux: {} ({} s after the apply): {}",
                f.outcome, f.elapsed_secs, f.sentence
            );
        }
        if let Some(hint) = &report.record_hint {
            println!("Record: {hint}");
        }
    }
    // Flux's outcome decides (docs/command-line.md, exit codes): ready 0, build-failed 1, git-auth 2, the
    // others 3; a run that did not wait for it (--no-wait, --dry-run) succeeded at the apply.
    Ok(match (&report.flux, report.outcome) {
        (_, bootstrap::BootstrapOutcome::ClusterNotReady) => ExitCode::from(Class::Retryable.exit_code()),
        (Some(f), _) => ExitCode::from(f.outcome.exit_code() as u8),
        (None, _) => ExitCode::SUCCESS,
    })
}
