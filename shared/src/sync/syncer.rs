//! The orchestrator: event → state objects → for each, the latest state version → the cell's
//! plan against the fleet repo's base branch → the cell's pull request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tracing::Instrument;

use super::dashboard::DashboardRun;
use super::fanout::{self, Enqueue};
use super::{SyncConfig, SyncError};
use crate::cells::ClusterProbe;
use crate::decommission::{self as decommission_plan, ClusterCheck};
use crate::error::{Class, Classify};
use crate::events::sync::{self as events, Manual, StateObject, SyncEvent, SyncItem, SyncSqsRecord};
use crate::fleet::{FleetRead, Keep};
use crate::github::proposal::{self, Proposal, Proposed};
use crate::github::report::{self, Refusal, Reported};
use crate::github::{GithubError, GithubRepo, Published, Snapshot};
use crate::metadata::{self, ContractError};
use crate::metrics::{self, Metrics};
use crate::pause::{self, Pause};
use crate::plan::{self, Plan, PlanOptions};
use crate::s3::{S3Error, StateSource};

mod decommission;

use self::decommission::Destroyed;

/// Attempts for one state when another writer keeps winning the race for the cell's branch.
const RACE_ATTEMPTS: u32 = 4;
/// Don't start a state with less time than this left: it would be cut off half-way.
const START_MARGIN: Duration = Duration::from_secs(3);
/// States synced at once in one invocation (sync-all, SQS batches).
/// States sharing one read of the base branch (an SQS batch's size at most).
const BASE_GROUP: usize = 10;
const PARALLEL: usize = 4;

/// The answer for one state object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellResult {
    pub cell: Option<String>,
    pub bucket: String,
    pub key: String,
    /// opened, updated, unchanged, closed, in-sync, stale, declined, conflicted, planned, refused,
    /// ignored, failed, paused.
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Running again later may succeed (SQS redelivers the record).
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Value>,
    pub attempts: u32,
    /// `paused`: what paused it (`CELLBRIDGE_PAUSED` or `.cellbridge/settings.yaml`) and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// A refused state or a final publishing failure, told on GitHub: the cell's pull request
    /// or its `cellbridge-refused` issue ([`report`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<Reported>,
    /// Why the report could not be written (the failure itself stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_error: Option<String>,
    /// The `cellbridge-refused` issues this good state closed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resolved_issues: Vec<u64>,
    /// A destroyed stack's state: the cell's cluster as EKS answered, and what was proposed or
    /// why nothing was ([`Syncer::decommission`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decommission: Option<Value>,
    /// This good state found no open pull request: its cell's refused issue is to be closed.
    #[serde(skip)]
    resolve_issue: bool,
    // auto-merge
    /// Whether the metadata pull request's head may merge without a person, why, and what was
    /// done about GitHub's auto-merge ([`crate::github::auto_merge`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_merge: Option<crate::github::auto_merge::AutoMergeReport>,
}

impl CellResult {
    fn new(obj: &StateObject, cell: Option<String>, action: &str) -> Self {
        Self {
            cell,
            bucket: obj.bucket.clone(),
            key: obj.key.clone(),
            action: action.into(),
            version_id: None,
            serial: None,
            pull_request: None,
            error: None,
            retryable: false,
            plan: None,
            attempts: 0,
            paused: None,
            reported: None,
            report_error: None,
            resolved_issues: Vec::new(),
            decommission: None,
            auto_merge: None,
            resolve_issue: false,
        }
    }

    /// The state object as reports name it.
    fn source(&self) -> String {
        match &self.version_id {
            Some(v) => format!("s3://{}/{} (version {v})", self.bucket, self.key),
            None => format!("s3://{}/{}", self.bucket, self.key),
        }
    }

    fn failed(&self) -> bool {
        self.action == "failed" || self.action == "refused"
    }

    /// A state a person named that is not there to sync (what an event's delivery ignores): a
    /// final failure that says what to check.
    fn not_there(&mut self) {
        let why = self.error.take().unwrap_or_default();
        self.action = "failed".into();
        self.retryable = false;
        self.error = Some(if why == GONE {
            format!(
                "no state at s3://{}/{}: check the cell name or CELLBRIDGE_STATE_KEY_PATTERN",
                self.bucket, self.key
            )
        } else {
            format!("s3://{}/{}: {why}", self.bucket, self.key)
        });
        tracing::error!(bucket = %self.bucket, key = %self.key, error = self.error.as_deref().unwrap_or_default(), "the state named is not there");
    }
}

/// Why a state whose event was delivered is not synced: it was deleted since.
const GONE: &str = "the state object no longer exists";

/// What one invocation returns.
#[derive(Debug, Clone)]
pub struct SyncInvocation {
    /// The JSON answer (for SQS, it carries `batchItemFailures`).
    pub response: Value,
    /// What the failures mean (`None` when nothing failed): retryable only when every failed
    /// state is. For SQS every record is answered in the response.
    pub class: Option<Class>,
}

impl SyncInvocation {
    /// Some state was refused or failed.
    pub fn failed(&self) -> bool {
        self.class.is_some()
    }
}

/// state-sync over a state source and GitHub's primitives (the fleet repo).
pub struct Syncer<S, G> {
    pub config: SyncConfig,
    pub states: S,
    pub fleet: G,
    /// state-sync's own queue: sync-all sends one message per cell there ([`super::fanout`]);
    /// `None`: sync-all syncs every cell in the invocation.
    pub queue: Option<Arc<dyn Enqueue>>,
    /// EKS, asked whether a destroyed cell's cluster is gone before its directory's removal is
    /// proposed; `None`: nobody can confirm it, so no decommission is ever opened.
    pub clusters: Option<ClusterAccess>,
}

