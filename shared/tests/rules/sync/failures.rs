//! state-sync: retries and failures, and what Lambda and SQS are answered. A fault worth retrying
//! fails retryably and the next run converges; a final GitHub answer fails for good; too little time
//! left starts nothing; a state read that fails is retryable; a repository rule refusing the branch
//! update is a final failure naming it; on SQS only a retryable failure is redelivered (a final or
//! unreadable record is counted and dropped); invoked directly, a final failure is a handled answer
//! and only a retryable one a Lambda error; a manual sync of a cell with no state is a final failure
//! naming what to check.

use crate::support::sync::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::Fault;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_fault_worth_retrying_fails_retryably_and_the_next_run_converges() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.fleet.fail(&ops::PULLS_CREATE, 1, Fault::Transient);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert!(bed.fleet.pulls().is_empty());
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(bed.fleet.pulls().len(), 1);
    assert_eq!(
        bed.fleet.commits_ahead(&branch("eu-c1")),
        1,
        "the cut-off run's commit is reused"
    );
}

#[tokio::test]
async fn a_final_github_answer_fails_for_good() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.fleet.fail(&ops::GIT_CREATE_TREE, 1, Fault::Status(403));
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    assert!(r["error"].as_str().unwrap().contains("403"), "{r}");
}

#[tokio::test]
async fn too_little_time_left_starts_nothing() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync_until(&bed, "eu-c1", Instant::now() + Duration::from_millis(500)).await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert!(bed.fleet.calls().is_empty(), "{:?}", bed.fleet.calls());
    assert_eq!(bed.states.reads(), 0);
}

#[tokio::test]
async fn a_state_read_that_fails_is_retryable_and_touches_no_pull_request() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    bed.states.fail_reads(1);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), 0);
}

#[tokio::test]
async fn a_rule_refusing_the_branch_update_is_a_final_failure_naming_it() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    bed.fleet
        .protect(&branch("eu-c1"), "Commits must have verified signatures.");
    apply(&bed, "eu-c1", 2, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "failed", "{r}");
    assert_eq!(r["retryable"], false, "a rule is not a race: {r}");
    assert_eq!(r["attempts"], 1, "{r}");
    assert!(r["error"].as_str().unwrap().contains("verified signatures"), "{r}");
    // A final publishing failure is the team's to see, on its pull request.
    assert_eq!(r["reported"]["on"], "pull-request", "{r}");
    assert!(bed.fleet.pulls()[0].comments[0].contains("verified signatures"));
}

/// An SQS record naming one state (EventBridge's `Object Created` in the body).
fn sqs_record(id: &str, cell: &str) -> Value {
    json!({"messageId": id, "eventSource": "aws:sqs", "body": json!({
        "source": "aws.s3", "detail-type": "Object Created",
        "detail": {"bucket": {"name": BUCKET}, "object": {"key": format!("cells/{cell}/terraform.tfstate")}},
    }).to_string()})
}

/// A state whose outputs look like a secret: refused, for good.
fn refused_state(bed: &Bed, cell: &str) {
    let text = state(cell, 1, "vpc-1").replace(
        "\"podinfo_replicas\":\"2\"",
        "\"api_token\":\"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\"",
    );
    bed.states.put(BUCKET, &format!("cells/{cell}/terraform.tfstate"), text);
}

#[tokio::test]
async fn on_sqs_only_a_retryable_failure_is_redelivered_and_a_final_or_unreadable_record_is_counted_and_dropped() {
    use cellbridge::shell::error::Class;
    use cellbridge::shell::metrics::{Captured, Metrics};
    let bed = bed();
    refused_state(&bed, "eu-c1");
    apply(&bed, "eu-c2", 1, "vpc-1");
    bed.fleet.fail(&ops::PULLS_CREATE, 1, Fault::Transient);
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let mut event = json!({"Records": [sqs_record("m1", "eu-c1"), sqs_record("m2", "eu-c2")]});
    event["Records"]
        .as_array_mut()
        .unwrap()
        .push(json!({"messageId": "m3", "eventSource": "aws:sqs", "body": "not JSON"}));
    let inv = crate::support::handle_with(&bed, &event, deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "m2"}]),
        "{}",
        inv.response
    );
    assert_eq!(inv.class, Some(Class::Final), "{}", inv.response);
    assert_eq!(
        captured.outcomes().into_iter().map(|(o, _)| o).collect::<Vec<_>>(),
        ["refused", "retried", "refused"],
        "{:?}",
        captured.records()
    );
    // The redelivered record converges; the refused one was never to come back.
    let inv = crate::support::handle_with(
        &bed,
        &json!({"Records": [sqs_record("m2", "eu-c2")]}),
        deadline(),
        None,
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(inv.response["cells"][0]["action"], "opened", "{}", inv.response);
}

#[tokio::test]
async fn directly_invoked_a_final_failure_is_a_handled_answer_and_only_a_retryable_one_a_lambda_error() {
    let bed = bed();
    refused_state(&bed, "eu-c1");
    apply(&bed, "eu-c2", 1, "vpc-1");
    // Final: answered, not an error, so the asynchronous invocation does not run it again.
    let ok = direct(&bed, json!({"action": "sync", "cell": "eu-c1"})).await.unwrap();
    assert_eq!(ok["class"], "final", "{ok}");
    assert_eq!(ok["cells"][0]["action"], "refused", "{ok}");
    assert!(ok["error"].is_string(), "{ok}");
    assert!(!ok.to_string().contains("ghp_"), "the value leaked: {ok}");
    // An event of no known shape: invalid input, answered the same way.
    let ok = direct(&bed, json!({"hello": "world"})).await.unwrap();
    assert_eq!(ok["class"], "invalid_input", "{ok}");
    assert!(ok["error"].as_str().unwrap().contains("event"), "{ok}");
    // Retryable: a Lambda error of its class, which asynchronous invocation retries.
    bed.states.fail_reads(1);
    let err = direct(&bed, json!({"action": "sync", "cell": "eu-c2"}))
        .await
        .unwrap_err();
    assert_eq!(err.error_type, "cellbridge.Retryable", "{}", err.error_message);
    assert!(err.error_message.contains("(retryable)"), "{}", err.error_message);
    assert!(bed.fleet.pulls().is_empty());
}

/// A person who names a cell (or a key) with no state behind it gets a final failure that says
/// what to check, and nothing is written; a delivered event whose object was deleted since is
/// still ignored (a deleted state proves nothing).
#[tokio::test]
async fn a_manual_sync_of_a_cell_with_no_state_is_a_final_failure_naming_what_to_check() {
    let bed = bed();
    let inv = crate::support::handle(&bed, &json!({"action": "sync", "cell": "eu-typo"}), deadline())
        .await
        .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("no state at s3://tfstate/cells/eu-typo/terraform.tfstate")
            && error.contains("check the cell name or CELLBRIDGE_STATE_KEY_PATTERN"),
        "{error}"
    );
    assert_eq!(
        inv.class,
        Some(cellbridge::shell::error::Class::Final),
        "{}",
        inv.response
    );
    let inv = crate::support::handle(
        &bed,
        &json!({"action": "sync", "bucket": BUCKET, "key": "elsewhere/eu-c1.tfstate"}),
        deadline(),
    )
    .await
    .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "failed", "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("CELLBRIDGE_STATE_KEY_PATTERN"),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), 0);

    // The same absence reached by an event: ignored, as ever.
    let event = json!({"Records": [sqs_record("m1", "eu-typo")]});
    let inv = crate::support::handle(&bed, &event, deadline()).await.unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(inv.class, None, "{}", inv.response);
}
