//! Waiting for a new cluster to be ACTIVE: EKS creates a cluster in minutes, a bootstrap waits
//! for it within the invocation and leaves the rest to the next delivery.

use std::time::{Duration, Instant};

use crate::ports::cluster::ClusterApi;
use crate::ports::cluster::eks::{ClusterInfo, ClusterStatus, EksError};

pub enum Waited {
    Active(ClusterInfo),
    /// Still not ACTIVE when the budget ran out.
    StillCreating(ClusterInfo),
}

/// Polls until ACTIVE, FAILED/DELETING (an error), or `budget` has passed.
pub async fn wait_active(
    api: &impl ClusterApi,
    cluster: &str,
    region: &str,
    budget: Duration,
    poll: Duration,
) -> Result<Waited, EksError> {
    let start = Instant::now();
    loop {
        let info = api.describe_cluster(cluster).await?.ok_or_else(|| EksError::NotFound {
            cluster: cluster.into(),
            region: region.into(),
        })?;
        match info.status {
            ClusterStatus::Active | ClusterStatus::Updating => return Ok(Waited::Active(info)),
            ClusterStatus::Failed | ClusterStatus::Deleting => {
                return Err(EksError::Unusable {
                    cluster: cluster.into(),
                    status: info.status.as_str().to_owned(),
                });
            }
            _ => {
                if start.elapsed() + poll > budget {
                    return Ok(Waited::StillCreating(info));
                }
                tracing::info!(
                    cluster,
                    status = info.status.as_str(),
                    "waiting for the cluster to become ACTIVE"
                );
                tokio::time::sleep(poll).await;
            }
        }
    }
}
