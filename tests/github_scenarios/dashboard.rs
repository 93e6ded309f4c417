//! The fleet dashboard on both GitHubs: one issue, rewritten only when what it shows changed (a
//! duplicate closed as `duplicate`); a repository without issues fails the dashboard, not the
//! sync-all; thousands of cells needing attention fit the body limit both GitHubs enforce.

use super::support::*;
use cellbridge::ports::github::MergeMethod;
use serde_json::json;

/// i. The fleet dashboard: one issue labelled `cellbridge-dashboard`, listing every
/// cell that needs attention (a pull request open with its status, a refusal naming the key and
/// never the value, a fleet cell no state names) and the cells in sync; rewritten only when what
/// it shows changed; a racing run's duplicate closed as a duplicate of the oldest.
async fn the_fleet_dashboard_is_one_issue_rewritten_only_when_what_it_shows_changed<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let number = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let mut meta = metadata("eu-c2", "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state("eu-c2", state_with(1, meta));

    let d = w.dashboard().await;
    assert_eq!(d["action"], "created", "{d}");
    let open = w.dashboards();
    assert_eq!(open.len(), 1, "{open:?}");
    let issue = &open[0];
    assert_eq!(d["issue"]["number"], issue.number);
    assert_eq!(issue.title, "cellbridge: fleet dashboard (main)");
    assert_eq!(issue.labels, ["cellbridge-dashboard"]);
    let body = issue.body.clone();
    assert!(
        body.contains(&format!(
            "| `{CELL}` | pending | new cell (11 keys); pull request #{number} opened today; strict check passes"
        )),
        "{body}"
    );
    assert!(
        body.contains("| `eu-c2` | refused | cell_metadata key `api_token`"),
        "{body}"
    );
    assert!(body.contains("| `prod-eu-west-1` | state missing |"), "{body}");
    assert!(!body.contains(PLANTED_SECRET) && !d.to_string().contains(PLANTED_SECRET));
    assert!(body.ends_with("<!-- cellbridge:dashboard=main -->\n"), "{body}");

    let writes = w.writes();
    assert_eq!(w.dashboard().await["action"], "unchanged");
    assert_eq!(w.writes(), writes, "nothing changed: nothing written");

    // Another run, which found no dashboard either, opened one at the same time.
    let dup = w.bed.open_issue(
        w.repo(),
        "cellbridge: fleet dashboard (main)",
        &body,
        &["cellbridge-dashboard"],
    );
    let d = w.dashboard().await;
    assert_eq!(
        (&d["action"], &d["closed_duplicates"]),
        (&json!("unchanged"), &json!([dup])),
        "{d}"
    );
    let closed = w.bed.issues(w.repo()).into_iter().find(|i| i.number == dup).unwrap();
    assert_eq!(
        (closed.open, closed.state_reason.as_deref()),
        (false, Some("duplicate")),
        "{closed:?}"
    );
    assert!(
        closed.body.starts_with(&format!("Duplicate of #{}", issue.number)),
        "{closed:?}"
    );

    // The reviewer merges: the cell is in sync, the dashboard rewritten in place.
    w.bed.merge(w.repo(), number).unwrap();
    let d = w.dashboard().await;
    assert_eq!(d["action"], "updated", "{d}");
    let open = w.dashboards();
    assert_eq!((open.len(), open[0].number), (1, issue.number));
    assert!(
        open[0].body.contains(&format!("**In sync** (1): `{CELL}`")),
        "{}",
        open[0].body
    );
    assert!(!open[0].body.contains(&format!("| `{CELL}` |")), "{}", open[0].body);
}

