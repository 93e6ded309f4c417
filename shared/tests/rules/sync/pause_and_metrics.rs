//! state-sync: the pause switch and the outcome metrics. Paused by `CELLBRIDGE_PAUSED`, nothing is
//! read or written and nothing redelivered; the fleet repo's settings file on the base branch pauses
//! every write; every cell result is one metric record with the cell as a property.

use crate::support::sync::*;
use serde_json::json;

#[tokio::test]
async fn paused_by_the_environment_nothing_is_read_or_written_and_nothing_is_redelivered() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let inv = crate::support::handle_with(
        &bed,
        &json!({"action": "sync", "cell": "eu-c1"}),
        deadline(),
        paused_by_env(),
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(inv.class, None, "paused is a success: {}", inv.response);
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "paused", "{r}");
    assert_eq!(r["cell"], "eu-c1");
    assert_eq!(r["paused"], json!({"by": "CELLBRIDGE_PAUSED", "reason": "maintenance"}));
    assert_eq!(inv.response["paused"]["by"], "CELLBRIDGE_PAUSED");
    assert!(bed.fleet.calls().is_empty(), "not even read: {:?}", bed.fleet.calls());
    assert!(bed.fleet.pulls().is_empty());

    // sync-all lists nothing; an SQS batch has nothing to redeliver.
    let inv = crate::support::handle_with(
        &bed,
        &json!({"action": "sync-all"}),
        deadline(),
        paused_by_env(),
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(inv.response["cells"], json!([]), "{}", inv.response);
    assert_eq!(inv.response["paused"]["by"], "CELLBRIDGE_PAUSED");
    let event = json!({"Records": [{"messageId": "m1", "eventSource": "aws:sqs", "body": json!({
        "source": "aws.s3", "detail-type": "Object Created",
        "detail": {"bucket": {"name": BUCKET}, "object": {"key": "cells/eu-c1/terraform.tfstate"}},
    }).to_string()}]});
    let inv = crate::support::handle_with(&bed, &event, deadline(), paused_by_env(), &metrics)
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert_eq!(
        captured.outcomes().into_iter().map(|(o, _)| o).collect::<Vec<_>>(),
        ["paused"; 3],
        "{:?}",
        captured.records()
    );
}

#[tokio::test]
async fn the_fleet_repos_settings_on_the_base_branch_pause_every_write() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    bed.fleet.commit(
        "main",
        &[(".cellbridge/settings.yaml", "paused: true\nreason: fleet freeze\n")],
        "pause cellbridge",
    );
    let before = bed.fleet.writes();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let inv = crate::support::handle_with(
        &bed,
        &json!({"action": "sync", "cell": "eu-c1"}),
        deadline(),
        None,
        &metrics,
    )
    .await
    .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "paused", "{r}");
    assert_eq!(
        r["paused"],
        json!({"by": ".cellbridge/settings.yaml", "reason": "fleet freeze"})
    );
    assert_eq!(inv.class, None);
    assert_eq!(bed.fleet.writes(), before, "{:?}", bed.fleet.calls());
    assert!(bed.fleet.pulls().is_empty());
    assert_eq!(captured.outcomes(), [("paused".to_owned(), Some("eu-c1".to_owned()))]);

    // A file people got wrong fails the cell for good, naming the file, and writes nothing.
    bed.fleet.commit(
        "main",
        &[(".cellbridge/settings.yaml", "paused: true\nfreeze: yes\n")],
        "typo",
    );
    let before = bed.fleet.writes();
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "failed", "{r}");
    assert_eq!(r["retryable"], false);
    assert!(
        r["error"].as_str().unwrap().contains(".cellbridge/settings.yaml"),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), before);

    // Unpaused, the same state opens its pull request.
    bed.fleet
        .commit("main", &[(".cellbridge/settings.yaml", "paused: false\n")], "unpause");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
}

#[tokio::test]
async fn every_cell_result_is_one_metric_record_with_the_cell_as_a_property() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let run = |cell: &'static str| {
        let (bed, metrics) = (&bed, &metrics);
        async move {
            crate::support::handle_with(bed, &json!({"action": "sync", "cell": cell}), deadline(), None, metrics)
                .await
                .unwrap()
        }
    };
    apply(&bed, "eu-c1", 1, "vpc-1");
    run("eu-c1").await;
    run("eu-c1").await;
    bed.states
        .put(BUCKET, "cells/eu-c2/terraform.tfstate", state("eu-c9", 1, "vpc-2"));
    run("eu-c2").await;
    assert_eq!(
        captured.outcomes(),
        [
            ("synced".to_owned(), Some("eu-c1".to_owned())),
            ("unchanged".to_owned(), Some("eu-c1".to_owned())),
            ("refused".to_owned(), Some("eu-c2".to_owned())),
        ]
    );
    for r in captured.records() {
        assert_eq!(r["Function"], "state-sync");
        assert_eq!(r["Count"], 1);
        assert_eq!(
            r["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function", "Outcome"]])
        );
        assert!(!r.to_string().contains("vpc-"), "no value in a record: {r}");
    }
}
