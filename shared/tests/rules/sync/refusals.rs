//! state-sync: refusals and how they are told. A refused state opens nothing and names the key, not
//! the value; two workspaces claiming one cell are refused naming both keys; a refused state fails the
//! open pull request's `cellbridge/contract` status and comments once per reason, else one
//! `cellbridge-refused` issue per cell rewritten in place (a racing duplicate closed, closed by the
//! next good state); GitHub refusing cellbridge's access (401, 403, 404, an installation missing a
//! permission, a permission revoked after the check) is named and never reported on GitHub; paused
//! from the fleet repo, a refusal is not reported.

use crate::support::sync::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::Fault;
use serde_json::json;

#[tokio::test]
async fn a_refused_state_opens_nothing_and_names_the_key_not_the_value() {
    let bed = bed();
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let text = state("eu-c1", 1, "vpc-1").replace("\"podinfo_replicas\":\"2\"", &format!("\"api_token\":\"{secret}\""));
    assert!(text.contains(secret));
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", text);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "refused", "{r}");
    assert!(r["error"].as_str().unwrap().contains("api_token"), "{r}");
    assert!(!r.to_string().contains(secret));
    // Nothing of the cell is written: no branch, no pull request; only the report's issue.
    assert_eq!(bed.fleet.head(&branch("eu-c1")), None);
    assert!(bed.fleet.pulls().is_empty());
    assert_eq!(
        bed.fleet
            .calls()
            .iter()
            .filter(|c| **c == ops::ISSUES_CREATE.id)
            .count(),
        1
    );
    assert_eq!(bed.fleet.writes(), 1, "{:?}", bed.fleet.calls());
}

#[tokio::test]
async fn two_workspaces_claiming_one_cell_are_refused_naming_both_keys() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    let other = state("eu-c1", 9, "vpc-9").replace(LINEAGE, "0e0e0e0e-0000-4000-8000-00000000beef");
    let key = "env:/staging/cells/eu-c1/terraform.tfstate";
    bed.states.put(BUCKET, key, other);
    let inv = crate::support::handle(
        &bed,
        &json!({"action": "sync", "bucket": BUCKET, "key": key}),
        deadline(),
    )
    .await
    .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(r["action"], "refused", "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(e.contains(key) && e.contains("cells/eu-c1/terraform.tfstate"), "{e}");
    assert!(
        bed.fleet.files(&branch("eu-c1"))[CM].contains("vpc-1"),
        "the pull request is not flipped"
    );
    // Told on the pull request: its head's contract status fails, one comment names the key.
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_eq!(r["reported"]["on"], "pull-request", "{r}");
    assert_eq!(contract_statuses(&bed, &head).last().map(|c| c.0), Some(false));
    assert!(
        bed.fleet.pulls()[0].comments[0].contains(key),
        "{:?}",
        bed.fleet.pulls()[0].comments
    );
    // The owner's state, synced again, holds what the pull request has: nothing is committed,
    // the contract status is back to success and the marker gone; said once.
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "unchanged", "{r}");
    assert_eq!(bed.fleet.head(&branch("eu-c1")).unwrap(), head);
    assert_eq!(contract_statuses(&bed, &head).last().map(|c| c.0), Some(true));
    assert!(!bed.fleet.pulls()[0].body.contains("refused="));
    let writes = bed.fleet.writes();
    sync(&bed, "eu-c1").await;
    assert_eq!(bed.fleet.writes(), writes);
}

fn contract_statuses(bed: &Bed, commit: &str) -> Vec<(bool, String)> {
    bed.fleet
        .statuses(commit)
        .into_iter()
        .filter(|s| s.context == cellbridge::rules::report::CONTRACT_CONTEXT)
        .map(|s| (s.success, s.description))
        .collect()
}