/// j. A repository whose issues are turned off answers 410 to the dashboard: a final failure of
/// the dashboard, in the answer, that leaves the sync-all's cells as they are.
async fn a_repository_without_issues_fails_the_dashboard_not_the_sync_all<B: Bed>() {
    let w = World::<B>::start();
    w.bed.disable_issues(w.repo());
    w.apply(CELL, 1, "vpc-1");
    let inv = w.handle(json!({"action": "sync-all"})).await;
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(inv.response["cells"][0]["action"], "opened", "{}", inv.response);
    let d = &inv.response["dashboard"];
    assert_eq!((&d["action"], &d["class"]), (&json!("failed"), &json!("final")), "{d}");
    assert!(d["error"].as_str().unwrap().contains("HTTP 410"), "{d}");
    let inv = w.handle(json!({"action": "dashboard"})).await;
    assert_eq!(
        inv.class,
        Some(cellbridge::shell::error::Class::Final),
        "{}",
        inv.response
    );
    assert!(w.bed.issues(w.repo()).is_empty());
}

/// k. A fleet with thousands of cells needing attention: the dashboard stays within GitHub's
/// 65,536-character body limit (both GitHubs refuse more) and says how many rows it left out.
async fn thousands_of_cells_needing_attention_fit_githubs_body_limit<B: Bed>() {
    let w = World::<B>::start();
    for i in 0..2500 {
        let cell = format!("eu-cell-{i:04}");
        let mut meta = metadata(&cell, "vpc-1");
        meta["api_token"] = json!(PLANTED_SECRET);
        w.put_state(&cell, state_with(1, meta));
    }
    let d = w.dashboard().await;
    assert_eq!(d["action"], "created", "{d}");
    assert_eq!(d["summary"]["refused"], 2500, "{d}");
    let body = w.dashboards().remove(0).body;
    assert!(body.chars().count() <= 65_536, "{}", body.chars().count());
    let shown = body.lines().filter(|l| l.starts_with("| `eu-cell-")).count();
    assert!(shown > 100 && shown < 2500, "{shown}");
    // The refused cells and the fleet's cell no state names.
    assert!(
        body.contains(&format!(
            "… and {} more cells needing attention not shown",
            2501 - shown
        )),
        "{}",
        &body[body.len() - 300..]
    );
    assert!(!body.contains(PLANTED_SECRET));
}

/// l. Every pending cell with nothing open is read for a declined proposal, however many there
/// are (a hundred a GraphQL request): a cell named after 350 other pending cells is shown
/// declined, by its newest pull request when a person closed several.
async fn every_pending_cell_is_read_for_a_declined_proposal<B: Bed>() {
    let w = World::<B>::start();
    let cell = "zz-declined-1";
    w.apply(cell, 1, "vpc-1");
    let first = w.deliver(cell).await["pull_request"]["number"].as_u64().unwrap();
    w.bed.close(w.repo(), first);
    w.apply(cell, 2, "vpc-2");
    let second = w.deliver(cell).await["pull_request"]["number"].as_u64().unwrap();
    assert_ne!(first, second);
    w.bed.close(w.repo(), second);
    for i in 0..350 {
        let other = format!("aa-pending-{i:03}");
        w.put_state(&other, state_with(1, metadata(&other, "vpc-1")));
    }
    let d = w.dashboard().await;
    assert_eq!(d["action"], "created", "{d}");
    let body = w.dashboards().remove(0).body;
    assert!(
        body.contains(&format!("declined: #{second} was closed without merging these values")),
        "{body}"
    );
    assert!(!body.contains(&format!("#{first} was closed")), "{body}");
}

