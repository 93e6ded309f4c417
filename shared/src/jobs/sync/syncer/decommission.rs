//! A destroyed stack's cell: the decommission state-sync proposes once EKS confirms that the
//! cell's cluster is gone, and the cell an EKS `DeleteCluster` names, synced again.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Value, json};

use super::{Attempt, SharedBase, Syncer, github_fail};
use crate::jobs::sync::outcome::{Action, CellError, CellResult};
use crate::jobs::sync::{CellLookupError, SyncError};
use crate::ports::github::{GithubRepo, Snapshot};
use crate::ports::state::StateSource;
use crate::pure::configmap;
use crate::pure::decommission::{self, ClusterCheck};
use crate::pure::events::sync::{DeletedCluster, StateObject, SyncItem};
use crate::pure::fleet::{FleetRead, Overlay};
use crate::rules::decommission::{self as gh_decommission, Decommissioned};
use crate::rules::proposal::{self, Proposal, Proposed};
use crate::rules::report::RefusedIssues;
use crate::{
    ports::probe::ClusterProbe,
    ports::probe::Presence,
    rules::cells::{self},
};

/// A destroyed stack's state: the decommission it would propose before EKS was asked (`None`:
/// the base has no `clusters/<cell>/`).
pub(super) struct Destroyed {
    pub(super) decommission: Result<Option<decommission::Decommission>, decommission::DecommissionError>,
}

/// What EKS says of a cell's cluster, asked in the cell's own account.
pub(crate) enum Described {
    /// Nothing can ask EKS about it from here: why (no EKS access; a cell of another account
    /// that no role reaches).
    Unreachable(String),
    /// EKS knows it: its status, and its tags.
    Exists {
        status: String,
        tags: HashMap<String, String>,
    },
    /// EKS no longer knows it, in `account`.
    Gone { account: String },
}

/// What EKS says of a destroyed cell's cluster, asked in the cell's own account.
enum Eks {
    /// Nothing can confirm it gone from here: the result's `decommission` detail says why.
    Unconfirmed(Value),
    /// EKS still knows it (not `DELETING`): a state that looks destroyed is no proof.
    Exists { status: String },
    /// EKS no longer knows it, in `account`.
    Gone { account: String },
}

