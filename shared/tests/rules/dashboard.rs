//! The fleet dashboard over the in-memory ports: one issue labelled
//! `cellbridge-dashboard`, rebuilt by every sync-all and by `{"action": "dashboard"}`, never by a
//! single cell's sync, listing every cell that needs attention and never a value.

use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::{Fault, MemIssue};
use cellbridge::ports::github::Pulls as _;
use cellbridge::rules::dashboard::LABEL_DASHBOARD;
use cellbridge::shell::metrics::{Captured, Metrics};
use serde_json::{Value, json};

use crate::support::sync::{
    BUCKET, Bed, LINEAGE, apply, bed, branch, deadline, paused_by_env, queued_bed, secret_state, sqs_bodies, state,
    sync,
};

/// What `terraform destroy` leaves: no outputs, no resources.
fn destroyed(serial: u64) -> String {
    json!({"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE,
        "outputs": {}, "resources": []})
    .to_string()
}

fn put(bed: &Bed, cell: &str, text: String) {
    bed.states.put(BUCKET, &format!("cells/{cell}/terraform.tfstate"), text);
}

async fn dashboard(bed: &Bed) -> Value {
    run(bed, json!({"action": "dashboard"})).await
}

async fn run(bed: &Bed, event: Value) -> Value {
    let inv = crate::support::handle(bed, &event, deadline()).await.unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    inv.response
}

/// The open dashboards.
fn dashboards(bed: &Bed) -> Vec<MemIssue> {
    bed.fleet
        .issues()
        .into_iter()
        .filter(|i| i.open && i.labels.iter().any(|l| l == LABEL_DASHBOARD))
        .collect()
}

fn the_dashboard(bed: &Bed) -> String {
    let open = dashboards(bed);
    assert_eq!(open.len(), 1, "{open:?}");
    open[0].body.clone()
}

/// The table's row of `cell`: (what, detail).
fn row(body: &str, cell: &str) -> (String, String) {
    let line = body
        .lines()
        .find(|l| l.starts_with(&format!("| `{cell}` |")))
        .unwrap_or_else(|| panic!("no row of {cell}:\n{body}"));
    let cols: Vec<&str> = line.split(" | ").collect();
    (cols[1].to_owned(), cols[2].trim_end_matches(" |").to_owned())
}

/// A cell merged into the fleet with these values: in sync.
async fn merged(bed: &Bed, cell: &str, vpc: &str) {
    apply(bed, cell, 1, vpc);
    let r = sync(bed, cell).await;
    bed.fleet.merge(r["pull_request"]["number"].as_u64().unwrap());
}

/// A decommission pull request on the cell's branch, as the lead's decommission opens it: labels
/// `cellbridge` and `decommission`, the cell's directory removed.
async fn decommission_pull(bed: &Bed, cell: &str) -> u64 {
    let d = deadline();
    bed.fleet.delete_files(
        &branch(cell),
        &[&format!("clusters/{cell}/cell-metadata.yaml")],
        "remove",
    );
    let (number, _) = bed
        .fleet
        .create_pull(
            &branch(cell),
            "main",
            &format!("cellbridge: decommission {cell}"),
            "…\n<!-- cellbridge:kind=decommission -->\n",
            d,
        )
        .await
        .unwrap();
    bed.fleet
        .add_labels(number, &["cellbridge".into(), "decommission".into()], d)
        .await
        .unwrap();
    number
}