/// How state-sync reaches the cells' clusters: EKS, and the roles of other accounts
/// (`CELLBRIDGE_ACCOUNT_ROLES`, as cluster-bootstrap has them).
#[derive(Clone)]
pub struct ClusterAccess {
    pub probe: Arc<dyn ClusterProbe>,
    pub account_roles: BTreeMap<String, String>,
}

/// The base branch as one invocation read it, shared by all its states (an SQS batch, a
/// sync-all): read once, by the first state that needs it, keeping the shared part of the fleet
/// and the batch's cells ([`Keep`]); read again only after a lost race showed it old, or when a
/// plan needed a cell directory it had read past.
#[derive(Default)]
pub struct SharedBase {
    slot: tokio::sync::Mutex<(Keep, Option<Arc<Snapshot>>)>,
    /// The open `cellbridge-refused` issues, listed once for the invocation (every group of it).
    refused: Arc<report::RefusedIssues>,
}

impl SharedBase {
    /// A base that keeps `cells`' directories.
    pub fn for_cells<I: IntoIterator<Item = String>>(cells: I) -> Self {
        Self {
            slot: tokio::sync::Mutex::new((Keep::cells(cells), None)),
            refused: Default::default(),
        }
    }

    /// The same, sharing `refused` with the invocation's other groups.
    fn sharing(mut self, refused: &Arc<report::RefusedIssues>) -> Self {
        self.refused = refused.clone();
        self
    }

    /// The snapshot, read now if no state of this invocation has read it (the others wait for
    /// that one read rather than make their own).
    async fn get<G: GithubRepo>(&self, fleet: &G, deadline: Instant) -> Result<Arc<Snapshot>, GithubError> {
        let mut slot = self.slot.lock().await;
        if let Some(s) = slot.1.as_ref()
            && s.keep.covers(&slot.0)
        {
            return Ok(s.clone());
        }
        let s = Arc::new(fleet.read_base(&slot.0, deadline).await?);
        slot.1 = Some(s.clone());
        Ok(s)
    }

    /// A base that keeps only the shared part and every cell's `cell-metadata.yaml`: what
    /// finds a cluster's cell.
    fn index() -> Self {
        Self {
            refused: Default::default(),
            slot: tokio::sync::Mutex::new((Keep::default().with_index(), None)),
        }
    }

    /// A state lost a race on the snapshot at `base_sha`: the next read takes a fresh one
    /// (unless another state already did).
    async fn lost_race(&self, base_sha: &str) {
        let mut slot = self.slot.lock().await;
        if slot.1.as_ref().is_some_and(|s| s.base_sha == base_sha) {
            slot.1 = None;
        }
    }

    /// A plan read cell directories the snapshot had read past (a layer of one cell that points
    /// into another's): the next read keeps them too.
    async fn widen(&self, cells: Vec<String>) {
        self.slot.lock().await.0.cells.extend(cells);
    }
}

/// What a state asks of the fleet repo, planned against the base.
enum Work {
    /// The state's `cell_metadata` as the cell's ConfigMap.
    Metadata(Plan),
    /// No outputs and no resources: the stack was destroyed.
    Destroyed(Destroyed),
}

/// One try at a cell's state failed: redo it on a fresh base (a lost race), or stop.
enum Attempt {
    Redo(String),
    Fail {
        error: String,
        retryable: bool,
        refused: bool,
        /// A final failure the cell's team can act on, told on GitHub ([`report`]); not the
        /// failures of GitHub access itself, nor of reading S3.
        report: bool,
    },
}

fn github_fail(e: GithubError) -> Attempt {
    match e {
        GithubError::Conflict { what, detail } => Attempt::Redo(format!("{what}: {detail}")),
        e => Attempt::Fail {
            retryable: e.retryable(),
            refused: false,
            // A fleet too large for the function's memory is the operators' to fix, as access is.
            report: !e.retryable() && !e.is_access() && !matches!(e, GithubError::TooLarge { .. }),
            error: e.to_string(),
        },
    }
}

/// The state was refused: the contract, the key, the plan.
fn refused(error: String) -> Attempt {
    Attempt::Fail {
        error,
        retryable: false,
        refused: true,
        report: true,
    }
}

impl<S: StateSource, G: GithubRepo> Syncer<S, G> {
    pub fn new(config: SyncConfig, states: S, fleet: G) -> Self {
        Self {
            config,
            states,
            fleet,
            queue: None,
            clusters: None,
        }
    }

    /// Destroyed stacks' clusters are looked up through `access` ([`Self::decommission`]).
    pub fn with_clusters(mut self, access: ClusterAccess) -> Self {
        self.clusters = Some(access);
        self
    }

    /// sync-all fans out to `queue`, one message per cell.
    pub fn with_queue(mut self, queue: Arc<dyn Enqueue>) -> Self {
        self.queue = Some(queue);
        self
    }

    /// Runs one invocation: every state the event names, each to its own result, at most
    /// a few at a time. Paused by `CELLBRIDGE_PAUSED`; no metrics (the command line).
    pub async fn handle(&self, event: &Value, deadline: Instant) -> Result<SyncInvocation, SyncError> {
        let switch = pause::from_env()?;
        let quiet = Metrics::new("state-sync", &metrics::Discard);
        self.handle_with(event, deadline, switch, &quiet).await
    }