impl<S: StateSource, G: GithubRepo> Syncer<S, G> {
    /// A destroyed stack's state: the removal of `clusters/<cell>/` is proposed only once EKS
    /// confirms that the cluster the cell's merged `cell-metadata.yaml` names is gone, in the
    /// cell's account and region. A cluster still there proposes nothing (and withdraws an open
    /// decommission); one still `DELETING` is asked again later (retryable); a cell whose
    /// metadata names no cluster, or a function with no EKS access, proposes nothing. A cell the
    /// base never had is `unmerged`'s.
    // The invocation's refused issues travel with its base: both are the invocation's, not the cell's.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn decommission(
        &self,
        snap: &Snapshot,
        cell: &str,
        destroyed: Destroyed,
        refused: &RefusedIssues,
        dry_run: bool,
        deadline: Instant,
        result: &mut CellResult,
    ) -> Result<(), Attempt> {
        let Some(dry) = destroyed.decommission.map_err(CellError::Decommission)? else {
            return self.unmerged(snap, cell, dry_run, deadline, result).await;
        };
        let Some(target) = dry.cluster.clone() else {
            return nothing(
                result,
                json!({"proposed": false, "reason": format!("clusters/{cell}/cell-metadata.yaml on the base branch names no cluster_name and aws_region: nothing can confirm that the cluster is gone")}),
            );
        };
        let about = |presence: Value, reason: String| json!({"cluster": target.cluster, "region": target.region, "eks": presence, "proposed": false, "reason": reason});
        match self.ask_eks(&snap.fleet, cell, &target, deadline).await? {
            Eks::Unconfirmed(detail) => nothing(result, detail),
            Eks::Exists { status } => {
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
            Eks::Gone { account } => {
                let gone = ClusterCheck::Gone {
                    cluster: target.cluster.clone(),
                    region: target.region.clone(),
                    account: account.clone(),
                };
                let d = dry.checked(&gone);
                let detail = json!({"cluster": target.cluster, "region": target.region, "account": account, "eks": {"presence": "gone"}, "proposed": true, "removed": d.removed.len()});
                if dry_run {
                    result.action = Action::Planned;
                    result.plan = Some(
                        json!({"outcome": "decommission", "title": d.title, "body": d.body, "labels": d.labels, "removed": d.removed}),
                    );
                    result.decommission = Some(detail);
                    return Ok(());
                }
                self.fleet.check_write_access(deadline).await.map_err(github_fail)?;
                let Proposed::Removal(published) =
                    proposal::converge(&self.fleet, snap, Proposal::Removal(&d), refused, deadline)
                        .await
                        .map_err(github_fail)?
                else {
                    unreachable!("a removal converges to a removal");
                };
                result.decommissioned(&published, detail);
                Ok(())
            }
        }
    }

    /// A destroyed stack whose cell the base branch never had (its first pull request was never
    /// merged): that pull request, when one is open, is closed with a comment once EKS confirms
    /// the cluster its head names gone; until then it stays open, and the dashboard lists the
    /// cell as needing attention, linking it.
    async fn unmerged(
        &self,
        snap: &Snapshot,
        cell: &str,
        dry_run: bool,
        deadline: Instant,
        result: &mut CellResult,
    ) -> Result<(), Attempt> {
        let nothing_to_remove = format!("the fleet repo's base branch has no clusters/{cell}/: nothing to remove");
        let Some((pr, text)) = gh_decommission::unmerged_pull(&self.fleet, cell, deadline)
            .await
            .map_err(github_fail)?
        else {
            return nothing(result, json!({"proposed": false, "reason": nothing_to_remove}));
        };
        result.pull_request = Some(json!({"number": pr.number, "url": pr.url}));
        // The cell as its pull request's head has it: the cluster, the account, the role.
        let view = Overlay::new(
            &snap.fleet as &dyn FleetRead,
            [(configmap::path_for(cell), text.into_bytes())],
        );
        let target = decommission::cell_cluster(&view, cell).ok().flatten();
        let Some(target) = target else {
            return nothing(
                result,
                json!({"proposed": false, "reason": format!("{nothing_to_remove}; pull request #{} names no cluster_name and aws_region, so nothing can confirm that the cluster is gone: a person closes it", pr.number)}),
            );
        };
        let mut detail = match self.ask_eks(&view, cell, &target, deadline).await? {
            Eks::Unconfirmed(detail) => detail,
            Eks::Exists { status } => {
                json!({"cluster": target.cluster, "region": target.region, "eks": {"presence": "exists", "status": status}, "proposed": false})
            }
            Eks::Gone { account } => {
                let detail = json!({"cluster": target.cluster, "region": target.region, "account": account, "eks": {"presence": "gone"}, "proposed": false, "closed": pr.number});
                if dry_run {
                    result.action = Action::Planned;
                    result.plan = Some(json!({"outcome": "close", "number": pr.number}));
                    result.decommission = Some(detail);
                    return Ok(());
                }
                let text = format!(
                    "The Terraform stack of cell `{cell}` was destroyed and EKS confirms that its cluster `{}` is gone from `{}` (account {account}). The cell never reached `{}`, so this pull request has nothing left to propose: cellbridge closes it. A later apply that brings the cell back opens a new one.",
                    target.cluster, target.region, snap.base_branch
                );
                self.fleet.check_write_access(deadline).await.map_err(github_fail)?;
                gh_decommission::close_unmerged(&self.fleet, snap, cell, &pr, &text, deadline)
                    .await
                    .map_err(github_fail)?;
                result.action = Action::Closed;
                result.decommission = Some(detail);
                return Ok(());
            }
        };
        detail["reason"] = json!(format!(
            "{nothing_to_remove}; pull request #{} stays open until EKS confirms the cluster gone in the cell's account",
            pr.number
        ));
        nothing(result, detail)
    }

    /// Whether EKS confirms `target` gone, asked in the cell's own account ([`Self::describe_cell_cluster`]):
    /// a cluster still `DELETING` is asked again later (retryable).
    async fn ask_eks(
        &self,
        fleet: &dyn FleetRead,
        cell: &str,
        target: &decommission::CellCluster,
        deadline: Instant,
    ) -> Result<Eks, Attempt> {
        match self.describe_cell_cluster(fleet, cell, target, deadline).await? {
            Described::Unreachable(why) => Ok(Eks::Unconfirmed(json!({
                "cluster": target.cluster, "region": target.region, "eks": Value::Null, "proposed": false,
                "reason": format!("{why}: nothing can confirm that the cluster is gone"),
            }))),
            Described::Exists { status, .. } if status == "DELETING" => Err(CellError::Deleting {
                cell: cell.to_owned(),
                cluster: target.cluster.clone(),
                region: target.region.clone(),
            }
            .into()),
            Described::Exists { status, .. } => Ok(Eks::Exists { status }),
            Described::Gone { account } => Ok(Eks::Gone { account }),
        }
    }

    /// What EKS says of `target`, asked in the cell's own account (its merged metadata's
    /// `aws_account_id`, or the account of its `bootstrap_role_arn`): through state-sync's
    /// describe-only role there (`CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES`), else in cellbridge's own
    /// account, and then only when the cell names no other account (EKS's "not found" in one
    /// account says nothing of a cluster in another). The decommission's question and the
    /// dashboard's Flux column both ask it this way.
    pub(crate) async fn describe_cell_cluster(
        &self,
        fleet: &dyn FleetRead,
        cell: &str,
        target: &decommission::CellCluster,
        deadline: Instant,
    ) -> Result<Described, CellError> {
        let Some(access) = &self.clusters else {
            return Ok(Described::Unreachable("EKS is not reachable from here".into()));
        };
        let merged =
            cells::named(fleet, &target.cluster, cell, "the state's key").map_err(|source| CellError::Cell {
                cell: cell.to_owned(),
                source,
            })?;
        // Metadata that names two accounts is the operators' to settle.
        let theirs = cells::cell_account(&merged).map_err(|source| CellError::Role { source })?;
        // Only state-sync's own describe-only role: a cell's bootstrap_role_arn is
        // cluster-bootstrap's, whose trust names cluster-bootstrap alone.
        let role = theirs.as_ref().and_then(|a| access.describe_roles.get(a)).cloned();
        let left = deadline.saturating_duration_since(Instant::now());
        let no_answer = |what: &str| CellError::NoAnswer {
            cell: cell.to_owned(),
            what: what.to_owned(),
        };
        let refused = |source: crate::ports::probe::ProbeError| CellError::Probe {
            cell: cell.to_owned(),
            source,
        };
        // Which account answers: the role's, or cellbridge's own.
        let account = match theirs {
            Some(theirs) if role.is_some() => theirs,
            theirs => {
                let home = tokio::time::timeout(left, access.probe.home_account())
                    .await
                    .map_err(|_| no_answer("STS GetCallerIdentity"))?
                    .map_err(refused)?;
                if let Some(theirs) = theirs.filter(|a| *a != home) {
                    return Ok(Described::Unreachable(format!(
                        "the cell's account {theirs} is not cellbridge's own ({home}), and CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES gives state-sync no role there (the module's account_describe_roles)"
                    )));
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
        Ok(match presence {
            Presence::Exists { status, tags } => Described::Exists { status, tags },
            Presence::Gone => Described::Gone { account },
        })
    }

    /// The state object of the cell whose merged `cell-metadata.yaml` names the deleted
    /// cluster and its region (the lookup cluster-bootstrap makes too, [`cells::find_by_cluster`]):
    /// synced again, it proposes the cell's decommission once the stack is destroyed and the
    /// cluster gone. A cluster of no cell is ignored.
    pub(crate) async fn cell_of_deleted(
        &self,
        deleted: &DeletedCluster,
        index: &SharedBase,
        deadline: Instant,
    ) -> Result<SyncItem, SyncError> {
        let lookup = |source: CellLookupError| SyncError::ClusterLookup {
            cluster: deleted.cluster.clone(),
            region: deleted.region.clone(),
            source: Box::new(source),
        };
        let base = index.get(&self.fleet, deadline).await.map_err(|e| lookup(e.into()))?;
        let found =
            cells::find_by_cluster(&base.fleet, &deleted.cluster, &deleted.region).map_err(|e| lookup(e.into()))?;
        let Some(cell) = found else {
            return Ok(SyncItem::Ignored {
                what: format!("EKS cluster {} in {}", deleted.cluster, deleted.region),
                reason: "no cell's cell-metadata.yaml on the base branch names it".into(),
            });
        };
        let Some(key) = self.config.key_pattern.key_for(&cell.name) else {
            return Err(lookup(CellLookupError::KeyUntold {
                cell: cell.name.clone(),
            }));
        };
        tracing::info!(cluster = %deleted.cluster, region = %deleted.region, cell = %cell.name, "EKS DeleteCluster: the cell is synced again");
        Ok(SyncItem::Object(StateObject {
            bucket: self.config.state_bucket.clone(),
            key,
            version_id: None,
        }))
    }
}

/// Nothing proposed for a destroyed stack: the result says why (`detail`).
fn nothing(result: &mut CellResult, detail: Value) -> Result<(), Attempt> {
    result.action = Action::Destroyed;
    tracing::warn!(cell = result.cell.as_deref().unwrap_or_default(), decommission = %detail, "the stack was destroyed; no decommission is proposed");
    result.decommission = Some(detail);
    Ok(())
}

impl CellResult {
    /// What converging the decommission did.
    pub(crate) fn decommissioned(&mut self, published: &Decommissioned, mut detail: Value) {
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
                (Action::DecommissionOpened, pr(*number, url))
            }
            Decommissioned::Updated { number, url, .. } => (Action::DecommissionUpdated, pr(*number, url)),
            Decommissioned::Unchanged { number, url } => (Action::DecommissionUnchanged, pr(*number, url)),
            Decommissioned::Declined { number, url } => (Action::Declined, pr(*number, url)),
            Decommissioned::Conflicted { number, url } => (Action::Conflicted, pr(*number, url)),
            Decommissioned::Stale { number, url, .. } => (Action::Stale, pr(*number, url)),
            // The stack is destroyed; a person decides about the pull request their commits are on.
            Decommissioned::Held { number, url } => {
                detail["proposed"] = json!(false);
                detail["reason"] = json!(format!(
                    "pull request #{number} holds a commit cellbridge did not write: a person merges or closes it, then the decommission is proposed"
                ));
                (Action::Destroyed, pr(*number, url))
            }
        };
        self.action = action;
        self.pull_request = pull;
        self.decommission = Some(detail);
        // A refusal reported in a cellbridge-refused issue (no pull request was open) is moot
        // once the stack is gone; with a pull request open it was reported there.
        self.resolve_issue = matches!(published, Decommissioned::Opened { .. });
    }
}
