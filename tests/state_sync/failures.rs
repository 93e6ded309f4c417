//! state-sync end to end: refusals, races and faults. A secret-looking or sensitive output opens
//! nothing; twenty concurrent invocations make one pull request; GitHub faults are retried or fail
//! cleanly; a rotated token is read again.

use crate::support::*;
use cellbridge::jobs::sync::Syncer;
use cellbridge::ports::state::StateSource;
use cellbridge_tests::github::TOKEN;
use cellbridge_tests::{leak, moto};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secret_looking_or_sensitive_output_opens_nothing() {
    let bed = Bed::new("refused", false).await;
    let cell = "eu-c2";
    let mut data = base_data(cell, "vpc-1");
    data.push(("db_password".into(), "hunter2-Zx8q".into()));
    bed.apply(cell, &data, false).await;
    bed.gh.clear_requests();
    let resp = bed.invoke(bed.receive().await).await;
    let c = only_cell(&resp);
    assert_eq!(c["action"], "refused", "{resp}");
    let err = c["error"].as_str().unwrap();
    assert!(err.contains("db_password"), "{err}");
    assert!(!resp.to_string().contains("hunter2"), "the value leaked: {resp}");
    // Redelivering cannot help: the record is not handed back to SQS.
    assert_eq!(resp["batchItemFailures"], json!([]));
    assert!(bed.pulls().is_empty());
    // Nothing of the cell is written; the refusal is reported in one issue, naming the key.
    assert_eq!(bed.counts().2, 1, "the report's issue, and no other write");
    let issues = bed.gh.issues(REPO);
    assert_eq!(issues.len(), 1, "{issues:?}");
    let body = issues[0]["body"].as_str().unwrap();
    assert!(body.contains("db_password") && !body.contains("hunter2"), "{body}");

    // A sensitive output, through a direct invocation: a final failure naming the output,
    // answered as handled (not a Lambda error, which an asynchronous invocation would retry).
    bed.apply(cell, &base_data(cell, "vpc-1"), true).await;
    let _ = bed.receive().await;
    let direct = json!({"action": "sync", "cell": cell});
    let resp = bed.invoke_with(direct, 60).await.unwrap();
    assert_eq!(resp["class"], "final", "{resp}");
    let text = resp.to_string();
    assert!(text.contains("sensitive") && text.contains("cell_metadata"), "{resp}");
    assert!(bed.pulls().is_empty());

    // A connection string's password, in an identifier's clothes: refused by its shape, named
    // by key and kind; its value reaches no response, issue, commit or log line (the leak check
    // reads every log of the suite for it).
    let password = "S3cr3tP4ss-Qm7v";
    leak::secret("state-sync: a database URL's password", password);
    let other = "eu-c3";
    let mut data = base_data(other, "vpc-3");
    data.push((
        "orders_db_url".into(),
        format!("postgres://admin:{password}@db.internal:5432/app"),
    ));
    bed.apply(other, &data, false).await;
    let resp = bed.invoke(bed.receive().await).await;
    let c = only_cell(&resp);
    assert_eq!(c["action"], "refused", "{resp}");
    let err = c["error"].as_str().unwrap();
    assert!(
        err.contains("`orders_db_url`")
            && err.contains("a URL with a password in its user info")
            && err.contains("output the endpoint and the ARN of the secret"),
        "{err}"
    );
    assert!(!resp.to_string().contains(password), "the value leaked: {resp}");
    assert!(bed.pulls().is_empty());
    let issues = bed.gh.issues(REPO);
    let body: String = issues.iter().map(|i| i["body"].as_str().unwrap_or("")).collect();
    assert!(body.contains("orders_db_url") && !body.contains(password), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_invocations_make_one_pull_request() {
    use cellbridge::adapters::github::pacing::{Limit, Pacing};
    let mut bed = Bed::new("race", false).await;
    // The race is what is tested here, not GitHub's write limits: twenty racing invocations send
    // more than the 80 content-creating requests a minute the default pacing keeps to, and one
    // paced past its deadline fails retryably (as it should, `tests/github_scenarios/requests.rs` tests
    // that) instead of racing. This process gets a larger share.
    let Syncer {
        config,
        states,
        fleet,
        queue,
        clusters,
    } = bed.service;
    let fleet = fleet.with_pacing(Pacing {
        limits: vec![Limit {
            count: 10_000,
            window: Duration::from_secs(60),
        }],
    });
    bed.service = Syncer {
        config,
        states,
        fleet,
        queue,
        clusters,
    };
    let cell = "eu-c4";
    let mut events = Vec::new();
    for vpc in ["vpc-a", "vpc-b", "vpc-c"] {
        bed.apply(cell, &base_data(cell, vpc), false).await;
        events.push(bed.receive().await);
    }
    let serial = bed
        .service
        .states
        .read_latest(&bed.bucket, &Bed::key(cell))
        .await
        .unwrap()
        .0
        .serial;
    let runs = (0..20).map(|i| bed.invoke(events[i % events.len()].clone()));
    let results = futures::future::join_all(runs).await;
    for r in &results {
        assert_eq!(r["batchItemFailures"], json!([]), "{r}");
        let c = only_cell(r);
        assert!(
            ["opened", "unchanged", "updated", "stale"].contains(&c["action"].as_str().unwrap()),
            "{c}"
        );
    }
    let opened = results.iter().filter(|r| only_cell(r)["action"] == "opened").count();
    assert_eq!(opened, 1, "exactly one invocation opens the pull request");
    let state = bed.gh.state(REPO);
    let pulls = state["pulls"].as_array().unwrap();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert!(
        pulls[0]["body"]
            .as_str()
            .unwrap()
            .contains(&format!("cellbridge:serial={serial} ")),
        "the pull request holds the latest serial {serial}"
    );
    let cm = state["files"][format!("cellbridge/{cell}")][format!("clusters/{cell}/cell-metadata.yaml")]
        .as_str()
        .unwrap();
    assert!(cm.contains("vpc-c"), "{cm}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn github_faults_are_retried_or_fail_cleanly() {
    // This bed authenticates as a GitHub App: every sync starts with an installation token.
    let bed = Bed::new("faults", true).await;
    let cell = "eu-c5";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let event = bed.receive().await;

    // 5xx on the branch creation and a secondary rate limit on the pull request: retried.
    bed.gh
        .fault(json!({"match": "POST /repos/*/git/refs", "status": 502, "times": 2}));
    bed.gh
        .fault(json!({"match": "POST /repos/*/pulls", "secondary_rate_limit": true, "retry_after": 1, "times": 1}));
    bed.gh.clear_requests();
    let t = Instant::now();
    let c = only_cell(&bed.invoke(event.clone()).await);
    assert_eq!(c["action"], "opened", "{c}");
    assert!(t.elapsed() >= Duration::from_secs(1), "Retry-After was honoured");
    let log = bed.gh.requests();
    let reqs = log["requests"].as_array().unwrap();
    assert!(
        reqs.iter()
            .any(|r| r["path"].as_str().unwrap().starts_with("/app/installations/")),
        "an installation token was minted"
    );
    let app_calls = |suffix: &str| {
        reqs.iter()
            .filter(|r| {
                let p = r["path"].as_str().unwrap();
                p.starts_with("/app/installations/") && p.ends_with(suffix)
            })
            .count()
    };
    assert_eq!(
        app_calls("/access_tokens"),
        1,
        "one installation token, reused by every request; its answer is the permission check"
    );
    assert_eq!(
        app_calls("/777"),
        0,
        "the installation's permissions are read only to name what a refused token lacks"
    );
    assert_eq!(
        reqs.iter()
            .filter(|r| r["method"] == "POST" && r["path"].as_str().unwrap().ends_with("/git/refs"))
            .count(),
        3
    );
    assert_eq!(bed.pulls().len(), 1);

    // GitHub down for longer than the function has: a clean, retryable failure, no write.
    bed.apply(cell, &base_data(cell, "vpc-2"), false).await;
    let event2 = bed.receive().await;
    bed.gh
        .fault(json!({"match": "GET /repos/*/tarball/*", "status": 503, "times": 1000}));
    bed.gh.clear_requests();
    let resp = bed.invoke_with(event2.clone(), 6).await.unwrap();
    let c = only_cell(&resp);
    assert_eq!(c["action"], "failed", "{resp}");
    assert_eq!(c["retryable"], true);
    let failed = resp["batchItemFailures"].as_array().unwrap();
    assert!(!failed.is_empty(), "the record goes back to SQS: {resp}");
    assert_eq!(bed.counts().2, 0, "nothing written: {}", bed.gh.requests());
    bed.gh.clear_faults();

    // GitHub hangs: the request is abandoned before the deadline, the record goes back. The
    // first request after the archive is the cell's reading (GraphQL).
    bed.gh
        .fault(json!({"match": "POST /graphql", "delay_ms": 8000, "times": 1}));
    let t = Instant::now();
    let resp = bed.invoke_with(event2.clone(), 5).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "answered within the deadline");
    assert_eq!(only_cell(&resp)["retryable"], true, "{resp}");
    assert!(!resp["batchItemFailures"].as_array().unwrap().is_empty(), "{resp}");
    bed.gh.clear_faults();

    // Another writer moves the cell's branch just before the update: redone on the fresh base.
    bed.gh.fault(json!({"match": "PATCH /repos/*/git/refs/heads/cellbridge/*", "times": 1, "lose_race": {"ref": format!("heads/cellbridge/{cell}"), "files": {"NOTE.md": "someone else\n"}}}));
    let c = only_cell(&bed.invoke(event2.clone()).await);
    assert_eq!(c["action"], "updated", "{c}");
    assert!(c["attempts"].as_u64().unwrap() >= 2, "{c}");

    // The base branch moves too: the next sync still converges, one pull request, latest data.
    bed.gh.commit(
        REPO,
        "main",
        &[("apps/base/NOTE.md", Some("unrelated\n"))],
        "unrelated change",
    );
    bed.apply(cell, &base_data(cell, "vpc-3"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "updated", "{c}");
    let state = bed.gh.state(REPO);
    let pulls = state["pulls"].as_array().unwrap();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0]["state"], "open");
    let branch = &state["files"][format!("cellbridge/{cell}")];
    assert!(
        branch[format!("clusters/{cell}/cell-metadata.yaml")]
            .as_str()
            .unwrap()
            .contains("vpc-3")
    );
    assert!(
        branch["apps/base/NOTE.md"].is_string(),
        "the branch carries the fresh base"
    );
}

/// A token rotated in Secrets Manager while the function was warm: the refused token is
/// dropped, the secret read again, and the sync goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_token_is_read_again() {
    let bed = Bed::new("rotation", false).await;
    let cell = "eu-c8";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "opened", "{c}");

    let rotated = "ghp_rotated_token_9876543210";
    leak::secret("state-sync: rotated GitHub token", rotated);
    bed.gh.token(rotated, false);
    bed.gh.token(TOKEN, true);
    let conf = moto::sdk_config().await;
    aws_sdk_secretsmanager::Client::new(&conf)
        .put_secret_value()
        .secret_id("cellbridge/github-rotation")
        .secret_string(json!({"token": rotated}).to_string())
        .send()
        .await
        .unwrap();
    bed.apply(cell, &base_data(cell, "vpc-2"), false).await;
    let resp = bed.invoke(bed.receive().await).await;
    assert_eq!(only_cell(&resp)["action"], "updated", "{resp}");
    assert!(!resp.to_string().contains(rotated) && !resp.to_string().contains(TOKEN));
}
