//! Fail closed, on both GitHubs: a merge state whose answer cannot be read (an enum value GitHub
//! added since) never lets a reviewer's head merge through cellbridge's auto-merge and leaves no
//! passing status on it; GitHub's own failure inside an answer of HTTP 200 is retried, never a
//! refused state; an error of a kind cellbridge does not know is asked again twice, then final,
//! never a refused state; a merge whose answer was lost reads back merged.

use super::support::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::pure::plan::STATUS_CONTEXT;

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

    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "unchanged", "{r}");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.merged, "{pr:?}");
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
    http_ghes: super::GhesBed;
    [
        an_unreadable_merge_state_never_merges_a_reviewers_head,
        githubs_own_failures_inside_an_answer_are_retried_and_never_a_refused_state,
        a_merge_whose_answer_was_lost_reads_back_merged,
    ]
);
