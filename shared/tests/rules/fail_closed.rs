//! Fail closed on GitHub, over the in-memory GitHub: a merge state that cannot be read (a field
//! refused inside an answer of HTTP 200, a value that cannot be read, GitHub's own failure) never
//! leaves cellbridge's auto-merge on an ineligible head nor a passing status on it, and fails the
//! cell by its cause; GitHub's own failures are never a refused state; a merge whose answer was
//! lost reads back merged; an installation without `checks: read` keeps working and cellbridge
//! never merges by itself without the check runs.

use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::{Fault, MemGithub, Protection, VIEWER};
use cellbridge::ports::github::CheckState;
use serde_json::Value;

use crate::support::sync::{Bed, apply, bed, branch, sync};

const CELL: &str = "eu-c1";
const STRICT: &str = "cellbridge/strict-substitution";
const CI: &str = "ci/build";
const ROLLUP_NODE: &str = "repository.pullRequest.commits.nodes.0.commit.statusCheckRollup.contexts.nodes.1";

/// `CELL` exists on main and `.cellbridge/auto-merge.yaml` opts every cell in; the repository
/// allows auto-merge. `grant`: the App installation's permissions (`None`: a token).
async fn opted_in(grant: Option<&[(&str, &str)]>) -> Bed {
    let bed = bed();
    if let Some(g) = grant {
        bed.fleet.grant(g);
    }
    apply(&bed, CELL, 1, "vpc-1");
    assert_eq!(sync(&bed, CELL).await["action"], "opened");
    let first = bed.fleet.pulls().last().unwrap().number;
    bed.fleet.merge(first);
    bed.fleet.commit(
        "main",
        &[(".cellbridge/auto-merge.yaml", "cells: ['*']\n")],
        "opt cells in",
    );
    bed.fleet.allow_auto_merge(true);
    bed.fleet.clear_calls();
    bed
}

fn protect(gh: &MemGithub, contexts: &[&str]) {
    gh.protect_branch(
        "main",
        Some(Protection {
            contexts: contexts.iter().map(|c| c.to_string()).collect(),
            strict: false,
            approvals: 0,
        }),
    );
}

fn open_pull(gh: &MemGithub) -> cellbridge::doubles::github::MemPull {
    gh.pulls()
        .into_iter()
        .rev()
        .find(|p| p.head == branch(CELL))
        .expect("the cell's pull request")
}

fn outcome(r: &Value) -> (Option<&str>, Option<bool>) {
    (r["action"].as_str(), r["retryable"].as_bool())
}

/// Nothing of the failure was reported as a refused Terraform state.
fn nothing_refused(bed: &Bed, r: &Value) {
    assert!(r.get("reported").is_none(), "{r}");
    assert!(bed.fleet.issues().is_empty(), "{:?}", bed.fleet.issues());
    for pr in bed.fleet.pulls() {
        let head = bed.fleet.head(&pr.head).unwrap_or_default();
        assert!(
            bed.fleet
                .statuses(&head)
                .iter()
                .all(|s| s.context != "cellbridge/contract"),
            "{pr:?}"
        );
    }
}

