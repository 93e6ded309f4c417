//! The orchestrator: event → state objects → for each, the latest state version → the cell's
//! plan against the fleet repo's base branch → the cell's pull request.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tracing::Instrument;

use super::{SyncConfig, SyncError};
use crate::error::{Class, Classify};
use crate::events::sync::{self as events, Manual, StateObject, SyncEvent, SyncItem};
use crate::github::{FleetRepo, GithubError, Published, Snapshot};
use crate::metadata;
use crate::plan::{self, Plan, PlanOptions};
use crate::s3::{S3Error, StateSource};
use crate::template::SyncSource;

/// Attempts for one state when another writer keeps winning the race for the cell's branch.
const RACE_ATTEMPTS: u32 = 4;
/// Don't start a state with less time than this left: it would be cut off half-way.
const START_MARGIN: Duration = Duration::from_secs(3);
/// States synced at once in one invocation (sync-all, SQS batches).
const PARALLEL: usize = 4;

/// The answer for one state object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellResult {
    pub cell: Option<String>,
    pub bucket: String,
    pub key: String,
    /// opened, updated, unchanged, closed, in-sync, stale, planned, refused, ignored, failed.
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
        }
    }

    fn failed(&self) -> bool {
        self.action == "failed" || self.action == "refused"
    }
}

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

/// state-sync over a state source and a fleet repo.
pub struct Syncer<S, R> {
    pub config: SyncConfig,
    pub states: S,
    pub fleet: R,
}

impl<S: StateSource, R: FleetRepo> Syncer<S, R> {
    pub fn new(config: SyncConfig, states: S, fleet: R) -> Self {
        Self { config, states, fleet }
    }

    /// Runs one invocation: every state the event names, each to its own result.
    pub async fn handle(&self, event: &Value, deadline: Instant) -> Result<SyncInvocation, SyncError> {
        match events::parse(event)? {
            SyncEvent::Direct(items) => {
                let results = self.sync_items(&items, false, deadline).await;
                Ok(finish(results, None))
            }
            SyncEvent::Manual { request, dry_run } => {
                let objects = match request {
                    Manual::Cell(cell) => {
                        if !metadata::is_dns1123_label(&cell) {
                            return Err(SyncError::Event(events::SyncEventError::Invalid {
                                what: "manual payload".into(),
                                reason: format!("cell {cell:?} is not a DNS-1123 label"),
                            }));
                        }
                        vec![StateObject {
                            bucket: self.config.state_bucket.clone(),
                            key: self.config.key_pattern.key_for(&cell),
                            version_id: None,
                        }]
                    }
                    Manual::Object { bucket, key } => vec![StateObject {
                        bucket: bucket.unwrap_or_else(|| self.config.state_bucket.clone()),
                        key,
                        version_id: None,
                    }],
                    Manual::All => self.all_states(deadline).await?,
                };
                let items: Vec<SyncItem> = objects.into_iter().map(SyncItem::Object).collect();
                let results = self.sync_items(&items, dry_run, deadline).await;
                Ok(finish(results, None))
            }
            SyncEvent::Sqs(records) => {
                let mut all_items = Vec::new();
                for r in &records {
                    if let Ok(items) = &r.items {
                        all_items.extend(items.iter().cloned());
                    }
                }
                let results = self.sync_items(&all_items, false, deadline).await;
                let mut failed_ids = Vec::new();
                for r in &records {
                    match &r.items {
                        // A body nobody can read will not read better later: log it, drop it.
                        Err(e) => {
                            tracing::error!(message_id = %r.message_id, error = %e, "SQS message is not a state-sync event; dropped")
                        }
                        Ok(items) => {
                            let retry = items.iter().any(|i| match i {
                                SyncItem::Object(o) => results.iter().any(|c| {
                                    c.bucket == o.bucket && c.key == o.key && c.action == "failed" && c.retryable
                                }),
                                SyncItem::Ignored { .. } => false,
                            });
                            if retry {
                                failed_ids.push(r.message_id.clone());
                            }
                        }
                    }
                }
                Ok(finish(results, Some(failed_ids)))
            }
        }
    }

