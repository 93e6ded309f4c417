//! The sweep of cellbridge's temporary access entries ("No standing admin").
//!
//! A bootstrap run creates an access entry with cluster-admin rights for its own principal and
//! deletes it at the end (`access.rs`); a run killed in between leaves it. The sweep visits the
//! cluster of every cell of the fleet (merged `cell-metadata.yaml`: `cluster_name`,
//! `aws_region`, and the role that reaches it), describes cellbridge's entry there and deletes
//! it when it is cellbridge's (its principal AND [`TEMPORARY_TAG`](crate::ports::cluster::access::TEMPORARY_TAG)) and older than the
//! TTL. Anyone else's entry (another principal, or ours without the tag) is never touched: the
//! sweep only ever names cellbridge's principal (DescribeAccessEntry/DeleteAccessEntry take the
//! principal ARN, <https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAccessEntry.html>),
//! so it never lists other principals' entries at all.
//!
//! The age is EKS's `createdAt` ("The Unix epoch timestamp at object creation",
//! <https://docs.aws.amazon.com/eks/latest/APIReference/API_AccessEntry.html>), else cellbridge's
//! [`CREATED_AT_TAG`](crate::ports::cluster::access::CREATED_AT_TAG); a tagged entry with neither predates the tag and counts as old.
//! One cluster failing (a refused role, throttling, a deleted cluster) is reported and the
//! sweep goes on.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::ports::cluster::AccessError;
use crate::ports::cluster::{Accounts, ClusterApi};
use crate::ports::queue::Enqueue;
use crate::pure::bootstrap::record::{self, CatchUp};
use crate::pure::configmap;
use crate::pure::fleet::{EntryKind, FleetRead};
use crate::rules::bootstrap::access;
use crate::rules::cells::{self as cell, Cell, role_of};
use crate::shell::error::{Class, Classify};

/// One cluster to visit, and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    pub cell: String,
    pub cluster: String,
    pub region: String,
    /// The role assumed to reach it; `None`: cellbridge's own identity (its own account).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The account the cluster is in: the role's, else cellbridge's own. Every catch-up carries
    /// it, so that the run it starts looks for the cluster in that account and no other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

impl Target {
    /// Where the cluster stands in the sweep's order: pages go through the fleet in it, and a
    /// page that runs out of time hands on the last key it visited ([`SweepReport::next`]).
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.cell, self.region, self.cluster)
    }
}

/// A cluster to visit, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    Visit(Target),
    /// The role that reaches it cannot be decided (a configuration and metadata disagreeing),
    /// or cellbridge's own account could not be read: `class` says whether trying later helps.
    Failed(Target, Class, String),
    /// An account no role reaches and not cellbridge's own ([`cell::at_home`]): never looked
    /// for at home, reported as unreachable, as state-sync does.
    Unreachable(Target, String),
}

impl Planned {
    pub fn target(&self) -> &Target {
        match self {
            Planned::Visit(t) | Planned::Failed(t, ..) | Planned::Unreachable(t, _) => t,
        }
    }
}