#[tokio::test]
async fn the_dashboard_lists_every_cell_needing_attention_and_the_cells_in_sync_never_a_value() {
    let bed = bed();
    merged(&bed, "eu-in-sync", "vpc-1").await;
    merged(&bed, "eu-open", "vpc-1").await;
    merged(&bed, "eu-gone", "vpc-1").await;
    merged(&bed, "eu-kept", "vpc-1").await;
    // A change with its pull request open for three days.
    apply(&bed, "eu-open", 2, "vpc-2");
    let open = sync(&bed, "eu-open").await["pull_request"]["number"].as_u64().unwrap();
    bed.fleet.opened_days_ago(open, 3);
    // A change no event has brought yet, and one a reviewer declined.
    apply(&bed, "eu-new", 1, "vpc-1");
    apply(&bed, "eu-declined", 1, "vpc-1");
    let declined = sync(&bed, "eu-declined").await["pull_request"]["number"]
        .as_u64()
        .unwrap();
    bed.fleet.close(declined);
    // Refused: a secret-looking value, planted.
    let (text, secret) = secret_state("eu-refused", 2);
    put(&bed, "eu-refused", text);
    // Destroyed: one with its decommission proposed, one whose cluster is still there.
    put(&bed, "eu-gone", destroyed(5));
    let decom = decommission_pull(&bed, "eu-gone").await;
    put(&bed, "eu-kept", destroyed(5));
    // Failed: not a state.
    put(&bed, "eu-broken", "{\"version\": 4, \"serial\"".into());
    bed.fleet.clear_calls();

    let r = dashboard(&bed).await;
    let d = &r["dashboard"];
    assert_eq!(d["action"], "created", "{r}");
    assert_eq!(bed.fleet.writes(), 1, "one issue: {:?}", bed.fleet.calls());
    let body = the_dashboard(&bed);
    assert_eq!(d["issue"]["number"], dashboards(&bed)[0].number);
    // prod-eu-west-1 is in the example fleet, and no state names it.
    assert_eq!(
        (&d["summary"]["cells"], &d["summary"]["needs_attention"]),
        (&json!(9), &json!(8)),
        "{r}"
    );

    assert_eq!(row(&body, "eu-open").0, "pending");
    assert!(
        row(&body, "eu-open").1.starts_with(&format!(
            "1 key changed; pull request #{open} open 3 days; strict check passes"
        )),
        "{body}"
    );
    assert!(
        row(&body, "eu-new")
            .1
            .starts_with("new cell (11 keys); no pull request open yet"),
        "{body}"
    );
    assert!(
        row(&body, "eu-declined")
            .1
            .contains(&format!("declined: #{declined} was closed without merging")),
        "{body}"
    );
    let (what, detail) = row(&body, "eu-refused");
    assert_eq!(what, "refused");
    assert!(
        detail.contains("`api_token`") && detail.contains("looks like a secret"),
        "{detail}"
    );
    assert!(!body.contains(secret), "a value reached the dashboard:\n{body}");
    assert!(!r.to_string().contains(secret), "{r}");
    assert_eq!(row(&body, "eu-gone").0, "destroyed");
    assert!(
        row(&body, "eu-gone")
            .1
            .starts_with(&format!("decommission pending (#{decom}, opened today)")),
        "{body}"
    );
    assert!(
        row(&body, "eu-kept")
            .1
            .contains("nothing is proposed: the cluster still exists or is not confirmed gone"),
        "{body}"
    );
    assert_eq!(row(&body, "eu-broken").0, "failed");
    assert_eq!(row(&body, "prod-eu-west-1").0, "state missing");
    assert!(body.contains("\n**In sync** (1): `eu-in-sync`\n"), "{body}");
    assert!(!body.contains("| `eu-in-sync` |"), "in sync is no row: {body}");
    assert!(
        body.contains("2 pull requests open (1 to decommission a cell)"),
        "{body}"
    );
    // Failed first, pending last.
    let at = |c: &str| body.find(&format!("| `{c}` |")).unwrap();
    assert!(at("eu-broken") < at("eu-refused") && at("eu-refused") < at("eu-gone"));
    assert!(at("eu-gone") < at("prod-eu-west-1") && at("prod-eu-west-1") < at("eu-open"));

    // Nothing changed: nothing written.
    bed.fleet.clear_calls();
    let r = dashboard(&bed).await;
    assert_eq!(r["dashboard"]["action"], "unchanged", "{r}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert_eq!(the_dashboard(&bed), body);
}

#[tokio::test]
async fn every_sync_all_rebuilds_the_dashboard_and_a_single_cell_s_sync_never_does() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    sync(&bed, "eu-c1").await;
    assert!(dashboards(&bed).is_empty(), "a single cell's sync opens no dashboard");

    let r = run(&bed, json!({"action": "sync-all"})).await;
    assert_eq!(r["dashboard"]["action"], "created", "{r}");
    let body = the_dashboard(&bed);
    assert!(
        body.contains("| `eu-c1` | pending | new cell (11 keys); pull request #1 opened today"),
        "{body}"
    );

    // A new value, synced on its own: the dashboard stays as it was until the next sync-all.
    apply(&bed, "eu-c1", 2, "vpc-2");
    bed.fleet.clear_calls();
    sync(&bed, "eu-c1").await;
    assert!(
        !bed.fleet.calls().contains(&ops::ISSUES_LIST_FOR_REPO.id),
        "{:?}",
        bed.fleet.calls()
    );
    assert_eq!(the_dashboard(&bed), body);
    // The reviewer merges it: the next sync-all says it is in sync (the pull request closed
    // by that sync-all first).
    bed.fleet.merge(1);
    let r = run(&bed, json!({"action": "sync-all"})).await;
    assert_eq!(r["dashboard"]["action"], "updated", "{r}");
    assert!(
        the_dashboard(&bed).contains("**In sync** (1): `eu-c1`"),
        "{}",
        the_dashboard(&bed)
    );
    assert_eq!(dashboards(&bed).len(), 1, "rewritten in place");
}

