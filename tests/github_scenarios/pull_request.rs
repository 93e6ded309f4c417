//! The cell's pull request as a user sees it, on both GitHubs: a new cell opens one pull request with
//! its whole directory; the same state delivered twice writes nothing; a changed value updates the same
//! pull request; values equal to the base open nothing and close the open pull request; a pull request
//! closed by a reviewer stays closed for its values; main moving is merged in at the next change; a
//! transient 5xx on one call ends as without it; a pull request merged while a run wrote it keeps
//! saying what it merged.

use super::support::*;
use cellbridge::adapters::github::operations::{self as ops};
use cellbridge::pure::plan::{LABEL_CELLBRIDGE, LABEL_NEW_CELL};
use std::collections::BTreeMap;

/// a. A new cell's state opens one pull request holding the whole cell directory (its metadata
/// and the template's files) in one commit, labelled, with a successful strict-substitution
/// status on its head.
async fn a_new_cell_opens_one_pull_request_with_its_whole_directory<B: Bed>() {
    let w = World::<B>::start();
    let main_before = w.files("main");
    let requests = w.requests();
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert!(w.requests() > requests, "the count counts");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");

    let pulls = w.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let pr = &pulls[0];
    assert_eq!((pr.number, pr.head.as_str(), pr.open), (1, branch(CELL).as_str(), true));
    assert!(pr.title.contains(CELL), "{pr:?}");
    assert_eq!(pr.labels, [LABEL_CELLBRIDGE, LABEL_NEW_CELL]);

    let files = w.files(&branch(CELL));
    let cell_dir: Vec<String> = files
        .keys()
        .filter(|p| p.starts_with(&format!("clusters/{CELL}/")))
        .cloned()
        .collect();
    assert_eq!(cell_dir, expected_cell_dir(CELL));
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-1"));
    // Nothing else changes: the rest of the branch is main.
    let rest: BTreeMap<String, String> = files
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&format!("clusters/{CELL}/")))
        .collect();
    assert_eq!(rest, main_before);
    assert_eq!(w.files("main"), main_before, "main is untouched");
    assert_eq!(
        w.bed.commits_ahead(w.repo(), &branch(CELL)),
        1,
        "one commit for the directory"
    );
    w.assert_checked(CELL);
}

/// b. The same state delivered twice: the second delivery writes nothing.
async fn the_same_state_delivered_twice_writes_nothing_the_second_time<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let head = w.head(&branch(CELL));
    let pulls = w.pulls();
    let writes = w.writes();
    assert!(writes > 0, "the first delivery wrote: the count counts");

    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "unchanged", "{r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    assert_eq!(w.writes(), writes, "no write request");
    assert_eq!(w.head(&branch(CELL)), head, "no new commit");
    assert_eq!(w.pulls(), pulls);
}

/// c. A changed value updates the same pull request: same number, a new head whose metadata has
/// the new value, checked again.
async fn a_changed_value_updates_the_same_pull_request<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let first_head = w.head(&branch(CELL)).unwrap();

    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    let pulls = w.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert!(pulls[0].open);
    assert_eq!(pulls[0].labels, [LABEL_CELLBRIDGE, LABEL_NEW_CELL]);
    let head = w.head(&branch(CELL)).unwrap();
    assert_ne!(head, first_head, "a new head");
    let cm = w.metadata_on(&branch(CELL), CELL);
    assert!(cm.contains("vpc-2") && !cm.contains("vpc-1"), "{cm}");
    // The base did not move: the update is one more commit on the branch, not a rebuild.
    assert_eq!(w.bed.commits_ahead(w.repo(), &branch(CELL)), 2);
    w.assert_checked(CELL);
}

