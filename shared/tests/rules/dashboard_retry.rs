//! The fleet dashboard's delayed retry: the schedule's sync-all whose dashboard failed for a
//! reason that passes sends one `{"action": "dashboard"}` to state-sync's own queue, delayed; a
//! final failure, a sync-all run by hand or no queue sends nothing and the answer says why; the
//! retry itself, taken from the queue, never queues another. The sync-all's fan-out stands
//! whatever happens.

use std::time::Duration;

use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::Fault;
use cellbridge::rules::dashboard::LABEL_DASHBOARD;
use serde_json::{Value, json};

use crate::support::sync::{apply, bed, deadline, queued_bed, sqs_bodies};

fn scheduled() -> Value {
    json!({"action": "sync-all", "scheduled": true})
}

/// Every message sent after the fan-out's (`fanned` of them), with its delay.
fn retries(queue: &cellbridge::doubles::queue::MemQueue, fanned: usize) -> Vec<(Value, Duration)> {
    let sent = queue.sent.lock().unwrap();
    let delays = queue.delays.lock().unwrap();
    sent.iter()
        .zip(delays.iter())
        .skip(fanned)
        .map(|(b, d)| (serde_json::from_str(b).unwrap(), *d))
        .collect()
}

fn dashboard_written(bed: &crate::support::sync::Bed) -> bool {
    bed.fleet
        .issues()
        .iter()
        .any(|i| i.open && i.labels.iter().any(|l| l == LABEL_DASHBOARD))
}

#[tokio::test]
async fn a_scheduled_sync_all_whose_dashboard_failed_for_now_queues_one_delayed_retry_that_rebuilds_it() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    apply(&bed, "eu-c2", 1, "vpc-1");
    bed.fleet.fail(&ops::ISSUES_CREATE, 1, Fault::Transient);
    let inv = crate::support::handle(&bed, &scheduled(), deadline()).await.unwrap();
    assert_eq!(inv.class, None, "the sync-all stands: {}", inv.response);
    assert_eq!(inv.response["enqueued"], 2, "{}", inv.response);
    let d = &inv.response["dashboard"];
    assert_eq!(
        (&d["action"], &d["class"]),
        (&json!("failed"), &json!("retryable")),
        "{d}"
    );
    assert_eq!(d["retry"], json!({"queued": true, "delay_seconds": 300}), "{d}");
    assert_eq!(
        retries(&queue, 2),
        [(json!({"action": "dashboard"}), Duration::from_secs(300))],
        "exactly one delayed dashboard message after the cells'"
    );
    assert!(!dashboard_written(&bed));

    // Received once the delay passed: the dashboard is written, nothing more is queued.
    let body = queue.sent.lock().unwrap()[2].clone();
    let inv = crate::support::handle(&bed, &sqs_bodies(std::slice::from_ref(&body)), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["dashboard"]["action"], "created", "{}", inv.response);
    assert!(inv.response["dashboard"].get("retry").is_none(), "{}", inv.response);
    assert!(dashboard_written(&bed));
    assert_eq!(queue.sent.lock().unwrap().len(), 3, "the retry queues nothing");

    // Failing again from the queue, it is handed back to SQS's redelivery, never re-queued.
    bed.fleet.fail(&ops::ISSUES_UPDATE, 1, Fault::Transient);
    apply(&bed, "eu-c3", 1, "vpc-1");
    let inv = crate::support::handle(&bed, &sqs_bodies(&[body]), deadline())
        .await
        .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "q0"}]),
        "{}",
        inv.response
    );
    assert_eq!(queue.sent.lock().unwrap().len(), 3, "no chain of retries");
}

#[tokio::test]
async fn a_final_dashboard_failure_queues_no_retry_and_says_why() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.fleet.disable_issues();
    let inv = crate::support::handle(&bed, &scheduled(), deadline()).await.unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(inv.response["enqueued"], 1, "{}", inv.response);
    let d = &inv.response["dashboard"];
    assert_eq!(d["class"], "final", "{d}");
    assert_eq!(d["retry"]["queued"], false, "{d}");
    assert!(
        d["retry"]["reason"].as_str().unwrap().contains("fail the same way"),
        "{d}"
    );
    assert!(retries(&queue, 1).is_empty(), "only the cell's message");
}

#[tokio::test]
async fn a_sync_all_run_by_hand_queues_no_retry_and_says_why() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.fleet.fail(&ops::ISSUES_CREATE, 1, Fault::Transient);
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(inv.response["enqueued"], 1, "{}", inv.response);
    let d = &inv.response["dashboard"];
    assert_eq!(d["class"], "retryable", "{d}");
    assert_eq!(d["retry"]["queued"], false, "{d}");
    assert!(d["retry"]["reason"].as_str().unwrap().contains("by hand"), "{d}");
    assert!(retries(&queue, 1).is_empty(), "only the cell's message");
}

#[tokio::test]
async fn without_a_queue_a_scheduled_sync_all_queues_no_retry_and_says_why() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.fleet.fail(&ops::ISSUES_CREATE, 1, Fault::Transient);
    let inv = crate::support::handle(&bed, &scheduled(), deadline()).await.unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(
        inv.response["cells"][0]["action"], "opened",
        "synced in place: {}",
        inv.response
    );
    let d = &inv.response["dashboard"];
    assert_eq!(d["class"], "retryable", "{d}");
    assert_eq!(d["retry"]["queued"], false, "{d}");
    assert!(
        d["retry"]["reason"]
            .as_str()
            .unwrap()
            .contains("CELLBRIDGE_SYNC_QUEUE_URL"),
        "{d}"
    );
}