    /// [`Self::handle`] with the environment's pause switch (`switch`, checked before anything
    /// is read: no state, no fleet repo, no write) and one metric record per cell result.
    pub async fn handle_with(
        &self,
        event: &Value,
        deadline: Instant,
        switch: Option<Pause>,
        metrics: &Metrics<'_>,
    ) -> Result<SyncInvocation, SyncError> {
        let parsed = match events::parse(event) {
            Ok(p) => p,
            Err(e) => {
                let e = SyncError::from(e);
                // No cell to name: one record for the invocation, so that a final failure,
                // which no retry brings back, is still counted.
                metrics.count(metrics::failure_outcome(e.class()), &[]);
                return Err(e);
            }
        };
        let mut retry_records = Vec::new();
        // Every sync-all rebuilds the fleet dashboard once its cells are synced or sent (a
        // sync-all paused by CELLBRIDGE_PAUSED reads nothing, the dashboard included); a single
        // cell's sync or an S3 event never does.
        let mut rebuild = matches!(
            parsed,
            SyncEvent::Manual {
                request: Manual::All,
                ..
            }
        ) && switch.is_none();
        // SQS messages that asked for the dashboard alone: they fail with it.
        let mut dashboard_messages = Vec::new();
        // The clusters an EKS DeleteCluster names are found in one read of the base's index,
        // shared by the invocation's records.
        let index = SharedBase::index();
        // A state a person named by its cell or key (a manual payload, the console, the command
        // line): its absence is a mistake to tell, not an event to drop.
        let named = matches!(
            &parsed,
            SyncEvent::Manual {
                request: Manual::Cell(_) | Manual::Object { .. },
                ..
            }
        );
        let (items, dry_run, records) = match parsed {
            SyncEvent::Manual {
                request: Manual::Dashboard,
                dry_run,
            } => {
                let run = self.dashboard(dry_run, deadline, switch.as_ref(), metrics).await;
                let class = run.failure;
                let mut response = json!({ "dashboard": run });
                if let Some(p) = switch {
                    response["paused"] = serde_json::to_value(p).unwrap_or_default();
                }
                return Ok(SyncInvocation { response, class });
            }
            SyncEvent::Direct(items) => {
                let mut resolved = Vec::new();
                for item in items {
                    match item {
                        SyncItem::ClusterDeleted(c) if switch.is_none() => {
                            match self.cell_of_deleted(&c, &index, deadline).await {
                                Ok(item) => resolved.push(item),
                                Err(e) => {
                                    metrics.count(metrics::failure_outcome(e.class()), &[]);
                                    return Err(e);
                                }
                            }
                        }
                        other => resolved.push(other),
                    }
                }
                (resolved, false, None)
            }
            // Listing every state is reading: a paused sync-all lists nothing.
            SyncEvent::Manual {
                request: Manual::All, ..
            } if switch.is_some() => (Vec::new(), false, None),
            SyncEvent::Manual {
                request: Manual::All,
                dry_run: false,
            } if self.queue.is_some() => {
                return match self.fan_out(deadline).await {
                    Ok(results) => {
                        for r in &results {
                            metrics.count(metrics::sync_outcome(&r.action, false), &[("cell", r.cell.as_deref())]);
                        }
                        let n = results.len();
                        let mut inv = finish(results, None);
                        inv.response["enqueued"] = n.into();
                        // The cells are on the queue: the dashboard shows the fleet as this
                        // sync-all found it. Its failure is its own (in the answer, its metric
                        // and log line): failing the sync-all would send every message again.
                        let run = self.dashboard(false, deadline, None, metrics).await;
                        inv.response["dashboard"] = serde_json::to_value(&run).unwrap_or_default();
                        Ok(inv)
                    }
                    Err(e) => {
                        metrics.count(metrics::failure_outcome(e.class()), &[]);
                        Err(e)
                    }
                };
            }
            SyncEvent::Manual { request, dry_run } => match self.manual_items(request, deadline).await {
                Ok(items) => (items, dry_run, None),
                Err(e) => {
                    metrics.count(metrics::failure_outcome(e.class()), &[]);
                    return Err(e);
                }
            },
            SyncEvent::Sqs(mut records) => {
                for r in &records {
                    let Ok(items) = &r.items else { continue };
                    if items.contains(&SyncItem::Manual(Manual::Dashboard)) {
                        dashboard_messages.push(r.message_id.clone());
                    }
                    rebuild |= switch.is_none() && items.contains(&SyncItem::Manual(Manual::All));
                }
                rebuild |= !dashboard_messages.is_empty();
                // Manual payloads as bodies (the fan-out's messages, a redriven sync-all) become
                // the state objects they name, as an S3 event's would.
                for r in records.iter_mut() {
                    let about = self.record_about(r);
                    if let Err(e) = self.resolve_record(r, &index, deadline, switch.is_some()).await {
                        retry_records.push(crate::lambda::RecordFailure {
                            message_id: r.message_id.clone(),
                            about,
                            class: e.class(),
                            reason: e.to_string(),
                        });
                    }
                }
                let items = records
                    .iter()
                    .filter_map(|r| r.items.as_ref().ok())
                    .flatten()
                    .cloned()
                    .collect();
                (items, false, Some(records))
            }
        };
        let mut results: Vec<CellResult> = match &switch {
            Some(p) => unique_objects(&items)
                .into_iter()
                .map(|o| {
                    let cell = self.config.key_pattern.cell_of(&o.key).map(|(c, _)| c);
                    let mut r = CellResult::new(&o, cell, "paused");
                    r.paused = Some(p.clone());
                    r.log();
                    r
                })
                .collect(),
            None => {
                // One read of the base per group of states, keeping the group's cells: memory
                // stays flat however many states one invocation syncs (a sync-all without a
                // queue), and an SQS batch (at most 10) is one group.
                let mut results = Vec::new();
                let refused = Arc::new(report::RefusedIssues::default());
                for group in unique_objects(&items).chunks(BASE_GROUP) {
                    let base = SharedBase::for_cells(
                        group
                            .iter()
                            .filter_map(|o| self.config.key_pattern.cell_of(&o.key).map(|(c, _)| c)),
                    )
                    .sharing(&refused);
                    let base = &base;
                    let syncs = group
                        .iter()
                        .cloned()
                        .map(|o| self.sync_with_base(o, dry_run, deadline, base));
                    results.extend(
                        futures::stream::iter(syncs)
                            .buffer_unordered(PARALLEL)
                            .collect::<Vec<_>>()
                            .await,
                    );
                }
                results
            }
        };
        results.sort_by(|a, b| (&a.bucket, &a.key).cmp(&(&b.bucket, &b.key)));
        if named {
            for r in results.iter_mut().filter(|r| r.action == "ignored") {
                r.not_there();
            }
        }
        for r in &results {
            metrics.count(
                metrics::sync_outcome(&r.action, r.retryable),
                &[("cell", r.cell.as_deref())],
            );
        }
        if results.is_empty() && switch.is_some() {
            metrics.count("paused", &[]);
        }
        let dashboard = if rebuild {
            Some(self.dashboard(dry_run, deadline, switch.as_ref(), metrics).await)
        } else {
            None
        };
        let failed_ids = records.map(|records| {
            let mut ids = sqs_failures(&records, &results, retry_records, metrics);
            // A message that asked for the dashboard alone is answered by it (a sync-all's
            // message is the sync-all's, whatever the dashboard did).
            if let Some(DashboardRun {
                failure: Some(class),
                error,
                ..
            }) = &dashboard
            {
                ids.extend(crate::lambda::sqs_redeliver(
                    "state-sync",
                    dashboard_messages.iter().map(|id| crate::lambda::RecordFailure {
                        message_id: id.clone(),
                        about: crate::lambda::About::fleet(),
                        class: *class,
                        reason: error.clone().unwrap_or_default(),
                    }),
                ));
            }
            ids
        });
        let mut inv = finish(results, failed_ids);
        if let Some(run) = dashboard {
            inv.response["dashboard"] = serde_json::to_value(&run).unwrap_or_default();
        }
        if let Some(p) = switch {
            inv.response["paused"] = serde_json::to_value(p).unwrap_or_default();
        }
        Ok(inv)
    }

