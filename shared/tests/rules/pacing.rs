//! Pacing, over the in-memory GitHub: a fleet-wide change of fifty opted-in cells never has more
//! than the cap (`CELLBRIDGE_AUTO_MERGE_CAP`, 5 unset) of cellbridge's pull requests queued or
//! auto-merging at once, counted by the double itself after every request and every person's
//! act, in one invocation's parallel records and in racing invocations; the rest wait their turn,
//! oldest first, say so, and go in as places free.

use cellbridge::doubles::github::{MemGithub, Protection};
use cellbridge::ports::github::{CheckState, MergeMethod};
use cellbridge::rules::automerge::CAP_DEFAULT;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::sync::{Bed, apply, bed, branch, deadline, sqs_bodies, sync};

const CI: &str = "ci/build";
const CELLS: usize = 50;

fn cells(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("eu-p{i:02}")).collect()
}

/// `n` cells on main (the first cell's first pull request merged, the others copied from it in
/// one commit, as if theirs had merged too), all opted in, main requiring a CI check, "Allow
/// auto-merge" on, and, with `queue`, a merge queue.
async fn fleet(n: usize, queue: bool) -> Bed {
    let bed = bed();
    let all = cells(n);
    apply(&bed, &all[0], 1, "vpc-1");
    assert_eq!(sync(&bed, &all[0]).await["action"], "opened");
    let first = bed.fleet.pulls().last().unwrap().number;
    bed.fleet.merge(first);
    let dir = format!("clusters/{}/", all[0]);
    let own: Vec<(String, String)> = bed
        .fleet
        .files("main")
        .into_iter()
        .filter(|(p, _)| p.starts_with(&dir))
        .collect();
    let mut copies: Vec<(String, String)> = Vec::new();
    for c in &all[1..] {
        apply(&bed, c, 1, "vpc-1");
        for (p, text) in &own {
            copies.push((p.replace(&all[0], c), text.replace(&all[0], c)));
        }
    }
    copies.push((".cellbridge/auto-merge.yaml".into(), "cells: ['eu-*']\n".into()));
    let files: Vec<(&str, &str)> = copies.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    bed.fleet.commit("main", &files, "the other cells, and opt in");
    bed.fleet.protect_branch(
        "main",
        Some(Protection {
            contexts: vec![CI.to_owned()],
            strict: false,
            approvals: 0,
        }),
    );
    bed.fleet.allow_auto_merge(true);
    if queue {
        bed.fleet.require_merge_queue("main", Some(MergeMethod::Squash));
    }
    bed.fleet.reset_peak_in_flight();
    bed
}

/// One invocation of SQS records, one per cell, run in parallel as state-sync runs them.
async fn one_run(bed: &Bed, cells: &[String]) -> Vec<Value> {
    let bodies: Vec<String> = cells
        .iter()
        .map(|c| json!({"action": "sync", "cell": c}).to_string())
        .collect();
    // A Lambda's longest run: fifty cells in a debug build take their time.
    let deadline = Instant::now() + Duration::from_secs(900);
    let inv = crate::support::handle(bed, &sqs_bodies(&bodies), deadline)
        .await
        .unwrap();
    inv.response["cells"].as_array().unwrap().clone()
}

fn done(r: &Value) -> &str {
    r["auto_merge"]["done"].as_str().unwrap_or("-")
}

/// What is in flight, never more than the cap at any point so far (the double's record).
fn assert_capped(gh: &MemGithub, when: &str) {
    assert!(
        gh.peak_in_flight() <= CAP_DEFAULT,
        "{when}: {} of cellbridge's pull requests were queued or auto-merging at once, the cap is {CAP_DEFAULT}",
        gh.peak_in_flight()
    );
}

