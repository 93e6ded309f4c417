//! cluster-bootstrap as the Lambda handler runs it ([`crate::shell::lambda::Job`]): each cluster an
//! event names, bootstrapped on one read of the fleet repo; the sweep's page when it is the
//! invocation (`{"action": "sweep"}`) or a page handed on through the queue.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tracing::Instrument as _;

use super::handler::BootstrapService;
use crate::ports::fleet::{BaseFleet, FleetSource};
use crate::ports::secrets::SecretStore;
use crate::pure::events::bootstrap::{self as ev, BootstrapEvent, BootstrapEventError, BootstrapItem};
use crate::pure::fleet::Keep;
use crate::shell::error::Classify;
use crate::shell::lambda::{About, After, Ctx, Failed, Fails, ItemOutcome, Job, Record, Work};
use crate::shell::metrics::{Metrics, Outcome};
use crate::shell::pause::{self, Pause, SettingsError};
use crate::{
    ports::cluster::Accounts, ports::cluster::KubeConnect, rules::bootstrap::BootstrapError, rules::bootstrap::Target,
    rules::bootstrap::report::BootstrapOutcome, rules::bootstrap::report::Report,
};

/// Leaves time for the bootstrap itself after waiting for a CREATING cluster.
const INSTALL_RESERVE: Duration = Duration::from_secs(240);

/// What one event or SQS message asks for, or why it cannot be read.
#[derive(Debug)]
pub struct Asked {
    pub message_id: Option<String>,
    pub item: Result<BootstrapItem, BootstrapEventError>,
}

impl Asked {
    fn cluster(&self) -> Option<&crate::rules::bootstrap::Request> {
        match &self.item {
            Ok(BootstrapItem::Cluster(r)) => Some(r),
            _ => None,
        }
    }
}

/// What the sweep and the answer need of an invocation.
pub struct BootstrapPlan {
    /// `{"action": "sweep"}`: the sweep is the invocation.
    sweep_alone: bool,
    /// The page of the sweep to go through after the clusters (`Some(None)`: from the start):
    /// the invocation's own, or the one a page that ran out of time handed on through the queue.
    sweep_page: Option<Option<String>>,
}

/// The fleet repo's base branch as the run's clusters share it.
pub struct SharedFleet {
    /// `None` when no cluster is to be bootstrapped (paused, or nothing but ignored events).
    base: Option<BaseFleet>,
    /// What the read kept: every cell's `cell-metadata.yaml`, the requests' cells and the cells
    /// naming their clusters.
    keep: Keep,
    /// `.cellbridge/settings.yaml` on that base: paused, or wrong (every cluster then fails,
    /// naming the file).
    settings: Result<Option<Pause>, SettingsError>,
}

/// What one cluster (or one event) came to.
#[derive(Debug)]
pub enum ClusterResult {
    /// The run's report: bootstrapped, already bootstrapped, planned, or no cell's.
    Ran(Box<Report>),
    Paused {
        cluster: String,
        region: String,
        paused: Pause,
    },
    /// Another API call, or a CreateCluster that failed: nothing to do.
    Ignored { what: String, reason: String },
    Failed {
        cluster: Option<String>,
        error: BootstrapError,
    },
    /// A re-check that failed for good (a refused role, say): logged and counted, never handed
    /// back to the queue, so that no re-check reaches the dead-letter queue.
    RecheckEnded { cluster: String, error: BootstrapError },
}

impl ClusterResult {
    fn to_json(&self) -> Value {
        match self {
            ClusterResult::Ran(report) => serde_json::to_value(report).unwrap_or_default(),
            ClusterResult::Paused {
                cluster,
                region,
                paused,
            } => json!({
                "cluster": cluster, "region": region, "cell": null,
                "outcome": "paused", "paused": paused, "objects": [],
            }),
            ClusterResult::Ignored { what, reason } => json!({"ignored": what, "reason": reason}),
            // Naming the cluster: the answer says which one failed, and its line too.
            ClusterResult::Failed {
                cluster: Some(c),
                error,
            } => json!({"cluster": c, "error": error.to_string()}),
            ClusterResult::Failed { cluster: None, error } => json!({"error": error.to_string()}),
            ClusterResult::RecheckEnded { cluster, error } => {
                json!({"cluster": cluster, "outcome": "checked", "error": error.to_string()})
            }
        }
    }
}

impl Serialize for ClusterResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl ItemOutcome for ClusterResult {
    fn metric(&self) -> Outcome {
        match self {
            ClusterResult::Ran(r) => r.outcome.metric(),
            ClusterResult::Paused { .. } => Outcome::Paused,
            ClusterResult::Ignored { .. } => Outcome::Ignored,
            ClusterResult::Failed { error, .. } | ClusterResult::RecheckEnded { error, .. } => {
                Outcome::of_failure(error.class())
            }
        }
    }