    /// What an SQS record asks about, before its manual payloads are resolved: for the line of
    /// a record that could not be.
    fn record_about(&self, record: &SyncSqsRecord) -> crate::lambda::About {
        use crate::lambda::About;
        let Ok(items) = &record.items else {
            return About::event();
        };
        let cell_of = |key: &str| self.config.key_pattern.cell_of(key).map(|(c, _)| c);
        let mut cells = Vec::new();
        for item in items {
            match item {
                SyncItem::Object(o) => cells.extend(cell_of(&o.key)),
                SyncItem::Manual(Manual::Cell(c)) => cells.push(c.clone()),
                SyncItem::Manual(Manual::Object { key, .. }) => cells.extend(cell_of(key)),
                SyncItem::Manual(Manual::All | Manual::Dashboard) => return About::fleet(),
                SyncItem::ClusterDeleted(d) => return About::cluster(&d.cluster),
                SyncItem::Ignored { .. } => {}
            }
        }
        About::cells(cells)
    }

    /// The state objects a manual payload names.
    async fn manual_items(&self, request: Manual, deadline: Instant) -> Result<Vec<SyncItem>, SyncError> {
        let objects = match request {
            Manual::Cell(cell) => {
                if !metadata::is_dns1123_label(&cell) {
                    return Err(SyncError::Event(events::SyncEventError::Invalid {
                        what: "manual payload".into(),
                        reason: format!("cell {cell:?} is not a DNS-1123 label"),
                    }));
                }
                let key = self.config.key_pattern.key_for(&cell).ok_or_else(|| {
                    SyncError::Event(events::SyncEventError::Invalid {
                        what: "manual payload".into(),
                        reason: format!(
                            "cell {cell:?}: CELLBRIDGE_STATE_KEY_PATTERN names both {{cell}} and {{workspace}}, so the state's key cannot be told from the cell; give \"bucket\" and \"key\""
                        ),
                    })
                })?;
                vec![StateObject {
                    bucket: self.config.state_bucket.clone(),
                    key,
                    version_id: None,
                }]
            }
            Manual::Object { bucket, key } => vec![StateObject {
                bucket: bucket.unwrap_or_else(|| self.config.state_bucket.clone()),
                key,
                version_id: None,
            }],
            Manual::All => self.all_states(deadline).await?,
            Manual::Dashboard => Vec::new(),
        };
        Ok(objects.into_iter().map(SyncItem::Object).collect())
    }

