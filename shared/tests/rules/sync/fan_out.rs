//! state-sync: the sync-all fan-out. One message per cell, each synced and retried on its own; every
//! payload survives a dead-letter redrive; a dry-run sync-all plans every cell in place and sends
//! nothing.

use crate::support::sync::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::Fault;
use serde_json::{Value, json};

#[tokio::test]
async fn sync_all_sends_one_message_per_cell_and_each_is_synced_and_retried_on_its_own() {
    let (bed, queue) = queued_bed();
    for c in ["eu-c1", "eu-c2", "eu-c3"] {
        apply(&bed, c, 1, "vpc-1");
    }
    bed.states
        .put(BUCKET, "cells/eu-c2/terraform.tfstate", secret_state("eu-c2", 2).0);
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(inv.response["enqueued"], 3, "{}", inv.response);
    let cells: Vec<(&str, &str)> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell"].as_str().unwrap(), c["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cells,
        [("eu-c1", "enqueued"), ("eu-c2", "enqueued"), ("eu-c3", "enqueued")]
    );
    // Nothing synced in the sync-all itself: GitHub saw the dashboard's reads and its issue.
    assert_eq!(
        bed.fleet.calls(),
        [
            ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE.id,
            ops::GRAPHQL_OPEN_CELL_PULLS.id,
            ops::GRAPHQL_NEWEST_PULLS.id,
            ops::ISSUES_LIST_FOR_REPO.id,
            ops::ISSUES_CREATE.id,
        ],
        "nothing synced in the sync-all itself"
    );
    assert_eq!(inv.response["dashboard"]["action"], "created", "{}", inv.response);
    bed.fleet.clear_calls();
    let sent = queue.sent.lock().unwrap().clone();
    assert_eq!(
        serde_json::from_str::<Value>(&sent[0]).unwrap(),
        json!({"action": "sync", "bucket": BUCKET, "key": "cells/eu-c1/terraform.tfstate"})
    );

    // The messages come back one per record; the refused cell's record alone is dropped, and
    // a retryable failure hands back only its own record.
    bed.fleet.fail(&ops::GIT_CREATE_TREE, 1, Fault::Transient);
    let inv = crate::support::handle(&bed, &sqs_bodies(&sent), deadline())
        .await
        .unwrap();
    let by_cell: std::collections::BTreeMap<&str, &str> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell"].as_str().unwrap(), c["action"].as_str().unwrap()))
        .collect();
    assert_eq!(by_cell["eu-c2"], "refused", "{}", inv.response);
    let failed: Vec<&str> = inv.response["batchItemFailures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap())
        .collect();
    let opened = by_cell.values().filter(|a| **a == "opened").count();
    assert_eq!(
        (opened, failed.len()),
        (1, 1),
        "one opened, one handed back: {}",
        inv.response
    );
    assert_ne!(failed[0], "q1", "the refused cell's record is not redelivered");
}

#[tokio::test]
async fn every_payload_survives_a_dead_letter_redrive() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    apply(&bed, "eu-c2", 1, "vpc-1");
    let bodies = [
        json!({"action": "sync", "cell": "eu-c1"}).to_string(),
        json!({"action": "sync-all"}).to_string(),
        json!({"action": "sync", "cell": "eu-c2", "dry_run": true}).to_string(),
        json!({"action": "sync", "cell": "Not A Label"}).to_string(),
    ];
    let inv = crate::support::handle(&bed, &sqs_bodies(&bodies), deadline())
        .await
        .unwrap();
    let cells = inv.response["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{}", inv.response);
    assert_eq!(
        (cells[0]["cell"].as_str(), cells[0]["action"].as_str()),
        (Some("eu-c1"), Some("opened"))
    );
    assert_eq!(
        queue.sent.lock().unwrap().len(),
        2,
        "the redriven sync-all fanned out again"
    );
    // A dry run or a bad cell cannot succeed later: not redelivered.
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);

    // A queue that refuses: the direct sync-all fails retryably, a queued one is handed back.
    queue.fail.store(true, std::sync::atomic::Ordering::Relaxed);
    let err = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ThrottlingException"), "{err}");
    assert_eq!(
        cellbridge::shell::error::Classify::class(&err),
        cellbridge::shell::error::Class::Retryable
    );
    let inv = crate::support::handle(
        &bed,
        &sqs_bodies(&[json!({"action": "sync-all"}).to_string()]),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "q0"}]),
        "{}",
        inv.response
    );
}

#[tokio::test]
async fn a_dry_run_sync_all_plans_every_cell_in_place_and_sends_nothing() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all", "dry_run": true}), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["cells"][0]["action"], "planned", "{}", inv.response);
    assert!(queue.sent.lock().unwrap().is_empty());
    assert_eq!(bed.fleet.writes(), 0);
}