#[tokio::test]
async fn a_refused_state_fails_the_open_pull_requests_contract_status_and_comments_once_per_reason() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
    let (text, secret) = secret_state("eu-c1", 2);
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", text);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "refused", "{r}");
    assert_eq!(r["reported"]["on"], "pull-request", "{r}");
    assert_eq!(r["reported"]["number"], 1, "{r}");
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    let contract = contract_statuses(&bed, &head);
    assert_eq!(contract.len(), 1, "{contract:?}");
    assert!(!contract[0].0 && contract[0].1.contains("api_token"), "{contract:?}");
    let pr = &bed.fleet.pulls()[0];
    assert_eq!(pr.comments.len(), 1);
    assert!(
        pr.comments[0].contains("api_token") && pr.comments[0].contains("eu-c1"),
        "{}",
        pr.comments[0]
    );
    for told in [&pr.comments[0], &pr.body, &contract[0].1] {
        assert!(!told.contains(secret), "a value reached GitHub: {told}");
    }
    assert!(
        bed.fleet.files(&branch("eu-c1"))[CM].contains("vpc-1"),
        "the values stay"
    );
    assert_eq!(
        bed.fleet.head(&branch("eu-c1")).unwrap(),
        head,
        "no commit for a refused state"
    );

    // The same event again: everything is already said.
    let writes = bed.fleet.writes();
    assert_eq!(sync(&bed, "eu-c1").await["action"], "refused");
    assert_eq!(bed.fleet.writes(), writes, "{:?}", bed.fleet.calls());

    // Another reason: one more comment, the status says the new reason.
    let other = state("eu-c1", 3, "vpc-1").replace("\"cell_name\":\"eu-c1\"", "\"cell_name\":\"eu-c2\"");
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", other);
    assert_eq!(sync(&bed, "eu-c1").await["action"], "refused");
    assert_eq!(bed.fleet.pulls()[0].comments.len(), 2);
    assert!(contract_statuses(&bed, &head).last().unwrap().1.contains("cell_name"));

    // A good state: the pull request is updated and its new head's contract status succeeds.
    apply(&bed, "eu-c1", 4, "vpc-4");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "updated", "{r}");
    let new_head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_eq!(
        contract_statuses(&bed, &new_head),
        [(true, cellbridge::rules::pull_request::CONTRACT_KEPT.to_owned())]
    );
    let pr = &bed.fleet.pulls()[0];
    assert_eq!(pr.comments.len(), 2, "a good state adds no comment");
    assert!(!pr.body.contains("refused="), "{}", pr.body);
    // And from then on it is as any pull request: the same state writes nothing.
    let writes = bed.fleet.writes();
    assert_eq!(sync(&bed, "eu-c1").await["action"], "unchanged");
    assert_eq!(bed.fleet.writes(), writes);
}

#[tokio::test]
async fn a_refused_cell_without_a_pull_request_gets_one_issue_updated_in_place_and_closed_by_the_next_good_state() {
    use cellbridge::rules::report::LABEL_REFUSED;
    let bed = bed();
    let (text, secret) = secret_state("eu-c1", 1);
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", text);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["reported"]["on"], "issue", "{r}");
    assert_eq!(r["reported"]["created"], true, "{r}");
    let issues = bed.fleet.issues();
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].labels, [LABEL_REFUSED]);
    assert!(
        issues[0].title.contains("eu-c1") && issues[0].body.contains("api_token"),
        "{:?}",
        issues[0]
    );
    assert!(issues[0].body.contains("cells/eu-c1/terraform.tfstate"));
    assert!(!issues[0].body.contains(secret));

    // Replayed: nothing written. Another reason: the same issue, its body rewritten.
    let writes = bed.fleet.writes();
    assert_eq!(sync(&bed, "eu-c1").await["reported"]["created"], false);
    assert_eq!(bed.fleet.writes(), writes);
    let other = state("eu-c1", 2, "vpc-1").replace("\"cell_name\":\"eu-c1\"", "\"cell_name\":\"eu-c2\"");
    bed.states.put(BUCKET, "cells/eu-c1/terraform.tfstate", other);
    sync(&bed, "eu-c1").await;
    let issues = bed.fleet.issues();
    assert_eq!(issues.len(), 1, "updated in place");
    assert!(
        issues[0].body.contains("cell_name") && !issues[0].body.contains("api_token"),
        "{}",
        issues[0].body
    );

    // Another cell's refusal has an issue of its own, which this cell's good state leaves open.
    bed.states
        .put(BUCKET, "cells/eu-c2/terraform.tfstate", secret_state("eu-c2", 1).0);
    sync(&bed, "eu-c2").await;
    apply(&bed, "eu-c1", 3, "vpc-3");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    let first = bed.fleet.issues()[0].number;
    assert_eq!(r["resolved_issues"], json!([first]), "{r}");
    let issues = bed.fleet.issues();
    assert_eq!(
        issues
            .iter()
            .map(|i| (i.open, i.title.contains("eu-c2")))
            .collect::<Vec<_>>(),
        [(false, false), (true, true)]
    );
    assert_eq!(bed.fleet.pulls().len(), 1);
    assert_ne!(
        bed.fleet.pulls()[0].number,
        first,
        "issues and pull requests share numbers"
    );
}