    /// sync-all on the queue: every state's message sent; one `enqueued` result per state.
    async fn fan_out(&self, deadline: Instant) -> Result<Vec<CellResult>, SyncError> {
        let Some(queue) = &self.queue else {
            return Ok(Vec::new());
        };
        let objects = self.all_states(deadline).await?;
        let bodies: Vec<String> = objects.iter().map(fanout::message_for).collect();
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, queue.enqueue(&bodies)).await {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err(SyncError::Enqueue { reason }),
            Err(_) => {
                return Err(SyncError::Enqueue {
                    reason: "sending did not finish before the function's deadline".into(),
                });
            }
        }
        tracing::info!(
            states = objects.len(),
            "sync-all: one message per state sent to the queue"
        );
        Ok(objects
            .iter()
            .map(|o| {
                let cell = self.config.key_pattern.cell_of(&o.key).map(|(c, _)| c);
                CellResult::new(o, cell, "enqueued")
            })
            .collect())
    }

    /// The state objects a record's manual payloads name, in place of the payloads; a sync-all
    /// (a redriven scheduled one) fans out again, or is synced here without a queue.
    /// Paused, a sync-all lists nothing (the others are answered `paused` as any state is).
    async fn resolve_record(
        &self,
        record: &mut SyncSqsRecord,
        index: &SharedBase,
        deadline: Instant,
        paused: bool,
    ) -> Result<(), SyncError> {
        let Ok(items) = &mut record.items else { return Ok(()) };
        let mut resolved = Vec::new();
        for item in std::mem::take(items) {
            match item {
                SyncItem::Manual(Manual::All) | SyncItem::ClusterDeleted(_) if paused => {}
                // Rebuilt once the batch's states are synced (`handle_with`).
                SyncItem::Manual(Manual::Dashboard) => {}
                SyncItem::ClusterDeleted(c) => resolved.push(self.cell_of_deleted(&c, index, deadline).await?),
                SyncItem::Manual(Manual::All) if self.queue.is_some() => {
                    let sent = self.fan_out(deadline).await?;
                    tracing::info!(message_id = %record.message_id, states = sent.len(), "a queued sync-all fanned out");
                }
                SyncItem::Manual(request) => match self.manual_items(request, deadline).await {
                    Ok(objects) => resolved.extend(objects),
                    Err(e) if e.class() == Class::InvalidInput => {
                        record.items = Err(match e {
                            SyncError::Event(e) => e,
                            e => events::SyncEventError::Invalid {
                                what: format!("SQS message {}", record.message_id),
                                reason: e.to_string(),
                            },
                        });
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                },
                other => resolved.push(other),
            }
        }
        *items = resolved;
        Ok(())
    }

    pub(super) async fn all_states(&self, deadline: Instant) -> Result<Vec<StateObject>, SyncError> {
        let bucket = &self.config.state_bucket;
        let mut keys = Vec::new();
        for prefix in [self.config.key_pattern.prefix(), "env:/"] {
            // A listing that hangs must end the invocation with an error before Lambda kills it.
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.states.list(bucket, prefix)).await {
                Ok(Ok(k)) => keys.extend(k),
                Ok(Err(source)) => {
                    return Err(SyncError::Listing {
                        bucket: bucket.clone(),
                        prefix: prefix.to_owned(),
                        source: Box::new(source),
                    });
                }
                Err(_) => {
                    return Err(SyncError::ListingTimedOut {
                        bucket: bucket.clone(),
                        prefix: prefix.to_owned(),
                    });
                }
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys
            .into_iter()
            .filter(|k| self.config.key_pattern.cell_of(k).is_some())
            .map(|key| StateObject {
                bucket: bucket.clone(),
                key,
                version_id: None,
            })
            .collect())
    }

    /// Converges one state object's cell: read the state, plan it against the base, converge
    /// the pull request; the whole of it again on a lost race, within the deadline.
    pub async fn sync_object(&self, obj: StateObject, dry_run: bool, deadline: Instant) -> CellResult {
        let cells = self.config.key_pattern.cell_of(&obj.key).map(|(c, _)| c);
        self.sync_with_base(obj, dry_run, deadline, &SharedBase::for_cells(cells))
            .await
    }

    /// [`Self::sync_object`] on the invocation's shared snapshot of the base branch.
    pub async fn sync_with_base(
        &self,
        obj: StateObject,
        dry_run: bool,
        deadline: Instant,
        base: &SharedBase,
    ) -> CellResult {
        let Some((key_cell, workspace)) = self.config.key_pattern.cell_of(&obj.key) else {
            tracing::info!(bucket = %obj.bucket, key = %obj.key, "ignored: the key does not match CELLBRIDGE_STATE_KEY_PATTERN");
            let mut r = CellResult::new(&obj, None, "ignored");
            r.error = Some("the key does not match CELLBRIDGE_STATE_KEY_PATTERN".into());
            return r;
        };
        if !metadata::is_dns1123_label(&key_cell) {
            let mut r = CellResult::new(&obj, Some(key_cell.clone()), "refused");
            r.error = Some(format!(
                "s3://{}/{}: the cell part {key_cell:?} of the key is not a DNS-1123 label",
                obj.bucket, obj.key
            ));
            tracing::error!(bucket = %obj.bucket, key = %obj.key, "refused: the key's cell is not a DNS-1123 label");
            return r;
        }
        // Every log line of this cell's sync carries the cell, key and workspace.
        let span = tracing::info_span!("sync", cell = %key_cell, key = %obj.key, workspace = workspace.as_deref().unwrap_or("default"));
        async {
            let mut result = CellResult::new(&obj, Some(key_cell.clone()), "failed");
            let mut report = false;
            // The base the last attempt planned on, to read a fresh one after a lost race.
            let mut planned_on: Option<String> = None;
            for attempt in 1..=RACE_ATTEMPTS {
                result.attempts = attempt;
                if deadline.saturating_duration_since(Instant::now()) < START_MARGIN {
                    result.action = "failed".into();
                    result.error = Some("the function's deadline came before this state was synced".into());
                    result.retryable = true;
                    break;
                }
                // Nothing is read for a state whose writes could not be sent before the deadline.
                if !dry_run && let Err(e) = self.fleet.write_room(deadline.checked_sub(START_MARGIN).unwrap_or(deadline)) {
                    result.action = "failed".into();
                    result.error = Some(e.to_string());
                    result.retryable = true;
                    break;
                }
                let outcome = match self.read_and_plan(&obj, &key_cell, deadline, base, &mut result).await {
                    Ok(None) => Ok(()),
                    Ok(Some((snapshot, Work::Metadata(plan)))) if dry_run => {
                        result.planned(&plan);
                        drop(snapshot);
                        Ok(())
                    }
                    Ok(Some((snapshot, Work::Metadata(plan)))) => {
                        planned_on = Some(snapshot.base_sha.clone());
                        self.publish(&snapshot, &plan, deadline, &mut result).await.map(|tell| report = tell)
                    }
                    Ok(Some((snapshot, Work::Destroyed(destroyed)))) => {
                        planned_on = Some(snapshot.base_sha.clone());
                        self.decommission(&snapshot, &key_cell, destroyed, dry_run, deadline, &mut result)
                            .await
                    }
                    Err(e) => Err(e),
                };
                match outcome {
                    Ok(()) => break,
                    Err(Attempt::Redo(why)) if attempt < RACE_ATTEMPTS => {
                        if let Some(sha) = planned_on.take() {
                            base.lost_race(&sha).await;
                        }
                        tracing::info!(cell = %key_cell, attempt, reason = %why, "lost a race; redoing on the fresh base");
                    }
                    Err(Attempt::Redo(why)) => {
                        result.action = "failed".into();
                        result.error = Some(format!("lost the race {RACE_ATTEMPTS} times: {why}"));
                        result.retryable = true;
                    }
                    Err(Attempt::Fail {
                        error,
                        retryable,
                        refused,
                        report: tell,
                    }) => {
                        result.action = if refused { "refused" } else { "failed" }.into();
                        result.error = Some(error);
                        result.retryable = retryable;
                        report = tell;
                        break;
                    }
                }
            }
            if !dry_run {
                self.tell_github(&mut result, report, deadline, base).await;
            }
            result.log();
            result
        }
        .instrument(span)
        .await
    }

    /// Converges the cell's pull request to `plan`; whether the outcome is to be told on GitHub
    /// (a claimed cell is refused, and its pull request says so).
    async fn publish(
        &self,
        snapshot: &Snapshot,
        plan: &Plan,
        deadline: Instant,
        result: &mut CellResult,
    ) -> Result<bool, Attempt> {
        self.fleet.check_write_access(deadline).await.map_err(github_fail)?;
        let Proposed::Values(converged) = proposal::converge(&self.fleet, snapshot, Proposal::Values(plan), deadline)
            .await
            .map_err(github_fail)?
        else {
            unreachable!("values converge to values");
        };
        let published = converged.published;
        result.auto_merge = converged.auto_merge;
        result.published(plan, &published);
        result.resolve_issue = no_open_pull(&published);
        Ok(matches!(published, Published::Claimed { .. }))
    }

    /// The state's latest version, checked against the contract, and its plan against the base
    /// branch as it is now; `None` when there is nothing to plan (the object is gone).
    async fn read_and_plan(
        &self,
        obj: &StateObject,
        key_cell: &str,
        deadline: Instant,
        base: &SharedBase,
        result: &mut CellResult,
    ) -> Result<Option<(Arc<Snapshot>, Work)>, Attempt> {
        // S3 has its own retries; the deadline bounds them so the record goes back to SQS
        // instead of the function being killed with the whole batch.
        let left = deadline.saturating_duration_since(Instant::now());
        let read = tokio::time::timeout(left, self.states.read_latest(&obj.bucket, &obj.key))
            .await
            .map_err(|_| Attempt::Fail {
                error: format!(
                    "s3://{}/{}: reading the state did not finish before the function's deadline",
                    obj.bucket, obj.key
                ),
                retryable: true,
                refused: false,
                report: false,
            })?;
        let (mut state, source) = match read {
            Ok(s) => s,
            Err(S3Error::NotFound { .. }) => {
                result.action = "ignored".into();
                result.error = Some(GONE.into());
                return Ok(None);
            }
            Err(e) => {
                return Err(Attempt::Fail {
                    retryable: e.retryable(),
                    // A state that is no state is refused; S3 refusing access is a failure of
                    // the deployment, not of the state.
                    refused: matches!(e, S3Error::State(_)) && !e.retryable(),
                    // A state that is no state is the team's to fix; S3 refusing access is not.
                    report: matches!(e, S3Error::State(_)) && !e.retryable(),
                    error: e.to_string(),
                });
            }
        };
        result.version_id = source.version_id.clone();
        result.serial = Some(state.serial);
        let origin = source.to_string();
        // Contract errors name the key, never the value. A destroyed stack is no contract
        // error: its cell may be decommissioned.
        let meta = match metadata::from_state(&state) {
            Ok(meta) => Some(meta),
            Err(ContractError::Destroyed) => None,
            Err(e) => return Err(refused(format!("{origin}: {e}"))),
        };
        let (serial, lineage) = (state.serial, std::mem::take(&mut state.lineage));
        drop(state);
        if let Some(meta) = &meta
            && meta.cell != key_cell
        {
            return Err(refused(format!(
                "{origin}: the key says cell `{key_cell}` (CELLBRIDGE_STATE_KEY_PATTERN) but cell_metadata.cell_name is `{}`",
                meta.cell
            )));
        }
        let snapshot = base.get(&self.fleet, deadline).await.map_err(github_fail)?;
        // The fleet repo's pause switch, on the base branch as read: nothing is written.
        match pause::from_fleet(&snapshot.fleet) {
            Ok(None) => {}
            Ok(Some(p)) => {
                result.action = "paused".into();
                result.paused = Some(p);
                return Ok(None);
            }
            // A broken settings file is the fleet's, not the cell's: the alarm tells.
            Err(e) => {
                return Err(Attempt::Fail {
                    error: e.to_string(),
                    retryable: false,
                    refused: false,
                    report: false,
                });
            }
        }
        let planned = match meta {
            Some(meta) => {
                let opts = PlanOptions {
                    sync_source: self.config.flux_git(&snapshot.base_branch),
                };
                plan::plan(&meta, source, &snapshot.fleet, &opts).map(Work::Metadata)
            }
            None => Ok(Work::Destroyed(Destroyed {
                decommission: decommission_plan::plan(
                    key_cell,
                    serial,
                    &lineage,
                    source,
                    &snapshot.fleet,
                    &ClusterCheck::NotAsked,
                ),
            })),
        };
        // Whatever the plan's verdict, it stands only if nothing it read was read past.
        let missed = snapshot.fleet.not_kept();
        if !missed.is_empty() {
            let why = format!(
                "the plan reads the directories of cells {} too; reading the base again keeping them",
                missed.join(", ")
            );
            base.widen(missed).await;
            return Err(Attempt::Redo(why));
        }
        let work = planned.map_err(|e| refused(e.to_string()))?;
        Ok(Some((snapshot, work)))
    }

    /// What the cell's team sees on GitHub: a final failure they can act on (`report`) on the
    /// cell's pull request or in its issue; after a good state with no pull request open, its
    /// `cellbridge-refused` issue closed. Best effort: the outcome stands whatever GitHub says,
    /// and a failure to tell is logged and answered (`report_error`).
    async fn tell_github(&self, result: &mut CellResult, report: bool, deadline: Instant, shared: &SharedBase) {
        let Some(cell) = result.cell.clone() else { return };
        if result.failed() && report && !result.retryable {
            let source = result.source();
            let reason = result.error.clone().unwrap_or_default();
            let refusal = Refusal {
                cell: &cell,
                source: &source,
                reason: &reason,
            };
            let told = async {
                // The fleet repo's pause switch holds for reports too; a refused state was
                // refused before the base was read.
                let base = shared.get(&self.fleet, deadline).await?;
                if let Ok(Some(p)) = pause::from_fleet(&base.fleet) {
                    return Ok(Err(p));
                }
                drop(base);
                self.fleet.check_write_access(deadline).await?;
                report::report(&self.fleet, &refusal, &shared.refused, deadline)
                    .await
                    .map(Ok)
            };
            match told.await {
                Ok(Ok(r)) => result.reported = Some(r),
                Ok(Err(p)) => {
                    tracing::warn!(cell = %cell, paused = %p.describe(), "the failure is not reported on GitHub: cellbridge is paused")
                }
                Err(e) => {
                    tracing::warn!(cell = %cell, error = %e, "the failure could not be reported on GitHub");
                    result.report_error = Some(e.to_string());
                }
            }
        } else if std::mem::take(&mut result.resolve_issue) {
            match report::resolve_issue(&self.fleet, &cell, &result.source(), &shared.refused, deadline).await {
                Ok(closed) => result.resolved_issues = closed,
                Err(e) => {
                    tracing::warn!(cell = %cell, error = %e, "the cell's cellbridge-refused issue could not be closed");
                    result.report_error = Some(e.to_string());
                }
            }
        }
    }
}

