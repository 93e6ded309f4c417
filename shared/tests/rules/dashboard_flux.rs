//! The fleet dashboard's Flux column over the in-memory ports: each cell whose merged
//! `cell-metadata.yaml` names its cluster is described in EKS (`MemAws`, the accounts and
//! clusters cluster-bootstrap's rules use) and shows the bootstrap record the cluster's tags hold
//! (`ready`, `confirming`, the reason, `—` for none); a cluster EKS no longer knows, or a cell
//! with no cluster, shows nothing and costs nothing; a DescribeCluster that fails shows
//! `unknown` and why, and the dashboard is written all the same.

use std::collections::BTreeMap;

use cellbridge::doubles::cluster::{MemAws, MemCluster};
use cellbridge::jobs::sync::ClusterAccess;
use cellbridge::pure::bootstrap::record::{FLUX_SINCE_TAG, FLUX_TAG};
use cellbridge::pure::status::RUNBOOK_URL;
use cellbridge::rules::dashboard::LABEL_DASHBOARD;
use serde_json::{Value, json};

use crate::support::sync::{Bed, apply, bed, deadline, sync};

const IDENTITY: &str = "arn:aws:iam::123456789012:role/cellbridge";
/// The test states name each cell's cluster after the cell, in eu-west-1.
const REGION: &str = "eu-west-1";
const SINCE: &str = "2026-12-05T20:31:42Z";

fn with_eks(aws: &MemAws) -> Bed {
    bed().with_clusters(ClusterAccess {
        probe: aws.clone().into(),
        describe_roles: BTreeMap::new(),
    })
}

/// A cluster whose bootstrap recorded `outcome`.
fn recorded(cell: &str, outcome: &str) -> MemCluster {
    MemCluster::active(cell, REGION)
        .tag("cellbridge.dev/cell", cell)
        .tag(FLUX_TAG, outcome)
        .tag(FLUX_SINCE_TAG, SINCE)
}

async fn merged(bed: &Bed, cell: &str) {
    apply(bed, cell, 1, "vpc-1");
    let r = sync(bed, cell).await;
    bed.fleet.merge(r["pull_request"]["number"].as_u64().unwrap());
}

async fn dashboard(bed: &Bed) -> Value {
    let inv = crate::support::handle(bed, &json!({"action": "dashboard"}), deadline())
        .await
        .unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    inv.response["dashboard"].clone()
}

fn body(bed: &Bed) -> String {
    let open: Vec<_> = bed
        .fleet
        .issues()
        .into_iter()
        .filter(|i| i.open && i.labels.iter().any(|l| l == LABEL_DASHBOARD))
        .collect();
    assert_eq!(open.len(), 1, "{open:?}");
    open[0].body.clone()
}

/// The table's row of `cell`: (what, flux, detail).
fn row(body: &str, cell: &str) -> (String, String, String) {
    let line = body
        .lines()
        .find(|l| l.starts_with(&format!("| `{cell}` |")))
        .unwrap_or_else(|| panic!("no row of {cell}:\n{body}"));
    let cols: Vec<&str> = line.split(" | ").collect();
    assert_eq!(cols.len(), 4, "{line}");
    (
        cols[1].to_owned(),
        cols[2].to_owned(),
        cols[3].trim_end_matches(" |").to_owned(),
    )
}

/// The clusters DescribeCluster was asked about.
fn described(aws: &MemAws) -> Vec<String> {
    let mut d: Vec<String> = aws
        .calls()
        .into_iter()
        .filter_map(|c| c.strip_prefix("DescribeCluster ").map(str::to_owned))
        .collect();
    d.sort();
    d
}

