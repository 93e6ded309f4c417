//! The cluster-bootstrap function's handler: event in, report (or SQS batch answer) out. The
//! Lambda main and `cellbridge invoke cluster-bootstrap --event FILE` both call it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tracing::Instrument as _;

use super::{Accounts, BootstrapError, BootstrapOutcome, Bootstrapper, KubeConnect, Settings, Target};
use crate::config::ConfigError;
use crate::error::{Class, Classify};
use crate::events::bootstrap::{self as ev, BootstrapEvent, BootstrapItem};
use crate::events::sync::batch_response;
use crate::fleet::{FleetRead, Keep, LocalFleet};
use crate::github::{GithubConfig, GithubError, GithubFleet, GithubRepo};
use crate::lambda::{About, RecordFailure, sqs_redeliver};
use crate::metrics::{self, Metrics};
use crate::pause::{self, Pause};
use crate::secrets::SecretStore;

/// The fleet repo's base branch as a run reads it.
pub struct BaseFleet {
    pub fleet: Arc<dyn FleetRead>,
    /// The branch's name when known (GitHub's default branch unless `CELLBRIDGE_BASE_BRANCH`
    /// names another): the branch Flux follows when no `gotk-sync.yaml` names one.
    pub branch: Option<String>,
}

/// Where a run reads the fleet repo from: the base branch as it is now, keeping at least what
/// `keep` keeps.
pub trait FleetSource: Send + Sync {
    fn fleet<'a>(&'a self, keep: &'a Keep, deadline: Instant) -> BoxFuture<'a, Result<BaseFleet, GithubError>>;
}

/// A checked-out fleet repo (the command line); its base branch is
/// [`super::config::checkout_base_branch`].
pub struct LocalSource(pub LocalFleet);

impl FleetSource for LocalSource {
    fn fleet<'a>(&'a self, _keep: &'a Keep, _deadline: Instant) -> BoxFuture<'a, Result<BaseFleet, GithubError>> {
        let base = BaseFleet {
            fleet: Arc::new(self.0.clone()),
            branch: super::config::checkout_base_branch(self.0.root()),
        };
        Box::pin(async move { Ok(base) })
    }
}

/// The fleet repo on GitHub, read the way state-sync reads it (one configuration, one client
/// set-up, credentials read again when GitHub refuses them).
pub struct GithubSource(GithubFleet);

impl GithubSource {
    pub fn new(config: GithubConfig, aws: &aws_config::SdkConfig) -> Self {
        Self(GithubFleet::from_config(
            &config,
            aws_sdk_secretsmanager::Client::new(aws),
        ))
    }

    pub fn from_env(aws: &aws_config::SdkConfig) -> Result<Self, ConfigError> {
        Ok(Self::new(GithubConfig::from_env()?, aws))
    }
}

impl FleetSource for GithubSource {
    fn fleet<'a>(&'a self, keep: &'a Keep, deadline: Instant) -> BoxFuture<'a, Result<BaseFleet, GithubError>> {
        Box::pin(async move {
            let snap = self.0.read_base(keep, deadline).await?;
            Ok(BaseFleet {
                fleet: Arc::new(snap.fleet),
                branch: Some(snap.base_branch),
            })
        })
    }
}

/// The function: configuration and clients, built once per process.
pub struct BootstrapService<A = super::AwsAccounts, K = super::Kubes, S = aws_sdk_secretsmanager::Client> {
    pub bootstrapper: Bootstrapper<A, K, S>,
    pub fleets: Box<dyn FleetSource>,
}

/// What one invocation answers.
#[derive(Debug, Clone)]
pub struct BootstrapInvocation {
    pub response: Value,
    /// What the failures mean (`None` when nothing failed; for SQS the failed records are
    /// listed in `batchItemFailures`): retryable only when every one is.
    pub class: Option<Class>,
}

impl BootstrapInvocation {
    pub fn failed(&self) -> bool {
        self.class.is_some()
    }
}

/// The function's configuration, read and checked from the environment without building any
/// client: what the Lambda's init phase does, so that a bad variable fails the cold start with
/// an error that names it.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Settings,
    pub github: GithubConfig,
}