/// Whether converging found no open pull request for the cell: then a refusal was reported in
/// an issue, which this good state resolves.
fn no_open_pull(published: &Published) -> bool {
    matches!(
        published,
        Published::Opened { .. }
            | Published::InSync
            | Published::Declined { .. }
            | Published::Stale { number: None, .. }
    )
}

/// One per object: S3 notifies twice for some multipart uploads, and a batch can name one
/// state many times. Each is read once, at its latest version.
fn unique_objects(items: &[SyncItem]) -> Vec<StateObject> {
    let mut objects: BTreeMap<(String, String), StateObject> = BTreeMap::new();
    for item in items {
        match item {
            SyncItem::Ignored { what, reason } => tracing::info!(object = %what, reason = %reason, "ignored"),
            // Resolved before (`resolve_record`), or paused.
            SyncItem::Manual(_) | SyncItem::ClusterDeleted(_) => {}
            SyncItem::Object(o) => {
                objects
                    .entry((o.bucket.clone(), o.key.clone()))
                    .or_insert_with(|| o.clone());
            }
        }
    }
    objects.into_values().collect()
}

/// The SQS records to redeliver: those naming a state whose failure a retry may fix
/// ([`crate::lambda::sqs_redeliver`], the rule cluster-bootstrap follows too). A record whose
/// states failed only for good, or whose body cannot be read, is deleted with an ERROR line
/// (and, for the body, a `refused` metric: its states have no result of their own).
fn sqs_failures(
    records: &[SyncSqsRecord],
    results: &[CellResult],
    fanned: Vec<crate::lambda::RecordFailure>,
    metrics: &Metrics<'_>,
) -> Vec<String> {
    use crate::lambda::{About, RecordFailure, sqs_redeliver};
    for f in &fanned {
        metrics.count(metrics::failure_outcome(f.class), &[]);
    }
    let mut failed = fanned;
    for r in records {
        match &r.items {
            // A body nobody can read will not read better later.
            Err(e) => {
                metrics.count(metrics::failure_outcome(Class::InvalidInput), &[]);
                failed.push(RecordFailure {
                    message_id: r.message_id.clone(),
                    about: About::event(),
                    class: Class::InvalidInput,
                    reason: format!("not a state-sync event: {e}"),
                });
            }
            Ok(items) => {
                let failures: Vec<&CellResult> = items
                    .iter()
                    .filter_map(|i| match i {
                        SyncItem::Object(o) => results
                            .iter()
                            .find(|c| c.bucket == o.bucket && c.key == o.key && c.failed()),
                        SyncItem::Ignored { .. } | SyncItem::Manual(_) | SyncItem::ClusterDeleted(_) => None,
                    })
                    .collect();
                if failures.is_empty() {
                    continue;
                }
                // Redelivered when any of its states may sync later; the others fail again,
                // counted again, which is cheaper than losing the one that would have worked.
                let retry = failures.iter().any(|c| c.action == "failed" && c.retryable);
                let reason = failures
                    .iter()
                    .map(|c| format!("{}: {}", c.key, c.error.as_deref().unwrap_or(&c.action)))
                    .collect::<Vec<_>>()
                    .join("; ");
                failed.push(RecordFailure {
                    message_id: r.message_id.clone(),
                    about: About::cells(failures.iter().filter_map(|c| c.cell.as_deref())),
                    class: if retry { Class::Retryable } else { Class::Final },
                    reason,
                });
            }
        }
    }
    sqs_redeliver("state-sync", failed)
}

