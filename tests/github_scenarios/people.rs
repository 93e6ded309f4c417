//! People on the pull request and on main, on both GitHubs: a reviewer's merge after main moved keeps
//! both sides, a conflicting one is refused and main unchanged; a lost race keeps the other writer's
//! file; a conflict between a reviewer and main is reported once and the branch left alone; people and
//! racing deliveries lose nothing; a branch pushed without a pull request is never built on and said
//! once; a file a reviewer deleted is gone from what the head's status checks; a head larger than a
//! comparison lists is checked whole; a reviewer's binary file never blocks the cell; main rewritten
//! under the pull request is no lost race. On the HTTP fake only: a submodule on the branch is no
//! file.

use super::support::*;
use cellbridge::adapters::github::operations::{self as ops};

/// A reviewer merges the pull request after a person committed on main: nothing conflicts (the
/// person's file is outside the cell), so GitHub merges, and main then holds both the person's
/// commit and the cell; the next delivery finds the cell in sync.
///
/// GitHub merges a pull request that is behind its base when nothing conflicts ("Merge a pull
/// request" refuses with 405 only "if merge cannot be performed",
/// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request; a branch behind its base is
/// `mergeable_state: behind`, still mergeable unless branch protection requires it up to date,
/// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging),
/// and the merge commit holds both sides. (Both GitHubs once got this wrong: the HTTP fake
/// refused whenever main was not an ancestor of the head, MemGithub's merge commit took the
/// head's tree and dropped main's commit; both now merge three ways.)
async fn a_reviewer_merging_after_main_moved_keeps_both_sides<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed
        .commit(w.repo(), "main", &[("OWNERS", "platform-team\n")], "a person's commit");

    let merged = w.bed.merge(w.repo(), 1);
    assert_eq!(
        merged,
        Ok(()),
        "GitHub merges a pull request behind its base when nothing conflicts"
    );
    let main = w.files("main");
    assert_eq!(
        main.get("OWNERS").map(String::as_str),
        Some("platform-team\n"),
        "the merge keeps main's side"
    );
    assert!(
        main[&metadata_path(CELL)].contains("vpc-1"),
        "the merge brings the cell"
    );
    assert_eq!(action(&w.deliver(CELL).await), "in-sync");
}

/// A reviewer and a person on main change the same file differently: GitHub cannot merge the pull
/// request (405 "Pull Request is not mergeable" "if merge cannot be performed",
/// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request; "You must resolve all merge
/// conflicts before you can merge a pull request",
/// https://docs.github.com/pull-requests/collaborating-with-pull-requests/addressing-merge-conflicts/about-merge-conflicts),
/// and nothing on main changes: the pull request stays open and unmerged.
async fn a_reviewer_merging_a_conflicting_pull_request_is_refused_and_main_is_unchanged<B: Bed>() {
    const SHARED: &str = "infrastructure/base/kustomization.yaml";
    let w = World::<B>::start();
    assert!(w.files("main").contains_key(SHARED), "the example fleet has {SHARED}");
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(SHARED, "# the reviewer's version\n")],
        "a reviewer's suggestion",
    );
    w.bed
        .commit(w.repo(), "main", &[(SHARED, "# main's version\n")], "a person's commit");
    let (main, main_head) = (w.files("main"), w.head("main"));

    let refused = w
        .bed
        .merge(w.repo(), 1)
        .expect_err("GitHub cannot merge a pull request that conflicts with its base");
    assert!(
        refused.contains("405") && refused.contains("Pull Request is not mergeable"),
        "{refused}"
    );
    assert_eq!(w.head("main"), main_head, "main did not move");
    assert_eq!(w.files("main"), main, "main's files are unchanged");
    let pulls = w.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert!(pulls[0].open && !pulls[0].merged, "{pulls:?}");
}