/// d. Back to what the base holds: once a reviewer merged the pull request, the same state opens
/// nothing; a later change opens a new pull request, and a state back to the merged values closes
/// it and deletes its branch (what `converge` does for `Outcome::InSync`).
async fn values_equal_to_the_base_open_nothing_and_close_the_open_pull_request<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.merge(w.repo(), 1).unwrap();
    assert!(w.metadata_on("main", CELL).contains("vpc-1"), "merged");

    let writes = w.writes();
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "in-sync", "{r}");
    assert_eq!(w.writes(), writes, "nothing written");
    assert!(w.open_pulls().is_empty(), "{:?}", w.pulls());

    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(r["pull_request"]["number"], 2, "{r}");
    let open = w.open_pulls();
    assert_eq!(open.len(), 1, "{open:?}");
    // The cell exists on main now: no longer a new cell.
    assert_eq!(open[0].labels, [LABEL_CELLBRIDGE]);
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
    w.assert_checked(CELL);

    w.apply(CELL, 3, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "closed", "{r}");
    assert_eq!(r["pull_request"]["number"], 2, "{r}");
    let pulls = w.pulls();
    assert_eq!(pulls.len(), 2, "{pulls:?}");
    assert!(pulls[0].merged && !pulls[0].open, "{pulls:?}");
    assert!(!pulls[1].merged && !pulls[1].open, "{pulls:?}");
    assert_eq!(w.head(&branch(CELL)), None, "the branch is deleted");
    assert!(w.metadata_on("main", CELL).contains("vpc-1"));
}

/// A pull request a reviewer closed without merging stays closed: the same values delivered
/// again open nothing; new values open a new pull request, on a branch recreated from main,
/// whose body links the closed one.
async fn a_pull_request_closed_by_a_reviewer_stays_closed_for_its_values<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.close(w.repo(), 1);
    assert!(w.open_pulls().is_empty());

    let writes = w.bed.writes(w.repo());
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "declined", "{r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    assert_eq!(
        w.bed.writes(w.repo()),
        writes,
        "a declined proposal is not written again"
    );
    assert!(w.open_pulls().is_empty());
    // A later apply with the same values and a newer serial is still declined.
    w.apply(CELL, 2, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "declined");

    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(r["pull_request"]["number"], 2, "{r}");
    let pulls = w.pulls();
    assert!(pulls[1].open, "{pulls:?}");
    assert_eq!(pulls[1].labels, [LABEL_CELLBRIDGE, LABEL_NEW_CELL]);
    assert!(
        pulls[1].body.contains("Follows #1 (closed without merging)"),
        "{pulls:?}"
    );
    assert!(w.files(&branch(CELL))[&metadata_path(CELL)].contains("vpc-3"));
    assert_eq!(w.bed.commits_ahead(w.repo(), &branch(CELL)), 1, "recreated from main");
    w.assert_checked(CELL);
}

/// e'. main moving is not a lost race: a commit on main just before cellbridge moves the cell's
/// branch leaves the update as it was built (on the main it read). The same state delivered
/// again changes nothing; the next change of the state is built on the new main (main merged
/// in), so the pull request then holds main's new file.
async fn main_moving_is_merged_in_at_the_next_change<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.apply(CELL, 2, "vpc-2");
    w.bed
        .race(w.repo(), &ops::GIT_UPDATE_REF, "main", &[("NOTES.md", "on main\n")]);
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["attempts"].as_u64()), ("updated", Some(1)), "{r}");
    assert!(w.files("main").contains_key("NOTES.md"), "main moved");
    assert!(
        !w.files(&branch(CELL)).contains_key("NOTES.md"),
        "built on the main it read"
    );

    let writes = w.writes();
    assert_eq!(action(&w.deliver(CELL).await), "unchanged");
    assert_eq!(w.writes(), writes, "the same state again: nothing written");
    assert!(!w.files(&branch(CELL)).contains_key("NOTES.md"), "not rebuilt");

    w.bed
        .commit(w.repo(), "main", &[("OWNERS", "platform-team\n")], "a person's commit");
    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    let files = w.files(&branch(CELL));
    assert_eq!(files.get("NOTES.md").map(String::as_str), Some("on main\n"));
    assert_eq!(files.get("OWNERS").map(String::as_str), Some("platform-team\n"));
    assert!(files[&metadata_path(CELL)].contains("vpc-3"));
    // Based on the new main: the branch differs from main by the cell's directory only.
    let main = w.files("main");
    let outside: Vec<&String> = files
        .keys()
        .chain(main.keys())
        .filter(|p| !p.starts_with(&format!("clusters/{CELL}/")) && files.get(*p) != main.get(*p))
        .collect();
    assert!(outside.is_empty(), "differs from main outside the cell: {outside:?}");
    w.assert_checked(CELL);
}

