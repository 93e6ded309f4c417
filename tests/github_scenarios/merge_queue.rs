//! Merge queues on both GitHubs, with the checks the docs say to require under a queue: the
//! fleet repository's own workflow (`examples/github-actions/cellbridge-check.yml`), whose
//! command the scenarios run as its CI on pull requests and on merge groups (`fleet_ci`). Where
//! `main` requires a merge queue, an eligible head is queued (`enqueuePullRequest` once every
//! requirement is met; before that, auto-merge without a method when "Allow auto-merge" is on,
//! nothing when it is off) and the queue merges it by its own method once the workflow's check
//! passes on the merge group's commit; a merge group the base's later commit makes fail the
//! check is dropped, unmerged; a head behind main is left to the queue; a head that is no
//! longer eligible is taken out of the queue in the same run, before its status, and never
//! merged, while a person's queueing is left alone; the fleet dashboard says "queued"; a
//! repository without a queue pays no request more.
//! A base that requires cellbridge's own status with a queue never gets a head queued (the queue
//! would wait for a status no merge group gets): the pull request and the dashboard say what to
//! require instead. A queued head whose merge state cannot be read is taken out of the queue.

use super::support::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::ports::github::MergeMethod;
use cellbridge::pure::plan::STATUS_CONTEXT;

/// The check the docs say a queue requires: the fleet workflow's.
fn fleet() -> &'static str {
    &fleet_check().name
}

/// A world where `CELL` exists on main and is opted in, `main` requires `contexts` (strict) and
/// a merge queue merging by squash.
async fn queued_world<B: Bed>(contexts: &[&str], allow_auto_merge: bool) -> World<B> {
    let w = opted_in(World::<B>::start(), "cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((contexts, 0, true)));
    w.bed.require_merge_queue(w.repo(), Some(MergeMethod::Squash));
    w.bed.allow_auto_merge(w.repo(), allow_auto_merge);
    w
}

fn body_of<B: Bed>(w: &World<B>, n: u64) -> String {
    w.pulls().into_iter().find(|p| p.number == n).unwrap().body
}

/// The docs' setup: `main` requires a merge queue and the fleet workflow's check, nothing else.
/// An opted-in eligible head waits for the workflow on its pull request, is then enqueued, and
/// the queue merges it only once the workflow's own command passes on the merge group's commit:
/// the head's check is not the group's.
async fn with_the_docs_required_check_the_queue_merges_once_the_workflow_passes_on_the_merge_group<B: Bed>() {
    let w = queued_world::<B>(&[fleet()], false).await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "waiting"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let (passed, out) = w.fleet_ci_on_pull(n);
    assert!(passed, "the workflow's command on the head: {out}");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("unchanged", "queued"), "{r}");

    let group = w.bed.merge_group(w.repo(), n).expect("a merge group awaits its checks");
    let base = w.head("main").unwrap();
    assert_eq!(
        (group.base_sha.as_str(), group.head_ref.clone()),
        (
            base.as_str(),
            format!("refs/heads/gh-readonly-queue/main/pr-{n}-{base}")
        ),
    );
    assert!(
        !w.pulls().into_iter().find(|p| p.number == n).unwrap().merged,
        "not before the group's check"
    );
    let (passed, out) = w.fleet_ci_on_merge_group(n).unwrap();
    assert!(passed, "the workflow's command on the merge group: {out}");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged && !pr.open, "{pr:?}");
    assert_eq!(
        w.head("main").unwrap(),
        group.head_sha,
        "main moved to the tested commit"
    );
    assert!(w.metadata_on("main", CELL).contains("vpc-2"));
    assert_eq!(w.bed.merge_group(w.repo(), n), None);
}