/// What the sweep did on one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Swept {
    /// cellbridge's temporary entry is there and young: a run is using it.
    Kept { age_secs: u64 },
    /// cellbridge's temporary entry had expired and is gone.
    Deleted { age_secs: Option<u64> },
    /// No temporary entry of cellbridge's (none, or an entry it did not make).
    None,
    /// In an account no role reaches: not looked at ([`Planned::Unreachable`]).
    Unreachable { reason: String },
    /// The cluster could not be looked at or cleaned; the next sweep tries again.
    /// `remaining_secs`: the age of an expired entry whose delete failed.
    Failed {
        class: Class,
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        remaining_secs: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterSweep {
    #[serde(flatten)]
    pub target: Target,
    #[serde(flatten)]
    pub swept: Swept,
    /// The daily sweep's catch-up: what the cluster's record asks for
    /// ([`crate::pure::bootstrap::record::catch_up`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUp>,
    /// The catch-up's bootstrap was sent to the function's queue.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub ttl_secs: u64,
    pub clusters: Vec<ClusterSweep>,
    /// The age of the oldest temporary entry still there (kept, or failed to delete), seconds.
    pub oldest_remaining_secs: u64,
    /// Regions and accounts whose tagged clusters could not be listed ([`discover`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub discovery_errors: Vec<String>,
    /// Clusters this page went through (looked at, or reported unreachable or failed).
    pub visited: usize,
    /// Clusters after them that this page's deadline left for the next page.
    pub left: usize,
    /// Where the next page starts (after this key, [`Target::key`]); `None`: the fleet is done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The next page was queued on the function's own queue.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub handed_on: bool,
}

impl SweepReport {
    pub fn count(&self, f: impl Fn(&Swept) -> bool) -> usize {
        self.clusters.iter().filter(|c| f(&c.swept)).count()
    }
    pub fn failed(&self) -> usize {
        self.count(|s| matches!(s, Swept::Failed { .. }))
    }
}

/// The cells of the fleet whose merged metadata names a cluster and region, each with the role
/// that reaches it or why none can be decided. Cells without metadata yet (pull request open)
/// have no cluster to sweep and are left out; a file that does not parse is skipped with a
/// warning, as the bootstrap's lookup does.
///
/// `home`: cellbridge's own account (STS), or why it could not be read: a cell no role reaches
/// is visited only when its `aws_account_id` is that account or absent.
pub fn targets(
    fleet: &dyn FleetRead,
    account_roles: &BTreeMap<String, String>,
    home: Result<&str, &(Class, String)>,
) -> Result<Vec<Planned>, cell::CellError> {
    let mut out = Vec::new();
    for e in fleet.list("clusters")?.unwrap_or_default() {
        if e.kind != EntryKind::Dir || e.name.starts_with('_') || !cell::is_dns_label(&e.name) {
            continue;
        }
        let file = configmap::path_for(&e.name);
        let Some(text) = fleet.read_text(&file)? else { continue };
        let metadata = match configmap::parse(&text, &file) {
            Ok(x) => x.data,
            Err(err) => {
                tracing::warn!(%file, error = %err, "sweep: skipping a cell-metadata file that does not parse");
                continue;
            }
        };
        let (Some(cluster), Some(region)) = (metadata.get("cluster_name"), metadata.get("aws_region")) else {
            continue;
        };
        let (cluster, region) = (cluster.clone(), region.clone());
        let c = Cell {
            name: e.name.clone(),
            metadata,
        };
        let target = |role: Option<String>, account: Option<&str>| Target {
            cell: c.name.clone(),
            cluster: cluster.clone(),
            region: region.clone(),
            account: account
                .map(str::to_owned)
                .or_else(|| role.as_deref().and_then(cell::role_account).map(str::to_owned)),
            role,
        };
        out.push(match (role_of(&c, account_roles), home) {
            (Ok(Some(role)), _) => Planned::Visit(target(Some(role), None)),
            // No role: its account (metadata that names two is refused below, by `role_of`).
            (Ok(None), Ok(home)) => match cell::at_home(
                cell::cell_account(&c).ok().flatten().as_deref(),
                home,
                "CELLBRIDGE_ACCOUNT_ROLES (or the cell's bootstrap_role_arn)",
            ) {
                Ok(()) => Planned::Visit(target(None, Some(home))),
                Err(unreachable) => Planned::Unreachable(target(None, None), unreachable.to_string()),
            },
            (Ok(None), Err((class, why))) => Planned::Failed(
                target(None, None),
                *class,
                format!("cannot tell whether the cell's cluster is in cellbridge's own account: {why}"),
            ),
            (Err(reason), _) => Planned::Failed(target(None, None), Class::Final, reason.to_string()),
        });
    }
    Ok(out)
}

/// The clusters tagged `cellbridge.dev/cell` that no merged cell names yet: a new cell is
/// bootstrapped from its cluster's tag before its pull request merges, so a run killed then
/// leaves its entry on a cluster the fleet's metadata does not know. Looked for in every region
/// of the fleet's cells and `home_region`, with cellbridge's own identity and with each role of
/// `account_roles` (ListClusters, then DescribeCluster for the tag). A region or account that
/// cannot be listed is reported in the second list and the sweep goes on.
pub async fn discover<A: Accounts>(
    accounts: &A,
    known: &[Planned],
    account_roles: &BTreeMap<String, String>,
    home_region: Option<&str>,
    home: Option<&str>,
) -> (Vec<Planned>, Vec<String>) {
    let known: Vec<Target> = known.iter().map(|p| p.target().clone()).collect();
    let mut regions: Vec<String> = known
        .iter()
        .map(|t| t.region.clone())
        .chain(home_region.map(str::to_owned))
        .collect();
    regions.sort();
    regions.dedup();
    let roles: Vec<Option<String>> = std::iter::once(None)
        .chain(account_roles.values().cloned().map(Some))
        .collect();
    let (mut found, mut errors) = (Vec::new(), Vec::new());
    for region in &regions {
        for role in &roles {
            let whose = role.as_deref().unwrap_or("cellbridge's own account");
            let api = match accounts.open(region, role.as_deref()).await {
                Ok(api) => api,
                Err(e) => {
                    errors.push(format!("{region}, {whose}: {e}"));
                    continue;
                }
            };
            let names = match api.list_clusters().await {
                Ok(n) => n,
                Err(e) => {
                    errors.push(format!("{region}, {whose}: {e}"));
                    continue;
                }
            };
            for cluster in names {
                // A merged cell's cluster is already a target (through the role its account gives).
                if known
                    .iter()
                    .any(|t| t.cluster == cluster && t.region == *region && t.role == *role)
                {
                    continue;
                }
                match api.describe_cluster(&cluster).await {
                    Ok(Some(info)) => {
                        if let Some(cell) = info.tags.get(cell::CELL_TAG) {
                            found.push(Planned::Visit(Target {
                                cell: cell.clone(),
                                cluster,
                                region: region.clone(),
                                account: match role {
                                    Some(r) => cell::role_account(r).map(str::to_owned),
                                    None => home.map(str::to_owned),
                                },
                                role: role.clone(),
                            }));
                        }
                    }
                    Ok(None) => {}
                    Err(e) => errors.push(format!("{region}, {whose}: {e}")),
                }
            }
        }
    }
    (found, errors)
}

/// Sweeps one cluster as `principal`.
pub async fn sweep_cluster(
    api: &impl ClusterApi,
    cluster: &str,
    principal: &str,
    now: SystemTime,
    ttl: Duration,
) -> Swept {
    let failed = |e: AccessError, remaining_secs| Swept::Failed {
        class: e.class(),
        error: e.to_string(),
        remaining_secs,
    };
    let entry = match api.access_entry(cluster, principal).await {
        Ok(Some(entry)) => entry,
        Ok(None) => return Swept::None,
        Err(e) => return failed(e.into(), None),
    };
    if !entry.temporary {
        // Our principal, but an entry someone made for it on purpose: never ours to delete.
        return Swept::None;
    }
    let age = access::age(&entry, now).map(|a| a.as_secs());
    if !access::expired(&entry, now, ttl) {
        return Swept::Kept {
            age_secs: age.unwrap_or_default(),
        };
    }
    match api.delete_access_entry(cluster, principal).await {
        Ok(_) => {
            tracing::warn!(
                cluster,
                principal,
                age_secs = age,
                "sweep: deleted an expired temporary access entry"
            );
            Swept::Deleted { age_secs: age }
        }
        // Still there: its age counts for the gauge (unknown age: as old as can be).
        Err(e) => failed(e.into(), Some(age.unwrap_or(u64::MAX))),
    }
}

/// What a page of the daily sweep does besides the expired access: decides each cluster's
/// catch-up from its record ([`crate::pure::bootstrap::record::catch_up`], `deadline`: the
/// confirmation's) and queues it on `queue` as soon as it is decided.
pub struct CatchUps<'a, Q> {
    pub deadline: Duration,
    pub queue: Option<&'a Q>,
}