#[tokio::test]
async fn a_duplicate_dashboard_from_a_racing_run_is_closed_as_a_duplicate_of_the_oldest() {
    let bed = bed();
    let first = dashboard(&bed).await["dashboard"]["issue"]["number"].as_u64().unwrap();
    // Another run, which saw no dashboard either, opened its own.
    let body = the_dashboard(&bed);
    let dup = bed
        .fleet
        .open_issue("cellbridge: fleet dashboard (main)", &body, &[LABEL_DASHBOARD]);
    let r = dashboard(&bed).await;
    assert_eq!(r["dashboard"]["closed_duplicates"], json!([dup]), "{r}");
    assert_eq!(r["dashboard"]["issue"]["number"], first);
    assert_eq!(bed.fleet.issue_state_reason(dup), Some("duplicate"));
    let closed = bed.fleet.issues().into_iter().find(|i| i.number == dup).unwrap();
    assert!(
        closed.body.starts_with(&format!("Duplicate of #{first}")),
        "{}",
        closed.body
    );
    assert!(
        !closed.body.contains("cellbridge:dashboard"),
        "no longer found by the marker"
    );
    assert_eq!(dashboards(&bed).len(), 1);
    // An issue with the label but not the marker is someone else's: left alone.
    let other = bed
        .fleet
        .open_issue("our own notes", "see the dashboard", &[LABEL_DASHBOARD]);
    assert_eq!(dashboard(&bed).await["dashboard"]["action"], "unchanged");
    assert!(bed.fleet.issues().iter().any(|i| i.number == other && i.open));
}

#[tokio::test]
async fn a_person_s_edit_is_overwritten_and_their_labels_kept() {
    let bed = bed();
    let n = dashboard(&bed).await["dashboard"]["issue"]["number"].as_u64().unwrap();
    let body = the_dashboard(&bed);
    let labels = vec![LABEL_DASHBOARD.to_owned(), "team-platform".to_owned()];
    bed.fleet
        .update_pull_text(n, "fleet", &format!("{body}\nnoted by hand"), &labels, deadline())
        .await
        .unwrap();
    assert_eq!(dashboard(&bed).await["dashboard"]["action"], "updated");
    let issue = &dashboards(&bed)[0];
    assert_eq!(
        (issue.body.as_str(), issue.title.as_str()),
        (body.as_str(), "cellbridge: fleet dashboard (main)")
    );
    assert_eq!(issue.labels, labels);
}

#[tokio::test]
async fn a_dry_run_returns_the_markdown_and_paused_writes_nothing() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = run(&bed, json!({"action": "dashboard", "dry_run": true})).await;
    assert_eq!(r["dashboard"]["action"], "planned", "{r}");
    let md = r["dashboard"]["markdown"].as_str().unwrap();
    assert!(
        md.contains("| `eu-c1` | pending | new cell (11 keys); no pull request open yet"),
        "{md}"
    );
    assert!(md.ends_with("<!-- cellbridge:dashboard=main -->\n"));
    // A dry sync-all plans every cell and the dashboard both.
    let r = run(&bed, json!({"action": "sync-all", "dry_run": true})).await;
    assert_eq!(r["dashboard"]["action"], "planned", "{r}");
    assert_eq!(bed.fleet.writes(), 0);

    // Paused from Git: read, not written.
    bed.fleet.commit(
        "main",
        &[(".cellbridge/settings.yaml", "paused: true\nreason: migrating\n")],
        "pause",
    );
    let r = dashboard(&bed).await;
    assert_eq!(r["dashboard"]["action"], "paused", "{r}");
    assert_eq!(r["dashboard"]["paused"]["by"], ".cellbridge/settings.yaml");
    // Paused by the environment: not even read.
    bed.fleet.clear_calls();
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let inv = crate::support::handle_with(
        &bed,
        &json!({"action": "dashboard"}),
        deadline(),
        paused_by_env(),
        &metrics,
    )
    .await
    .unwrap();
    assert_eq!(
        (inv.class, &inv.response["dashboard"]["action"]),
        (None, &json!("paused"))
    );
    assert!(bed.fleet.calls().is_empty(), "{:?}", bed.fleet.calls());
    assert_eq!(bed.fleet.writes(), 0);
    assert!(dashboards(&bed).is_empty());
    assert_eq!(captured.outcomes(), [("paused".to_owned(), None)]);
}

