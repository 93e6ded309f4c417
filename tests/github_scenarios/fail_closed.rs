//! Fail closed, on both GitHubs: a merge state whose answer cannot be read (an enum value GitHub
//! added since) never lets a reviewer's head merge through cellbridge's auto-merge and leaves no
//! passing status on it; GitHub's own failure inside an answer of HTTP 200 is retried, never a
//! refused state; an error of a kind cellbridge does not know is asked again twice, then final,
//! never a refused state; a merge whose answer was lost reads back merged. While the merge state
//! stays unreadable, the fleet dashboard shows GitHub's failure and since when, never a failing
//! strict check.

use super::support::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::pure::plan::STATUS_CONTEXT;

fn now() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

/// The state was not reported refused anywhere: no issue, no contract status.
fn nothing_refused<B: Bed>(w: &World<B>, r: &serde_json::Value) {
    assert!(r.get("reported").is_none(), "{r}");
    assert!(w.bed.issues(w.repo()).is_empty());
    for p in w.pulls() {
        if let Some(head) = w.head(&p.head) {
            assert!(
                w.statuses(&head).iter().all(|s| s.context != "cellbridge/contract"),
                "{p:?}"
            );
        }
    }
}

async fn an_unreadable_merge_state_never_merges_a_reviewers_head<B: Bed>() {
    let w = opted_in(World::<B>::start(), "cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let pushed = w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/extra-layer.yaml"), "# a reviewer's layer\n")],
        "a reviewer adds a layer",
    );
    w.bed.ci(w.repo(), &pushed, CI, true);

    w.bed.merge_state_unknown_enum(w.repo());
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    assert!(r["error"].as_str().unwrap().contains("QUEUED"), "{r}");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.merged, "{pr:?}");
    assert_eq!(
        w.bed.auto_merge(w.repo(), n),
        (None, None),
        "cellbridge's auto-merge is off"
    );
    let ours: Vec<Status> = w
        .statuses(&pushed)
        .into_iter()
        .filter(|s| s.context == STATUS_CONTEXT)
        .collect();
    assert!(ours.len() == 1 && ours[0].pending, "{ours:?}");
    nothing_refused(&w, &r);

    // While it lasts, the dashboard shows GitHub's failure and since when, never a failing check.
    let (before, _) = (now(), w.dashboard().await);
    let body = w.dashboards().remove(0).body;
    let row = body
        .lines()
        .find(|l| l.starts_with(&format!("| `{CELL}` | pending |")))
        .unwrap_or_else(|| panic!("{body}"));
    let since = row
        .split("GitHub failed: the merge state could not be read, since ")
        .nth(1)
        .unwrap_or_else(|| panic!("{row}"));
    let since = cellbridge::pure::bootstrap::record::parse_time(&since[..20]).unwrap_or_else(|| panic!("{row}"));
    assert!(
        since <= before && before.duration_since(since).unwrap().as_secs() < 600,
        "{row}"
    );
    assert!(!row.contains("strict check fails"), "{row}");

    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "unchanged", "{r}");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.merged, "{pr:?}");
}

/// A 5xx on the merge state after a reviewer's push: the answer names no pull request, and
/// cellbridge's own auto-merge goes all the same, by the node id the run read the pull request
/// by; the reviewer's head is pending, nothing merges, the cell is retried.
async fn a_5xx_on_the_merge_state_turns_cellbridges_auto_merge_off<B: Bed>() {
    let w = opted_in(World::<B>::start(), "cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(
        w.bed.auto_merge(w.repo(), n).0.is_some(),
        "cellbridge's auto-merge is on"
    );
    let pushed = w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/extra-layer.yaml"), "# a reviewer's layer\n")],
        "a reviewer adds a layer",
    );
    w.bed.ci(w.repo(), &pushed, CI, true);

    w.bed
        .graphql_server_error(w.repo(), &ops::GRAPHQL_MERGE_STATE.as_operation());
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(true)), "{r}");
    assert_eq!(
        w.bed.auto_merge(w.repo(), n),
        (None, None),
        "cellbridge's auto-merge is off: {r}"
    );
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.merged, "{pr:?}");
    let ours: Vec<Status> = w
        .statuses(&pushed)
        .into_iter()
        .filter(|s| s.context == STATUS_CONTEXT)
        .collect();
    assert!(ours.len() == 1 && ours[0].pending, "{ours:?}");
    nothing_refused(&w, &r);
}

async fn githubs_own_failures_inside_an_answer_are_retried_and_never_a_refused_state<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    w.bed
        .graphql_untyped_error(w.repo(), &ops::GRAPHQL_CELL_READING.as_operation(), 1);
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(true)), "{r}");
    nothing_refused(&w, &r);

    w.bed
        .graphql_unknown_error(w.repo(), &ops::GRAPHQL_CELL_READING.as_operation(), 3);
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    assert!(r["error"].as_str().unwrap().contains("INSUFFICIENT_SCOPES"), "{r}");
    nothing_refused(&w, &r);

    w.bed
        .graphql_unknown_error(w.repo(), &ops::GRAPHQL_CELL_READING.as_operation(), 2);
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "answered on the third send: {r}");
    w.assert_checked(CELL);
    nothing_refused(&w, &r);
}

async fn a_merge_whose_answer_was_lost_reads_back_merged<B: Bed>() {
    let w = opted_in(World::<B>::start(), "cells: [eu-c1]\n").await;
    w.apply(CELL, 2, "vpc-2");
    w.bed.merge_answer_lost(w.repo());
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "merged"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged && !pr.body.contains("refused to merge"), "{pr:?}");
    assert!(w.metadata_on("main", CELL).contains("vpc-2"));
    assert_eq!(action(&w.deliver(CELL).await), "in-sync");
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        an_unreadable_merge_state_never_merges_a_reviewers_head,
        githubs_own_failures_inside_an_answer_are_retried_and_never_a_refused_state,
        a_merge_whose_answer_was_lost_reads_back_merged,
    ]
);

// The client's six tries of a 5xx cost about eight seconds of backoff on an HTTP double: once,
// on GitHub.com's (the Enterprise Server's reads the pull request the same way).
mod no_data {
    use super::*;
    scenarios!(
        mem_github: super::super::MemBed,
        http_fake: super::super::HttpBed;
        [a_5xx_on_the_merge_state_turns_cellbridges_auto_merge_off]
    );
}