#[tokio::test]
async fn the_flux_column_shows_each_clusters_bootstrap_record() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    for cell in ["eu-ready", "eu-none", "eu-confirming", "eu-stuck", "eu-gone"] {
        merged(&bed, cell).await;
    }
    aws.add_cluster(recorded("eu-ready", "ready"));
    aws.add_cluster(recorded("eu-confirming", "confirming"));
    // Flux installed another way: the cluster has no record.
    aws.add_cluster(MemCluster::active("eu-none", REGION).tag("cellbridge.dev/cell", "eu-none"));
    // Bootstrapped, then its confirmation ended: git-auth, recorded with TagResource.
    aws.add_cluster(MemCluster::active("eu-stuck", REGION).tag("cellbridge.dev/cell", "eu-stuck"));
    aws.add_cluster_tags(
        None,
        REGION,
        "eu-stuck",
        &[(FLUX_TAG, "confirming"), (FLUX_SINCE_TAG, SINCE)],
    );
    aws.add_cluster_tags(None, REGION, "eu-stuck", &[(FLUX_TAG, "git-auth")]);
    assert_eq!(aws.cluster_tags(REGION, "eu-stuck")[FLUX_TAG], "git-auth");
    // eu-gone's cluster is not in EKS any more. Changes pending for three cells.
    for cell in ["eu-ready", "eu-none", "eu-gone"] {
        apply(&bed, cell, 2, "vpc-2");
    }
    // A new cell: the base branch has no metadata of it, so it names no cluster yet.
    apply(&bed, "eu-new", 1, "vpc-1");

    let d = dashboard(&bed).await;
    assert_eq!(d["action"], "created", "{d}");
    let body = body(&bed);
    assert!(
        body.contains("\n| cell | what | flux | detail |\n|---|---|---|---|\n"),
        "{body}"
    );
    let (what, flux, detail) = row(&body, "eu-ready");
    assert_eq!((what.as_str(), flux.as_str()), ("pending", "ready"), "{body}");
    assert!(!detail.contains("Flux"), "{detail}");
    assert_eq!(row(&body, "eu-none").1, "—", "{body}");
    // Gone from EKS, or no cluster named yet: the row says what it said without the column.
    assert_eq!(row(&body, "eu-gone").1, "", "{body}");
    assert_eq!(row(&body, "eu-new").1, "", "{body}");
    assert_eq!(row(&body, "prod-eu-west-1").1, "", "{body}");
    // A stuck cluster needs a person, whatever its cell's state.
    let (what, flux, detail) = row(&body, "eu-stuck");
    // Its Flux cell links to the runbook's entry for the outcome.
    let stuck = format!("[git-auth]({RUNBOOK_URL}#flux-git-auth)");
    assert_eq!((what.as_str(), flux.as_str()), ("in sync", stuck.as_str()), "{body}");
    assert!(
        detail.contains(&format!("Flux did not take over: git-auth (bootstrapped {SINCE})")),
        "{detail}"
    );
    assert!(
        body.contains("**In sync** (2): `eu-confirming` (flux confirming), `eu-stuck` (flux git-auth)\n"),
        "{body}"
    );
    assert!(body.contains("; 1 cluster stuck**"), "{body}");
    assert_eq!(
        (&d["summary"]["flux_stuck"], &d["summary"].get("flux_unknown")),
        (&json!(1), &None),
        "{d}"
    );
    // One question per cell whose merged metadata names a cluster; none for eu-new.
    assert_eq!(
        described(&aws),
        [
            "eu-confirming",
            "eu-gone",
            "eu-none",
            "eu-ready",
            "eu-stuck",
            "prod-eu-west-1"
        ],
        "{:?}",
        aws.calls()
    );
    assert_eq!(d["clusters"], json!({"described": 6, "gone": 2, "unknown": 0}), "{d}");

    // Nothing changed: nothing written (the since is a time, not an age).
    bed.fleet.clear_calls();
    assert_eq!(dashboard(&bed).await["action"], "unchanged");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());

    // The confirmation ends: the column follows the record.
    aws.add_cluster_tags(None, REGION, "eu-confirming", &[(FLUX_TAG, "ready")]);
    assert_eq!(dashboard(&bed).await["action"], "updated");
    assert!(
        body_of_in_sync(&bed).starts_with("**In sync** (2): `eu-confirming`, `eu-stuck` (flux git-auth)"),
        "{}",
        body_of_in_sync(&bed)
    );
}

fn body_of_in_sync(bed: &Bed) -> String {
    let b = body(bed);
    b[b.find("**In sync**").unwrap()..].to_owned()
}

#[tokio::test]
async fn a_describe_cluster_that_fails_shows_unknown_and_why_and_the_dashboard_is_written() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged(&bed, "eu-c1").await;
    aws.add_cluster(recorded("eu-c1", "ready"));
    // Refused for eu-c1 and for the example fleet's prod-eu-west-1.
    aws.fail("DescribeCluster", 2, false);

    let d = dashboard(&bed).await;
    assert_eq!(d["action"], "created", "{d}");
    let body = body(&bed);
    let (what, flux, detail) = row(&body, "eu-c1");
    let unknown = format!("[unknown]({RUNBOOK_URL}#dashboard-flux-unknown)");
    assert_eq!((what.as_str(), flux.as_str()), ("in sync", unknown.as_str()), "{body}");
    assert!(
        detail.contains("Flux unknown: cell eu-c1: EKS DescribeCluster eu-c1 in eu-west-1")
            && detail.contains("AccessDeniedException: injected"),
        "{detail}"
    );
    assert_eq!(row(&body, "prod-eu-west-1").1, unknown, "{body}");
    assert_eq!(d["summary"]["flux_unknown"], 2, "{d}");
    assert_eq!(d["clusters"], json!({"described": 2, "gone": 0, "unknown": 2}), "{d}");
    assert!(body.contains("**In sync** (1): `eu-c1` (flux unknown)\n"), "{body}");

    // Answered again: ready, and nothing to look at.
    assert_eq!(dashboard(&bed).await["action"], "updated");
    let body = self::body(&bed);
    assert!(body.contains("**In sync** (1): `eu-c1`\n"), "{body}");
    assert!(!body.contains("| `eu-c1` |"), "{body}");
}

#[tokio::test]
async fn without_eks_there_is_no_column_and_nothing_is_asked() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let d = dashboard(&bed).await;
    assert!(d.get("clusters").is_none(), "{d}");
    let body = body(&bed);
    assert!(body.contains("\n| cell | what | detail |\n|---|---|---|\n"), "{body}");
}
