//! What a bootstrap run answers: its outcome and report (the objects applied, the temporary
//! access, the GitRepository's first Ready), naming objects and files, never a secret.

use serde::Serialize;

use super::follow::FluxReport;
use crate::pure::events::bootstrap::Recheck;
use crate::shell::metrics::Outcome;
use crate::{ports::cluster::kube::Applied, rules::bootstrap::CredentialKind, rules::bootstrap::Request};

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
    /// A re-check: nothing applied, the cluster looked at (`flux`).
    Checked,
}

impl BootstrapOutcome {
    /// Its name in the report's `outcome`, for the log line too: operators match one with the
    /// other.
    pub fn as_str(self) -> &'static str {
        match self {
            BootstrapOutcome::Bootstrapped => "bootstrapped",
            BootstrapOutcome::AlreadyBootstrapped => "already_bootstrapped",
            BootstrapOutcome::Planned => "planned",
            BootstrapOutcome::NotACell => "not_a_cell",
            BootstrapOutcome::ClusterNotReady => "cluster_not_ready",
            BootstrapOutcome::Checked => "checked",
        }
    }

    /// Its metric (docs/outcomes.md, "Metrics and alarms").
    pub const fn metric(self) -> Outcome {
        match self {
            BootstrapOutcome::Bootstrapped => Outcome::Synced,
            BootstrapOutcome::AlreadyBootstrapped => Outcome::Unchanged,
            BootstrapOutcome::Planned => Outcome::Planned,
            BootstrapOutcome::NotACell => Outcome::Ignored,
            BootstrapOutcome::ClusterNotReady => Outcome::Retried,
            BootstrapOutcome::Checked => Outcome::Unchanged,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessReport {
    pub principal_arn: String,
    /// The entry was cellbridge's for this run (and deleted after it).
    pub temporary: bool,
    /// The temporary entry was found young: another run may hold it, so this one left it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub adopted: bool,
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
    /// Where the sync objects come from: the cell's own `gotk-sync.yaml`, or the template's
    /// written for the cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialKind>,
    /// Applied (or, for a dry run, to be applied), in order.
    pub objects: Vec<Applied>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_entry: Option<AccessReport>,
    /// Whether Flux took over: the last check's verdict (none for a dry run, a cluster of no
    /// cell, or `--no-wait`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flux: Option<FluxReport>,
    /// The next re-check and its delay, while the run is still confirming: the function queues
    /// it, the command line makes it.
    #[serde(skip)]
    pub recheck: Option<(Recheck, std::time::Duration)>,
    /// A `--kubeconfig` run whose outcome could not be recorded on the cluster: the tag to set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_hint: Option<String>,
    pub duration_ms: u64,
}

impl Report {
    pub(super) fn new(req: &Request, outcome: BootstrapOutcome) -> Self {
        Report {
            cluster: req.cluster.clone(),
            region: req.region.clone(),
            cell: None,
            outcome,
            cluster_status: None,
            components_file: None,
            sync_file: None,
            credentials: None,
            objects: Vec::new(),
            access_entry: None,
            record_hint: None,
            flux: None,
            recheck: None,
            duration_ms: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BootstrapOutcome::*;
    use crate::shell::metrics::Outcome;

    #[test]
    fn the_log_line_names_the_outcome_as_the_report_does() {
        for outcome in [
            Bootstrapped,
            AlreadyBootstrapped,
            Planned,
            NotACell,
            ClusterNotReady,
            Checked,
        ] {
            assert_eq!(serde_json::to_value(outcome).unwrap(), outcome.as_str());
        }
    }

    #[test]
    fn a_cluster_still_creating_counts_as_retried_and_the_others_as_their_kind() {
        let metrics: Vec<Outcome> = [Bootstrapped, AlreadyBootstrapped, Planned, NotACell, ClusterNotReady]
            .into_iter()
            .map(|o| o.metric())
            .collect();
        assert_eq!(
            metrics,
            [
                Outcome::Synced,
                Outcome::Unchanged,
                Outcome::Planned,
                Outcome::Ignored,
                Outcome::Retried
            ]
        );
    }
}