#[tokio::test]
async fn a_dashboard_failure_never_fails_the_sync_all_but_fails_its_own_payload() {
    let (bed, queue) = queued_bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);

    // GitHub keeps failing the dashboard's write: the fan-out stands, nothing is sent twice.
    bed.fleet.fail(&ops::ISSUES_CREATE, 1, Fault::Transient);
    let inv = crate::support::handle_with(&bed, &json!({"action": "sync-all"}), deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(inv.response["enqueued"], 1);
    let d = &inv.response["dashboard"];
    assert_eq!(
        (&d["action"], &d["class"]),
        (&json!("failed"), &json!("retryable")),
        "{d}"
    );
    assert!(d["error"].as_str().unwrap().contains("fleet dashboard"), "{d}");
    assert_eq!(queue.sent.lock().unwrap().len(), 1);
    assert_eq!(
        captured.outcomes(),
        [
            ("enqueued".to_owned(), Some("eu-c1".to_owned())),
            ("retried".to_owned(), None)
        ],
        "one record for the dashboard run"
    );

    // Asked for alone, its failure is the invocation's: retried (a Lambda error), and as an SQS
    // message handed back, while a sync-all's message is not.
    bed.fleet.fail(&ops::ISSUES_CREATE, 1, Fault::Transient);
    let inv = crate::support::handle(&bed, &json!({"action": "dashboard"}), deadline())
        .await
        .unwrap();
    assert_eq!(
        inv.class,
        Some(cellbridge::shell::error::Class::Retryable),
        "{}",
        inv.response
    );
    bed.fleet.fail(&ops::ISSUES_CREATE, 1, Fault::Transient);
    let inv = crate::support::handle(
        &bed,
        &sqs_bodies(&[
            json!({"action": "dashboard"}).to_string(),
            json!({"action": "sync-all"}).to_string(),
        ]),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": "q0"}]),
        "{}",
        inv.response
    );
    assert!(dashboards(&bed).is_empty());

    // Issues turned off: 410, final, not retried; the sync-all still stands.
    bed.fleet.disable_issues();
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    let d = &inv.response["dashboard"];
    assert_eq!(d["class"], "final", "{d}");
    assert!(d["error"].as_str().unwrap().contains("410"), "{d}");
    let inv = crate::support::handle(&bed, &json!({"action": "dashboard"}), deadline())
        .await
        .unwrap();
    assert_eq!(
        inv.class,
        Some(cellbridge::shell::error::Class::Final),
        "{}",
        inv.response
    );
}

#[tokio::test]
async fn thousands_of_cells_needing_attention_fit_githubs_body_limit_and_are_counted() {
    let bed = bed();
    let (_, secret) = secret_state("x", 1);
    for i in 0..3000 {
        let cell = format!("eu-cell-{i:04}");
        let text = if i % 3 == 0 {
            secret_state(&cell, 2).0
        } else {
            state(&cell, 1, "vpc-1")
        };
        put(&bed, &cell, text);
    }
    let r = dashboard(&bed).await;
    assert_eq!(r["dashboard"]["action"], "created", "{}", r["dashboard"]);
    let body = the_dashboard(&bed);
    // MemGithub refuses a body over 65,536 characters, as GitHub does: it was taken.
    assert!(body.chars().count() <= 65_536, "{}", body.chars().count());
    let shown = body.lines().filter(|l| l.starts_with("| `eu-cell-")).count();
    assert!(shown > 100 && shown < 3001, "{shown}");
    assert!(
        body.contains(&format!(
            "… and {} more cells needing attention not shown",
            3001 - shown
        )),
        "{}",
        &body[body.len() - 400..]
    );
    assert!(body.starts_with("## Fleet dashboard"), "the heading stays");
    assert!(
        body.ends_with("<!-- cellbridge:dashboard=main -->\n"),
        "the marker stays"
    );
    assert!(!body.contains(secret));
    // Every pending cell is read (its newest pull request: declined?), a hundred a query: the
    // 2,000 pending cells with nothing open are 20 queries, after one listing of open ones.
    let count = |op: &str| bed.fleet.calls().iter().filter(|c| **c == op).count();
    assert_eq!(count(ops::PULLS_LIST.id), 1, "one listing of open pull requests");
    assert_eq!(
        count(ops::GRAPHQL_NEWEST_PULLS.id),
        20,
        "every pending cell read, 100 a query"
    );
}