    fn properties(&self) -> Vec<(&'static str, Option<&str>)> {
        let (cell, cluster) = match self {
            ClusterResult::Ran(r) => (r.cell.as_deref(), Some(r.cluster.as_str())),
            ClusterResult::Paused { cluster, .. } => (None, Some(cluster.as_str())),
            ClusterResult::Ignored { .. } => (None, None),
            ClusterResult::Failed { cluster, .. } => (None, cluster.as_deref()),
            ClusterResult::RecheckEnded { cluster, .. } => (None, Some(cluster.as_str())),
        };
        vec![("cell", cell), ("cluster", cluster)]
    }

    fn flux(&self) -> Option<crate::pure::bootstrap::confirm::Outcome> {
        match self {
            ClusterResult::Ran(r) => r.flux.as_ref().filter(|f| f.is_final()).map(|f| f.outcome),
            _ => None,
        }
    }

    fn failure(&self) -> Option<Failed> {
        let ClusterResult::Failed { cluster, error } = self else {
            return None;
        };
        Some(Failed {
            class: error.class(),
            reason: error.to_string(),
            about: cluster.as_deref().map_or_else(About::event, About::cluster),
        })
    }
}

/// Each cluster of an event, in order: a cluster still CREATING is not an error of the event,
/// but directly invoked the invocation fails so that EventBridge's retry policy brings it back,
/// and from SQS its record is listed for redelivery (after the function's backoff).
impl<A: Accounts, K: KubeConnect, S: SecretStore> Job for BootstrapService<A, K, S> {
    const NAME: &'static str = "cluster-bootstrap";
    /// One read of the fleet repo for the whole invocation, one cluster at a time.
    const GROUP: usize = usize::MAX;
    const PARALLEL: usize = 1;

    type Item = Asked;
    type Batch = SharedFleet;
    type Outcome = ClusterResult;
    type Plan = BootstrapPlan;
    type Error = BootstrapError;

    async fn parse(
        &self,
        event: &Value,
        _pause: Option<&Pause>,
        _deadline: Instant,
    ) -> Result<Work<Self>, BootstrapError> {
        let (items, sqs): (Vec<Asked>, bool) = match ev::parse(event)? {
            BootstrapEvent::Manual(r) => (vec![direct(Ok(BootstrapItem::Cluster(r)))], false),
            BootstrapEvent::Direct(item) => (vec![direct(Ok(item))], false),
            BootstrapEvent::Sqs(records) => (
                records
                    .into_iter()
                    .map(|r| Asked {
                        message_id: Some(r.message_id),
                        item: r.item,
                    })
                    .collect(),
                true,
            ),
            // The pause switch does not stop it: it only ever removes cellbridge's own expired
            // access.
            BootstrapEvent::Sweep { from } => {
                return Ok(Work {
                    plan: BootstrapPlan {
                        sweep_alone: true,
                        sweep_page: Some(from),
                    },
                    answered: Vec::new(),
                    items: Vec::new(),
                    records: None,
                    failed: Vec::new(),
                    alone: true,
                });
            }
        };
        let records = sqs.then(|| {
            items
                .iter()
                .enumerate()
                .filter_map(|(i, a)| {
                    Some(Record {
                        message_id: a.message_id.clone()?,
                        items: Ok(vec![i]),
                    })
                })
                .collect()
        });
        Ok(Work {
            plan: BootstrapPlan {
                sweep_alone: false,
                // A handed-on page is swept after the batch's clusters (several: the first).
                sweep_page: items.iter().find_map(|a| match &a.item {
                    Ok(BootstrapItem::Sweep { from }) => Some(from.clone()),
                    _ => None,
                }),
            },
            answered: Vec::new(),
            items,
            records,
            failed: Vec::new(),
            alone: false,
        })
    }

    /// Paused, a re-check is not made either (it takes an access entry): the chain ends with the
    /// cluster recorded `confirming`, and the daily sweep re-checks it once the pause is lifted.
    fn paused(&self, asked: &Asked, pause: &Pause) -> Option<ClusterResult> {
        if let Ok(BootstrapItem::Recheck(r)) = &asked.item {
            tracing::warn!(cluster = %r.cluster, paused = %pause.describe(), "re-check not made: cellbridge is paused; the daily sweep re-checks the cluster once it is not");
            return Some(ClusterResult::Paused {
                cluster: r.cluster.clone(),
                region: r.region.clone(),
                paused: pause.clone(),
            });
        }
        let req = asked.cluster()?;
        Some(paused(req, pause.clone()))
    }