impl Config {
    pub fn from_env() -> Result<Self, BootstrapError> {
        // Read again by each invocation; checked here so a bad value fails the cold start.
        pause::from_env()?;
        metrics::namespace_from_env()?;
        super::access::ttl_from_env()?;
        crate::backoff::Backoff::from_env()?;
        Ok(Self {
            settings: Settings::from_env()?,
            github: GithubConfig::from_env()?,
        })
    }
}

/// The service for a checked configuration: the AWS configuration and its clients. No network
/// call; the cost is the HTTPS client's trust store (see `crate::lambda`).
pub async fn service_with(config: Config) -> BootstrapService {
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    let fleets = Box::new(GithubSource::new(config.github, &aws));
    BootstrapService {
        bootstrapper: Bootstrapper::new(aws, config.settings),
        fleets,
    }
}

/// Configuration and clients from the environment, at once (the command line).
pub async fn service_from_env() -> Result<BootstrapService, BootstrapError> {
    Ok(service_with(Config::from_env()?).await)
}

/// Leaves time for the bootstrap itself after waiting for a CREATING cluster.
const INSTALL_RESERVE: Duration = Duration::from_secs(240);
/// The sweep after a run starts only with at least this much time left, and stops this long
/// before the deadline.
const SWEEP_AFTER_RUN: Duration = Duration::from_secs(30);
const SWEEP_MARGIN: Duration = Duration::from_secs(5);

impl<A: Accounts, K: KubeConnect, S: SecretStore> BootstrapService<A, K, S> {
    /// Handles one event. A cluster still CREATING is not an error: directly invoked, the
    /// invocation fails so that EventBridge's retry policy brings it back; from SQS the record
    /// is listed for redelivery, and the Lambda shell sets when it returns (`crate::backoff`).
    /// Paused by `CELLBRIDGE_PAUSED`; no metrics (the command line).
    pub async fn handle(&self, event: &Value, deadline: Instant) -> Result<BootstrapInvocation, BootstrapError> {
        let switch = pause::from_env()?;
        let quiet = Metrics::new("cluster-bootstrap", &metrics::Discard);
        self.handle_with(event, deadline, switch, &quiet).await
    }

