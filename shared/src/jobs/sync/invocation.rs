//! What one state-sync invocation asks for: the event read into the state objects it names
//! (manual payloads resolved, a sync-all listed or sent to the queue, an EKS DeleteCluster's
//! cell found), whether the fleet dashboard is rebuilt after them, and the answer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::outcome::{Action, CellResult};
use super::syncer::SharedBase;
use super::{SyncError, Syncer};
use crate::ports::github::GithubRepo;
use crate::ports::state::StateSource;
use crate::pure::events::sync::{self as events, Manual, StateObject, SyncEvent, SyncItem, SyncSqsRecord};
use crate::pure::metadata;
use crate::rules::report::RefusedIssues;
use crate::shell::error::{Class, Classify};
use crate::shell::lambda::{About, After, Ctx, Fails, Record, RecordFailure, Work};
use crate::shell::metrics::Metrics;
use crate::shell::pause::Pause;
use crate::{
    jobs::sync::fanout::{self},
    ports::queue::Enqueue,
};

/// One state object to sync.
#[derive(Debug, Clone)]
pub struct Target {
    pub object: StateObject,
    /// A person named it (a manual payload, the console, the command line): its absence is a
    /// mistake to tell, not an event to drop.
    pub named: bool,
    /// Plan only: nothing is written.
    pub dry_run: bool,
}

/// What the dashboard and the answer need of an invocation.
pub struct SyncPlan {
    pub(super) dry_run: bool,
    dashboard: Dashboard,
    /// A sync-all that sent one message per state to the queue (answered with `"enqueued"`).
    fanned_out: bool,
    /// The schedule's sync-all: its dashboard, failed for now, is tried again through the queue.
    scheduled: bool,
    /// The open `cellbridge-refused` issues, listed once for the invocation (every group of it).
    pub(super) refused: Arc<RefusedIssues>,
}

/// Whether the fleet dashboard is rebuilt after the states, and what its failure fails.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Dashboard {
    /// A single cell's sync or an S3 event never rebuilds it.
    No,
    /// After a sync-all: its failure is its own (failing the sync-all would send every message
    /// again).
    After,
    /// `{"action": "dashboard"}`: the invocation is the dashboard.
    Alone,
    /// An SQS batch with a sync-all or dashboard message: these messages asked for the dashboard
    /// alone and fail with it (a sync-all's message is the sync-all's).
    Messages(Vec<String>),
}

