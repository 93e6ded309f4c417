//! The confirmation's re-checks as cluster-bootstrap runs them: a run still confirming queues
//! its next check on the function's own queue with a delay, and a re-check is one look at the
//! cluster ([`crate::rules::bootstrap::follow`]) that queues the next one until the outcome is
//! final. A re-check is never handed back to the queue: whatever happens it is answered, so
//! that none reaches the dead-letter queue. A chain broken anyway (the queue refusing the next
//! message, a pause) leaves the cluster recorded `confirming`, which the daily sweep re-checks.

use std::time::{Duration, SystemTime};

use super::handler::BootstrapService;
use super::job::ClusterResult;
use crate::ports::cluster::{Accounts, KubeConnect};
use crate::ports::queue::Enqueue as _;
use crate::ports::secrets::SecretStore;
use crate::pure::bootstrap::record;
use crate::pure::events::bootstrap::Recheck;
use crate::rules::bootstrap::{Target, report::Report};
use crate::shell::error::Classify as _;
use crate::shell::lambda::Ctx;

impl<A: Accounts, K: KubeConnect, S: SecretStore> BootstrapService<A, K, S> {
    /// One re-check, and the next one queued while the outcome is not final.
    pub(super) async fn recheck(&self, r: &Recheck, ctx: &Ctx) -> ClusterResult {
        match self.bootstrapper.recheck(r, Target::Eks, Some(ctx.deadline)).await {
            Ok(report) => {
                self.queue_recheck(&report).await;
                ClusterResult::Ran(Box::new(report))
            }
            Err(e) if e.retryable() => {
                // The cluster could not be looked at this time (STS, EKS throttled): the check
                // is made again later, as long as the deadline allows.
                let elapsed = record::parse_time(&r.since)
                    .and_then(|s| SystemTime::now().duration_since(s).ok())
                    .unwrap_or_default();
                let deadline = self.bootstrapper.settings().confirm.deadline;
                match record::next_delay(r.check, elapsed, deadline) {
                    Some(delay) => {
                        tracing::warn!(cluster = %r.cluster, check = r.check, error = %e, "re-check failed; checking again in {} s", delay.as_secs());
                        let next = Recheck {
                            check: r.check + 1,
                            ..r.clone()
                        };
                        self.send(&next, delay).await;
                    }
                    None => {
                        tracing::error!(cluster = %r.cluster, check = r.check, error = %e, "re-check failed at the deadline: the confirmation ends without an outcome recorded")
                    }
                }
                ClusterResult::RecheckEnded {
                    cluster: r.cluster.clone(),
                    error: e,
                }
            }
            Err(e) => {
                tracing::error!(cluster = %r.cluster, check = r.check, error = %e, "re-check refused: the confirmation ends");
                ClusterResult::RecheckEnded {
                    cluster: r.cluster.clone(),
                    error: e,
                }
            }
        }
    }

    /// Queues the run's next re-check, if it has one.
    pub(super) async fn queue_recheck(&self, report: &Report) {
        let Some((next, delay)) = &report.recheck else {
            return;
        };
        self.send(next, *delay).await;
    }

    async fn send(&self, next: &Recheck, delay: Duration) {
        let Some(queue) = &self.rechecks else {
            tracing::warn!(cluster = %next.cluster, "CELLBRIDGE_CONFIRM_QUEUE_URL is not set: no re-check is queued, the cluster stays recorded `confirming` until the daily sweep re-checks it");
            return;
        };
        match queue.enqueue(&[next.to_body()], delay).await {
            Ok(()) => {
                tracing::info!(cluster = %next.cluster, check = next.check, delay_secs = delay.as_secs(), "re-check queued")
            }
            Err(e) => {
                tracing::error!(cluster = %next.cluster, check = next.check, error = %e, "could not queue the re-check: the cluster stays recorded `confirming` until the daily sweep re-checks it")
            }
        }
    }
}