    /// [`Self::handle`] with the environment's pause switch (`switch`: checked before anything
    /// is read; then `.cellbridge/settings.yaml` on the base branch) and one metric record per
    /// cluster. Paused, no cluster is touched: no access entry, no apply.
    pub async fn handle_with(
        &self,
        event: &Value,
        deadline: Instant,
        mut switch: Option<Pause>,
        metrics: &Metrics<'_>,
    ) -> Result<BootstrapInvocation, BootstrapError> {
        let parsed = match ev::parse(event) {
            Ok(p) => p,
            Err(e) => {
                metrics.count(metrics::failure_outcome(Class::InvalidInput), &[]);
                return Err(e.into());
            }
        };
        let requests: Vec<(Option<String>, Result<BootstrapItem, ev::BootstrapEventError>)> = match parsed {
            BootstrapEvent::Manual(r) => vec![(None, Ok(BootstrapItem::Cluster(r)))],
            BootstrapEvent::Direct(item) => vec![(None, Ok(item))],
            BootstrapEvent::Sqs(records) => records.into_iter().map(|r| (Some(r.message_id), r.item)).collect(),
            // Boxed: its future stays out of this one's layout.
            BootstrapEvent::Sweep => {
                return Box::pin(self.sweep(deadline, metrics).instrument(super::sweep::span())).await;
            }
        };
        let is_sqs = requests.first().is_some_and(|(id, _)| id.is_some());
        let needs_fleet = switch.is_none() && requests.iter().any(|(_, i)| matches!(i, Ok(BootstrapItem::Cluster(_))));
        // What finds a cluster's cell (every cell's `cell-metadata.yaml`), the cells the
        // requests name and those whose metadata names a request's cluster (found in the same
        // pass); a cell found otherwise (by its tag) is read when its run asks for it.
        let clusters = || {
            requests.iter().filter_map(|(_, i)| match i {
                Ok(BootstrapItem::Cluster(r)) => Some(r),
                _ => None,
            })
        };
        let keep = Keep::cells(clusters().filter_map(|r| r.cell.clone()))
            .with_index()
            .with_clusters(clusters().map(|r| (r.cluster.clone(), r.region.clone())));
        // The read is for these clusters: its lines (GitHub's retries too) name them.
        let names = clusters().map(|r| r.cluster.as_str()).collect::<Vec<_>>().join(", ");
        let fleet = if needs_fleet {
            let read = tracing::info_span!("fleet", cluster = %names);
            match self.fleets.fleet(&keep, deadline).instrument(read).await {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::error!(cluster = %names, error = %e, retryable = e.retryable(), "cannot read the fleet repo");
                    for (_, item) in &requests {
                        let cluster = match item {
                            Ok(BootstrapItem::Cluster(r)) => Some(r.cluster.as_str()),
                            _ => None,
                        };
                        metrics.count(metrics::failure_outcome(e.class()), &[("cluster", cluster)]);
                    }
                    if is_sqs {
                        let reason = format!("cannot read the fleet repo: {e}");
                        let failed = requests.into_iter().filter_map(|(id, item)| {
                            Some(RecordFailure {
                                message_id: id?,
                                about: match item {
                                    Ok(BootstrapItem::Cluster(r)) => About::cluster(&r.cluster),
                                    _ => About::event(),
                                },
                                class: e.class(),
                                reason: reason.clone(),
                            })
                        });
                        let ids = sqs_redeliver("cluster-bootstrap", failed);
                        return Ok(BootstrapInvocation {
                            response: serde_json::to_value(batch_response(ids)).unwrap_or_default(),
                            class: Some(e.class()),
                        });
                    }
                    return Err(BootstrapError::Fleet(e));
                }
            }
        } else {
            None
        };
        // The fleet repo's pause switch, on the base branch as read; a file people got wrong
        // fails every cluster of the run, naming the file.
        let mut settings_error = None;
        if let Some(base) = &fleet {
            match pause::from_fleet(base.fleet.as_ref()) {
                Ok(Some(p)) => switch = Some(p),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(scope = "fleet", error = %e, "cannot read the fleet repo's settings");
                    settings_error = Some(e.to_string());
                }
            }
        }
        // A dry run writes nothing, the sweep's deletions included: an invocation whose every
        // cluster is a dry run does not sweep.
        let dry_only = requests
            .iter()
            .all(|(_, item)| matches!(item, Ok(BootstrapItem::Cluster(r)) if r.dry_run));
        let mut results = Vec::new();
        let mut failed_records = Vec::new();
        let mut failures = Vec::new();
        for (id, item) in requests {
            let cluster = match &item {
                Ok(BootstrapItem::Cluster(r)) => Some(r.cluster.clone()),
                _ => None,
            };
            let outcome: Result<Value, (String, Class)> = match item {
                Err(e) => {
                    tracing::error!(scope = "event", message_id = id.as_deref().unwrap_or(""), error = %e, "event not understood");
                    Err((e.to_string(), Class::InvalidInput))
                }
                Ok(BootstrapItem::Ignored { what, reason }) => {
                    tracing::info!(%what, %reason, "event ignored");
                    Ok(json!({"ignored": what, "reason": reason}))
                }
                Ok(BootstrapItem::Cluster(req)) if switch.is_some() => {
                    let p = switch.clone().unwrap_or(Pause {
                        by: pause::ENV,
                        reason: None,
                    });
                    tracing::warn!(cluster = %req.cluster, paused = %p.describe(), "cluster not bootstrapped: cellbridge is paused");
                    Ok(json!({
                        "cluster": req.cluster, "region": req.region, "cell": null,
                        "outcome": "paused", "paused": p, "objects": [],
                    }))
                }
                Ok(BootstrapItem::Cluster(_)) if settings_error.is_some() => {
                    Err((settings_error.clone().unwrap_or_default(), Class::Final))
                }
                Ok(BootstrapItem::Cluster(req)) => {
                    let first = fleet.as_ref().expect("read above");
                    let mut wider: Option<BaseFleet> = None;
                    let ran = loop {
                        let base = wider.as_ref().unwrap_or(first);
                        let left = deadline
                            .saturating_duration_since(Instant::now())
                            .saturating_sub(INSTALL_RESERVE);
                        // Boxed: the whole bootstrap is one deep future, kept off the caller's
                        // stack. The install stops before the deadline, leaving time to delete the
                        // access entry (`RELEASE_RESERVE`).
                        let run = Box::pin(self.bootstrapper.run_before(
                            base.fleet.as_ref(),
                            base.branch.as_deref(),
                            &req,
                            Target::Eks,
                            Some(left),
                            Some(deadline),
                        ))
                        .await;
                        // The cluster's cell (its tag) was read past: read the base again keeping
                        // it, once, and run again (a run is create-if-missing).
                        let missed = base.fleet.not_kept();
                        if missed.is_empty() || wider.is_some() {
                            break run;
                        }
                        tracing::info!(cluster = %req.cluster, cells = %missed.join(", "), "the run needs cells the fleet read kept out; reading it again with them");
                        let mut keep = keep.clone();
                        keep.cells.extend(missed);
                        let read = tracing::info_span!("bootstrap", cluster = %req.cluster, region = %req.region);
                        match self.fleets.fleet(&keep, deadline).instrument(read).await {
                            Ok(f) => wider = Some(f),
                            Err(e) => break Err(BootstrapError::Fleet(e)),
                        }
                    };
                    match ran {
                        Ok(rep) if rep.outcome == BootstrapOutcome::ClusterNotReady => {
                            if is_sqs {
                                tracing::info!(cluster = %req.cluster, "cluster still CREATING: the record is handed back, redelivered after the function's backoff");
                            } else {
                                tracing::info!(cluster = %req.cluster, "cluster still CREATING: failing the invocation so that it is retried");
                            }
                            Err((
                                format!(
                                    "cluster {} is still {}; retry later",
                                    req.cluster,
                                    rep.cluster_status.as_deref().unwrap_or("CREATING")
                                ),
                                Class::Retryable,
                            ))
                        }
                        Ok(rep) => Ok(serde_json::to_value(&rep).unwrap_or_default()),
                        Err(e) => {
                            tracing::error!(cluster = %req.cluster, retryable = e.retryable(), error = %e, "bootstrap failed");
                            Err((e.to_string(), e.class()))
                        }
                    }
                }
            };
            let (counted, cell) = match &outcome {
                Ok(v) => (
                    v["outcome"].as_str().map_or("ignored", metrics::bootstrap_outcome),
                    v["cell"].as_str(),
                ),
                Err((_, class)) => (metrics::failure_outcome(*class), None),
            };
            metrics.count(counted, &[("cell", cell), ("cluster", cluster.as_deref())]);
            match outcome {
                Ok(v) => results.push(v),
                Err((e, class)) => {
                    failures.push(class);
                    if let Some(message_id) = id {
                        failed_records.push(RecordFailure {
                            message_id,
                            about: cluster.as_deref().map_or_else(About::event, About::cluster),
                            class,
                            reason: e.clone(),
                        });
                    }
                    // Naming the cluster: the answer says which one failed, and its line too.
                    results.push(match &cluster {
                        Some(c) => json!({"cluster": c, "error": e}),
                        None => json!({"error": e}),
                    });
                }
            }
        }
        // Every run that touched clusters also sweeps the fleet's expired temporary access, with
        // the time it has left: what a run killed elsewhere left goes without waiting for the
        // daily schedule. Best effort: its failures are the sweep's, not this run's.
        let swept = match &fleet {
            Some(base)
                if switch.is_none()
                    && !dry_only
                    && deadline.saturating_duration_since(Instant::now()) > SWEEP_AFTER_RUN =>
            {
                let ttl = super::access::ttl_from_env().unwrap_or(super::access::DEFAULT_TTL);
                let left = deadline.saturating_duration_since(Instant::now()) - SWEEP_MARGIN;
                let sweep = Box::pin(self.sweep_fleet(base.fleet.as_ref(), ttl)).instrument(super::sweep::span());
                match tokio::time::timeout(left, sweep).await {
                    Ok(Ok(report)) => {
                        self.record_sweep(&report, metrics);
                        serde_json::to_value(&report).ok()
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(scope = "fleet", error = %e, "sweep after the run: cannot list the fleet's cells");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(
                            scope = "fleet",
                            "sweep after the run: not finished before the deadline; the schedule's sweep does it"
                        );
                        None
                    }
                }
            }
            _ => None,
        };
        let mut response = if is_sqs {
            // Only what a retry may fix goes back to the queue; a final failure (a cluster that
            // is no cell, a CONFIG_MAP-only cluster, a bad Git secret) is deleted after its
            // metric and ERROR line instead of coming back for hours.
            let ids = sqs_redeliver("cluster-bootstrap", failed_records);
            serde_json::to_value(batch_response(ids)).unwrap_or_default()
        } else {
            results.into_iter().next().unwrap_or(Value::Null)
        };
        // A direct run answers with it; an SQS batch's answer stays the batch's (the log and
        // the heartbeat tell).
        if let (Some(report), Some(obj), false) = (swept, response.as_object_mut(), is_sqs) {
            obj.insert("sweep".into(), report);
        }
        Ok(BootstrapInvocation {
            response,
            class: Class::of_all(failures),
        })
    }
}