/// The base moves after the pull request was queued: a person's commit on main makes a layer
/// use a variable the cell's metadata lacks. The queue tests the pull request on the new base,
/// the workflow's check fails on that merge group, and the queue drops the entry: the pull
/// request stays open and unmerged and main holds no merge of it.
async fn a_merge_group_the_moved_base_makes_fail_the_check_is_dropped_by_the_queue<B: Bed>() {
    let w = queued_world::<B>(&[fleet()], false).await;
    w.apply(CELL, 2, "vpc-2");
    let n = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    assert!(w.fleet_ci_on_pull(n).0);
    assert_eq!(done(&w.deliver(CELL).await), "queued");
    let first = w.bed.merge_group(w.repo(), n).unwrap();

    let layer = "apps/base/podinfo/deployment.yaml";
    let text = w.files("main")[layer].replacen(
        "    app: podinfo\nspec:",
        "    app: podinfo\n    cost-center: ${cost_center}\nspec:",
        1,
    );
    assert!(text.contains("${cost_center}"), "{text}");
    let moved = w
        .bed
        .commit(w.repo(), "main", &[(layer, &text)], "podinfo: a cost center label");
    let group = w
        .bed
        .merge_group(w.repo(), n)
        .expect("a new merge group on the moved base");
    assert_eq!(group.base_sha, moved);
    assert_ne!(group.head_sha, first.head_sha);

    let (passed, out) = w.fleet_ci_on_merge_group(n).unwrap();
    assert!(
        !passed && out.contains("cost_center"),
        "the strict check names the variable: {out}"
    );
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "dropped by the queue");
    assert_eq!(w.bed.merge_group(w.repo(), n), None);
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.merged, "{pr:?}");
    assert_eq!(w.head("main").unwrap(), moved, "main holds no merge");
    assert!(!w.metadata_on("main", CELL).contains("vpc-2"));
}

/// "Allow auto-merge" on: auto-merge is enabled without a merge method and GitHub adds the pull
/// request to the queue once its CI passes; the next event says "queued" and a replay writes
/// nothing; a head behind main is not brought up to date (the queue tests the merge with the
/// latest base); nobody merges it outside the queue, and the queue merges it by its method.
async fn with_a_merge_queue_and_auto_merge_on_an_eligible_head_is_queued_and_the_queue_merges_it<B: Bed>() {
    let w = queued_world::<B>(&[fleet(), CI], true).await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert_eq!(w.bed.auto_merge(w.repo(), n).0.as_deref(), Some(B::CELLBRIDGE));
    let head = w.head(&branch(CELL)).unwrap();
    assert!(w.fleet_ci_on_pull(n).0);
    w.bed.ci(w.repo(), &head, CI, true);
    assert_eq!(
        w.bed.queued_by(w.repo(), n).as_deref(),
        Some(B::CELLBRIDGE),
        "GitHub's auto-merge queued it as its enabler"
    );

    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("unchanged", "queued"), "{r}");
    let body = body_of(&w, n);
    assert!(
        body.contains("**Queued.**") && body.contains("automerge-by=cellbridge"),
        "{body}"
    );
    let writes = w.writes();
    assert_eq!(done(&w.deliver(CELL).await), "queued");
    assert_eq!(w.writes(), writes, "a replay writes nothing");
    // The fleet dashboard says so (from what cellbridge recorded in the body).
    w.dashboard().await;
    let board = &w.dashboards()[0].body;
    assert!(
        board.contains(&format!("#{n} opened today, queued in the merge queue")),
        "{board}"
    );

    // Main moves: the head is behind, and stays as it is.
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "elsewhere");
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "queued", "{r}");
    assert_eq!(
        w.head(&branch(CELL)).unwrap(),
        head,
        "not brought up to date: the queue does that"
    );

    let refused = w.bed.merge(w.repo(), n).unwrap_err();
    assert!(refused.contains("through the merge queue"), "{refused}");
    // Both required checks on the merge group: the workflow's alone does not merge it.
    let group = w.bed.merge_group(w.repo(), n).unwrap();
    assert_eq!(w.fleet_ci_on_merge_group(n).map(|r| r.0), Some(true));
    assert!(w.pulls().into_iter().find(|p| p.number == n).unwrap().open);
    w.bed.ci(w.repo(), &group.head_sha, CI, true);
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged, "{pr:?}");
    assert_eq!(w.bed.auto_merge(w.repo(), n).1.as_deref(), Some(B::CELLBRIDGE));
    let main = w.files("main");
    assert!(main.contains_key("docs/elsewhere.md") && w.metadata_on("main", CELL).contains("vpc-2"));
}