/// e. A lost race: another writer moves the cell's branch between cellbridge's read and its
/// fast-forward. The update is refused as not a fast-forward, and the whole sync is redone on a
/// fresh read: the same pull request ends up holding the new value.
async fn a_lost_race_for_the_branch_is_redone_on_a_fresh_read<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.apply(CELL, 2, "vpc-2");
    w.bed.race(
        w.repo(),
        &ops::GIT_UPDATE_REF,
        &branch(CELL),
        &[("NOTES.md", "someone else\n")],
    );
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert_eq!(r["attempts"], 2, "one redo: {r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    assert_eq!(w.pulls().len(), 1);
    let files = w.files(&branch(CELL));
    assert!(files[&metadata_path(CELL)].contains("vpc-2"));
    // The other writer's commit and its file stay: cellbridge's update is a commit on the
    // branch's current head that rewrites its own file only.
    assert_eq!(files["NOTES.md"], "someone else\n", "{:?}", files.keys());
    assert_eq!(w.bed.commits_ahead(w.repo(), &branch(CELL)), 3);
    w.assert_checked(CELL);
}

/// Instantiates every scenario once per bed: `mod <bed module> { #[tokio::test] <scenario> }`;
/// attributes written before a scenario's name (an `#[ignore]`) go on both of its tests.
/// A reviewer and main change the same file of the cell: cellbridge cannot merge main into the
/// branch, so the next state leaves the branch as it is, the head's status says so and one
/// comment asks for "Update branch" (a second event does not comment again).
async fn a_conflict_between_a_reviewer_and_main_is_reported_once_and_the_branch_left_alone<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let layers = format!("clusters/{CELL}/layers.yaml");
    w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&layers, "# the reviewer's version\n")],
        "a reviewer",
    );
    w.bed
        .commit(w.repo(), "main", &[(&layers, "# main's version\n")], "someone on main");
    let head = w.head(&branch(CELL));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "conflicted", "{r}");
    assert_eq!(w.head(&branch(CELL)), head, "the branch is left as it is");
    let statuses = w.statuses(head.as_deref().unwrap());
    assert!(
        statuses
            .iter()
            .any(|s| !s.success && s.description.contains("Update branch")),
        "{statuses:?}"
    );
    assert_eq!(action(&w.deliver(CELL).await), "conflicted");
    let pulls = w.open_pulls();
    assert_eq!(pulls[0].comments.len(), 1, "one comment: {pulls:?}");
    assert!(pulls[0].comments[0].contains("Update branch"));
}

/// Randomized, end to end: for a few seeds, two deliveries of each of three successive states
/// race each other while people push to the pull request's branch and to main, merge, close and
/// press "Update branch" between them. Whatever the interleaving: no person's file is lost,
/// merging never undoes main, there is never more than one open pull request. Every other seed
/// runs as a token on a base requiring signed commits (a ruleset or classic protection):
/// cellbridge's commits there go through `createCommitOnBranch` and "Update branch", and every
/// commit on the branch that no person made is verified. (The in-memory
/// double runs a thousand such schedules with every GitHub call interleaved:
/// `shared/tests/rules/sync/schedules.rs`.)
async fn people_and_racing_deliveries_lose_nothing<B: Bed>() {
    for seed in 1..=4u64 {
        let mut w = World::<B>::start();
        let signed = seed % 2 == 0;
        if signed {
            B::credentials(&mut w, true);
            w.bed.require_signatures(w.repo(), seed == 4);
        }
        let mut people_made = Vec::new();
        let mut dice = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut roll = |sides: u64| {
            dice ^= dice << 13;
            dice ^= dice >> 7;
            dice ^= dice << 17;
            dice % sides
        };
        let (mut on_main, mut on_branch) = (Vec::new(), Vec::new());
        for serial in 1..=3u64 {
            w.apply(CELL, serial, &format!("vpc-{serial}"));
            let people = async {
                tokio::task::yield_now().await;
                let open = w.open_pulls().first().map(|p| p.number);
                let step = format!("seed {seed} serial {serial}");
                match (roll(6), open) {
                    (0, _) => {
                        let path = format!("docs/{seed}-{serial}.md");
                        w.bed.commit(w.repo(), "main", &[(&path, &step)], "a person on main");
                        on_main.push((path, step));
                    }
                    (1 | 2, Some(n)) => {
                        let path = format!("clusters/{CELL}/review-{serial}.yaml");
                        people_made.push(w.bed.commit(
                            w.repo(),
                            &branch(CELL),
                            &[(&path, &format!("# {step}\n"))],
                            "a reviewer",
                        ));
                        on_branch.push((n, path, format!("# {step}\n")));
                    }
                    (3, Some(n)) => {
                        let _ = w.bed.merge(w.repo(), n);
                    }
                    (4, Some(n)) => w.bed.update_branch(w.repo(), n),
                    (5, Some(n)) if roll(2) == 0 => w.bed.close(w.repo(), n),
                    // GitHub's own untyped failure inside an answer of HTTP 200: retryable,
                    // never a refused state.
                    (5, _) => w
                        .bed
                        .graphql_untyped_error(w.repo(), &ops::GRAPHQL_CELL_READING.as_operation(), 1),
                    _ => {}
                }
            };
            let (a, b, ()) = tokio::join!(w.deliver(CELL), w.deliver(CELL), people);
            for r in [a, b] {
                assert!(r["action"] != "failed" || r["retryable"] == true, "seed {seed}: {r}");
                assert!(r.get("reported").is_none(), "seed {seed}: {r}");
            }
        }
        w.deliver_until_done(CELL).await;
        let pulls = w.pulls();
        assert!(pulls.iter().filter(|p| p.open).count() <= 1, "seed {seed}: {pulls:?}");
        if signed && pulls.iter().any(|p| p.open) {
            for (sha, verified) in w.bed.verified_commits(w.repo(), &branch(CELL)) {
                assert!(
                    verified || people_made.contains(&sha),
                    "seed {seed}: commit {sha} on the branch is unverified and no person's"
                );
            }
        }
        let main = w.files("main");
        for (path, text) in &on_main {
            assert_eq!(main.get(path), Some(text), "seed {seed}: main lost {path}");
        }
        for (n, path, text) in &on_branch {
            let pr = pulls.iter().find(|p| p.number == *n).unwrap();
            if pr.merged {
                assert_eq!(main.get(path), Some(text), "seed {seed}: merging #{n} lost {path}");
            } else if pr.open {
                assert_eq!(
                    w.files(&branch(CELL)).get(path),
                    Some(text),
                    "seed {seed}: #{n} lost {path}"
                );
            }
        }
    }
}