    fn about(&self, asked: &Asked) -> About {
        match &asked.item {
            Ok(BootstrapItem::Recheck(r)) => About::cluster(&r.cluster),
            _ => asked
                .cluster()
                .map_or_else(About::event, |r| About::cluster(&r.cluster)),
        }
    }

    /// One read of the fleet repo for every cluster of the invocation: what finds a cluster's
    /// cell (every cell's `cell-metadata.yaml`), the cells the requests name and those whose
    /// metadata names a request's cluster (found in the same pass); a cell found otherwise (by
    /// its tag) is read when its run asks for it.
    async fn prepare(
        &self,
        items: &[Asked],
        _plan: &BootstrapPlan,
        deadline: Instant,
    ) -> Result<SharedFleet, BootstrapError> {
        let clusters = || items.iter().filter_map(Asked::cluster);
        let keep = Keep::cells(clusters().filter_map(|r| r.cell.clone()))
            .with_index()
            .with_clusters(clusters().map(|r| (r.cluster.clone(), r.region.clone())));
        if clusters().next().is_none() {
            return Ok(SharedFleet {
                base: None,
                keep,
                settings: Ok(None),
            });
        }
        // The read is for these clusters: its lines (GitHub's retries too) name them.
        let names = clusters().map(|r| r.cluster.as_str()).collect::<Vec<_>>().join(", ");
        let read = tracing::info_span!("fleet", cluster = %names);
        let base = match self.fleets.fleet(&keep, deadline).instrument(read).await {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(cluster = %names, error = %e, retryable = e.retryable(), "cannot read the fleet repo");
                return Err(BootstrapError::Fleet(e));
            }
        };
        // The fleet repo's pause switch, on the base branch as read; a file people got wrong
        // fails every cluster of the run, naming the file.
        let settings = pause::from_fleet(base.fleet.as_ref());
        if let Err(e) = &settings {
            tracing::error!(scope = "fleet", error = %e, "cannot read the fleet repo's settings");
        }
        Ok(SharedFleet {
            base: Some(base),
            keep,
            settings,
        })
    }

    /// One cluster: its bootstrap on the fleet as read (read again, once, when its cell was read
    /// past), to its report or its failure.
    async fn run(&self, asked: Asked, read: &SharedFleet, ctx: &Ctx) -> ClusterResult {
        async move {
            let deadline = ctx.deadline;
            let req = match asked.item {
                Err(e) => {
                    tracing::error!(scope = "event", message_id = asked.message_id.as_deref().unwrap_or(""), error = %e, "event not understood");
                    return ClusterResult::Failed {
                        cluster: None,
                        error: BootstrapError::Unreadable(e),
                    };
                }
                Ok(BootstrapItem::Ignored { what, reason }) => {
                    tracing::info!(%what, %reason, "event ignored");
                    return ClusterResult::Ignored { what, reason };
                }
                Ok(BootstrapItem::Recheck(r)) => return Box::pin(self.recheck(&r, ctx)).await,
                Ok(BootstrapItem::Sweep { .. }) => {
                    return ClusterResult::Ignored {
                        what: "the sweep's next page".into(),
                        reason: "swept after the batch's clusters".into(),
                    };
                }
                Ok(BootstrapItem::Cluster(req)) => req,
            };
            let first = match (&read.base, &read.settings) {
                (_, Ok(Some(p))) => return paused(&req, p.clone()),
                (_, Err(e)) => {
                    return ClusterResult::Failed {
                        cluster: Some(req.cluster),
                        error: BootstrapError::Settings(e.clone()),
                    };
                }
                (Some(base), Ok(None)) => base,
                (None, Ok(None)) => unreachable!("a cluster to bootstrap has the fleet read for it"),
            };
            let mut wider: Option<BaseFleet> = None;
            let ran = loop {
                let base = wider.as_ref().unwrap_or(first);
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(INSTALL_RESERVE);
                // Boxed: the whole bootstrap is one deep future, kept off the caller's stack. The
                // install stops before the deadline, leaving time to delete the access entry
                // (`RELEASE_RESERVE`).
                let run = Box::pin(self.bootstrapper.run_before(
                    base.fleet.as_ref(),
                    base.branch.as_deref(),
                    &req,
                    Target::Eks,
                    Some(left),
                    Some(deadline),
                ))
                .await;
                // The cluster's cell (its tag) was read past: read the base again keeping it,
                // once, and run again (a run is create-if-missing).
                let missed = base.fleet.not_kept();
                if missed.is_empty() || wider.is_some() {
                    break run;
                }
                tracing::info!(cluster = %req.cluster, cells = %missed.join(", "), "the run needs cells the fleet read kept out; reading it again with them");
                let mut keep = read.keep.clone();
                keep.cells.extend(missed);
                let span = tracing::info_span!("bootstrap", cluster = %req.cluster, region = %req.region);
                match self.fleets.fleet(&keep, deadline).instrument(span).await {
                    Ok(f) => wider = Some(f),
                    Err(e) => break Err(BootstrapError::Fleet(e)),
                }
            };
            match ran {
                Ok(rep) if rep.outcome == BootstrapOutcome::ClusterNotReady => {
                    if ctx.sqs {
                        tracing::info!(cluster = %req.cluster, "cluster still CREATING: the record is handed back, redelivered after the function's backoff");
                    } else {
                        tracing::info!(cluster = %req.cluster, "cluster still CREATING: failing the invocation so that it is retried");
                    }
                    ClusterResult::Failed {
                        error: BootstrapError::NotReady {
                            cluster: req.cluster.clone(),
                            status: rep.cluster_status.unwrap_or_else(|| "CREATING".into()),
                        },
                        cluster: Some(req.cluster),
                    }
                }
                Ok(rep) => {
                    self.queue_recheck(&rep).await;
                    ClusterResult::Ran(Box::new(rep))
                }
                Err(e) => {
                    tracing::error!(cluster = %req.cluster, retryable = e.retryable(), error = %e, "bootstrap failed");
                    ClusterResult::Failed {
                        cluster: Some(req.cluster),
                        error: e,
                    }
                }
            }
        }
        .instrument(tracing::trace_span!(target: "cellbridge::chain", "BootstrapService.run"))
        .await
    }

    /// The daily sweep's page when it is the invocation, or when the batch holds the page a
    /// previous one handed on. A bootstrap run sweeps nothing beyond its own cluster (whose
    /// expired entry it deletes itself, [`crate::rules::bootstrap::access`]).
    async fn after(
        &self,
        plan: &BootstrapPlan,
        _read: Option<&SharedFleet>,
        pause: Option<&Pause>,
        ctx: &Ctx,
        metrics: &Metrics<'_>,
    ) -> Result<Option<After>, BootstrapError> {
        let Some(from) = &plan.sweep_page else {
            return Ok(None);
        };
        // Boxed: its future stays out of the handler's layout.
        let page = Box::pin(self.sweep(ctx.deadline, pause.is_some(), metrics, from.as_deref()))
            .instrument(crate::jobs::bootstrap::sweep::span())
            .await;
        if !plan.sweep_alone {
            // A handed-on page's message is answered: its failures are the sweep's (logged,
            // counted in its heartbeat), and the next schedule goes through the fleet again.
            return Ok(page.ok().map(|(report, _)| After {
                answer: serde_json::to_value(&report).unwrap_or_default(),
                failure: None,
                fails: Fails::Nothing,
            }));
        }
        let (report, class) = page?;
        Ok(Some(After {
            answer: serde_json::to_value(&report).unwrap_or_default(),
            failure: class.map(|c| (c, String::new())),
            fails: Fails::Invocation,
        }))
    }

    /// The sweep's `{"action": "sweep", "report": ...}`; a direct run's report (with the sweep
    /// after it); an SQS batch's answer is its `batchItemFailures` alone (the log and the
    /// heartbeat tell the sweep).
    fn answer(
        &self,
        plan: BootstrapPlan,
        outcomes: Vec<ClusterResult>,
        after: Option<After>,
        _pause: Option<Pause>,
        ctx: &Ctx,
    ) -> Value {
        if plan.sweep_alone {
            return json!({"action": "sweep", "report": after.map(|a| a.answer)});
        }
        if ctx.sqs {
            return json!({});
        }
        let mut response = outcomes.first().map_or(Value::Null, ClusterResult::to_json);
        if let (Some(after), Some(obj)) = (after, response.as_object_mut()) {
            obj.insert("sweep".into(), after.answer);
        }
        response
    }
}

fn direct(item: Result<BootstrapItem, BootstrapEventError>) -> Asked {
    Asked { message_id: None, item }
}

/// Paused: no cluster is touched, no access entry, no apply.
fn paused(req: &crate::rules::bootstrap::Request, p: Pause) -> ClusterResult {
    tracing::warn!(cluster = %req.cluster, paused = %p.describe(), "cluster not bootstrapped: cellbridge is paused");
    ClusterResult::Paused {
        cluster: req.cluster.clone(),
        region: req.region.clone(),
        paused: p,
    }
}