/// A queued head that is no longer eligible (the cell opted out, a reviewer's push) is taken out
/// of the queue in the same run, before its status, and the queue never merges it; a person's
/// own queueing of an ineligible head is left alone.
async fn an_ineligible_head_after_queueing_is_taken_out_in_the_same_run_and_never_merged<B: Bed>() {
    let w = queued_world::<B>(&[fleet()], false).await;
    w.apply(CELL, 2, "vpc-2");
    let n = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    assert!(w.fleet_ci_on_pull(n).0);
    assert_eq!(done(&w.deliver(CELL).await), "queued");
    assert_eq!(w.bed.queued_by(w.repo(), n).as_deref(), Some(B::CELLBRIDGE));

    // The cell is opted out on main: the same head is no longer eligible.
    w.bed
        .commit(w.repo(), "main", &[(OPT_IN, "cells: [other]\n")], "opt out");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (r["auto_merge"]["eligible"].as_bool(), done(&r)),
        (Some(false), "dequeued"),
        "{r}"
    );
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "out of the queue");
    assert_eq!(w.fleet_ci_on_merge_group(n), None, "nothing left to merge");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(
        pr.open && !pr.merged && !pr.body.contains("automerge-by="),
        "{}",
        pr.body
    );

    // Opted in again and queued again; a reviewer's push then makes the head ineligible: GitHub
    // drops the entry of a head that moved, and nothing of cellbridge's is left queued.
    w.bed.commit(w.repo(), "main", &[(OPT_IN, "cells: ['*']\n")], "opt in");
    assert_eq!(done(&w.deliver(CELL).await), "queued");
    w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/extra-layer.yaml"), "# a reviewer's layer\n")],
        "a reviewer adds a layer",
    );
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "GitHub took the moved head out");
    let r = w.deliver(CELL).await;
    assert_eq!(r["auto_merge"]["eligible"].as_bool(), Some(false), "{r}");
    assert_eq!(w.fleet_ci_on_merge_group(n), None);

    // A reviewer queues the head themself once the workflow passed on it: their choice, left
    // alone.
    assert!(w.fleet_ci_on_pull(n).0);
    w.bed.enqueue_as_reviewer(w.repo(), n);
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "left-alone", "{r}");
    assert_eq!(w.bed.queued_by(w.repo(), n).as_deref(), Some(REVIEWER));
    assert_eq!(
        w.fleet_ci_on_merge_group(n).map(|r| r.0),
        Some(true),
        "the reviewer's queueing merges it"
    );
    assert!(w.pulls().into_iter().find(|p| p.number == n).unwrap().merged);
}

/// Auto-merge on waits for a requirement to turn met; one met by a rule relaxed meanwhile is no
/// trigger, and the pull request stays armed and out of the queue: the next event enqueues it.
async fn an_armed_head_a_relaxed_rule_made_ready_is_enqueued_by_the_next_event<B: Bed>() {
    let w = queued_world::<B>(&[fleet(), CI], true).await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(w.fleet_ci_on_pull(n).0);
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "the CI is still required");
    // An administrator stops requiring the CI: nothing triggers GitHub's auto-merge.
    w.bed.protect_main(w.repo(), Some((&[fleet()], 0, true)));
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "armed, not queued");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("unchanged", "queued"), "{r}");
    assert_eq!(w.bed.queued_by(w.repo(), n).as_deref(), Some(B::CELLBRIDGE));
    assert_eq!(
        w.bed.auto_merge(w.repo(), n).0,
        None,
        "in the queue, auto-merge is over"
    );
}

/// Without a merge queue the merge state is the same one request: a delivery with a queue costs
/// exactly what one without costs.
async fn a_repository_without_a_merge_queue_pays_no_request_more<B: Bed>() {
    let mut counts = Vec::new();
    for queue in [None, Some(MergeMethod::Merge)] {
        let w = opted_in(World::<B>::start(), "cells: ['*']\n").await;
        w.bed.protect_main(w.repo(), Some((&[fleet(), CI], 0, false)));
        w.bed.require_merge_queue(w.repo(), queue);
        w.apply(CELL, 2, "vpc-2");
        let (requests, writes) = (w.requests(), w.writes());
        let r = w.deliver(CELL).await;
        assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{queue:?}: {r}");
        counts.push((w.requests() - requests, w.writes() - writes));
    }
    assert_eq!(counts[0], counts[1], "(requests, writes) without a queue, with one");
}