/// Someone pushes to `cellbridge/<cell>` with no pull request: cellbridge neither builds on the
/// branch nor deletes it. It fails for good (no retry), and names the branch and the commit in
/// the cell's issue, once.
async fn a_branch_someone_pushed_without_a_pull_request_is_never_built_on_and_said_once<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    let theirs = w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/NOTES.md"), "mine\n")],
        "someone's own work",
    );
    w.apply(CELL, 2, "vpc-2");
    for _ in 0..2 {
        let r = w.deliver(CELL).await;
        assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
        assert!(r["error"].as_str().unwrap().contains(&theirs[..12]), "{r}");
        assert_eq!(r["reported"]["on"], "issue", "{r}");
    }
    assert_eq!(
        w.head(&branch(CELL)).as_deref(),
        Some(theirs.as_str()),
        "the branch is untouched"
    );
    let reports: Vec<IssueSeen> = w.bed.issues(w.repo()).into_iter().filter(|i| i.open).collect();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].body.contains(&branch(CELL)) && reports[0].body.contains("delete the branch"),
        "{}",
        reports[0].body
    );
    assert!(w.open_pulls().is_empty());
}

/// A reviewer deletes a manifest a layer still lists: Flux would fail to build that layer, and so
/// does the head's check, which reads the head's content with its deletions (not the base's file
/// in its place). Putting it back makes the status pass again.
async fn a_file_a_reviewer_deleted_is_gone_from_what_the_heads_status_checks<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let manifest = "apps/base/podinfo/deployment.yaml";
    let text = w.files("main")[manifest].clone();
    let deleted = w
        .bed
        .delete(w.repo(), &branch(CELL), &[manifest], "a reviewer deletes a manifest");
    w.apply(CELL, 3, "vpc-3");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let head = w.head(&branch(CELL)).unwrap();
    assert_ne!(head, deleted);
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(
        status.len() == 1 && !status[0].success && status[0].description.contains("deployment.yaml"),
        "{status:?}"
    );
    let restored = w
        .bed
        .commit(w.repo(), &branch(CELL), &[(manifest, &text)], "put it back");
    assert_eq!(action(&w.deliver(CELL).await), "unchanged");
    let status: Vec<Status> = w.strict_statuses(&restored);
    assert!(status.len() == 1 && status[0].success, "{status:?}");
}

