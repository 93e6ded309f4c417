//! Signed commits on both GitHubs: as a GitHub App, cellbridge's Git-data commits are verified and
//! it never asks whether signatures are required; with a token on a base requiring them (a ruleset
//! or classic protection), every commit of the pull request is verified (createCommitOnBranch, and
//! "Update branch" when main moved) and GitHub merges it; a reviewer's unsigned commit blocks the
//! pull request and its body names it; a template's script (100755) is refused by name with nothing
//! written (said in the refused issue); a rebase merge asked of auto-merge is refused, saying why
//! (but not under a merge queue, whose own method applies);
//! a decommission's commits are verified too. On the HTTP fake only (the double has no GraphQL
//! schema to lack a field of): a site without `Ref.rules` still gets verified cells.

use super::support::*;

fn all_verified(commits: &[(String, bool)]) -> bool {
    !commits.is_empty() && commits.iter().all(|(_, v)| *v)
}

/// As a GitHub App on a base requiring signatures: every commit it writes is verified, a new cell
/// and an update after main moved alike, and it asks nothing about signatures.
async fn as_an_app_every_commit_is_verified_and_nothing_is_asked<B: Bed>() {
    let mut w = World::<B>::start();
    B::credentials(&mut w, false);
    w.bed.require_signatures(w.repo(), true);
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "main moves");
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let commits = w.bed.verified_commits(w.repo(), &branch(CELL));
    assert!(commits.len() >= 3 && all_verified(&commits), "{commits:?}");
    assert_eq!(
        w.bed.signature_reads(w.repo()),
        0,
        "an App's commits are signed: nothing to ask"
    );
    let n = w.open_pulls()[0].number;
    w.bed.merge(w.repo(), n).unwrap();
}

/// With a token on a base requiring signatures (by a ruleset, then by classic protection): the
/// new cell's commit and the update's (main merged in by "Update branch") are all verified, and
/// GitHub merges the pull request; the cell's reading told the rule, so nothing more is asked.
async fn with_a_token_on_a_signed_base_every_commit_is_verified<B: Bed>() {
    for ruleset in [true, false] {
        let mut w = World::<B>::start();
        B::credentials(&mut w, true);
        w.bed.require_signatures(w.repo(), ruleset);
        w.apply(CELL, 1, "vpc-1");
        let r = w.deliver(CELL).await;
        assert_eq!(action(&r), "opened", "{r}");
        assert_eq!(
            w.files(&branch(CELL)).len(),
            w.files("main").len() + expected_cell_dir(CELL).len()
        );
        w.assert_checked(CELL);
        w.bed
            .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "main moves");
        w.apply(CELL, 2, "vpc-2");
        assert_eq!(action(&w.deliver(CELL).await), "updated");
        assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
        assert_eq!(
            w.files(&branch(CELL))["docs/elsewhere.md"],
            "a person's\n",
            "main merged in"
        );
        let commits = w.bed.verified_commits(w.repo(), &branch(CELL));
        assert!(
            commits.len() >= 3 && all_verified(&commits),
            "ruleset {ruleset}: {commits:?}"
        );
        assert_eq!(action(&w.deliver(CELL).await), "unchanged", "a replay writes nothing");
        assert_eq!(
            w.bed.signature_reads(w.repo()),
            0,
            "ruleset {ruleset}: the cell's reading told the rule; nothing more asked"
        );
        let n = w.open_pulls()[0].number;
        w.bed
            .merge(w.repo(), n)
            .unwrap_or_else(|e| panic!("ruleset {ruleset}: GitHub refused the merge: {e}"));
    }
}

/// A reviewer's unsigned commit on a base requiring signatures blocks the pull request whatever
/// its checks say; the next event names it (its id) in the body, and the paragraph goes once the
/// commit is gone.
async fn a_reviewers_unsigned_commit_blocks_the_pull_request_and_is_named<B: Bed>() {
    let mut w = World::<B>::start();
    B::credentials(&mut w, true);
    w.bed.require_signatures(w.repo(), true);
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let theirs = w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/NOTES.md"), "a reviewer's note\n")],
        "a reviewer's note",
    );
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let pr = w.open_pulls().into_iter().next().unwrap();
    assert!(
        pr.body.contains(&theirs[..12]) && pr.body.contains("requires signed commits"),
        "{}",
        pr.body
    );
    let refused = w.bed.merge(w.repo(), pr.number).unwrap_err();
    assert!(refused.contains("verified signatures"), "{refused}");
    // Only the reviewer's commit is unverified: cellbridge's own are signed.
    let commits = w.bed.verified_commits(w.repo(), &branch(CELL));
    let unverified: Vec<&str> = commits.iter().filter(|(_, v)| !v).map(|(c, _)| c.as_str()).collect();
    assert_eq!(unverified, [theirs.as_str()], "{commits:?}");
}

