//! state-sync end to end: the AWS side. `invoke` from a file uses the environment; state-sync reaches
//! a cell's account narrowed to `DescribeCluster`; a state bucket in another account is read through
//! `CELLBRIDGE_STATE_ROLE_ARN`; a record handed back comes back after a backoff that doubles
//! (`ChangeMessageVisibility`); sync-all fans out through moto's SQS and each message syncs its cell;
//! the schedule's sync-all's failed dashboard comes back delayed through the queue.

use crate::support::*;
use cellbridge::adapters::github::{GithubConfig, GithubFleet};
use cellbridge::jobs::sync::{KeyPattern, SyncConfig, Syncer};
use cellbridge_tests::github::{FakeGithub, TOKEN};
use cellbridge_tests::{leak, moto};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// `cellbridge invoke state-sync --event FILE` reads its configuration from the environment
/// like the Lambda does; a missing variable is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_from_file_uses_the_environment() {
    let bed = Bed::new("invoke", false).await;
    let cell = "eu-c6";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("event.json");
    std::fs::write(&event, bed.receive().await.to_string()).unwrap();
    // SAFETY: only this test reads these variables.
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("CELLBRIDGE_FLEET_REPO");
    }
    let err = cellbridge::jobs::sync::invoke_from_file(&event)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("CELLBRIDGE_FLEET_REPO"), "{err}");
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("CELLBRIDGE_FLEET_REPO", REPO);
        std::env::set_var("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github-invoke");
        std::env::set_var("CELLBRIDGE_STATE_BUCKET", &bed.bucket);
        std::env::set_var("GITHUB_API_URL", bed.gh.url());
        std::env::set_var("CELLBRIDGE_STATE_KEY_PATTERN", "cells/{cell}/terraform.tfstate");
    }
    let inv = cellbridge::jobs::sync::invoke_from_file(&event).await.unwrap();
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(only_cell(&inv.response)["action"], "opened", "{}", inv.response);
    assert_eq!(bed.pulls().len(), 1);
}

/// state-sync asks EKS in a cell's account through the cell's role, which is cluster-bootstrap's
/// (a role that may make itself a cluster's administrator), narrowed by a session policy to
/// `eks:DescribeCluster` alone: moto's record of the assumed session holds that policy, and a
/// cluster of that account is found through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_sync_reaches_a_cells_account_narrowed_to_describe_cluster() {
    use cellbridge::{adapters::probe::EksProbe, ports::probe::ClusterProbe, ports::probe::Presence};
    const ROLE: &str = "arn:aws:iam::333333333333:role/cellbridge-bootstrap";
    leak::init();
    let conf = moto::sdk_config().await;
    let theirs = moto::assumed(&conf, "arn:aws:iam::333333333333:role/terraform", "test-account-c").await;
    moto::create_cluster(&theirs, "eks-narrow", &[]).await;
    let probe = EksProbe::new(conf.clone(), "cellbridge-state-sync");
    let presence = probe.presence("eks-narrow", "eu-west-1", Some(ROLE)).await.unwrap();
    assert!(matches!(presence, Presence::Exists { .. }), "{presence:?}");
    let (_, moto_data) =
        cellbridge_tests::kube::http_json("GET", &format!("{}/moto-api/data.json", moto::endpoint()), None);
    let sessions: Vec<&Value> = moto_data["sts"]["AssumedRole"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["role_arn"] == ROLE && r["session_name"] == "cellbridge-state-sync")
        .collect();
    assert!(!sessions.is_empty(), "{}", moto_data["sts"]);
    for s in sessions {
        let policy: Value = serde_json::from_str(s["policy"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
        assert_eq!(
            policy["Statement"][0]["Action"], "eks:DescribeCluster",
            "the session may do nothing else: {s}"
        );
    }
}

/// The state bucket in another account, read through
/// `CELLBRIDGE_STATE_ROLE_ARN`. moto is multi-account: the bucket is made with account B's
/// credentials, and moto's own record of assumed roles (`/moto-api/data.json`) shows the role
/// state-sync assumed, with its session name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_bucket_in_another_account_is_read_through_the_configured_role() {
    const ROLE: &str = "arn:aws:iam::222222222222:role/cellbridge-state-reader";
    leak::init();
    let conf = moto::sdk_config().await;
    let b = moto::assumed(&conf, "arn:aws:iam::222222222222:role/terraform", "test-account-b").await;
    let s3b = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&b).force_path_style(true).build());
    let bucket = "tfstate-account-b";
    moto::create_bucket(&s3b, bucket).await;
    let cell = "eu-x1";
    let data: serde_json::Map<String, Value> = base_data(cell, "vpc-b")
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    let state = json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "0000-b",
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": data}}, "resources": [],
    });
    s3b.put_object()
        .bucket(bucket)
        .key(Bed::key(cell))
        .body(state.to_string().into_bytes().into())
        .send()
        .await
        .unwrap();

    let gh = FakeGithub::start();
    gh.seed_example_fleet(REPO);
    leak::secret("state-sync cross-account: GitHub token", TOKEN);
    let fleet = GithubFleet::new(
        &gh.url(),
        "acme",
        "fleet",
        None,
        &cellbridge::adapters::github::Credentials::Token(cellbridge::pure::redact::Secret::new(TOKEN.to_owned())),
    )
    .unwrap();
    let config = SyncConfig {
        github: GithubConfig::checked("acme".into(), "fleet".into(), None, "unused".into(), gh.url()).unwrap(),
        state_bucket: bucket.into(),
        key_pattern: KeyPattern::parse(cellbridge::jobs::sync::DEFAULT_KEY_PATTERN).unwrap(),
        flux_git_url: None,
        flux_git_branch: None,
    };
    let service = Syncer::new(
        config,
        cellbridge::jobs::sync::state_source(&conf, Some(ROLE)).await,
        fleet,
    );
    let inv = cellbridge_tests::handle(
        &service,
        &json!({"action": "sync", "cell": cell}),
        Instant::now() + Duration::from_secs(60),
    )
    .await
    .unwrap();
    leak::capture("state-sync cross-account: answer", &inv.response.to_string());
    assert_eq!(only_cell(&inv.response)["action"], "opened", "{}", inv.response);
    assert!(
        gh.state(REPO)["files"][format!("cellbridge/{cell}")][format!("clusters/{cell}/cell-metadata.yaml")]
            .as_str()
            .unwrap()
            .contains("vpc-b")
    );
    let (_, moto_data) =
        cellbridge_tests::kube::http_json("GET", &format!("{}/moto-api/data.json", moto::endpoint()), None);
    let assumed: Vec<(&str, &str)> = moto_data["sts"]["AssumedRole"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["role_arn"].as_str().unwrap(), r["session_name"].as_str().unwrap()))
        .collect();
    assert!(assumed.contains(&(ROLE, "cellbridge-state-sync")), "{assumed:?}");

    // A value that is no role ARN fails the cold start, naming the variable.
    // SAFETY: only this test reads this variable.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("CELLBRIDGE_STATE_ROLE_ARN", "arn:aws:iam::222222222222:user/someone");
    }
    let err = cellbridge::jobs::sync::state_role_from_env().unwrap_err().to_string();
    assert!(err.starts_with("CELLBRIDGE_STATE_ROLE_ARN="), "{err}");
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("CELLBRIDGE_STATE_ROLE_ARN");
    }
}

