//! One cell per cluster, proven before anything is written: the cluster's own tag, else the
//! merged metadata naming the cluster (and its account), decides the cell; a request naming
//! another cell is refused, naming both, with no access entry made and nothing applied.

use crate::support::bootstrap::*;
use cellbridge::rules::bootstrap::{BootstrapError, Request, Target};
use cellbridge::shell::error::{Class, Classify};

fn asking(cell: &str) -> Request {
    Request {
        cell: Some(cell.into()),
        ..request()
    }
}

/// Nothing was written: no access entry call but the reads, nothing applied.
fn untouched(bed: &Bed) {
    let calls = bed.accounts().calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("CreateAccessEntry") || c.starts_with("AssociateAccessPolicy")),
        "{calls:?}"
    );
    assert!(bed.kube().applied().is_empty());
}

/// The sweep's catch-up named cell `b` for a cluster tagged `a` (what the sweep queued for an
/// unmapped account's cell it looked for at home): refused, naming both cells.
#[tokio::test]
async fn a_request_naming_another_cell_than_the_clusters_tag_is_refused_naming_both() {
    let bed = bed();
    bed.accounts()
        .add_cluster_tags(None, REGION, CLUSTER, &[("cellbridge.dev/cell", CELL)]);
    let mut fleet = fleet(&[]);
    fleet.insert(
        "clusters/b/cell-metadata.yaml",
        metadata("b", CLUSTER, &[("aws_account_id", "333333333333")]),
    );
    let err = bed.run(&fleet, &asking("b"), Target::Eks).await.unwrap_err();
    assert!(matches!(err, BootstrapError::OtherCell { .. }), "{err}");
    assert_eq!(err.class(), Class::Final);
    let msg = err.to_string();
    assert!(
        msg.contains("cell b") && msg.contains(&format!("names cell {CELL}")) && msg.contains(CLUSTER),
        "{msg}"
    );
    untouched(&bed);
    // The cell the tag names is bootstrapped as asked.
    let report = bed.run(&fleet, &asking(CELL), Target::Eks).await.unwrap();
    assert_eq!(report.cell.as_deref(), Some(CELL));
}

/// No tag: only the merged metadata naming the cluster proves a cell. A request naming a cell
/// whose metadata names no such cluster, or another cell's cluster, is refused; a cell whose
/// merged `aws_account_id` is not the account the cluster was reached in is refused too.
#[tokio::test]
async fn without_a_tag_the_merged_metadata_naming_the_cluster_and_its_account_decides() {
    let bed = bed();
    let mut fleet = fleet(&[]);
    fleet.insert("clusters/other/cell-metadata.yaml", metadata("other", "elsewhere", &[]));
    for asked in ["other", "not-merged"] {
        let err = bed.run(&fleet, &asking(asked), Target::Eks).await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, BootstrapError::OtherCell { .. }), "{msg}");
        assert!(msg.contains(&format!("cell {asked}")), "{msg}");
        if asked == "other" {
            assert!(
                msg.contains(&format!("cell {CELL}'s merged cell-metadata.yaml names the cluster")),
                "{msg}"
            );
        }
    }
    untouched(&bed);

    // The merged metadata puts the cell in another account: the home cluster of that name is
    // not it, whoever asks.
    let fleet = crate::support::bootstrap::fleet(&[("aws_account_id", ACCOUNT_B)]);
    for req in [request(), asking(CELL)] {
        let err = bed.run(&fleet, &req, Target::Eks).await.unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("account {ACCOUNT_B}")) && msg.contains(&format!("is in {HOME}")),
            "{msg}"
        );
    }
    untouched(&bed);
    let fleet = crate::support::bootstrap::fleet(&[("aws_account_id", HOME)]);
    let report = bed.run(&fleet, &asking(CELL), Target::Eks).await.unwrap();
    assert_eq!(report.cell.as_deref(), Some(CELL));
}