/// m. The dashboard's GraphQL read of the declined proposals, refused (a token without
/// `pull_requests=read`): the dashboard fails for good; a 5xx once is retryable, and the
/// dashboard written.
async fn a_refused_graphql_read_fails_the_dashboard_and_a_5xx_is_retried<B: Bed>() {
    let w = World::<B>::start();
    w.put_state("eu-waiting-1", state_with(1, metadata("eu-waiting-1", "vpc-1")));
    let newest = cellbridge::adapters::github::operations::GRAPHQL_NEWEST_PULLS.as_operation();
    w.bed.refuse_once(w.repo(), &newest, 403);
    let inv = w.handle(json!({"action": "dashboard"})).await;
    let d = failed_dashboard(&inv, cellbridge::shell::error::Class::Final);
    assert!(d["error"].as_str().unwrap().contains("HTTP 403"), "{d}");
    assert!(w.dashboards().is_empty());
    // A 5xx: retried by the client where it retries (HTTP); else the run fails retryably and the
    // next one writes.
    w.bed.transient(w.repo(), &newest);
    if !B::RETRIES_IN_CLIENT {
        let inv = w.handle(json!({"action": "dashboard"})).await;
        assert_eq!(
            inv.class,
            Some(cellbridge::shell::error::Class::Retryable),
            "{}",
            inv.response
        );
    }
    let d = w.dashboard().await;
    assert_eq!(d["action"], "created", "{d}");
}

/// n. A row shows what GitHub says of its pull request: its merge state in words ("not computed
/// yet" while GitHub computes it), and "queued" only when GitHub's merge queue holds it, never
/// because its body says `queued=yes` (a person can edit a body).
async fn a_row_shows_its_merge_state_and_the_merge_queue_as_github_says<B: Bed>() {
    let w = World::<B>::start();
    // The queue waits for the check the docs say it requires (else it merges at once).
    w.bed
        .protect_main(w.repo(), Some((&[fleet_check().name.as_str()], 0, false)));
    w.bed.require_merge_queue(w.repo(), Some(MergeMethod::Squash));
    w.apply(CELL, 1, "vpc-1");
    let queued = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let other = "eu-c2";
    w.apply(other, 1, "vpc-1");
    let edited = w.deliver(other).await["pull_request"]["number"].as_u64().unwrap();
    assert!(w.fleet_ci_on_pull(queued).0);
    w.bed.enqueue_as_reviewer(w.repo(), queued);
    let body = w.pulls().into_iter().find(|p| p.number == edited).unwrap().body;
    w.bed
        .edit_body(w.repo(), edited, &format!("{body}\n<!-- cellbridge:queued=yes -->\n"));
    w.bed.merge_state_not_computed(w.repo(), edited);

    let d = w.dashboard().await;
    assert_eq!(d["action"], "created", "{d}");
    let body = w.dashboards().remove(0).body;
    assert!(
        body.contains(&format!(
            "pull request #{queued} opened today, queued in the merge queue; strict check passes; merge state: ready to merge ("
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "pull request #{edited} opened today; strict check passes; merge state: not computed yet ("
        )),
        "{body}"
    );
}

/// o. The open pull requests' read answered HTTP 200 with the head's status refused inside
/// `errors` (`FORBIDDEN`: the credentials cannot read statuses): the dashboard fails for good,
/// naming the field and the permission; the sync-all's cells are synced all the same.
async fn a_field_refused_inside_the_graphql_answer_fails_the_dashboard_not_the_sync_all<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let op = cellbridge::adapters::github::operations::GRAPHQL_OPEN_CELL_PULLS.as_operation();
    w.bed.graphql_field_refused(
        w.repo(),
        &op,
        "repository.pullRequests.nodes.0.commits.nodes.0.commit.status",
    );
    let inv = w.handle(json!({"action": "sync-all"})).await;
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(inv.response["cells"][0]["action"], "opened", "{}", inv.response);
    let d = &inv.response["dashboard"];
    assert_eq!((&d["action"], &d["class"]), (&json!("failed"), &json!("final")), "{d}");
    let error = d["error"].as_str().unwrap();
    assert!(
        error.contains("FORBIDDEN") && error.contains("commit.status") && error.contains("statuses=read"),
        "{error}"
    );
    assert!(!error.contains("HTTP 403"), "GitHub answered 200: {error}");
    assert!(w.dashboards().is_empty());
}

