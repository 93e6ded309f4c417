//! Refusals as a user sees them: a refused state opens no pull request and is reported in one
//! issue, or fails the open pull request's contract status until a good state; many cells' refusals
//! list the refused issues once (both GitHubs). On the HTTP fake only, GitHub's permissions: an App
//! installation missing a permission is refused before any write, naming it; a fine-grained token's
//! 403 names the permission GitHub gives; an App not installed is an access failure, not a report; a
//! refusal in a repository without issues is answered with why it was not reported.

use super::support::*;
use cellbridge::adapters::github::Credentials;
use cellbridge::pure::redact::Secret;
use cellbridge_tests::leak;
use serde_json::{Value, json};

/// g. A refused state (a value that looks like a secret; no `cell_name`) opens no pull request
/// and writes nothing of the cell; with no pull request open, it is reported in one issue per
/// cell, labelled `cellbridge-refused`, naming the key and never the value. Replayed, nothing is
/// written; the cell's next good state opens its pull request and closes the issue.
async fn a_refused_state_opens_no_pull_request_and_is_reported_in_one_issue<B: Bed>() {
    let w = World::<B>::start();
    let mut meta = metadata(CELL, "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(1, meta));
    let mut nameless = metadata("eu-c2", "vpc-1");
    nameless.as_object_mut().unwrap().remove("cell_name");
    w.put_state("eu-c2", state_with(1, nameless));

    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("refused", Some(false)), "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("api_token"), "names the key: {r}");
    assert!(!r.to_string().contains(PLANTED_SECRET), "never the value: {r}");
    assert_eq!(
        (r["reported"]["on"].as_str(), r["reported"]["created"].as_bool()),
        (Some("issue"), Some(true)),
        "{r}"
    );

    let r = w.deliver("eu-c2").await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("refused", Some(false)), "{r}");
    assert!(r["error"].as_str().unwrap().contains("cell_name"), "{r}");

    assert!(w.pulls().is_empty());
    assert_eq!(w.head(&branch(CELL)), None);
    let issues = w.bed.issues(w.repo());
    assert_eq!(issues.len(), 2, "{issues:?}");
    for (issue, (cell, key)) in issues.iter().zip([(CELL, "api_token"), ("eu-c2", "cell_name")]) {
        assert!(issue.open && issue.labels == ["cellbridge-refused"], "{issue:?}");
        assert!(issue.title.contains(cell) && issue.body.contains(key), "{issue:?}");
        assert!(!issue.body.contains(PLANTED_SECRET));
    }

    let writes = w.writes();
    assert_eq!(w.deliver(CELL).await["reported"]["created"], false);
    assert_eq!(w.writes(), writes, "replayed: nothing written");

    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(r["resolved_issues"], json!([issues[0].number]), "{r}");
    let issues = w.bed.issues(w.repo());
    assert_eq!(
        issues.iter().map(|i| i.open).collect::<Vec<_>>(),
        [false, true],
        "{issues:?}"
    );
    w.assert_checked(CELL);
}

/// h. A refused state of a cell whose pull request is open: its head gets a failing
/// `cellbridge/contract` status and one comment naming the key (never the value); the values
/// stay; the next good state sets the status back to success on the head it writes.
async fn a_refused_state_fails_the_pull_requests_contract_status_until_a_good_state<B: Bed>() {
    use cellbridge::rules::report::CONTRACT_CONTEXT;
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let head = w.head(&branch(CELL)).unwrap();
    let mut meta = metadata(CELL, "vpc-9");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(2, meta));
    for _ in 0..2 {
        let r = w.deliver(CELL).await;
        assert_eq!(
            (action(&r), r["reported"]["on"].as_str()),
            ("refused", Some("pull-request")),
            "{r}"
        );
    }
    let contract: Vec<Status> = w
        .statuses(&head)
        .into_iter()
        .filter(|s| s.context == CONTRACT_CONTEXT)
        .collect();
    assert_eq!(contract.len(), 1, "posted once: {contract:?}");
    assert!(
        !contract[0].success && contract[0].description.contains("api_token"),
        "{contract:?}"
    );
    let pr = &w.open_pulls()[0];
    assert_eq!(pr.comments.len(), 1, "{pr:?}");
    assert!(pr.comments[0].contains("api_token") && !pr.comments[0].contains(PLANTED_SECRET));
    assert!(!pr.body.contains(PLANTED_SECRET));
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-1"), "the values stay");

    w.apply(CELL, 3, "vpc-3");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let new_head = w.head(&branch(CELL)).unwrap();
    let contract: Vec<Status> = w
        .statuses(&new_head)
        .into_iter()
        .filter(|s| s.context == CONTRACT_CONTEXT)
        .collect();
    assert_eq!(
        contract.iter().map(|s| s.success).collect::<Vec<_>>(),
        [true],
        "{contract:?}"
    );
    assert_eq!(w.open_pulls()[0].comments.len(), 1);
}