#[tokio::test]
async fn a_duplicate_refused_issue_left_by_a_race_is_closed() {
    use cellbridge::ports::github::Issues as _;
    let bed = bed();
    bed.states
        .put(BUCKET, "cells/eu-c1/terraform.tfstate", secret_state("eu-c1", 1).0);
    sync(&bed, "eu-c1").await;
    let body = bed.fleet.issues()[0].body.clone();
    // What a second run, racing the first, would have opened.
    bed.fleet
        .create_issue("dup", &body, &["cellbridge-refused".into()], deadline())
        .await
        .unwrap();
    sync(&bed, "eu-c1").await;
    let issues = bed.fleet.issues();
    assert_eq!(issues.iter().map(|i| i.open).collect::<Vec<_>>(), [true, false]);
    assert!(issues[1].body.contains(&format!("Duplicate of #{}", issues[0].number)));
    // Closed as GitHub's "duplicate", not "completed": the refusal it reported still stands.
    assert_eq!(bed.fleet.issue_state_reason(issues[1].number), Some("duplicate"));
    // The next good state closes the one kept as resolved.
    apply(&bed, "eu-c1", 2, "vpc-1");
    sync(&bed, "eu-c1").await;
    assert_eq!(bed.fleet.issue_state_reason(issues[0].number), Some("completed"));
}

/// GitHub refusing cellbridge's access (a 403 "Resource not accessible", a 401, a 404) is a
/// metric, not a report: GitHub would refuse the report too.
#[tokio::test]
async fn githubs_refusal_of_access_is_not_reported_on_github() {
    for status in [401, 403, 404] {
        let bed = bed();
        apply(&bed, "eu-c1", 1, "vpc-1");
        bed.fleet.fail(&ops::GIT_CREATE_TREE, 1, Fault::Status(status));
        let r = sync(&bed, "eu-c1").await;
        assert_eq!(
            (r["action"].as_str(), r["retryable"].as_bool()),
            (Some("failed"), Some(false)),
            "{r}"
        );
        assert!(r.get("reported").is_none(), "{r}");
        assert!(bed.fleet.issues().is_empty() && bed.fleet.pulls().is_empty());
    }
}

#[tokio::test]
async fn an_installation_missing_a_permission_is_refused_before_any_write_naming_it() {
    let bed = bed();
    bed.fleet.grant(&[
        ("metadata", "read"),
        ("contents", "write"),
        ("pull_requests", "write"),
        ("issues", "write"),
        ("statuses", "read"),
    ]);
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    let e = r["error"].as_str().unwrap();
    assert!(e.contains("statuses=write") && e.contains("statuses=read"), "{e}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert!(r.get("reported").is_none());

    // Granted: the next event opens the pull request.
    bed.fleet.grant(&[
        ("metadata", "read"),
        ("contents", "write"),
        ("pull_requests", "write"),
        ("issues", "write"),
        ("statuses", "write"),
    ]);
    assert_eq!(sync(&bed, "eu-c1").await["action"], "opened");
}

#[tokio::test]
async fn a_permission_revoked_after_the_check_is_named_by_the_403() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    // A token (GitHub cannot tell its permissions beforehand) that lost statuses=write.
    bed.fleet.fail(&ops::REPOS_CREATE_COMMIT_STATUS, 1, Fault::Status(403));
    apply(&bed, "eu-c1", 2, "vpc-2");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["retryable"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("403"), "{r}");
    // The next event, the permission back, completes the update without another commit (the
    // commit was already the pull request's head, so nothing is "updated" by this run).
    let head = bed.fleet.head(&branch("eu-c1")).unwrap();
    assert_eq!(sync(&bed, "eu-c1").await["action"], "unchanged");
    assert_eq!(
        bed.fleet.head(&branch("eu-c1")).unwrap(),
        head,
        "no second commit for one change"
    );
    assert!(
        bed.fleet.statuses(&head).iter().any(|s| s.success),
        "the status is there now"
    );
    assert!(bed.fleet.pulls()[0].body.contains(&format!("head={head}")));
}

#[tokio::test]
async fn paused_from_the_fleet_repo_a_refusal_is_not_reported() {
    let bed = bed();
    bed.fleet
        .commit("main", &[(".cellbridge/settings.yaml", "paused: true\n")], "pause");
    bed.states
        .put(BUCKET, "cells/eu-c1/terraform.tfstate", secret_state("eu-c1", 1).0);
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "refused", "{r}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
}