/// A template holding a script (100755) cannot be written by createCommitOnBranch, which writes
/// every file as a regular one: with a token on a base requiring signatures, the new cell is
/// refused naming the script, and nothing is written.
async fn a_script_in_the_template_is_refused_by_name_and_nothing_is_written<B: Bed>() {
    let mut w = World::<B>::start();
    B::credentials(&mut w, true);
    w.bed.require_signatures(w.repo(), false);
    w.bed.commit_executable(
        w.repo(),
        "main",
        "clusters/_template/hooks/check.sh",
        "#!/bin/sh\nexit 0\n",
    );
    let before = w.writes();
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("clusters/{CELL}/hooks/check.sh")) && error.contains("100755"),
        "{error}"
    );
    // Nothing of the cell is written: no branch, no commit; the refusal is reported as a refused
    // state is, in one issue naming the script (its one write).
    assert!(w.head(&branch(CELL)).is_none());
    assert_eq!(w.writes(), before + 1, "only the refused issue");
    let issues = w.bed.issues(w.repo());
    assert!(
        issues.len() == 1 && issues[0].body.contains(&format!("clusters/{CELL}/hooks/check.sh")),
        "{issues:?}"
    );
}

/// An opt-in file asking `merge_method: rebase` on a base requiring signatures: GitHub cannot sign
/// a rebase merge's commits, so auto-merge is refused before anything of it is written, and the
/// result and the body say why.
async fn a_rebase_merge_on_a_signed_base_is_refused_saying_why<B: Bed>() {
    let w = World::<B>::start();
    w.bed.require_signatures(w.repo(), true);
    let w = opted_in(w, "cells: ['*']\nmerge_method: rebase\n").await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(
        (r["auto_merge"]["eligible"].as_bool(), done(&r)),
        (Some(false), "nothing"),
        "{r}"
    );
    let reasons = r["auto_merge"]["reasons"].to_string();
    assert!(reasons.contains("rebase") && reasons.contains("signed commits"), "{r}");
    let pr = w.open_pulls().into_iter().next().unwrap();
    assert!(pr.body.contains("merge_method: rebase"), "{}", pr.body);
    assert_eq!(
        w.bed.auto_merge(w.repo(), pr.number).0,
        None,
        "auto-merge never enabled"
    );
}

/// A destroyed cell's decommission, with a token on a base requiring signatures: its removal is
/// a verified commit (createCommitOnBranch's deletions), and after main moved the base comes in
/// by "Update branch", verified too; GitHub merges it.
async fn a_decommission_with_a_token_on_a_signed_base_is_verified<B: Bed>() {
    let aws = cellbridge::doubles::cluster::MemAws::new("arn:aws:iam::123456789012:role/cellbridge");
    let mut w = World::<B>::start().with_eks(&aws);
    B::credentials(&mut w, true);
    w.bed.require_signatures(w.repo(), true);
    let w = w.merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    w.put_state(CELL, destroyed_state(2));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-opened");
    assert!(w.cell_dir(&branch(CELL)).is_empty(), "the directory removed");
    w.bed.commit(
        w.repo(),
        "main",
        &[(&format!("clusters/{CELL}/late.yaml"), "late: 1\n")],
        "a late file",
    );
    w.put_state(CELL, destroyed_state(3));
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "decommission-updated", "{r}");
    assert!(w.cell_dir(&branch(CELL)).is_empty(), "the late file removed too");
    let commits = w.bed.verified_commits(w.repo(), &branch(CELL));
    assert!(commits.len() >= 3 && all_verified(&commits), "{commits:?}");
    let n = w.open_pulls()[0].number;
    w.bed.merge(w.repo(), n).unwrap();
}

/// With a token on a base requiring signatures, a reviewer and main changing the same file:
/// "Update branch" refuses the merge as a conflict, the branch is left as it is and the conflict
/// said, as with `POST /merges`.
async fn a_conflict_through_update_branch_leaves_the_branch_alone<B: Bed>() {
    let mut w = World::<B>::start();
    B::credentials(&mut w, true);
    w.bed.require_signatures(w.repo(), true);
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let layers = format!("clusters/{CELL}/layers.yaml");
    w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&layers, "# the reviewer's\n")],
        "a reviewer",
    );
    w.bed
        .commit(w.repo(), "main", &[(&layers, "# main's\n")], "someone on main");
    let head = w.head(&branch(CELL));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "conflicted", "{r}");
    assert_eq!(w.head(&branch(CELL)), head, "the branch is left as it is");
    assert!(w.open_pulls()[0].comments[0].contains("Update branch"));
}

