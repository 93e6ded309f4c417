//! The orchestrator: for one state object, the latest state version → the cell's plan against
//! the fleet repo's base branch → the cell's pull request, redone on a lost race. What an
//! invocation asks for and answers is `invocation.rs`; a destroyed stack's decommission is
//! `syncer/decommission.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::Instrument;

use super::invocation::{SyncPlan, Target};
use super::outcome::{Action, CellError, CellResult, RACE_ATTEMPTS, Redo};
use super::{SyncConfig, SyncError};
use crate::adapters::probe::Probe;
use crate::ports::github::{GithubError, GithubRepo, Published, Snapshot};
use crate::ports::state::{S3Error, StateSource};
use crate::pure::decommission::{self as decommission_plan, ClusterCheck};
use crate::pure::events::sync::StateObject;
use crate::pure::fleet::{FleetRead, Keep};
use crate::pure::metadata::{self, ContractError};
use crate::pure::plan::{self, Plan, PlanOptions};
use crate::rules::proposal::{self, Proposal, Proposed};
use crate::rules::report::{self, Refusal};
use crate::shell::lambda::{About, After, CHAIN, Ctx, Job, Work};
use crate::shell::metrics::Metrics;
use crate::shell::pause::{self, Pause};

mod decommission;

pub(crate) use self::decommission::Described;
use self::decommission::Destroyed;

/// Don't start a state with less time than this left: it would be cut off half-way.
const START_MARGIN: Duration = Duration::from_secs(3);

/// state-sync over a state source and GitHub's primitives (the fleet repo).
pub struct Syncer<S, G> {
    pub config: SyncConfig,
    pub states: S,
    pub fleet: G,
    /// state-sync's own queue: sync-all sends one message per cell there ([`super::fanout`]);
    /// `None`: sync-all syncs every cell in the invocation.
    pub queue: Option<crate::jobs::queue::Queue>,
    /// EKS, asked whether a destroyed cell's cluster is gone before its directory's removal is
    /// proposed; `None`: nobody can confirm it, so no decommission is ever opened.
    pub clusters: Option<ClusterAccess>,
}

/// How state-sync reaches the cells' clusters: EKS, and its describe-only role in each other
/// account (`CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES`). Never cluster-bootstrap's roles there: those
/// may make themselves a cluster's administrator, and their trust names cluster-bootstrap only.
#[derive(Clone)]
pub struct ClusterAccess {
    pub probe: Probe,
    pub describe_roles: BTreeMap<String, String>,
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
    pub(super) fn sharing(mut self, refused: &Arc<report::RefusedIssues>) -> Self {
        self.refused = refused.clone();
        self
    }

