//! Forks' pull requests whose head branch has a cell's branch name (`cellbridge/<cell>`), on both
//! GitHubs: GraphQL's `pullRequests(headRefName:)` lists them with the repository's own, REST's
//! `head=owner:branch` does not; cellbridge takes none of them for the cell's, touches none, and
//! finds the cell's own behind more than a page of them.

use super::support::*;
use cellbridge::pure::plan::{LABEL_CELLBRIDGE, LABEL_NEW_CELL};

/// What a user sees of someone's fork pull request `number`: open, no labels, no comments, the
/// title and description its author wrote.
fn assert_untouched<B: Bed>(w: &World<B>, number: u64, open: bool) {
    let p = w
        .pulls()
        .into_iter()
        .find(|p| p.number == number)
        .expect("the fork's pull request");
    assert_eq!(
        (p.open, p.merged, p.title.as_str(), p.body.as_str()),
        (open, false, format!("{FORK}'s change").as_str(), ""),
        "{p:?}"
    );
    assert!(p.labels.is_empty() && p.comments.is_empty(), "{p:?}");
}

/// A fork's pull request opened on `cellbridge/<cell>` after the cell's own: a new Terraform
/// value updates the cell's own pull request; the fork's is not edited, labelled or closed.
async fn a_forks_newer_pull_request_of_the_cells_branch_name_is_left_alone<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let own = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let fork = w.bed.fork_pull(w.repo(), &branch(CELL), true);

    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["pull_request"]["number"].as_u64()),
        ("updated", Some(own)),
        "{r}"
    );
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
    w.assert_checked(CELL);
    let pulls = w.pulls();
    assert_eq!(pulls.len(), 2, "{pulls:?}");
    let mine = pulls.iter().find(|p| p.number == own).unwrap();
    assert!(mine.open, "{mine:?}");
    assert_eq!(mine.labels, [LABEL_CELLBRIDGE, LABEL_NEW_CELL]);
    assert_untouched(&w, fork, true);

    // The same values again: in step, nothing written (the fork's is no pull request to fix).
    let writes = w.writes();
    assert_eq!(action(&w.deliver(CELL).await), "unchanged");
    assert_eq!(w.writes(), writes);
}

/// A new cell whose branch name a fork's open pull request already uses: cellbridge opens the
/// cell's own pull request (GitHub allows one open pull request per head in each repository).
async fn a_new_cell_opens_its_own_pull_request_beside_a_forks_of_the_same_branch_name<B: Bed>() {
    let w = World::<B>::start();
    let fork = w.bed.fork_pull(w.repo(), &branch(CELL), true);
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    let own = r["pull_request"]["number"].as_u64().unwrap();
    assert_ne!(own, fork);
    let open = w.open_pulls();
    assert_eq!(open.len(), 2, "{open:?}");
    let mine = open.iter().find(|p| p.number == own).unwrap();
    assert_eq!(mine.head, branch(CELL));
    assert_eq!(mine.labels, [LABEL_CELLBRIDGE, LABEL_NEW_CELL]);
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-1"));
    w.assert_checked(CELL);
    assert_untouched(&w, fork, true);
}

/// The dashboard shows the cell's own pull request, never a fork's of the same branch name: an
/// open fork's is not the cell's pull request, and a fork's newer closed one does not hide that
/// a reviewer declined the cell's.
async fn the_dashboard_shows_the_cells_own_pull_request_not_a_forks<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let own = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let fork_open = w.bed.fork_pull(w.repo(), &branch(CELL), true);
    let row = |body: &str| -> String {
        body.lines()
            .find(|l| l.starts_with(&format!("| `{CELL}` |")))
            .unwrap_or_else(|| panic!("no row of {CELL}: {body}"))
            .to_owned()
    };

    assert_eq!(w.dashboard().await["action"], "created");
    let shown = row(&w.dashboards().remove(0).body);
    assert!(shown.contains(&format!("pull request #{own} opened")), "{shown}");
    assert!(!shown.contains(&format!("#{fork_open}")), "{shown}");

    // A reviewer declines the cell's; someone closes a newer fork's of the same branch name.
    w.bed.close(w.repo(), own);
    let fork_closed = w.bed.fork_pull(w.repo(), &branch(CELL), false);
    w.dashboard().await;
    let shown = row(&w.dashboards().remove(0).body);
    assert!(
        shown.contains(&format!("declined: #{own} was closed without merging these values")),
        "{shown}"
    );
    assert!(
        !shown.contains(&format!("#{fork_open}")) && !shown.contains(&format!("#{fork_closed}")),
        "{shown}"
    );
    assert_untouched(&w, fork_open, true);
    assert_untouched(&w, fork_closed, false);
}

/// A reviewer declined the cell's pull request, and then forks opened and closed six pull
/// requests with the cell's branch name (more than the five the dashboard reads of a branch at
/// first): the dashboard still shows the cell declined, and none of the forks' pull requests.
async fn a_declined_cell_behind_six_forks_pull_requests_is_shown_declined<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let own = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    w.bed.close(w.repo(), own);
    let forks: Vec<u64> = (0..6)
        .map(|_| w.bed.fork_pull(w.repo(), &branch(CELL), false))
        .collect();

    assert_eq!(w.dashboard().await["action"], "created");
    let body = w.dashboards().remove(0).body;
    let shown = body
        .lines()
        .find(|l| l.starts_with(&format!("| `{CELL}` |")))
        .unwrap_or_else(|| panic!("no row of {CELL}: {body}"));
    assert!(
        shown.contains(&format!("declined: #{own} was closed without merging these values")),
        "{shown}"
    );
    for fork in forks {
        assert!(!shown.contains(&format!("#{fork} ")), "{shown}");
        assert_untouched(&w, fork, false);
    }
}

/// More forks' pull requests with the cell's branch name than a page of the reading holds (ten),
/// all newer than the cell's own open one: a new Terraform value still updates the cell's own
/// (found on the next page), and opens no second pull request.
async fn the_cells_own_pull_request_behind_a_page_of_forks_is_updated<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let own = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let forks: Vec<u64> = (0..11)
        .map(|_| w.bed.fork_pull(w.repo(), &branch(CELL), true))
        .collect();

    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["pull_request"]["number"].as_u64()),
        ("updated", Some(own)),
        "{r}"
    );
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
    w.assert_checked(CELL);
    assert_eq!(w.open_pulls().len(), 12, "no second pull request of the cell");
    for fork in forks {
        assert_untouched(&w, fork, true);
    }
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        a_forks_newer_pull_request_of_the_cells_branch_name_is_left_alone,
        a_new_cell_opens_its_own_pull_request_beside_a_forks_of_the_same_branch_name,
        the_dashboard_shows_the_cells_own_pull_request_not_a_forks,
        the_cells_own_pull_request_behind_a_page_of_forks_is_updated,
        a_declined_cell_behind_six_forks_pull_requests_is_shown_declined,
    ]
);