/// A record that failed retryably comes back after a backoff that doubles
/// with each delivery (`ChangeMessageVisibility` on the in-flight message, before the answer),
/// not after the queue's visibility timeout (moto's default, 30 s, here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_comes_back_after_a_backoff_that_doubles() {
    // SAFETY: read by the handler only when a record is handed back; set before this test's
    // first invocation, and the other tests' handed-back records are already deleted.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("CELLBRIDGE_RETRY_BASE_SECS", "2");
        std::env::set_var("CELLBRIDGE_RETRY_MAX_SECS", "4");
    }
    let bed = Bed::new("backoff", false).await;
    let cell = "eu-b1";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let mut event = bed.poll_once(Duration::from_secs(10)).await.expect("the notification");
    for (count, delay) in [("1", 2u64), ("2", 4)] {
        assert_eq!(event["Records"][0]["attributes"]["ApproximateReceiveCount"], count);
        // Too little time left to start: a retryable failure, handed back.
        let resp = bed.invoke_with(event.clone(), 3).await.unwrap();
        assert_eq!(
            resp["batchItemFailures"].as_array().unwrap().len(),
            1,
            "{resp} for {event}"
        );
        let answered = Instant::now();
        assert!(bed.poll_once(Duration::ZERO).await.is_none(), "not visible at once");
        event = bed.poll_once(Duration::from_secs(12)).await.expect("redelivered");
        let after = answered.elapsed();
        assert!(
            after >= Duration::from_secs(delay) - Duration::from_millis(300) && after < Duration::from_secs(delay + 5),
            "delivery {count}: back after {after:?}, expected {delay} s"
        );
    }
    // The third delivery syncs; the event source mapping then deletes the message.
    let resp = bed.invoke(event.clone()).await;
    assert_eq!(resp["batchItemFailures"], json!([]), "{resp}");
    assert_eq!(only_cell(&resp)["action"], "opened", "{resp}");
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("CELLBRIDGE_RETRY_BASE_SECS");
        std::env::remove_var("CELLBRIDGE_RETRY_MAX_SECS");
    }
}