/// p. GitHub gives up on a page of open pull requests (a 502 "This may be the result of a
/// timeout"): the dashboard asks a smaller page and is written; when even the smallest page
/// times out, it fails retryably, saying GitHub could not answer in time.
async fn a_graphql_timeout_asks_a_smaller_page_then_fails_retryably<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let number = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    let op = cellbridge::adapters::github::operations::GRAPHQL_OPEN_CELL_PULLS.as_operation();
    w.bed.graphql_times_out(w.repo(), &op, 1);
    let d = w.dashboard().await;
    assert_eq!(d["action"], "created", "{d}");
    let body = w.dashboards().remove(0).body;
    assert!(
        body.contains(&format!("pull request #{number} opened today; strict check passes")),
        "{body}"
    );
    // 100, 50 and 25 a page: each times out.
    w.bed.graphql_times_out(w.repo(), &op, 3);
    let inv = w.handle(json!({"action": "dashboard"})).await;
    let d = failed_dashboard(&inv, cellbridge::shell::error::Class::Retryable);
    assert!(
        d["error"]
            .as_str()
            .unwrap()
            .contains("could not answer the query in time"),
        "{d}"
    );
}

/// q. More than a hundred open pull requests: read a page of a hundred at a time, the cell whose
/// pull request is on the second page shown with it like the first hundred (not as "no pull
/// request open yet").
async fn more_than_a_hundred_open_pull_requests_are_each_shown<B: Bed>() {
    let w = World::<B>::start();
    let mut last = 0;
    for i in 0..101 {
        let cell = format!("eu-many-{i:03}");
        w.put_state(&cell, state_with(1, metadata(&cell, "vpc-1")));
        // People's pull requests on the cells' branches (cellbridge's own writes would be paced
        // past the test's deadline).
        w.bed.commit(
            w.repo(),
            &branch(&cell),
            &[("docs/note.md", &format!("{cell}\n"))],
            "a note",
        );
        last = w.bed.open_pull_as_person(w.repo(), &branch(&cell), &cell);
    }
    let d = w.dashboard().await;
    assert_eq!(d["action"], "created", "{d}");
    let body = w.dashboards().remove(0).body;
    let shown = body
        .lines()
        .filter(|l| l.starts_with("| `eu-many-") && l.contains("opened today; strict check not posted on its head yet"))
        .count();
    assert_eq!(shown, 101, "{body}");
    assert!(
        body.contains(&format!(
            "| `eu-many-100` | pending | new cell (11 keys); pull request #{last} opened today;"
        )),
        "{body}"
    );
    assert!(!body.contains("no pull request open yet"), "{body}");
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        the_fleet_dashboard_is_one_issue_rewritten_only_when_what_it_shows_changed,
        a_repository_without_issues_fails_the_dashboard_not_the_sync_all,
        thousands_of_cells_needing_attention_fit_githubs_body_limit,
        every_pending_cell_is_read_for_a_declined_proposal,
        a_refused_graphql_read_fails_the_dashboard_and_a_5xx_is_retried,
        a_row_shows_its_merge_state_and_the_merge_queue_as_github_says,
        a_field_refused_inside_the_graphql_answer_fails_the_dashboard_not_the_sync_all,
        a_graphql_timeout_asks_a_smaller_page_then_fails_retryably,
        more_than_a_hundred_open_pull_requests_are_each_shown,
    ]
);

/// The dashboard's part of an invocation that failed with `class`, which the invocation's own
/// class is too (a dashboard asked for alone fails its invocation).
fn failed_dashboard(
    inv: &cellbridge::shell::lambda::Invocation,
    class: cellbridge::shell::error::Class,
) -> &serde_json::Value {
    assert_eq!(inv.class, Some(class), "{}", inv.response);
    let d = &inv.response["dashboard"];
    let word = match class {
        cellbridge::shell::error::Class::Final => "final",
        _ => "retryable",
    };
    assert_eq!((&d["action"], &d["class"]), (&json!("failed"), &json!(word)), "{d}");
    d
}