    async fn all_states(&self, deadline: Instant) -> Result<Vec<StateObject>, SyncError> {
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

    async fn sync_items(&self, items: &[SyncItem], dry_run: bool, deadline: Instant) -> Vec<CellResult> {
        // One result per object: S3 notifies twice for some multipart uploads, and a batch can
        // name one state many times. Each is read once, at its latest version.
        let mut objects: BTreeMap<(String, String), StateObject> = BTreeMap::new();
        let mut results = Vec::new();
        for item in items {
            match item {
                SyncItem::Ignored { what, reason } => tracing::info!(object = %what, reason = %reason, "ignored"),
                SyncItem::Object(o) => {
                    objects
                        .entry((o.bucket.clone(), o.key.clone()))
                        .or_insert_with(|| o.clone());
                }
            }
        }
        let futs = objects.into_values().map(|o| self.sync_object(o, dry_run, deadline));
        results.extend(
            futures::stream::iter(futs)
                .buffer_unordered(PARALLEL)
                .collect::<Vec<_>>()
                .await,
        );
        results.sort_by(|a, b| (&a.bucket, &a.key).cmp(&(&b.bucket, &b.key)));
        results
    }

    /// Converges one state object's cell, redoing the whole read-plan-publish on a lost race.
    pub async fn sync_object(&self, obj: StateObject, dry_run: bool, deadline: Instant) -> CellResult {
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
        self.converge(obj, key_cell, dry_run, deadline).instrument(span).await
    }

    async fn converge(&self, obj: StateObject, key_cell: String, dry_run: bool, deadline: Instant) -> CellResult {
        let mut result = CellResult::new(&obj, Some(key_cell.clone()), "failed");
        for attempt in 1..=RACE_ATTEMPTS {
            result.attempts = attempt;
            if deadline.saturating_duration_since(Instant::now()) < START_MARGIN {
                result.action = "failed".into();
                result.error = Some("the function's deadline came before this state was synced".into());
                result.retryable = true;
                break;
            }
            match self.attempt(&obj, &key_cell, dry_run, deadline, &mut result).await {
                Ok(()) => break,
                Err(Attempt::Redo(why)) if attempt < RACE_ATTEMPTS => {
                    tracing::info!(cell = %key_cell, attempt, reason = %why, "lost a race; redoing on the fresh base");
                    continue;
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
                }) => {
                    result.action = if refused { "refused" } else { "failed" }.into();
                    result.error = Some(error);
                    result.retryable = retryable;
                    break;
                }
            }
        }
        match result.action.as_str() {
            "failed" | "refused" => {
                tracing::error!(cell = %key_cell, key = %obj.key, action = %result.action, retryable = result.retryable, error = result.error.as_deref().unwrap_or(""), "state not synced")
            }
            a => {
                tracing::info!(cell = %key_cell, key = %obj.key, action = a, serial = result.serial, pull_request = ?result.pull_request, "state synced")
            }
        }
        result
    }

    async fn attempt(
        &self,
        obj: &StateObject,
        key_cell: &str,
        dry_run: bool,
        deadline: Instant,
        result: &mut CellResult,
    ) -> Result<(), Attempt> {
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
            })?;
        let (state, source) = match read {
            Ok(s) => s,
            Err(S3Error::NotFound { .. }) => {
                result.action = "ignored".into();
                result.error = Some("the state object no longer exists".into());
                return Ok(());
            }
            Err(e) => {
                return Err(Attempt::Fail {
                    retryable: e.retryable(),
                    refused: !e.retryable(),
                    error: e.to_string(),
                });
            }
        };
        result.version_id = source.version_id.clone();
        result.serial = Some(state.serial);
        let origin = source.to_string();
        // Contract errors name the key, never the value.
        let meta = metadata::from_state(&state).map_err(|e| Attempt::Fail {
            error: format!("{origin}: {e}"),
            retryable: false,
            refused: true,
        })?;
        drop(state);
        if meta.cell != key_cell {
            return Err(Attempt::Fail {
                error: format!(
                    "{origin}: the key says cell `{key_cell}` (CELLBRIDGE_STATE_KEY_PATTERN) but cell_metadata.cell_name is `{}`",
                    meta.cell
                ),
                retryable: false,
                refused: true,
            });
        }
        let snapshot: Snapshot = self.fleet.snapshot(deadline).await.map_err(github_fail)?;
        let opts = PlanOptions {
            sync_source: self.config.flux_git_url.as_ref().map(|url| SyncSource {
                url: url.clone(),
                branch: snapshot.base_branch.clone(),
            }),
        };
        let plan: Plan = plan::plan(&meta, source, &snapshot.fleet, &opts).map_err(|e| Attempt::Fail {
            error: e.to_string(),
            retryable: false,
            refused: true,
        })?;
        if dry_run {
            result.action = "planned".into();
            result.plan = Some(json!({
                "outcome": plan.outcome, "title": plan.title, "body": plan.body, "labels": plan.labels,
                "files": plan.files.iter().map(|f| &f.path).collect::<Vec<_>>(), "diff": plan.unified_diff(),
                "status": if plan.status_ok() { "success" } else { "failure" }, "status_description": plan.status_description(),
            }));
            return Ok(());
        }
        let published = match self.fleet.publish(&snapshot, &plan, deadline).await {
            Ok(p) => p,
            Err(GithubError::Conflict { what, detail }) => return Err(Attempt::Redo(format!("{what}: {detail}"))),
            Err(e) => return Err(github_fail(e)),
        };
        let pr = |number: u64, url: &str| Some(json!({"number": number, "url": url}));
        let (action, pull) = match &published {
            Published::Opened { number, url, .. } => ("opened", pr(*number, url)),
            Published::Updated { number, url, .. } => ("updated", pr(*number, url)),
            Published::Unchanged { number, url } => ("unchanged", pr(*number, url)),
            Published::Closed { number, url } => ("closed", pr(*number, url)),
            Published::InSync => ("in-sync", None),
            Published::Stale { number, url, .. } => ("stale", number.map(|n| json!({"number": n, "url": url}))),
        };
        result.action = action.into();
        result.pull_request = pull;
        if !plan.status_ok()
            && matches!(
                published,
                Published::Opened { .. } | Published::Updated { .. } | Published::Unchanged { .. }
            )
        {
            result.plan = Some(json!({"status": "failure", "status_description": plan.status_description()}));
        }
        Ok(())
    }
}

enum Attempt {
    Redo(String),
    Fail {
        error: String,
        retryable: bool,
        refused: bool,
    },
}

fn github_fail(e: GithubError) -> Attempt {
    Attempt::Fail {
        retryable: e.retryable(),
        refused: false,
        error: e.to_string(),
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