/// A head whose changes run past the 300 files a comparison lists is checked whole: a reviewer's
/// broken manifest sorting after 310 other files still fails the head's status, naming it.
async fn a_head_larger_than_a_comparison_lists_is_checked_whole<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let manifest = "apps/base/podinfo/deployment.yaml";
    let broken = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  owner: ${no_such_key}\n";
    // 310 files that sort before the manifest (identical, so read once).
    let bulk: Vec<String> = (0..310).map(|i| format!("aaa-bulk/f{i:03}.yaml")).collect();
    let mut files: Vec<(&str, &str)> = bulk.iter().map(|p| (p.as_str(), "# bulk\n")).collect();
    files.push((manifest, broken));
    let pushed = w
        .bed
        .commit(w.repo(), &branch(CELL), &files, "a reviewer's large change");
    w.apply(CELL, 3, "vpc-3");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let head = w.head(&branch(CELL)).unwrap();
    assert_ne!(head, pushed);
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(
        status.len() == 1 && !status[0].success && status[0].description.contains("no_such_key"),
        "{status:?}"
    );
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-3"));
}

/// A binary file a reviewer commits on the cell's branch (an image) stays opaque: it never
/// blocks the cell, no layer reads it, and the next values are written with a passing status.
async fn a_binary_file_on_the_branch_never_blocks_the_cell<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let png: &[u8] = &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0xfe, 0x00, 0x80];
    w.bed.commit_bytes(
        w.repo(),
        &branch(CELL),
        &format!("clusters/{CELL}/diagram.png"),
        png,
        "a reviewer's diagram",
    );
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    let pr = w.open_pulls().remove(0);
    assert!(pr.comments.is_empty(), "nothing refused: {:?}", pr.comments);
    let head = w.head(&branch(CELL)).unwrap();
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(status.len() == 1 && status[0].success, "{status:?}");
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
}

/// A person rewrites main's history after the pull request was written (a force-push that drops
/// a commit the pull request recorded as its base): the next state is no lost race, retried
/// forever, but written on main as it now is.
async fn main_rewritten_under_the_pull_request_is_no_lost_race<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    let before = w.head("main").unwrap();
    w.bed
        .commit(w.repo(), "main", &[("docs/oops.md", "pushed by mistake\n")], "oops");
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.force_push(w.repo(), "main", &before);
    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-3"));
    assert_eq!(action(&w.deliver(CELL).await), "unchanged");
}

/// A reviewer adds a submodule under the cell on its pull request: a comparison lists the
/// gitlink like a file, whose "blob" the repository does not have. The head is then read from
/// its trees, where the submodule is no file: the next values are written, the status passes,
/// nothing is refused. (The in-memory double has no gitlinks: this runs on the HTTP fake.)
#[tokio::test]
async fn http_a_submodule_on_the_branch_is_no_file_and_never_blocks_the_cell() {
    let w = World::<HttpBed>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.gh.commit_gitlink(
        REPO,
        &branch(CELL),
        &format!("clusters/{CELL}/vendor/charts"),
        "0123456789abcdef0123456789abcdef01234567",
        "a reviewer vendors charts as a submodule",
    );
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert!(w.open_pulls()[0].comments.is_empty(), "nothing refused");
    let head = w.head(&branch(CELL)).unwrap();
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(status.len() == 1 && status[0].success, "{status:?}");
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        a_reviewer_merging_after_main_moved_keeps_both_sides,
        a_reviewer_merging_a_conflicting_pull_request_is_refused_and_main_is_unchanged,
        a_lost_race_for_the_branch_is_redone_on_a_fresh_read,
        a_conflict_between_a_reviewer_and_main_is_reported_once_and_the_branch_left_alone,
        people_and_racing_deliveries_lose_nothing,
        a_branch_someone_pushed_without_a_pull_request_is_never_built_on_and_said_once,
        a_file_a_reviewer_deleted_is_gone_from_what_the_heads_status_checks,
        a_head_larger_than_a_comparison_lists_is_checked_whole,
        a_binary_file_on_the_branch_never_blocks_the_cell,
        main_rewritten_under_the_pull_request_is_no_lost_race,
    ]
);