/// A reviewer's layer pushed on an eligible pull request whose auto-merge cellbridge enabled,
/// the merge state then unreadable as `fault` says: nothing merges the reviewer's head, no
/// passing status is on it (a pending one says why), cellbridge's own auto-merge goes where
/// GitHub's answer still names the pull request, and the cell fails retryably or not by the
/// cause. The next run converges.
#[tokio::test]
async fn an_unreadable_merge_state_never_leaves_auto_merge_or_a_passing_status_on_an_ineligible_head() {
    for (fault, retryable, answered) in [
        (Fault::FieldRefused(ROLLUP_NODE), false, true),
        (
            Fault::Unreadable("mergeStateStatus \"QUEUED\" is not one cellbridge knows"),
            false,
            true,
        ),
        (Fault::Unreadable("no pullRequest in the answer"), false, true),
        (Fault::Untyped, true, false),
        (Fault::Transient, true, false),
    ] {
        let bed = opted_in(None).await;
        protect(&bed.fleet, &[STRICT, CI]);
        apply(&bed, CELL, 2, "vpc-2");
        let r = sync(&bed, CELL).await;
        assert_eq!(r["auto_merge"]["done"], "enabled", "{r}");
        let n = open_pull(&bed.fleet).number;
        let pushed = bed.fleet.commit(
            &branch(CELL),
            &[("clusters/eu-c1/extra-layer.yaml", "# a reviewer's layer\n")],
            "a reviewer adds a layer",
        );
        bed.fleet.post_check(&pushed, CI, CheckState::Passed);

        bed.fleet.fail(&ops::GRAPHQL_MERGE_STATE.as_operation(), 1, fault);
        let r = sync(&bed, CELL).await;
        assert_eq!(outcome(&r), (Some("failed"), Some(retryable)), "{fault:?}: {r}");
        let pr = open_pull(&bed.fleet);
        assert!(
            pr.open && !pr.merged,
            "{fault:?}: nothing merged the reviewer's head: {pr:?}"
        );
        let strict: Vec<_> = bed
            .fleet
            .statuses(&pushed)
            .into_iter()
            .filter(|s| s.context == STRICT)
            .collect();
        assert!(
            strict.len() == 1 && strict[0].pending && strict[0].description.starts_with("not verified"),
            "{fault:?}: {strict:?}"
        );
        if answered {
            assert!(
                pr.auto_merge.is_none(),
                "{fault:?}: cellbridge's auto-merge is off: {pr:?}"
            );
        }
        nothing_refused(&bed, &r);

        // GitHub answers again: the head is judged, cellbridge's auto-merge is off, its status is
        // its check's, and the ineligible head waits for a person.
        let r = sync(&bed, CELL).await;
        assert_eq!(r["action"], "unchanged", "{fault:?}: {r}");
        let pr = open_pull(&bed.fleet);
        assert!(pr.open && !pr.merged && pr.auto_merge.is_none(), "{fault:?}: {pr:?}");
        assert!(
            bed.fleet
                .statuses(&pushed)
                .iter()
                .any(|s| s.context == STRICT && s.success),
            "{fault:?}"
        );
        assert_eq!(pr.number, n);
    }
}

/// An eligible head whose merge state cannot be read when cellbridge would turn auto-merge on:
/// not turned on, the head's passing status replaced by a pending one, the cell failed.
#[tokio::test]
async fn an_unreadable_merge_state_never_turns_auto_merge_on() {
    let bed = opted_in(None).await;
    protect(&bed.fleet, &[STRICT, CI]);
    apply(&bed, CELL, 2, "vpc-2");
    bed.fleet.fail(
        &ops::GRAPHQL_MERGE_STATE.as_operation(),
        1,
        Fault::FieldRefused(ROLLUP_NODE),
    );
    let r = sync(&bed, CELL).await;
    assert_eq!(outcome(&r), (Some("failed"), Some(false)), "{r}");
    let pr = open_pull(&bed.fleet);
    assert!(pr.auto_merge.is_none() && pr.open, "{pr:?}");
    let head = bed.fleet.head(&branch(CELL)).unwrap();
    bed.fleet.post_check(&head, CI, CheckState::Passed);
    assert!(!open_pull(&bed.fleet).merged);
    let newest = bed
        .fleet
        .statuses(&head)
        .into_iter()
        .find(|s| s.context == STRICT)
        .unwrap();
    assert!(newest.pending && !newest.success, "{newest:?}");
    nothing_refused(&bed, &r);
    // Read again: every requirement met (the CI passed), so cellbridge merges the head it checked.
    let r = sync(&bed, CELL).await;
    assert_eq!(r["auto_merge"]["done"], "merged", "{r}");
}

/// GitHub's own failures inside answers of HTTP 200: "Something went wrong while executing your
/// query" is retryable, an error of a kind cellbridge does not know is asked again twice and then
/// final; neither (nor a final 422) is ever reported as a refused state, and a clean run after
/// converges.
#[tokio::test]
async fn githubs_own_failures_are_never_a_refused_state() {
    let bed = bed();
    apply(&bed, CELL, 1, "vpc-1");
    bed.fleet
        .fail(&ops::GRAPHQL_CELL_READING.as_operation(), 1, Fault::Untyped);
    let r = sync(&bed, CELL).await;
    assert_eq!(outcome(&r), (Some("failed"), Some(true)), "{r}");
    assert!(r["error"].as_str().unwrap().contains("Something went wrong"), "{r}");
    nothing_refused(&bed, &r);

    bed.fleet.clear_calls();
    bed.fleet
        .fail(&ops::GRAPHQL_CELL_READING.as_operation(), 3, Fault::UnknownType);
    let r = sync(&bed, CELL).await;
    assert_eq!(outcome(&r), (Some("failed"), Some(false)), "{r}");
    let reads = bed
        .fleet
        .calls()
        .iter()
        .filter(|c| **c == ops::GRAPHQL_CELL_READING.id)
        .count();
    assert_eq!(reads, 3, "sent, then asked again twice: {:?}", bed.fleet.calls());
    nothing_refused(&bed, &r);

    bed.fleet.fail(&ops::PULLS_CREATE, 1, Fault::Status(422));
    let r = sync(&bed, CELL).await;
    assert_eq!(outcome(&r), (Some("failed"), Some(false)), "{r}");
    nothing_refused(&bed, &r);

    // Answered on the second send: the run goes on.
    bed.fleet
        .fail(&ops::GRAPHQL_CELL_READING.as_operation(), 1, Fault::UnknownType);
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    nothing_refused(&bed, &r);
}