/// `main` requires a merge queue and cellbridge's own status, which no merge group ever gets: an
/// eligible head is never queued nor armed (the queue would wait for it until its timeout), the
/// pull request says which check to require instead and the dashboard shows it; once the
/// workflow's check is required instead, the next event queues it. A head cellbridge queued before
/// the status was required is taken out.
async fn a_queue_that_would_wait_for_cellbridges_status_never_gets_its_heads<B: Bed>() {
    let w = queued_world::<B>(&[STATUS_CONTEXT, CI], true).await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "unqueueable"), "{r}");
    assert_eq!(r["auto_merge"]["eligible"].as_bool(), Some(true), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let head = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &head, CI, true);
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "never queued");
    assert_eq!(w.bed.auto_merge(w.repo(), n).0, None, "never armed");
    let body = body_of(&w, n);
    for said in [
        "**Not queued.**",
        "`cellbridge/strict-substitution`",
        "never on a merge group's commit",
        "`cellbridge fleet check`",
        "docs/merge-queue.md",
    ] {
        assert!(body.contains(said), "{said}: {body}");
    }
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "unqueueable", "{r}");
    w.dashboard().await;
    let board = &w.dashboards()[0].body;
    assert!(
        board.contains(&format!(
            "#{n} opened today, eligible but not queued: the merge queue would wait for cellbridge/strict-substitution"
        )),
        "{board}"
    );

    // The workflow's check required instead (CI stands for it here): queued at the next event.
    w.bed.protect_main(w.repo(), Some((&[CI], 0, true)));
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "queued", "{r}");
    assert_eq!(w.bed.queued_by(w.repo(), n).as_deref(), Some(B::CELLBRIDGE));
    assert!(!body_of(&w, n).contains("**Not queued.**"));

    // Someone requires cellbridge's status again: cellbridge's queueing is taken back.
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, true)));
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "unqueueable", "{r}");
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "out of the queue");
}

/// A queued head whose merge state cannot be read (a value GitHub added since, a 5xx with no data)
/// is taken out of the queue cellbridge put it in: unverified, it must not merge by cellbridge's
/// doing; the next readable event queues it again.
async fn a_queued_head_whose_merge_state_cannot_be_read_is_taken_out<B: Bed>() {
    let w = queued_world::<B>(&[fleet()], false).await;
    w.apply(CELL, 2, "vpc-2");
    let n = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    assert!(w.fleet_ci_on_pull(n).0);
    assert_eq!(done(&w.deliver(CELL).await), "queued");

    w.bed.merge_state_unknown_enum(w.repo());
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "out of the queue: {r}");
    assert_eq!(w.fleet_ci_on_merge_group(n), None, "nothing left to merge");

    assert_eq!(done(&w.deliver(CELL).await), "queued");
    w.bed
        .graphql_server_error(w.repo(), &ops::GRAPHQL_MERGE_STATE.as_operation());
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(true)), "{r}");
    assert_eq!(w.bed.queued_by(w.repo(), n), None, "out of the queue: {r}");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.merged, "{pr:?}");
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        with_the_docs_required_check_the_queue_merges_once_the_workflow_passes_on_the_merge_group,
        a_merge_group_the_moved_base_makes_fail_the_check_is_dropped_by_the_queue,
        with_a_merge_queue_and_auto_merge_on_an_eligible_head_is_queued_and_the_queue_merges_it,
        an_ineligible_head_after_queueing_is_taken_out_in_the_same_run_and_never_merged,
        an_armed_head_a_relaxed_rule_made_ready_is_enqueued_by_the_next_event,
        a_repository_without_a_merge_queue_pays_no_request_more,
        a_queue_that_would_wait_for_cellbridges_status_never_gets_its_heads,
        a_queued_head_whose_merge_state_cannot_be_read_is_taken_out,
    ]
);