/// Refused states of many cells in one invocation (an SQS batch) list the `cellbridge-refused`
/// issues once, whatever the number of cells, and each cell gets its own issue.
async fn refused_states_of_many_cells_list_the_refused_issues_once<B: Bed>() {
    let w = World::<B>::start();
    let cells: Vec<String> = (1..=6).map(|i| format!("eu-r{i}")).collect();
    for c in &cells {
        let mut meta = metadata(c, "vpc-1");
        meta["api_token"] = json!(PLANTED_SECRET);
        w.put_state(c, state_with(1, meta));
    }
    let records: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": json!({
                "source": "aws.s3", "detail-type": "Object Created",
                "detail": {"bucket": {"name": BUCKET}, "object": {"key": format!("cells/{c}/terraform.tfstate")}},
            }).to_string()})
        })
        .collect();
    let listed = w.bed.issue_listings(w.repo());
    let inv = w.handle(json!({ "Records": records })).await;
    let reported: Vec<&Value> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reported"]["on"] == "issue")
        .collect();
    assert_eq!(reported.len(), cells.len(), "{}", inv.response);
    assert_eq!(w.bed.issue_listings(w.repo()) - listed, 1, "one listing for the batch");
    let issues = w.bed.issues(w.repo());
    for c in &cells {
        assert_eq!(
            issues.iter().filter(|i| i.open && i.title.contains(c.as_str())).count(),
            1,
            "{issues:?}"
        );
    }
}

#[tokio::test]
async fn http_an_app_installation_missing_a_permission_is_refused_before_any_write_naming_it() {
    let w = http_world(app_credentials);
    w.bed.gh.set_app(json!({"permissions": {
        "metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "statuses": "read",
    }}));
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(
        e.contains("lacks the repository permission statuses=write") && e.contains("statuses=read"),
        "{e}"
    );
    assert_eq!(repo_writes(&w), 0, "nothing written: {}", w.bed.gh.requests());
    assert!(
        r.get("reported").is_none(),
        "access failures are not reported on GitHub: {r}"
    );

    // The administrator grants it: the next event opens the pull request.
    w.bed.gh.set_app(json!({"permissions": {
        "metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "statuses": "write",
    }}));
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.assert_checked(CELL);
}

#[tokio::test]
async fn http_a_fine_grained_token_missing_a_permission_fails_naming_the_one_github_gives() {
    const FINE: &str = "github_pat_11AAAAAAA0123456789_scenarioFineGrainedTokenWithoutStatuses";
    let w = http_world(|gh| {
        leak::secret("github_scenarios: fine-grained token", FINE);
        gh.fine_grained_token(
            FINE,
            json!({"metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write"}),
        );
        Credentials::Token(Secret::new(FINE.to_owned()))
    });
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(
        e.contains("HTTP 403") && e.contains("lack the repository permission statuses=write"),
        "{e}"
    );
    assert!(r.get("reported").is_none(), "{r}");
    assert!(w.bed.issues(w.repo()).is_empty() && w.pulls().is_empty());
}

#[tokio::test]
async fn http_an_app_not_installed_on_the_repository_is_an_access_failure_not_a_report() {
    let w = http_world(app_credentials);
    w.bed.gh.set_app(json!({"repositories": ["acme/another-repo"]}));
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("cannot reach repository acme/fleet"),
        "{r}"
    );
    assert_eq!(repo_writes(&w), 0);
}

/// A repository whose issues are turned off answers 410 to the refused issue
/// (https://docs.github.com/rest/issues/issues#create-an-issue): the refusal stands, is not
/// redelivered, and the report's failure is in the answer; nothing else is written.
#[tokio::test]
async fn http_a_refusal_in_a_repository_without_issues_is_answered_with_why_it_was_not_reported() {
    let w = World::<HttpBed>::start();
    w.bed.gh.disable_issues(REPO);
    let mut meta = metadata(CELL, "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(1, meta));
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("refused", Some(false)), "{r}");
    assert!(r.get("reported").is_none(), "{r}");
    assert!(r["report_error"].as_str().unwrap().contains("410"), "{r}");
    assert!(w.bed.issues(w.repo()).is_empty() && w.pulls().is_empty());
    assert_eq!(repo_writes(&w), 1, "the one refused attempt: {}", w.bed.gh.requests());
}

/// A cell's refused issue past the first hundred open `cellbridge-refused` issues (a fleet with
/// many refused cells) is still found when the cell's next good state opens its pull request,
/// and closed: the cell's reading pages the issues.
async fn a_refused_issue_past_the_first_hundred_is_closed_by_the_next_good_state<B: Bed>() {
    let w = World::<B>::start();
    for i in 0..120 {
        let other = format!("eu-x{i}");
        w.bed.open_issue(
            w.repo(),
            &format!("cellbridge refused the Terraform state of cell {other}"),
            &format!("<!-- cellbridge:refused-cell={other} -->\n\nrefused"),
            &["cellbridge-refused"],
        );
    }
    let mut meta = metadata(CELL, "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(1, meta));
    let r = w.deliver(CELL).await;
    assert_eq!(r["reported"]["on"], "issue", "{r}");
    let mine = w
        .bed
        .issues(w.repo())
        .into_iter()
        .find(|i| i.title.contains(CELL))
        .unwrap();
    assert!(mine.number > 120, "{mine:?}");

    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(r["resolved_issues"], json!([mine.number]), "{r}");
    let open = w.bed.issues(w.repo()).into_iter().filter(|i| i.open).count();
    assert_eq!(open, 120, "the others' issues stay open");
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        a_refused_state_opens_no_pull_request_and_is_reported_in_one_issue,
        a_refused_state_fails_the_pull_requests_contract_status_until_a_good_state,
        refused_states_of_many_cells_list_the_refused_issues_once,
        a_refused_issue_past_the_first_hundred_is_closed_by_the_next_good_state,
    ]
);