impl CellResult {
    /// A dry run's answer: the plan itself.
    fn planned(&mut self, plan: &Plan) {
        self.action = "planned".into();
        self.plan = Some(json!({
            "outcome": plan.outcome, "title": plan.title, "body": plan.body, "labels": plan.labels,
            "files": plan.files.iter().map(|f| &f.path).collect::<Vec<_>>(), "diff": plan.unified_diff(),
            "status": if plan.status_ok() { "success" } else { "failure" }, "status_description": plan.status_description(),
        }));
    }

    /// What converging the pull request did.
    fn published(&mut self, plan: &Plan, published: &Published) {
        let pr = |number: u64, url: &str| Some(json!({"number": number, "url": url}));
        let (action, pull) = match published {
            Published::Opened { number, url, .. } => ("opened", pr(*number, url)),
            Published::Updated { number, url, .. } => ("updated", pr(*number, url)),
            Published::Unchanged { number, url } => ("unchanged", pr(*number, url)),
            Published::Closed { number, url } => ("closed", pr(*number, url)),
            Published::InSync => ("in-sync", None),
            Published::Stale { number, url, .. } => ("stale", number.map(|n| json!({"number": n, "url": url}))),
            Published::Declined { number, url } => ("declined", pr(*number, url)),
            Published::Conflicted { number, url } => ("conflicted", pr(*number, url)),
            Published::Claimed { number, url, other_key } => {
                self.error = Some(format!(
                    "two states claim cell {}: {} and {other_key} (pull request #{number}); map each workspace to its own cell with {{workspace}} in CELLBRIDGE_STATE_KEY_PATTERN",
                    self.cell.as_deref().unwrap_or_default(),
                    self.key
                ));
                ("refused", pr(*number, url))
            }
        };
        self.action = action.into();
        self.pull_request = pull;
        if !plan.status_ok()
            && matches!(
                published,
                Published::Opened { .. } | Published::Updated { .. } | Published::Unchanged { .. }
            )
        {
            self.plan = Some(json!({"status": "failure", "status_description": plan.status_description()}));
        }
    }

