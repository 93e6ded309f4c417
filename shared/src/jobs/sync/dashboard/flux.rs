//! The dashboard's Flux column: for each cell whose merged `cell-metadata.yaml` names its
//! cluster (`cluster_name`, `aws_region`), one DescribeCluster in the cell's account, through
//! the role that reaches it, exactly as a decommission asks ([`Syncer::describe_cell_cluster`]),
//! and the bootstrap record its tags hold ([`Flux::from_tags`]). A few clusters at a time; a
//! cell that names no cluster costs nothing; a cluster EKS no longer knows shows nothing; a
//! question EKS did not answer, or refused, shows `unknown` and why, rather than failing the
//! dashboard.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::StreamExt;
use serde::Serialize;

use crate::jobs::sync::syncer::{Described, Syncer};
use crate::ports::github::GithubRepo;
use crate::ports::state::StateSource;
use crate::pure::decommission;
use crate::pure::fleet::FleetRead;
use crate::pure::status::{CellStatus, Flux};

/// Clusters described at once.
pub(super) const DESCRIBES: usize = 8;

/// What the Flux column cost: the answer's `"clusters"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClustersRead {
    /// Clusters asked about: one per cell whose merged metadata names one (DescribeCluster, after
    /// an AssumeRole for a cell of another account).
    pub described: usize,
    /// Of those, the ones EKS no longer knows: their rows show nothing new.
    pub gone: usize,
    /// Of those, the ones whose record is unknown (no answer, refused, tags edited).
    pub unknown: usize,
}

impl<S: StateSource, G: GithubRepo> Syncer<S, G> {
    /// Fills each row's [`CellStatus::flux`] from its cell's cluster, asked until `until`.
    /// `None`: no EKS access here, so no column (and nothing asked).
    pub(super) async fn read_flux(
        &self,
        fleet: &dyn FleetRead,
        rows: &mut [CellStatus],
        until: Instant,
    ) -> Option<ClustersRead> {
        self.clusters.as_ref()?;
        // One question per cell (a cell whose workspaces give it several rows has one cluster).
        let mut targets = BTreeMap::new();
        for r in rows.iter() {
            if !targets.contains_key(&r.cell)
                && let Ok(Some(target)) = decommission::cell_cluster(fleet, &r.cell)
            {
                targets.insert(r.cell.clone(), target);
            }
        }
        let asks = targets
            .into_iter()
            .map(|(cell, target)| self.flux_of(fleet, cell, target, until));
        let found: BTreeMap<String, Option<Flux>> =
            futures::stream::iter(asks).buffer_unordered(DESCRIBES).collect().await;
        let read = ClustersRead {
            described: found.len(),
            gone: found.values().filter(|f| f.is_none()).count(),
            unknown: found
                .values()
                .filter(|f| matches!(f, Some(Flux::Unknown { .. })))
                .count(),
        };
        for (cell, flux) in &found {
            if let Some(Flux::Unknown { reason }) = flux {
                tracing::warn!(%cell, reason = %reason, "fleet dashboard: the cell's cluster's Flux record is unknown");
            }
        }
        for r in rows.iter_mut() {
            r.flux = found.get(r.cell.as_str()).cloned().flatten();
        }
        Some(read)
    }

    /// `cell`'s cluster's Flux record (`None`: EKS no longer knows the cluster).
    async fn flux_of(
        &self,
        fleet: &dyn FleetRead,
        cell: String,
        target: decommission::CellCluster,
        until: Instant,
    ) -> (String, Option<Flux>) {
        let flux = match self.describe_cell_cluster(fleet, &cell, &target, until).await {
            Ok(Described::Exists { tags, .. }) => Some(Flux::from_tags(&tags)),
            Ok(Described::Gone { .. }) => None,
            Ok(Described::Unreachable(why)) => Some(Flux::Unknown { reason: why }),
            Err(e) => Some(Flux::Unknown { reason: e.to_string() }),
        };
        (cell, flux)
    }
}