/// The Lambda handler: the report or an SQS batch answer ([`crate::lambda::answer`]). An SQS
/// batch lists the records to redeliver (retryable failures only); a direct invocation fails as
/// a Lambda error only when its failure is retryable (so EventBridge or the asynchronous
/// invocation runs it again), and answers a final or invalid-input failure as a handled result
/// with its `"class"`.
pub async fn lambda_handler<A: Accounts, K: KubeConnect, S: SecretStore>(
    service: &BootstrapService<A, K, S>,
    event: lambda_runtime::LambdaEvent<Value>,
) -> Result<Value, lambda_runtime::Diagnostic> {
    use crate::lambda::{answer, answer_error, deadline_from_epoch_ms};
    const NAME: &str = "cluster-bootstrap";
    let deadline = deadline_from_epoch_ms(event.context.deadline);
    // Both were checked at init (`Config::from_env`); the pause switch before anything else.
    let switch = match pause::from_env() {
        Ok(s) => s,
        Err(e) => return answer_error(NAME, Class::Final, e),
    };
    let metrics = match Metrics::from_env(NAME, &metrics::Stdout) {
        Ok(m) => m,
        Err(e) => return answer_error(NAME, Class::Final, e),
    };
    let answered = match service.handle_with(&event.payload, deadline, switch, &metrics).await {
        Ok(inv) => answer(NAME, inv.response, inv.class),
        Err(e) => answer_error(NAME, e.class(), e),
    };
    crate::lambda::answer_sqs(NAME, &event.payload, answered, deadline).await
}

/// `cellbridge invoke cluster-bootstrap --event FILE [--fleet DIR]`: the handler on an event
/// file, against whatever `AWS_ENDPOINT_URL` and `GITHUB_API_URL` point at, or a local fleet.
pub async fn invoke_from_file(path: &Path, fleet_dir: Option<&Path>) -> Result<BootstrapInvocation, BootstrapError> {
    let bad = |reason: String| BootstrapError::Input {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let event: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    crate::telemetry::install_crypto_provider();
    let settings = Settings::from_env()?;
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    let fleets: Box<dyn FleetSource> = match fleet_dir {
        Some(d) => Box::new(LocalSource(LocalFleet::open(d).map_err(|e| bad(e.to_string()))?)),
        None => Box::new(GithubSource::from_env(&aws)?),
    };
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(aws, settings),
        fleets,
    };
    service.handle(&event, Instant::now() + Duration::from_secs(900)).await
}