    /// The snapshot, read now if no state of this invocation has read it (the others wait for
    /// that one read rather than make their own).
    pub(super) async fn get<G: GithubRepo>(&self, fleet: &G, deadline: Instant) -> Result<Arc<Snapshot>, GithubError> {
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
    pub(super) fn index() -> Self {
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
enum Change {
    /// The state's `cell_metadata` as the cell's ConfigMap. Both variants are boxed: each
    /// carries a strict check's whole report.
    Metadata(Box<Plan>),
    /// No outputs and no resources: the stack was destroyed.
    Destroyed(Box<Destroyed>),
}

/// One try at a cell's state failed: redo it on a fresh base (a lost race), or stop.
enum Attempt {
    Redo(Redo),
    Fail(CellError),
}

impl From<CellError> for Attempt {
    fn from(e: CellError) -> Self {
        Attempt::Fail(e)
    }
}

fn github_fail(e: GithubError) -> Attempt {
    match e {
        GithubError::Conflict { what, detail } => Attempt::Redo(Redo::Conflict { what, detail }),
        e => Attempt::Fail(CellError::Github(e)),
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

    /// Destroyed stacks' clusters are looked up through `access` (`syncer/decommission.rs`).
    pub fn with_clusters(mut self, access: ClusterAccess) -> Self {
        self.clusters = Some(access);
        self
    }

    /// sync-all fans out to `queue`, one message per cell.
    pub fn with_queue(mut self, queue: impl Into<crate::jobs::queue::Queue>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// The cell a state's key names, when it names one.
    pub(super) fn cell_of(&self, key: &str) -> Option<String> {
        self.config.key_pattern.cell_of(key).map(|(c, _)| c)
    }
}

/// state-sync as the Lambda handler runs it: every state the event names, each to its own
/// [`CellResult`], the states of a group sharing one read of the base branch; the fleet
/// dashboard after a sync-all.
impl<S: StateSource, G: GithubRepo> Job for Syncer<S, G> {
    const NAME: &'static str = "state-sync";
    /// States sharing one read of the base (an SQS batch's size at most): memory stays flat
    /// however many states one invocation syncs (a sync-all without a queue).
    const GROUP: usize = 10;
    const PARALLEL: usize = 4;

    type Item = Target;
    type Batch = SharedBase;
    type Outcome = CellResult;
    type Plan = SyncPlan;
    type Error = SyncError;

    async fn parse(&self, event: &Value, pause: Option<&Pause>, deadline: Instant) -> Result<Work<Self>, SyncError> {
        self.work(event, pause, deadline).await
    }

    fn paused(&self, item: &Target, pause: &Pause) -> Option<CellResult> {
        let mut r = CellResult::new(&item.object, self.cell_of(&item.object.key), Action::Paused);
        r.paused = Some(pause.clone());
        r.log();
        Some(r)
    }

    fn about(&self, item: &Target) -> About {
        About::cells(self.cell_of(&item.object.key))
    }

    async fn prepare(&self, items: &[Target], plan: &SyncPlan, _deadline: Instant) -> Result<SharedBase, SyncError> {
        Ok(SharedBase::for_cells(items.iter().filter_map(|t| self.cell_of(&t.object.key))).sharing(&plan.refused))
    }

    /// Converges one state object's cell: read the state, plan it against the base, converge
    /// the pull request; the whole of it again on a lost race, within the deadline.
    async fn run(&self, item: Target, base: &SharedBase, ctx: &Ctx) -> CellResult {
        let Target {
            object: obj,
            named,
            dry_run,
        } = item;
        let deadline = ctx.deadline;
        async move {
            let mut result = match self.config.key_pattern.cell_of(&obj.key) {
                None => {
                    tracing::info!(bucket = %obj.bucket, key = %obj.key, "ignored: the key does not match CELLBRIDGE_STATE_KEY_PATTERN");
                    let mut r = CellResult::new(&obj, None, Action::Ignored);
                    r.ignore(CellError::KeyNotMatched);
                    r
                }
                Some((key_cell, _)) if !metadata::is_dns1123_label(&key_cell) => {
                    let mut r = CellResult::new(&obj, Some(key_cell.clone()), Action::Refused);
                    r.fail(CellError::KeyCell {
                        bucket: obj.bucket.clone(),
                        key: obj.key.clone(),
                        cell: key_cell,
                    });
                    tracing::error!(bucket = %obj.bucket, key = %obj.key, "refused: the key's cell is not a DNS-1123 label");
                    r
                }
                // Every log line of this cell's sync carries the cell, key and workspace.
                Some((key_cell, workspace)) => {
                    let span = tracing::info_span!("sync", cell = %key_cell, key = %obj.key, workspace = workspace.as_deref().unwrap_or("default"));
                    async {
                        let mut result = CellResult::new(&obj, Some(key_cell.clone()), Action::Failed { retryable: false });
                        // The base the last attempt planned on, to read a fresh one after a lost race.
                        let mut planned_on: Option<String> = None;
                        for attempt in 1..=RACE_ATTEMPTS {
                            result.attempts = attempt;
                            if deadline.saturating_duration_since(Instant::now()) < START_MARGIN {
                                result.fail(CellError::Deadline);
                                break;
                            }
                            // Nothing is read for a state whose writes could not be sent before the deadline.
                            if !dry_run
                                && let Err(e) = self.fleet.write_room(deadline.checked_sub(START_MARGIN).unwrap_or(deadline))
                            {
                                result.fail(CellError::NoRoom(e));
                                break;
                            }
                            let outcome = match self.read_and_plan(&obj, &key_cell, deadline, base, &mut result).await {
                                Ok(None) => Ok(()),
                                Ok(Some((_, Change::Metadata(plan)))) if dry_run => {
                                    result.planned(&plan);
                                    Ok(())
                                }
                                Ok(Some((snapshot, Change::Metadata(plan)))) => {
                                    planned_on = Some(snapshot.base_sha.clone());
                                    let converged = async {
                                        self.fleet.check_write_access(deadline).await?;
                                        proposal::converge(&self.fleet, &snapshot, Proposal::Values(&plan), &base.refused, deadline).await
                                    };
                                    match converged.await.map_err(github_fail) {
                                        Ok(Proposed::Values(converged)) => {
                                            result.auto_merge = converged.auto_merge;
                                            result.published(&plan, &converged.published);
                                            result.resolve_issue = no_open_pull(&converged.published);
                                            Ok(())
                                        }
                                        Ok(Proposed::Removal(_)) => unreachable!("values converge to values"),
                                        Err(e) => Err(e),
                                    }
                                }
                                Ok(Some((snapshot, Change::Destroyed(destroyed)))) => {
                                    planned_on = Some(snapshot.base_sha.clone());
                                    self.decommission(&snapshot, &key_cell, *destroyed, &base.refused, dry_run, deadline, &mut result)
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
                                Err(Attempt::Redo(why)) => result.fail(CellError::Raced(why)),
                                Err(Attempt::Fail(e)) => {
                                    result.fail(e);
                                    break;
                                }
                            }
                        }
                        if !dry_run {
                            self.tell_github(&mut result, deadline, base).await;
                        }
                        result.log();
                        result
                    }
                    .instrument(span)
                    .await
                }
            };
            // A state a person named (a manual payload, the console, the command line): its
            // absence is a mistake to tell, not an event to drop.
            if named && result.action == Action::Ignored {
                result.not_there();
            }
            result
        }
        .instrument(tracing::trace_span!(target: CHAIN, "Syncer.run"))
        .await
    }

    async fn after(
        &self,
        plan: &SyncPlan,
        _base: Option<&SharedBase>,
        pause: Option<&Pause>,
        ctx: &Ctx,
        metrics: &Metrics<'_>,
    ) -> Result<Option<After>, SyncError> {
        let after = self.rebuild_dashboard(plan, pause, ctx, metrics).await;
        // Once per invocation, as GitHub's answers left it: the token-expiring alarm's gauge.
        metrics.github_token(self.fleet.token_expires_at());
        Ok(after)
    }

    fn answer(
        &self,
        plan: SyncPlan,
        outcomes: Vec<CellResult>,
        after: Option<After>,
        pause: Option<Pause>,
        _ctx: &Ctx,
    ) -> Value {
        super::invocation::answer(plan, outcomes, after, pause)
    }
}

impl<S: StateSource, G: GithubRepo> Syncer<S, G> {
    /// The state's latest version, checked against the contract, and its plan against the base
    /// branch as it is now; `None` when there is nothing to plan (the object is gone).
    async fn read_and_plan(
        &self,
        obj: &StateObject,
        key_cell: &str,
        deadline: Instant,
        base: &SharedBase,
        result: &mut CellResult,
    ) -> Result<Option<(Arc<Snapshot>, Change)>, Attempt> {
        // S3 has its own retries; the deadline bounds them so the record goes back to SQS
        // instead of the function being killed with the whole batch.
        let left = deadline.saturating_duration_since(Instant::now());
        let read = tokio::time::timeout(left, self.states.read_latest(&obj.bucket, &obj.key))
            .await
            .map_err(|_| CellError::ReadTimeout {
                bucket: obj.bucket.clone(),
                key: obj.key.clone(),
            })?;
        let (mut state, source) = match read {
            Ok(s) => s,
            Err(S3Error::NotFound { .. }) => {
                result.ignore(CellError::Gone);
                return Ok(None);
            }
            Err(e) => return Err(CellError::State(e).into()),
        };
        result.version_id = source.version_id.clone();
        result.serial = Some(state.serial);
        let origin = source.to_string();
        // Contract errors name the key, never the value. A destroyed stack is no contract
        // error: its cell may be decommissioned.
        let meta = match metadata::from_state(&state) {
            Ok(meta) => Some(meta),
            Err(ContractError::Destroyed) => None,
            Err(e) => return Err(CellError::Contract { origin, source: e }.into()),
        };
        let (serial, lineage) = (state.serial, std::mem::take(&mut state.lineage));
        drop(state);
        if let Some(meta) = &meta
            && meta.cell != key_cell
        {
            return Err(CellError::KeyMismatch {
                origin,
                key_cell: key_cell.to_owned(),
                meta_cell: meta.cell.clone(),
            }
            .into());
        }
        let snapshot = base.get(&self.fleet, deadline).await.map_err(github_fail)?;
        // The fleet repo's pause switch, on the base branch as read: nothing is written.
        match pause::from_fleet(&snapshot.fleet) {
            Ok(None) => {}
            Ok(Some(p)) => {
                result.action = Action::Paused;
                result.paused = Some(p);
                return Ok(None);
            }
            // A broken settings file is the fleet's, not the cell's: the alarm tells.
            Err(e) => return Err(CellError::Settings(e).into()),
        }
        let planned = match meta {
            Some(meta) => {
                let opts = PlanOptions {
                    sync_source: self.config.flux_git(&snapshot.base_branch),
                };
                plan::plan(&meta, source, &snapshot.fleet, &opts).map(|p| Change::Metadata(Box::new(p)))
            }
            None => Ok(Change::Destroyed(Box::new(Destroyed {
                decommission: decommission_plan::plan(
                    key_cell,
                    serial,
                    &lineage,
                    source,
                    &snapshot.fleet,
                    &ClusterCheck::NotAsked,
                ),
            }))),
        };
        // Whatever the plan's verdict, it stands only if nothing it read was read past.
        let missed = snapshot.fleet.not_kept();
        if !missed.is_empty() {
            base.widen(missed.clone()).await;
            return Err(Attempt::Redo(Redo::ReadPast(missed)));
        }
        let change = planned.map_err(CellError::Plan)?;
        Ok(Some((snapshot, change)))
    }

    /// What the cell's team sees on GitHub: a final failure they can act on
    /// ([`CellError::reported`]) on the cell's pull request or in its issue; after a good state
    /// with no pull request open, its `cellbridge-refused` issue closed. Best effort: the
    /// outcome stands whatever GitHub says, and a failure to tell is logged and answered
    /// (`report_error`).
    async fn tell_github(&self, result: &mut CellResult, deadline: Instant, shared: &SharedBase) {
        let Some(cell) = result.cell.clone() else { return };
        let told = result
            .error
            .as_ref()
            .filter(|e| result.failed() && e.reported() && !e.retryable())
            .map(ToString::to_string);
        if let Some(reason) = told {
            let source = result.source();
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
                    result.report_error = Some(e);
                }
            }
        } else if std::mem::take(&mut result.resolve_issue) {
            match report::resolve_issue(&self.fleet, &cell, &result.source(), &shared.refused, deadline).await {
                Ok(closed) => result.resolved_issues = closed,
                Err(e) => {
                    tracing::warn!(cell = %cell, error = %e, "the cell's cellbridge-refused issue could not be closed");
                    result.report_error = Some(e);
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