/// Through moto's SQS: sync-all sends one message per state to state-sync's
/// own queue (SendMessageBatch); delivered back, each message syncs its cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_all_fans_out_through_the_queue_and_each_message_syncs_its_cell() {
    let bed = Bed::new("fanout", false).await;
    for cell in ["eu-f1", "eu-f2"] {
        bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    }
    // The S3 notifications are not this test's subject.
    let _ = bed.receive().await;
    let conf = moto::sdk_config().await;
    let fanning = cellbridge::jobs::sync::service_for(bed.service.config.clone(), &conf)
        .with_queue(cellbridge::jobs::queue::SqsQueue::new(&conf, bed.queue_url.clone()));
    let ctx = cellbridge_tests::lambda_context(60);
    let resp = cellbridge_tests::lambda_handler(
        &fanning,
        lambda_runtime::LambdaEvent::new(json!({"action": "sync-all"}), ctx),
    )
    .await
    .unwrap();
    leak::capture("state-sync fan-out", &resp.to_string());
    assert_eq!(resp["enqueued"], 2, "{resp}");
    assert!(bed.pulls().is_empty(), "nothing synced by the sync-all itself");

    let event = bed.receive().await;
    let bodies: Vec<Value> = event["Records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
        .collect();
    assert!(
        bodies.contains(&json!({"action": "sync", "bucket": bed.bucket, "key": "cells/eu-f1/terraform.tfstate"})),
        "{bodies:?}"
    );
    let resp = bed.invoke(event).await;
    let mut actions: Vec<String> = cells(&resp)
        .iter()
        .map(|c| c["action"].as_str().unwrap().to_owned())
        .collect();
    actions.sort();
    assert_eq!(actions, ["opened", "opened"], "{resp}");
    assert_eq!(bed.pulls().len(), 2);
}

/// Through moto's SQS: the schedule's sync-all whose dashboard GitHub keeps refusing for now
/// (503s) still fans out, and leaves one `{"action": "dashboard"}` on the queue, delayed by
/// `CELLBRIDGE_DASHBOARD_RETRY_SECS`; delivered once the delay passed (and GitHub is back), it
/// writes the dashboard and queues nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_sync_all_s_failed_dashboard_comes_back_delayed_through_the_queue_and_is_written() {
    // SAFETY: read only when a scheduled sync-all's dashboard fails, which no other test makes.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("CELLBRIDGE_DASHBOARD_RETRY_SECS", "3");
    }
    let bed = Bed::new("dashretry", false).await;
    bed.apply("eu-r1", &base_data("eu-r1", "vpc-1"), false).await;
    let _ = bed.receive().await;
    bed.gh
        .fault(json!({"match": "POST /repos/*/issues", "status": 503, "times": 1000}));
    let conf = moto::sdk_config().await;
    let fanning = cellbridge::jobs::sync::service_for(bed.service.config.clone(), &conf)
        .with_queue(cellbridge::jobs::queue::SqsQueue::new(&conf, bed.queue_url.clone()));
    let resp = cellbridge_tests::lambda_handler(
        &fanning,
        lambda_runtime::LambdaEvent::new(
            json!({"action": "sync-all", "scheduled": true}),
            cellbridge_tests::lambda_context(60),
        ),
    )
    .await
    .unwrap();
    let sent = Instant::now();
    leak::capture("state-sync dashboard retry", &resp.to_string());
    assert_eq!(resp["enqueued"], 1, "the fan-out stands: {resp}");
    let d = &resp["dashboard"];
    assert_eq!(
        (&d["action"], &d["class"]),
        (&json!("failed"), &json!("retryable")),
        "{resp}"
    );
    assert_eq!(d["retry"], json!({"queued": true, "delay_seconds": 3}), "{resp}");
    bed.gh.clear_faults();

    // At once: the cell's message only, and one message delayed.
    let now = bed.receive().await;
    let bodies: Vec<&str> = now["Records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"].as_str().unwrap())
        .collect();
    assert!(
        bodies.len() == 1 && bodies[0].contains("\"sync\""),
        "only the cell's message is visible: {bodies:?}"
    );
    let attrs = bed
        .sqs
        .get_queue_attributes()
        .queue_url(&bed.queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .unwrap();
    let delayed = attrs
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed))
        .cloned();
    assert_eq!(delayed.as_deref(), Some("1"), "one message waits out its delay");

    let event = bed
        .poll_once(Duration::from_secs(10))
        .await
        .expect("the dashboard's message, once its delay passed");
    assert!(
        sent.elapsed() >= Duration::from_millis(2700),
        "visible after {:?}",
        sent.elapsed()
    );
    assert_eq!(
        serde_json::from_str::<Value>(event["Records"][0]["body"].as_str().unwrap()).unwrap(),
        json!({"action": "dashboard"})
    );
    let resp = cellbridge_tests::lambda_handler(
        &fanning,
        lambda_runtime::LambdaEvent::new(event, cellbridge_tests::lambda_context(60)),
    )
    .await
    .unwrap();
    assert_eq!(resp["dashboard"]["action"], "created", "{resp}");
    assert_eq!(resp["batchItemFailures"], json!([]), "{resp}");
    assert_eq!(bed.gh.issues(REPO).len(), 1, "the dashboard is written");
    assert!(
        bed.poll_once(Duration::from_secs(4)).await.is_none(),
        "the retry queued nothing more"
    );
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("CELLBRIDGE_DASHBOARD_RETRY_SECS");
    }
}