/// Which part of the fleet a page goes through: the targets after `from` ([`Target::key`]), in
/// key order, until `stop` (the invocation's deadline less a margin). A page always goes through
/// at least one target, so that a chain of pages always ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Page<'a> {
    pub from: Option<&'a str>,
    pub stop: Option<std::time::Instant>,
}

impl Page<'_> {
    /// Whether the page is out of time. Tokio's clock: the same instant as the standard one,
    /// except where time is paused.
    fn over(&self) -> bool {
        self.stop
            .is_some_and(|s| tokio::time::Instant::now() >= tokio::time::Instant::from_std(s))
    }
}

/// Sweeps the targets of one page. `own_principal`: the IAM principal cellbridge's own identity
/// has entries as (`CELLBRIDGE_ACCESS_PRINCIPAL_ARN`, else STS's answer); an assumed role's entry
/// is the role's ARN, as in a bootstrap run.
pub async fn sweep<A: Accounts, Q: Enqueue>(
    accounts: &A,
    targets: Vec<Planned>,
    own_principal: Option<&str>,
    now: SystemTime,
    ttl: Duration,
    catch_up: Option<CatchUps<'_, Q>>,
    page: Page<'_>,
) -> SweepReport {
    let mut report = SweepReport {
        ttl_secs: ttl.as_secs(),
        ..SweepReport::default()
    };
    let mut targets: Vec<(String, Planned)> = targets
        .into_iter()
        .map(|p| (p.target().key(), p))
        .filter(|(k, _)| page.from.is_none_or(|from| k.as_str() > from))
        .collect();
    targets.sort_by(|a, b| a.0.cmp(&b.0));
    targets.dedup_by(|a, b| a.0 == b.0);
    let total = targets.len();
    for (i, (_, t)) in targets.into_iter().enumerate() {
        if i > 0 && page.over() {
            report.left = total - i;
            report.next = report.clusters.last().map(|c| c.target.key());
            tracing::warn!(visited = i, left = report.left, next = ?report.next, "sweep: out of time; the rest is left for the next page");
            break;
        }
        report.visited += 1;
        let (target, swept) = match t {
            Planned::Failed(target, class, reason) => (
                target,
                Swept::Failed {
                    class,
                    error: reason,
                    remaining_secs: None,
                },
            ),
            Planned::Unreachable(target, reason) => {
                tracing::warn!(cell = %target.cell, cluster = %target.cluster, region = %target.region, %reason, "sweep: the cell's cluster is unreachable; not looked for at home");
                (target, Swept::Unreachable { reason })
            }
            Planned::Visit(target) => {
                let (swept, caught, queued) =
                    visit(accounts, &target, own_principal, now, ttl, catch_up.as_ref()).await;
                if caught.is_some() {
                    report.clusters.push(ClusterSweep {
                        target,
                        swept,
                        catch_up: caught,
                        queued,
                    });
                    continue;
                }
                (target, swept)
            }
        };
        if let Swept::Failed { error, .. } = &swept {
            tracing::error!(cell = %target.cell, cluster = %target.cluster, region = %target.region, %error, "sweep: cluster not swept");
        }
        match swept {
            Swept::Kept { age_secs }
            | Swept::Failed {
                remaining_secs: Some(age_secs),
                ..
            } => report.oldest_remaining_secs = report.oldest_remaining_secs.max(age_secs),
            _ => {}
        }
        report.clusters.push(ClusterSweep {
            target,
            swept,
            catch_up: None,
            queued: false,
        });
    }
    report
}