/// On a GitHub without `Ref.rules` (a GitHub Enterprise Server older than the field), with a
/// token and a ruleset requiring signatures: a new cell still opens with verified commits, and a
/// second cell too; the site's refusal of the field is met once, and the rule is asked apart.
async fn on_a_site_without_ref_rules_a_token_still_opens_verified_cells<const GHES: bool>() {
    let mut w = World::<HttpBed<GHES>>::start();
    HttpBed::<GHES>::credentials(&mut w, true);
    w.bed.gh.lacks(&["Ref.rules"]);
    w.bed.require_signatures(w.repo(), true);
    for cell in [CELL, "eu-c2"] {
        w.apply(cell, 1, "vpc-1");
        let r = w.deliver(cell).await;
        assert_eq!(action(&r), "opened", "{cell}: {r}");
        w.assert_checked(cell);
        let commits = w.bed.verified_commits(w.repo(), &branch(cell));
        assert!(all_verified(&commits), "{cell}: {commits:?}");
    }
    let readings: Vec<Vec<serde_json::Value>> = w.bed.gh.requests()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["graphql"] == "graphql/cellReading")
        .map(|q| q["graphql_errors"].as_array().cloned().unwrap_or_default())
        .collect();
    let refused = readings.iter().filter(|e| !e.is_empty()).count();
    assert_eq!(
        refused, 1,
        "the second cell's reading went straight to the short one: {readings:?}"
    );
    assert_eq!(readings.len(), 3, "{readings:?}");
    assert_eq!(
        w.bed.signature_reads(w.repo()),
        1,
        "the reading could not tell the ruleset's rule: asked apart, once"
    );
}

#[tokio::test]
async fn http_fake_on_a_site_without_ref_rules_a_token_still_opens_verified_cells() {
    on_a_site_without_ref_rules_a_token_still_opens_verified_cells::<false>().await
}

#[tokio::test]
async fn http_ghes_on_a_site_without_ref_rules_a_token_still_opens_verified_cells() {
    on_a_site_without_ref_rules_a_token_still_opens_verified_cells::<true>().await
}

/// The same opt-in file under a merge queue: the queue merges by its own method, so the file's
/// `merge_method: rebase` is not judged, the head is queued and the paragraph claims no rebase.
async fn under_a_merge_queue_the_files_rebase_is_not_judged<B: Bed>() {
    let w = World::<B>::start();
    w.bed.require_signatures(w.repo(), true);
    let w = opted_in(w, "cells: ['*']\nmerge_method: rebase\n").await;
    let check = &fleet_check().name;
    w.bed.protect_main(w.repo(), Some((&[check.as_str()], 0, false)));
    w.bed
        .require_merge_queue(w.repo(), Some(cellbridge::ports::github::MergeMethod::Squash));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["auto_merge"]["eligible"].as_bool()),
        ("opened", Some(true)),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(w.fleet_ci_on_pull(n).0);
    let r = w.deliver(CELL).await;
    assert_eq!(
        (r["auto_merge"]["eligible"].as_bool(), done(&r)),
        (Some(true), "queued"),
        "{r}"
    );
    let pr = w.open_pulls().into_iter().next().unwrap();
    assert!(!pr.body.contains("rebase"), "{}", pr.body);
    assert_eq!(
        w.fleet_ci_on_merge_group(pr.number).map(|r| r.0),
        Some(true),
        "the queue merges it"
    );
    assert!(w.pulls().into_iter().find(|p| p.number == pr.number).unwrap().merged);
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        as_an_app_every_commit_is_verified_and_nothing_is_asked,
        with_a_token_on_a_signed_base_every_commit_is_verified,
        a_reviewers_unsigned_commit_blocks_the_pull_request_and_is_named,
        a_script_in_the_template_is_refused_by_name_and_nothing_is_written,
        a_rebase_merge_on_a_signed_base_is_refused_saying_why,
        under_a_merge_queue_the_files_rebase_is_not_judged,
        a_decommission_with_a_token_on_a_signed_base_is_verified,
        a_conflict_through_update_branch_leaves_the_branch_alone,
    ]
);