impl<S: StateSource, G: GithubRepo> Syncer<S, G> {
    /// The invocation's work: every state object the event names, once (S3 notifies twice for
    /// some multipart uploads, and a batch can name one state many times), in key order.
    pub(super) async fn work(
        &self,
        event: &Value,
        pause: Option<&Pause>,
        deadline: Instant,
    ) -> Result<Work<Self>, SyncError> {
        let paused = pause.is_some();
        let mut plan = SyncPlan {
            dry_run: false,
            dashboard: Dashboard::No,
            fanned_out: false,
            scheduled: false,
            refused: Arc::default(),
        };
        let work = |plan: SyncPlan, answered: Vec<CellResult>, alone: bool| -> Work<Self> {
            Work {
                plan,
                answered,
                items: Vec::new(),
                records: None,
                failed: Vec::new(),
                alone,
            }
        };
        // The clusters an EKS DeleteCluster names are found in one read of the base's index,
        // shared by the invocation's records.
        let index = SharedBase::index();
        let mut named = false;
        let mut failed = Vec::new();
        let (items, records) = match events::parse(event)? {
            SyncEvent::Manual {
                request: Manual::Dashboard,
                dry_run,
                ..
            } => {
                plan.dry_run = dry_run;
                plan.dashboard = Dashboard::Alone;
                return Ok(work(plan, Vec::new(), true));
            }
            SyncEvent::Direct(items) => {
                let mut resolved = Vec::new();
                for item in items {
                    match item {
                        SyncItem::ClusterDeleted(c) if !paused => {
                            resolved.push(self.cell_of_deleted(&c, &index, deadline).await?)
                        }
                        other => resolved.push(other),
                    }
                }
                (resolved, None)
            }
            // Listing every state is reading: a paused sync-all lists nothing (the dashboard
            // included).
            SyncEvent::Manual {
                request: Manual::All, ..
            } if paused => (Vec::new(), None),
            SyncEvent::Manual {
                request: Manual::All,
                dry_run: false,
                scheduled,
            } if self.queue.is_some() => {
                let sent = self.fan_out(deadline).await?;
                // The cells are on the queue: the dashboard shows the fleet as this sync-all
                // found it.
                plan.dashboard = Dashboard::After;
                plan.fanned_out = true;
                plan.scheduled = scheduled;
                return Ok(work(plan, sent, false));
            }
            SyncEvent::Manual {
                request,
                dry_run,
                scheduled,
            } => {
                named = matches!(request, Manual::Cell(_) | Manual::Object { .. });
                if matches!(request, Manual::All) {
                    plan.dashboard = Dashboard::After;
                    plan.scheduled = scheduled;
                }
                plan.dry_run = dry_run;
                (self.manual_items(request, deadline).await?, None)
            }
            SyncEvent::Sqs(mut records) => {
                let mut rebuild = false;
                let mut messages = Vec::new();
                for r in &records {
                    let Ok(items) = &r.items else { continue };
                    if items.contains(&SyncItem::Manual(Manual::Dashboard)) {
                        messages.push(r.message_id.clone());
                    }
                    rebuild |= !paused && items.contains(&SyncItem::Manual(Manual::All));
                }
                if rebuild || !messages.is_empty() {
                    plan.dashboard = Dashboard::Messages(messages);
                }
                // Manual payloads as bodies (the fan-out's messages, a redriven sync-all) become
                // the state objects they name, as an S3 event's would.
                for r in records.iter_mut() {
                    let about = self.record_about(r);
                    if let Err(e) = self.resolve_record(r, &index, deadline, paused).await {
                        failed.push(RecordFailure {
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
                (items, Some(records))
            }
        };
        let mut objects: BTreeMap<(String, String), StateObject> = BTreeMap::new();
        for item in &items {
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
        let at: BTreeMap<&(String, String), usize> = objects.keys().enumerate().map(|(i, k)| (k, i)).collect();
        let records = records.map(|records| {
            records
                .iter()
                .map(|r| Record {
                    message_id: r.message_id.clone(),
                    items: match &r.items {
                        // A body nobody can read will not read better later.
                        Err(e) => Err(RecordFailure {
                            message_id: r.message_id.clone(),
                            about: About::event(),
                            class: Class::InvalidInput,
                            reason: format!("not a state-sync event: {e}"),
                        }),
                        Ok(items) => Ok(items
                            .iter()
                            .filter_map(|i| match i {
                                SyncItem::Object(o) => at.get(&(o.bucket.clone(), o.key.clone())).copied(),
                                SyncItem::Ignored { .. } | SyncItem::Manual(_) | SyncItem::ClusterDeleted(_) => None,
                            })
                            .collect()),
                    },
                })
                .collect()
        });
        let dry_run = plan.dry_run;
        Ok(Work {
            plan,
            answered: Vec::new(),
            items: objects
                .into_values()
                .map(|object| Target { object, named, dry_run })
                .collect(),
            records,
            failed,
            alone: false,
        })
    }

    /// The fleet dashboard, when the invocation rebuilds it.
    pub(super) async fn rebuild_dashboard(
        &self,
        plan: &SyncPlan,
        pause: Option<&Pause>,
        ctx: &Ctx,
        metrics: &Metrics<'_>,
    ) -> Option<After> {
        let fails = match &plan.dashboard {
            Dashboard::No => return None,
            Dashboard::After => Fails::Nothing,
            Dashboard::Alone => Fails::Invocation,
            Dashboard::Messages(ids) => Fails::Records(ids.clone()),
        };
        let run = self.dashboard(plan.dry_run, ctx.deadline, pause, metrics).await;
        let mut answer = serde_json::to_value(&run).unwrap_or_default();
        // Only a sync-all's dashboard is retried here: a `{"action": "dashboard"}` is retried by
        // the queue's redelivery or by its caller, and one retry queueing the next would chain.
        if let (Dashboard::After, Some(class)) = (&plan.dashboard, run.class()) {
            answer["retry"] = self.retry_dashboard(plan, class, ctx.deadline).await;
        }
        Some(After {
            failure: run.class().map(|class| (class, run.error_text())),
            answer,
            fails,
        })
    }

    /// A sync-all's failed dashboard: for the schedule's, failed for a reason that passes, one
    /// delayed `{"action": "dashboard"}` on state-sync's own queue, so that the table is not left
    /// a day old for a rate limit nobody was there to wait out. The answer's `"retry"` says
    /// what was done, and why not when nothing was. Never the sync-all's failure: its cells
    /// are on the queue already.
    async fn retry_dashboard(&self, plan: &SyncPlan, class: Class, deadline: Instant) -> Value {
        let not = |reason: &str| json!({"queued": false, "reason": reason});
        if class != Class::Retryable {
            return not("the failure is not one that passes: a retry would fail the same way");
        }
        if !plan.scheduled {
            return not("a sync-all run by hand: run {\"action\": \"dashboard\"} again");
        }
        if plan.dry_run {
            return not("a dry run writes nothing");
        }
        let Some(queue) = &self.queue else {
            return not("no queue (CELLBRIDGE_SYNC_QUEUE_URL): the next sync-all rebuilds it");
        };
        // Checked at the cold start: the default is never wrong.
        let delay = fanout::dashboard_retry_from_env().unwrap_or(fanout::DASHBOARD_RETRY_DEFAULT);
        let left = deadline.saturating_duration_since(Instant::now());
        let sent = match tokio::time::timeout(left, queue.enqueue(&[fanout::dashboard_message()], delay)).await {
            Ok(sent) => sent,
            Err(_) => Err(crate::ports::queue::EnqueueError::Deadline),
        };
        match sent {
            Ok(()) => {
                tracing::info!(
                    delay_seconds = delay.as_secs(),
                    "the fleet dashboard is tried again later: {{\"action\": \"dashboard\"}} sent to the queue"
                );
                json!({"queued": true, "delay_seconds": delay.as_secs()})
            }
            Err(e) => {
                tracing::error!(error = %e, "the fleet dashboard's retry could not be sent to the queue");
                not(&format!("sending it to the queue failed: {e}"))
            }
        }
    }

    /// What an SQS record asks about, before its manual payloads are resolved: for the line of
    /// a record that could not be.
    fn record_about(&self, record: &SyncSqsRecord) -> About {
        let Ok(items) = &record.items else {
            return About::event();
        };
        let mut cells = Vec::new();
        for item in items {
            match item {
                SyncItem::Object(o) => cells.extend(self.cell_of(&o.key)),
                SyncItem::Manual(Manual::Cell(c)) => cells.push(c.clone()),
                SyncItem::Manual(Manual::Object { key, .. }) => cells.extend(self.cell_of(key)),
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
        match tokio::time::timeout(left, queue.enqueue(&bodies, std::time::Duration::ZERO)).await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                return Err(SyncError::Enqueue {
                    source: Box::new(source),
                });
            }
            Err(_) => {
                return Err(SyncError::Enqueue {
                    source: Box::new(crate::ports::queue::EnqueueError::Deadline),
                });
            }
        }
        tracing::info!(
            states = objects.len(),
            "sync-all: one message per state sent to the queue"
        );
        Ok(objects
            .iter()
            .map(|o| CellResult::new(o, self.cell_of(&o.key), Action::Enqueued))
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
                // Rebuilt once the batch's states are synced (the dashboard after-step).
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

    /// Every state the key pattern names in the state bucket (workspaces under `env:/` too).
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
}

/// The invocation's answer: `{"cells": [...]}` (and `"enqueued"` for a fanned-out sync-all),
/// the dashboard's run as `"dashboard"`, the environment's pause as `"paused"`.
pub(super) fn answer(plan: SyncPlan, cells: Vec<CellResult>, after: Option<After>, pause: Option<Pause>) -> Value {
    let mut response = if plan.dashboard == Dashboard::Alone {
        json!({})
    } else {
        json!({ "cells": serde_json::to_value(&cells).unwrap_or(Value::Null) })
    };
    if plan.fanned_out {
        response["enqueued"] = cells.len().into();
    }
    if let Some(after) = after {
        response["dashboard"] = after.answer;
    }
    if let Some(p) = pause {
        response["paused"] = serde_json::to_value(p).unwrap_or_default();
    }
    response
}