/// "Merge a pull request" sent again after its answer was lost meets its own merge (405): the
/// pull request reads merged with the head cellbridge meant, and the outcome is `merged`, with
/// nothing saying GitHub refused it.
#[tokio::test]
async fn a_merge_whose_answer_was_lost_reads_back_merged() {
    let bed = opted_in(None).await;
    apply(&bed, CELL, 2, "vpc-2");
    bed.fleet.fail(&ops::PULLS_MERGE, 1, Fault::AnswerLost);
    let r = sync(&bed, CELL).await;
    assert_eq!(
        (r["action"].as_str(), r["auto_merge"]["done"].as_str()),
        (Some("opened"), Some("merged")),
        "{r}"
    );
    let pr = open_pull(&bed.fleet);
    assert!(pr.merged && pr.merged_by.as_deref() == Some(VIEWER), "{pr:?}");
    assert!(!pr.body.contains("refused to merge"), "{}", pr.body);
    assert_eq!(
        bed.fleet.calls().iter().filter(|c| **c == ops::PULLS_MERGE.id).count(),
        2
    );
    assert_eq!(sync(&bed, CELL).await["action"], "in-sync");
}

const WITHOUT_CHECKS: [(&str, &str); 5] = [
    ("metadata", "read"),
    ("contents", "write"),
    ("pull_requests", "write"),
    ("issues", "write"),
    ("statuses", "write"),
];

/// An App installation without `checks: read`: its token is asked for without it (GitHub refuses
/// one asking for a permission the installation lacks), everything else works, GitHub's
/// auto-merge is still turned on (it waits for the required checks itself), and cellbridge never
/// merges a pull request itself, since it cannot see the head's check runs.
#[tokio::test]
async fn an_installation_without_checks_read_keeps_working_and_never_merges_by_itself() {
    let bed = bed();
    bed.fleet.grant(&WITHOUT_CHECKS);
    apply(&bed, CELL, 1, "vpc-1");
    assert_eq!(sync(&bed, CELL).await["action"], "opened");
    let mints: Vec<_> = bed
        .fleet
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("apps/"))
        .collect();
    assert_eq!(
        mints,
        [
            ops::APPS_CREATE_INSTALLATION_ACCESS_TOKEN.id,
            ops::APPS_GET_INSTALLATION.id,
            ops::APPS_CREATE_INSTALLATION_ACCESS_TOKEN.id
        ]
    );
    let first = bed.fleet.pulls().last().unwrap().number;
    bed.fleet.merge(first);
    bed.fleet.commit(
        "main",
        &[(".cellbridge/auto-merge.yaml", "cells: ['*']\n")],
        "opt cells in",
    );
    bed.fleet.allow_auto_merge(true);

    // Nothing to wait for (GitHub would refuse auto-merge): cellbridge does not merge it.
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!(
        (r["action"].as_str(), r["auto_merge"]["done"].as_str()),
        (Some("opened"), Some("waiting")),
        "{r}"
    );
    assert!(
        r["auto_merge"]["detail"].as_str().unwrap().contains("checks=read"),
        "{r}"
    );
    assert!(!open_pull(&bed.fleet).merged);

    // Required checks: GitHub's auto-merge is turned on and merges once they pass.
    protect(&bed.fleet, &[STRICT, CI]);
    let r = sync(&bed, CELL).await;
    assert_eq!(r["auto_merge"]["done"], "enabled", "{r}");
    let head = bed.fleet.head(&branch(CELL)).unwrap();
    bed.fleet.post_check(&head, CI, CheckState::Passed);
    assert!(open_pull(&bed.fleet).merged);
}