/// Fifty cells changed at once under a merge queue: one invocation (its records in parallel) lets
/// in exactly the cap; the rest wait, say so in their paragraph and on the dashboard; once the
/// queue merged the ones let in, the next run lets in the oldest of those waiting. Never more than
/// the cap at any point.
#[tokio::test]
async fn fifty_cells_changed_at_once_never_have_more_than_the_cap_in_flight() {
    let bed = fleet(CELLS, true).await;
    bed.fleet.jitter(7);
    let all = cells(CELLS);
    for c in &all {
        apply(&bed, c, 2, "vpc-2");
    }
    let results = one_run(&bed, &all).await;
    assert_capped(&bed.fleet, "the fleet-wide change");
    let mut by_done = std::collections::BTreeMap::<&str, usize>::new();
    for r in &results {
        *by_done.entry(done(r)).or_default() += 1;
    }
    assert_eq!(
        by_done,
        [("enabled", CAP_DEFAULT), ("waiting-for-turn", CELLS - CAP_DEFAULT)].into(),
        "{results:?}"
    );
    assert_eq!(bed.fleet.in_flight(), CAP_DEFAULT, "the cap is filled");
    let waiting = results.iter().find(|r| done(r) == "waiting-for-turn").unwrap();
    let detail = waiting["auto_merge"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!(
            "waiting for its turn: {CAP_DEFAULT} of cellbridge's pull requests are queued or auto-merging, the cap is {CAP_DEFAULT}"
        )),
        "{detail}"
    );
    let number = waiting["pull_request"]["number"].as_u64().unwrap();
    let body = bed.fleet.pulls().into_iter().find(|p| p.number == number).unwrap().body;
    assert!(body.contains("**Waiting for its turn.**"), "{body}");
    let inv = crate::support::handle(&bed, &json!({"action": "dashboard"}), deadline())
        .await
        .unwrap();
    let board = bed.fleet.issues().into_iter().last().unwrap().body;
    assert_eq!(
        board.matches("eligible and waiting for its turn").count(),
        CELLS - CAP_DEFAULT,
        "{}\n{board}",
        inv.response
    );

    // CI passes on what was let in, GitHub queues it and the queue merges it.
    let mut waiting_cells = Vec::new();
    for c in &all {
        let p = bed
            .fleet
            .pulls()
            .into_iter()
            .rev()
            .find(|p| p.head == branch(c))
            .unwrap();
        if p.auto_merge.is_none() {
            waiting_cells.push((p.number, c.clone()));
            continue;
        }
        let head = bed.fleet.head(&branch(c)).unwrap();
        bed.fleet.post_check(&head, CI, CheckState::Passed);
        // The queue's CI passes on the entry's merge group: the queue merges it.
        let group = bed.fleet.merge_group(p.number).expect("queued once its check passed");
        bed.fleet.post_check(&group.head_sha, CI, CheckState::Passed);
        let merged = bed.fleet.pulls().into_iter().find(|q| q.number == p.number).unwrap();
        assert!(merged.merged, "#{}", p.number);
        assert_capped(&bed.fleet, &format!("merging #{}", p.number));
    }
    assert_eq!(bed.fleet.in_flight(), 0);
    // The next events of the cells still waiting (the schedule's sync-all, say): the oldest five
    // go in, whatever order their runs take.
    // One event a cell, the youngest's first: the order of turns is not the order of events.
    waiting_cells.sort();
    let mut results = Vec::new();
    for (_, c) in waiting_cells.iter().rev() {
        results.push(sync(&bed, c).await);
    }
    assert_capped(&bed.fleet, "the next run");
    let mut now: Vec<u64> = results
        .iter()
        .filter(|r| done(r) == "enabled")
        .map(|r| r["pull_request"]["number"].as_u64().unwrap())
        .collect();
    now.sort();
    let oldest: Vec<u64> = waiting_cells.iter().take(CAP_DEFAULT).map(|(n, _)| *n).collect();
    assert_eq!(now, oldest, "{results:?}");
}

/// Racing invocations over the same cells, with and without a merge queue, in seeded
/// interleavings: never more than the cap at any point, and once they end exactly the cap in
/// flight.
#[tokio::test]
async fn racing_invocations_never_have_more_than_the_cap_in_flight() {
    for queue in [false, true] {
        let bed = fleet(12, queue).await;
        let all = cells(12);
        for c in &all {
            apply(&bed, c, 2, "vpc-2");
        }
        let (firsts, lasts) = all.split_at(6);
        for seed in 1..=2u64 {
            bed.fleet.jitter(seed);
            let (a, b, c) = tokio::join!(one_run(&bed, lasts), one_run(&bed, firsts), one_run(&bed, &all));
            assert_capped(&bed.fleet, &format!("queue {queue}, seed {seed}"));
            for r in a.iter().chain(&b).chain(&c) {
                assert!(
                    r["action"] != "failed" || r["retryable"] == true,
                    "queue {queue}, seed {seed}: {r}"
                );
            }
            assert_eq!(
                bed.fleet.in_flight(),
                CAP_DEFAULT,
                "queue {queue}, seed {seed}: the cap is filled"
            );
        }
    }
}