    fn log(&self) {
        let cell = self.cell.as_deref().unwrap_or("");
        if let Some(p) = &self.paused {
            tracing::warn!(cell, key = %self.key, paused = %p.describe(), "state not synced: cellbridge is paused")
        } else if self.failed() {
            tracing::error!(cell, key = %self.key, action = %self.action, retryable = self.retryable, error = self.error.as_deref().unwrap_or(""), "state not synced")
        } else {
            // Fields a Logs Insights query filters on, never a debug dump: the pull request by
            // its number and address.
            let number = self.pull_request.as_ref().and_then(|p| p["number"].as_u64());
            let url = self.pull_request.as_ref().and_then(|p| p["url"].as_str()).unwrap_or("");
            let message = match self.action.as_str() {
                "ignored" => "state ignored",
                "planned" => "state planned (dry run): nothing written",
                "destroyed" => "stack destroyed: nothing proposed",
                _ => "state synced",
            };
            tracing::info!(cell, key = %self.key, action = %self.action, serial = self.serial, pull_request = number, pull_request_url = url, reason = self.error.as_deref().unwrap_or(""), "{message}")
        }
    }
}

fn finish(results: Vec<CellResult>, sqs_failures: Option<Vec<String>>) -> SyncInvocation {
    let class = Class::of_all(
        results
            .iter()
            .filter(|r| r.failed())
            .map(|r| if r.retryable { Class::Retryable } else { Class::Final }),
    );
    let cells = serde_json::to_value(&results).unwrap_or(Value::Null);
    let response = match sqs_failures {
        Some(ids) => {
            let mut v =
                serde_json::to_value(events::batch_response(ids)).unwrap_or_else(|_| json!({"batchItemFailures": []}));
            v["cells"] = cells;
            v
        }
        None => json!({ "cells": cells }),
    };
    SyncInvocation { response, class }
}