/// One cluster: its expired access swept and, with `catch_up` (the daily sweep only), what its
/// record asks for, read with one DescribeCluster, queued at once and marked on the cluster
/// ([`record::CATCH_UP_TAG`]) so that no other sweep queues it again while it is pending.
async fn visit<A: Accounts, Q: Enqueue>(
    accounts: &A,
    target: &Target,
    own_principal: Option<&str>,
    now: SystemTime,
    ttl: Duration,
    catch_up: Option<&CatchUps<'_, Q>>,
) -> (Swept, Option<CatchUp>, bool) {
    let failed = |e: AccessError| Swept::Failed {
        class: e.class(),
        error: e.to_string(),
        remaining_secs: None,
    };
    let api = match accounts.open(&target.region, target.role.as_deref()).await {
        Ok(api) => api,
        Err(e) => return (failed(e), None, false),
    };
    let principal = match target.role.as_deref().or(own_principal) {
        Some(p) => p.to_owned(),
        None => match api.caller_principal().await {
            Ok(p) => p,
            Err(e) => return (failed(e), None, false),
        },
    };
    let swept = sweep_cluster(&api, &target.cluster, &principal, now, ttl).await;
    let Some(catch_up) = catch_up else {
        return (swept, None, false);
    };
    // A young temporary entry of ours is a run at work: it is not caught up under it.
    let running = matches!(swept, Swept::Kept { .. });
    let info = match api.describe_cluster(&target.cluster).await {
        Ok(Some(info)) => info,
        Ok(None) => return (swept, None, false),
        Err(e) => {
            tracing::warn!(cell = %target.cell, cluster = %target.cluster, error = %e, "sweep: cannot read the cluster's bootstrap record; not caught up today");
            return (swept, None, false);
        }
    };
    let active = info.status == crate::ports::cluster::eks::ClusterStatus::Active;
    let caught = record::catch_up(&info.tags, active, running, now, catch_up.deadline);
    let queued = super::catchup::queue(catch_up.queue, target, caught).await;
    if queued {
        super::catchup::mark(&api, &info, now).await;
    }
    (swept, caught, queued)
}

/// The span of a sweep, scheduled or after a run: it concerns the whole fleet's clusters, and its
/// every line says so (each cluster's lines name the cluster too).
pub fn span() -> tracing::Span {
    tracing::info_span!("sweep", scope = "fleet")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_without_a_merged_role_is_reached_through_its_accounts_configured_role() {
        let roles: BTreeMap<String, String> = [(
            "210987654321".to_owned(),
            "arn:aws:iam::210987654321:role/cellbridge".to_owned(),
        )]
        .into();
        let cell = |account: &str| Cell {
            name: "c".into(),
            metadata: [("aws_account_id".to_owned(), account.to_owned())].into(),
        };
        assert_eq!(
            role_of(&cell("210987654321"), &roles).unwrap().as_deref(),
            Some("arn:aws:iam::210987654321:role/cellbridge")
        );
        assert_eq!(role_of(&cell("123456789012"), &roles).unwrap(), None);
    }
}
