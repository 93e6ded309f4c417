//! The daily sweep's catch-up: each cluster its record says needs it is bootstrapped through the
//! function's own queue, as the manual payload (a run finding Flux there applies nothing and
//! checks), queued as soon as the sweep decides it, naming the cell, the cluster's region and the
//! account it is in: the run it starts looks for the cluster there and nowhere else, and holds the
//! cluster to the cell ([`crate::rules::bootstrap`]'s one cell per cluster).

use crate::ports::cluster::ClusterApi;
use crate::ports::cluster::eks::ClusterInfo;
use crate::ports::queue::Enqueue;
use crate::pure::bootstrap::record::CatchUp;

use super::sweep::Target;

/// Queues the catch-up of `t`; whether it was queued.
pub(super) async fn queue<Q: Enqueue>(queue: Option<&Q>, t: &Target, caught: Option<CatchUp>) -> bool {
    let Some(caught) = caught else { return false };
    let Some(account) = &t.account else {
        // Without its account the run would look for the cluster in cellbridge's own.
        tracing::error!(cell = %t.cell, cluster = %t.cluster, "sweep: the cluster's account is not known; its catch-up is not queued");
        return false;
    };
    let body = serde_json::json!({
        "action": "bootstrap",
        "cluster": t.cluster,
        "region": t.region,
        "cell": t.cell,
        "account": account,
    });
    let Some(queue) = queue else {
        tracing::warn!(cell = %t.cell, cluster = %t.cluster, "sweep: the cluster has no record of a completed bootstrap, but CELLBRIDGE_CONFIRM_QUEUE_URL is not set: bootstrap it by hand");
        return false;
    };
    match queue.enqueue(&[body.to_string()], std::time::Duration::ZERO).await {
        Ok(()) => {
            let why = match caught {
                CatchUp::Bootstrap => "no record of a completed bootstrap",
                CatchUp::Recheck => "recorded stuck, or confirming long past its deadline",
            };
            tracing::warn!(cell = %t.cell, cluster = %t.cluster, %account, "sweep: the cluster has {why}; bootstrapping it through the queue (a Flux found there is checked, not re-applied)");
            true
        }
        Err(e) => {
            tracing::error!(cell = %t.cell, cluster = %t.cluster, error = %e, "sweep: could not queue the cluster's bootstrap; the next sweep tries again");
            false
        }
    }
}

/// Marks the cluster's catch-up queued at `now` ([`crate::pure::bootstrap::record::CATCH_UP_TAG`],
/// TagResource). Best effort: unmarked, a retried sweep may queue the catch-up once more, and
/// the two runs it starts each hold their own access ([`crate::rules::bootstrap::access`]).
pub(super) async fn mark(api: &impl ClusterApi, info: &ClusterInfo, now: std::time::SystemTime) {
    use crate::pure::bootstrap::record;
    let Some(arn) = info.arn.as_deref() else {
        tracing::warn!(cluster = %info.name, "sweep: DescribeCluster gave no ARN; the queued catch-up is not marked");
        return;
    };
    let tags = [(record::CATCH_UP_TAG.to_owned(), record::format_time(now))];
    if let Err(e) = api.tag_cluster(&info.name, arn, &tags).await {
        tracing::warn!(cluster = %info.name, error = %e, "sweep: could not mark the queued catch-up on the cluster (TagResource)");
    }
}