/// f. A transient 5xx on one GitHub call: the outcome is the same as without it, for another
/// cell synced cleanly on the same repository. The HTTP client retries the 502 within the
/// delivery; the in-memory double's fault is what the client reports after its retries, so there
/// the delivery fails retryably and the redelivery converges, reusing the cut-off run's commit.
async fn a_transient_5xx_on_one_call_ends_as_without_it<B: Bed>() {
    let w = World::<B>::start();
    let clean = "eu-c2";
    w.apply(clean, 1, "vpc-1");
    assert_eq!(action(&w.deliver(clean).await), "opened");

    w.apply(CELL, 1, "vpc-1");
    w.bed.transient(w.repo(), &ops::PULLS_CREATE);
    let runs = w.deliver_until_done(CELL).await;
    if let Some(served) = w.bed.server_errors(w.repo()) {
        assert_eq!(served, 1, "the 5xx was served");
    }
    if B::RETRIES_IN_CLIENT {
        assert_eq!(runs.len(), 1, "retried within the delivery: {runs:?}");
    } else {
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert_eq!(
            (action(&runs[0]), runs[0]["retryable"].as_bool()),
            ("failed", Some(true)),
            "{runs:?}"
        );
    }
    let last = runs.last().unwrap();
    assert_eq!(action(last), "opened", "{last}");
    assert_eq!(w.open_pulls().len(), 2);
    assert_eq!(w.outcome(CELL, CELL), w.outcome(clean, CELL));
    w.assert_checked(CELL);
}

/// A reviewer merges the pull request while a run writes it: the merged pull request keeps the
/// text it had when it was merged (cellbridge never touches a merged pull request), and the run,
/// redone on a fresh read, proposes what main lacks in a pull request of its own.
async fn a_pull_request_merged_while_a_run_wrote_it_keeps_saying_what_it_merged<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    w.apply(CELL, 2, "vpc-2");
    let n = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let before = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    // Merged once cellbridge's commit is on the branch, before the text says so.
    w.bed.merge_before(w.repo(), &ops::ISSUES_UPDATE, n);
    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver_until_done(CELL).await;
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged, "{r:?}");
    assert_eq!((pr.title, pr.body), (before.title, before.body), "{r:?}");
    assert_eq!(action(r.last().unwrap()), "in-sync", "{r:?}");

    w.apply(CELL, 4, "vpc-4");
    let m = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let before = w.pulls().into_iter().find(|p| p.number == m).unwrap();
    w.bed.merge_before(w.repo(), &ops::GIT_UPDATE_REF, m);
    w.apply(CELL, 5, "vpc-5");
    let r = w.deliver_until_done(CELL).await;
    let merged = w.pulls().into_iter().find(|p| p.number == m).unwrap();
    assert!(merged.merged, "{r:?}");
    assert!(w.metadata_on("main", CELL).contains("vpc-4"), "it merged vpc-4: {r:?}");
    assert_eq!((merged.title, merged.body), (before.title, before.body), "{r:?}");
    let next = w.open_pulls();
    assert!(
        next.len() == 1 && next[0].number > m && w.metadata_on(&branch(CELL), CELL).contains("vpc-5"),
        "{next:?} {r:?}"
    );
}

/// The newest of a branch's pull requests is the cell's: with a merged, a closed and an open one
/// on `cellbridge/<cell>`, a changed value updates the open one, the newest.
async fn the_newest_of_several_pull_requests_of_the_branch_is_the_cells<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.merge(w.repo(), 1).unwrap();
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.close(w.repo(), 2);
    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), &r["pull_request"]["number"]),
        ("opened", &serde_json::json!(3)),
        "{r}"
    );
    w.apply(CELL, 4, "vpc-4");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), &r["pull_request"]["number"]),
        ("updated", &serde_json::json!(3)),
        "{r}"
    );
    assert_eq!(w.open_pulls().len(), 1);
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    http_ghes: super::GhesBed;
    [
        a_new_cell_opens_one_pull_request_with_its_whole_directory,
        the_same_state_delivered_twice_writes_nothing_the_second_time,
        a_changed_value_updates_the_same_pull_request,
        values_equal_to_the_base_open_nothing_and_close_the_open_pull_request,
        a_pull_request_closed_by_a_reviewer_stays_closed_for_its_values,
        main_moving_is_merged_in_at_the_next_change,
        a_transient_5xx_on_one_call_ends_as_without_it,
        a_pull_request_merged_while_a_run_wrote_it_keeps_saying_what_it_merged,
        the_newest_of_several_pull_requests_of_the_branch_is_the_cells,
    ]
);
