//! A destroyed stack's cell: the decommission state-sync proposes once EKS confirms that the
//! cell's cluster is gone, and the cell an EKS `DeleteCluster` names, synced again.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Attempt, CellResult, SharedBase, Syncer, github_fail};
use crate::cells::{self, Presence};
use crate::decommission::{self, ClusterCheck};
use crate::error::{Class, Classify};
use crate::events::sync::{DeletedCluster, StateObject, SyncItem};
use crate::github::decommission::{self as gh_decommission, Decommissioned};
use crate::github::{GithubRepo, Snapshot};
use crate::s3::StateSource;
use crate::sync::SyncError;

/// A destroyed stack's state: the decommission it would propose before EKS was asked (`None`:
/// the base has no `clusters/<cell>/`).
pub(super) struct Destroyed {
    pub(super) decommission: Result<Option<decommission::Decommission>, decommission::DecommissionError>,
}

impl<S: StateSource, G: GithubRepo> Syncer<S, G> {
    /// A destroyed stack's state: the removal of `clusters/<cell>/` is proposed only once EKS
    /// confirms that the cluster the cell's merged `cell-metadata.yaml` names is gone, in the
    /// cell's account and region. A cluster still there proposes nothing (and withdraws an open
    /// decommission); one still `DELETING` is asked again later (retryable); a cell whose
    /// metadata names no cluster, or a function with no EKS access, proposes nothing.
    pub(super) async fn decommission(
        &self,
        snap: &Snapshot,
        cell: &str,
        destroyed: Destroyed,
        dry_run: bool,
        deadline: Instant,
        result: &mut CellResult,
    ) -> Result<(), Attempt> {
        let nothing = |result: &mut CellResult, detail: Value| {
            result.action = "destroyed".into();
            result.decommission = Some(detail);
            tracing::warn!(cell, decommission = %result.decommission.as_ref().map(|v| v.to_string()).unwrap_or_default(), "the stack was destroyed; no decommission is proposed");
            Ok(())
        };
        let fleet_failure = |e: decommission::DecommissionError| Attempt::Fail {
            error: e.to_string(),
            retryable: false,
            refused: false,
            report: true,
        };
        let Some(dry) = destroyed.decommission.map_err(fleet_failure)? else {
            return nothing(
                result,
                json!({"proposed": false, "reason": format!("the fleet repo's base branch has no clusters/{cell}/: nothing to remove")}),
            );
        };
        let Some(target) = dry.cluster.clone() else {
            return nothing(
                result,
                json!({"proposed": false, "reason": format!("clusters/{cell}/cell-metadata.yaml on the base branch names no cluster_name and aws_region: nothing can confirm that the cluster is gone")}),
            );
        };
        let about = |presence: Value, reason: String| json!({"cluster": target.cluster, "region": target.region, "eks": presence, "proposed": false, "reason": reason});
        let Some(access) = &self.clusters else {
            return nothing(
                result,
                about(
                    Value::Null,
                    "EKS is not reachable from here: nothing can confirm that the cluster is gone".into(),
                ),
            );
        };
        let merged =
            cells::named(&snap.fleet, &target.cluster, cell, "the state's key").map_err(|e| Attempt::Fail {
                error: format!("cell {cell}: {e}"),
                retryable: false,
                refused: false,
                report: true,
            })?;
        // An account whose role the configuration and the metadata disagree on is the
        // operators' to settle, as a bootstrap run would refuse it.
        let role = cells::role_of(&merged, &access.account_roles).map_err(|error| Attempt::Fail {
            error,
            retryable: false,
            refused: false,
            report: false,
        })?;
        let left = deadline.saturating_duration_since(Instant::now());
        let no_answer = |what: &str| Attempt::Fail {
            error: format!("cell {cell}: {what}: no answer before the function's deadline"),
            retryable: true,
            refused: false,
            report: false,
        };
        let refused = |e: cells::ProbeError| Attempt::Fail {
            retryable: e.class() == Class::Retryable,
            error: format!("cell {cell}: {e}"),
            refused: false,
            report: false,
        };
        // Which account answers: the role's, or cellbridge's own. "Not found" proves a cluster
        // gone only in the cell's own account: a cell of another account with no role to reach
        // it cannot be confirmed gone from here.
        let account = match &role {
            Some(role) => cells::role_account(role).unwrap_or_default().to_owned(),
            None => {
                let home = tokio::time::timeout(left, access.probe.home_account())
                    .await
                    .map_err(|_| no_answer("STS GetCallerIdentity"))?
                    .map_err(refused)?;
                if let Some(theirs) = merged.metadata.get("aws_account_id").filter(|a| **a != home) {
                    return nothing(
                        result,
                        about(
                            Value::Null,
                            format!(
                                "the cell's account {theirs} is not cellbridge's own ({home}), and neither CELLBRIDGE_ACCOUNT_ROLES nor the cell's bootstrap_role_arn gives a role there: nothing can confirm that the cluster is gone"
                            ),
                        ),
                    );
                }
                home
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let presence = tokio::time::timeout(
            left,
            access.probe.presence(&target.cluster, &target.region, role.as_deref()),
        )
        .await
        .map_err(|_| no_answer(&format!("EKS DescribeCluster {} in {}", target.cluster, target.region)))?
        .map_err(refused)?;
        match presence {
            Presence::Exists { status } if status == "DELETING" => Err(Attempt::Fail {
                error: format!(
                    "cell {cell}: the stack was destroyed and EKS cluster {} in {} is still DELETING: the decommission is proposed once EKS no longer knows it",
                    target.cluster, target.region
                ),
                retryable: true,
                refused: false,
                report: false,
            }),
            Presence::Exists { status } => {
                let mut detail = about(
                    json!({"presence": "exists", "status": status}),
                    format!(
                        "EKS cluster {} still exists in {} ({status}): a state that looks destroyed (moved to another key, `terraform state rm`, another backend) is no proof, so nothing is proposed",
                        target.cluster, target.region
                    ),
                );
                if !dry_run {
                    let why = format!(
                        "Closed by cellbridge: EKS cluster `{}` still exists in `{}` ({status}), so `clusters/{cell}/` stays.",
                        target.cluster, target.region
                    );
                    if let Some((number, url)) = gh_decommission::withdraw(&self.fleet, cell, &why, deadline)
                        .await
                        .map_err(github_fail)?
                    {
                        detail["withdrawn"] = json!({"number": number, "url": url});
                    }
                }
                nothing(result, detail)
            }
            Presence::Gone => {
                let gone = ClusterCheck::Gone {
                    cluster: target.cluster.clone(),
                    region: target.region.clone(),
                    account: account.clone(),
                };
                let d = dry.checked(&gone);
                let detail = json!({"cluster": target.cluster, "region": target.region, "account": account, "eks": {"presence": "gone"}, "proposed": true, "removed": d.removed.len()});
                if dry_run {
                    result.action = "planned".into();
                    result.plan = Some(
                        json!({"outcome": "decommission", "title": d.title, "body": d.body, "labels": d.labels, "removed": d.removed}),
                    );
                    result.decommission = Some(detail);
                    return Ok(());
                }
                self.fleet.check_write_access(deadline).await.map_err(github_fail)?;
                let published = gh_decommission::converge(&self.fleet, snap, &d, deadline)
                    .await
                    .map_err(github_fail)?;
                result.decommissioned(&published, detail);
                Ok(())
            }
        }
    }

    /// The state object of the cell whose merged `cell-metadata.yaml` names the deleted
    /// cluster and its region (the lookup cluster-bootstrap makes too, [`cells::find_by_cluster`]):
    /// synced again, it proposes the cell's decommission once the stack is destroyed and the
    /// cluster gone. A cluster of no cell is ignored.
    pub(super) async fn cell_of_deleted(
        &self,
        deleted: &DeletedCluster,
        index: &SharedBase,
        deadline: Instant,
    ) -> Result<SyncItem, SyncError> {
        let lookup = |reason: String, retryable: bool| SyncError::ClusterLookup {
            cluster: deleted.cluster.clone(),
            region: deleted.region.clone(),
            reason,
            retryable,
        };
        let base = index
            .get(&self.fleet, deadline)
            .await
            .map_err(|e| lookup(e.to_string(), e.retryable()))?;
        let found = cells::find_by_cluster(&base.fleet, &deleted.cluster, &deleted.region)
            .map_err(|e| lookup(e.to_string(), false))?;
        let Some(cell) = found else {
            return Ok(SyncItem::Ignored {
                what: format!("EKS cluster {} in {}", deleted.cluster, deleted.region),
                reason: "no cell's cell-metadata.yaml on the base branch names it".into(),
            });
        };
        let Some(key) = self.config.key_pattern.key_for(&cell.name) else {
            return Err(lookup(
                format!(
                    "cell {}: CELLBRIDGE_STATE_KEY_PATTERN names both {{cell}} and {{workspace}}, so the cell's state cannot be told; sync it with \"bucket\" and \"key\"",
                    cell.name
                ),
                false,
            ));
        };
        tracing::info!(cluster = %deleted.cluster, region = %deleted.region, cell = %cell.name, "EKS DeleteCluster: the cell is synced again");
        Ok(SyncItem::Object(StateObject {
            bucket: self.config.state_bucket.clone(),
            key,
            version_id: None,
        }))
    }
}

impl CellResult {
    /// What converging the decommission did.
    fn decommissioned(&mut self, published: &Decommissioned, mut detail: Value) {
        let pr = |number: u64, url: &str| Some(json!({"number": number, "url": url}));
        let (action, pull) = match published {
            Decommissioned::Opened {
                number,
                url,
                superseded,
                ..
            } => {
                if let Some(n) = superseded {
                    detail["superseded"] = json!(n);
                }
                ("decommission-opened", pr(*number, url))
            }
            Decommissioned::Updated { number, url, .. } => ("decommission-updated", pr(*number, url)),
            Decommissioned::Unchanged { number, url } => ("decommission-unchanged", pr(*number, url)),
            Decommissioned::Declined { number, url } => ("declined", pr(*number, url)),
            Decommissioned::Conflicted { number, url } => ("conflicted", pr(*number, url)),
            Decommissioned::Stale { number, url, .. } => ("stale", pr(*number, url)),
            // The stack is destroyed; a person decides about the pull request their commits are on.
            Decommissioned::Held { number, url } => {
                detail["proposed"] = json!(false);
                detail["reason"] = json!(format!(
                    "pull request #{number} holds a commit cellbridge did not write: a person merges or closes it, then the decommission is proposed"
                ));
                ("destroyed", pr(*number, url))
            }
        };
        self.action = action.into();
        self.pull_request = pull;
        self.decommission = Some(detail);
        // A refusal reported in a cellbridge-refused issue (no pull request was open) is moot
        // once the stack is gone; with a pull request open it was reported there.
        self.resolve_issue = matches!(published, Decommissioned::Opened { .. });
    }
}
