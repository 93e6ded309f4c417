//! What cellbridge sends GitHub, on the HTTP fake: every request names cellbridge and its version (the
//! installation token, REST, GraphQL, the archive download); an archive download cut in transit is
//! downloaded again; a fleet over `CELLBRIDGE_FLEET_MEMORY_MB` fails naming the limit and writes
//! nothing; every row of docs/github.md's "GitHub requests per outcome" (the decommission's and the
//! dashboard's included) measured and compared; writes paced to the process's share of GitHub's
//! limits.

use super::support::*;
use cellbridge::pure::fleet::Keep;
use cellbridge::pure::plan::STATUS_CONTEXT;
use cellbridge::pure::redact::Secret;
use cellbridge::{adapters::github::Credentials, adapters::github::GithubFleet, ports::github::GitData as _};
use cellbridge_tests::github::TOKEN;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Every request cellbridge sends to GitHub (the installation token it mints, REST, GraphQL,
/// the archive download) says in one User-Agent line that it is cellbridge, and which version:
/// GitHub asks each request to name its application
/// (https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent),
/// and an operator asked about a burst of requests must be able to tell they were cellbridge's.
#[tokio::test]
async fn http_every_request_cellbridge_sends_names_cellbridge_and_its_version() {
    let w = opted_in(http_world(app_credentials), "cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 1, true)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{r}");

    let agent = concat!("cellbridge/", env!("CARGO_PKG_VERSION"), " ");
    let mut seen = BTreeMap::new();
    for q in w.bed.gh.requests()["requests"].as_array().unwrap() {
        let lines: Vec<&str> = q["user_agent"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        if lines == ["cellbridge-tests"] {
            continue; // the test's own client, acting as a person
        }
        let (method, path) = (q["method"].as_str().unwrap(), q["path"].as_str().unwrap());
        assert!(
            lines.len() == 1 && lines[0].starts_with(agent),
            "{method} {path} carried the User-Agent lines {lines:?}"
        );
        let kind = if path.contains("/access_tokens") {
            "installation token"
        } else if path.starts_with("/_codeload/") {
            "archive download"
        } else if q.get("graphql").is_some() {
            "GraphQL"
        } else {
            "REST"
        };
        *seen.entry(kind).or_insert(0) += 1;
    }
    let kinds: Vec<&str> = seen.keys().copied().collect();
    assert_eq!(
        kinds,
        ["GraphQL", "REST", "archive download", "installation token"],
        "{seen:?}"
    );
}

/// An archive download cut in transit (the connection closed before the body announced was
/// all there) is downloaded again, streamed, and the sync carries on as if nothing happened.
#[tokio::test]
async fn http_an_archive_download_cut_in_transit_is_downloaded_again() {
    let w = World::<HttpBed>::start();
    w.bed
        .gh
        .fault(json!({"cut_after": 2048, "match": "GET /_codeload/*", "times": 1}));
    w.apply("eu-c9", 1, "vpc-1");
    let r = w.deliver("eu-c9").await;
    assert_eq!(action(&r), "opened", "{r}");
    let downloads = w.bed.gh.requests()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["path"].as_str().unwrap().starts_with("/_codeload/"))
        .count();
    assert_eq!(downloads, 2, "one cut, one whole");
    let (head, main) = (w.bed.files(w.repo(), &branch("eu-c9")), w.bed.files(w.repo(), "main"));
    assert!(main.keys().all(|p| head.contains_key(p)), "nothing of main lost");
    assert!(head.contains_key(&metadata_path("eu-c9")));
}

/// A fleet too large for the memory the function may give it: a final failure naming the size
/// limit and the variable, nothing written, nothing reported to the cell's team (the operators
/// must act), instead of an out-of-memory kill.
#[tokio::test]
async fn http_a_fleet_over_the_memory_limit_fails_naming_the_limit_and_writes_nothing() {
    let mut w = World::<HttpBed>::start();
    w.sync.fleet = GithubFleet::new(
        &w.bed.gh.url(),
        OWNER,
        REPO_NAME,
        None,
        &Credentials::Token(Secret::new(TOKEN.to_owned())),
    )
    .unwrap()
    .with_fleet_memory(4096);
    w.apply("eu-c9", 1, "vpc-1");
    let r = w.deliver("eu-c9").await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("over 4 KB") && error.contains("CELLBRIDGE_FLEET_MEMORY_MB"),
        "{error}"
    );
    assert_eq!(repo_writes(&w), 0);
    assert!(w.bed.issues(w.repo()).is_empty(), "not the cell team's to fix");
}

/// docs/github.md's table "GitHub requests per outcome", row by row, measured on the HTTP fake with
/// the product's own client (the default branch, read once per process, left out as the table says).
#[tokio::test]
async fn http_the_request_budget_per_outcome_is_the_documented_one() {
    let table = documented_budget();

    let w = World::<HttpBed>::start();
    // The default branch, once per process: read now, so that every row counts one sync. So is,
    // with a token, whether main requires signed commits (asked again after 5 minutes).
    w.sync.fleet.read_base(&Keep::all(), deadline()).await.unwrap();
    assert!(!w.sync.fleet.requires_signatures("main", deadline()).await.unwrap());
    let mut measured: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut step = async |row: &str, expect: &str| {
        let cell = if row.starts_with("new cell") { "eu-c9" } else { CELL };
        measured.insert(row.to_owned(), measure(&w, row, cell, expect).await);
    };
    let mut secret = metadata(CELL, "vpc-1");
    secret["api_token"] = json!(PLANTED_SECRET);

    w.apply("eu-c9", 1, "vpc-1");
    step("new cell (`opened`)", "opened").await;
    w.put_state(CELL, state_with(1, secret.clone()));
    step("refused, no pull request (first time)", "refused").await;
    step("refused, no pull request (replayed)", "refused").await;
    // Opened after a refusal: the issue closed is the one write more.
    w.apply(CELL, 2, "vpc-1");
    w.deliver(CELL).await;
    step("replayed, nothing changed (`unchanged`)", "unchanged").await;
    w.apply(CELL, 3, "vpc-3");
    step("value changed, pull request open (`updated`)", "updated").await;
    w.put_state(CELL, state_with(4, secret.clone()));
    step("refused, pull request open (first time for a reason)", "refused").await;
    step("refused, pull request open (replayed)", "refused").await;
    let number = w.open_pulls().iter().find(|p| p.head == branch(CELL)).unwrap().number;
    w.bed.merge(w.repo(), number).unwrap_or_else(|e| panic!("{e}"));
    w.apply(CELL, 5, "vpc-3");
    step("merged, nothing open (`in-sync`)", "in-sync").await;
    // A new value opens a pull request, and the next state back at main's values closes it.
    w.apply(CELL, 6, "vpc-6");
    w.deliver(CELL).await;
    w.apply(CELL, 7, "vpc-3");
    step("back in sync, pull request closed (`closed`)", "closed").await;

    // Auto-merge: the cell opted in, main protected by the strict check and a CI.
    w.bed
        .commit(w.repo(), "main", &[(OPT_IN, "cells: [eu-c1]\n")], "opt eu-c1 in");
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    w.bed.allow_auto_merge(w.repo(), false);
    w.apply(CELL, 8, "vpc-8");
    assert_eq!(done(&w.deliver(CELL).await), "not-allowed");
    w.bed.allow_auto_merge(w.repo(), true);
    w.apply(CELL, 9, "vpc-9");
    step("opted in: value changed, auto-merge enabled (`updated`)", "updated").await;
    w.apply(CELL, 10, "vpc-10");
    step("opted in: value changed, auto-merge already on (`updated`)", "updated").await;
    step("opted in: replayed (`unchanged`)", "unchanged").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, true)));
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "elsewhere");
    step(
        "opted in: eligible head `BEHIND` a base that must be up to date (`updated`)",
        "updated",
    )
    .await;
    let head = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &head, CI, true);
    assert!(
        !w.open_pulls().iter().any(|p| p.head == branch(CELL)),
        "GitHub's auto-merge merged it"
    );
    w.bed.protect_main(w.repo(), None);
    w.apply(CELL, 11, "vpc-11");
    step(
        "opted in: nothing to wait for, merged with the head's sha (`opened`)",
        "opened",
    )
    .await;
    // A merge queue on main: the eligible head goes into it at once (auto-merge without a
    // method), and the queue, with no check required of its merge group, merges it.
    w.bed
        .require_merge_queue(w.repo(), Some(cellbridge::ports::github::MergeMethod::Squash));
    w.apply(CELL, 12, "vpc-12");
    let before = w.pulls().len();
    step("opted in: merge queue, queued at once (`opened`)", "opened").await;
    let pulls = w.pulls();
    let queued = pulls[before..].iter().find(|p| p.head == branch(CELL)).unwrap();
    assert!(queued.merged, "the queue merged it: {queued:?}");
    assert_eq!(
        w.bed.auto_merge(w.repo(), queued.number).1.as_deref(),
        Some(HttpBed::<false>::CELLBRIDGE),
        "as its enqueuer"
    );
    w.bed.require_merge_queue(w.repo(), None);

    // The fleet dashboard, over a fleet with no pull request open (the new cell's merged): the
    // rows that cost no further request (in sync, refused, a fleet cell no state names).
    let number = w
        .open_pulls()
        .iter()
        .find(|p| p.head == branch("eu-c9"))
        .unwrap()
        .number;
    w.bed.merge(w.repo(), number).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(action(&w.deliver("eu-c9").await), "in-sync");
    for (row, expect) in [
        ("fleet dashboard, first run (`created`)", "created"),
        ("fleet dashboard, nothing changed (`unchanged`)", "unchanged"),
        ("fleet dashboard, a row changed (`updated`)", "updated"),
    ] {
        if expect == "updated" {
            w.put_state(CELL, state_with(8, secret.clone()));
        }
        let from = w.bed.gh.requests()["requests"].as_array().unwrap().len();
        let d = w.dashboard().await;
        assert_eq!(d["action"], expect, "{row}: {d}");
        let reqs = api_requests_since(&w, from);
        let writes = reqs.iter().filter(|(_, write)| *write).count();
        measured.insert(row.to_owned(), (reqs.len(), writes));
    }

    assert_budget(&table, &measured);
    assert!(measured.len() >= 17, "{measured:?}");
}

/// docs/github.md's rows "token mode, signatures required": a token on a base whose ruleset requires
/// signed commits writes through createCommitOnBranch (a new cell) and brings main in by "Update
/// branch" (an update after main moved), measured as the table's other rows are.
#[tokio::test]
async fn http_the_request_budget_with_signatures_required_is_the_readmes() {
    let table = documented_budget();
    let w = World::<HttpBed>::start();
    w.bed.require_signatures(w.repo(), true);
    w.sync.fleet.read_base(&Keep::all(), deadline()).await.unwrap();
    assert!(w.sync.fleet.requires_signatures("main", deadline()).await.unwrap());
    let mut measured: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let new_cell = "token mode, signatures required: new cell (`opened`)";
    w.apply(CELL, 1, "vpc-1");
    measured.insert(new_cell.to_owned(), measure(&w, new_cell, CELL, "opened").await);
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "main moves");
    let updated = "token mode, signatures required: value changed, main moved (`updated`)";
    w.apply(CELL, 2, "vpc-2");
    measured.insert(updated.to_owned(), measure(&w, updated, CELL, "updated").await);
    assert_budget(&table, &measured);
}

/// A base tree GitHub refuses when a tree is built on it (the one the cell's reading gave, gone
/// since) is read again from the base commit, once, and the new cell opens as without it.
#[tokio::test]
async fn http_a_refused_base_tree_is_read_again_from_the_base_commit() {
    let w = World::<HttpBed>::start();
    w.bed.refuse_once(
        w.repo(),
        &cellbridge::adapters::github::operations::GIT_CREATE_TREE,
        422,
    );
    w.apply("eu-c9", 1, "vpc-1");
    let r = w.deliver("eu-c9").await;
    assert_eq!(action(&r), "opened", "{r}");
    let commit_reads = w.bed.gh.requests()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["method"] == "GET" && q["path"].as_str().unwrap().contains("/git/commits/"))
        .count();
    assert_eq!(commit_reads, 1, "{}", w.bed.gh.requests());
}

/// docs/github.md's table "GitHub requests per outcome": row → (API requests, writes), read by
/// the one reader the benches use too (rows whose cells are no plain numbers left out).
fn documented_budget() -> BTreeMap<String, (usize, usize)> {
    cellbridge_tests::fleetgen::parse_budget(include_str!("../../docs/github.md"))
        .expect("docs/github.md: the table of GitHub requests per outcome")
        .into_iter()
        .filter_map(|r| Some((r.outcome, (r.api? as usize, r.writes? as usize))))
        .collect()
}

/// The decommission rows of docs/github.md's table, measured on the HTTP fake.
#[tokio::test]
async fn http_the_decommission_request_budget_is_the_readmes() {
    let table = documented_budget();
    let aws = cellbridge::doubles::cluster::MemAws::new("arn:aws:iam::123456789012:role/cellbridge");
    let w = World::<HttpBed>::start().with_eks(&aws);
    w.sync.fleet.read_base(&Keep::all(), deadline()).await.unwrap();
    w.apply(CELL, 1, "vpc-1");
    let opened = w.deliver(CELL).await;
    w.bed
        .merge(w.repo(), opened["pull_request"]["number"].as_u64().unwrap())
        .unwrap();
    let mut measured: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut step = async |row: &str, expect: &str| {
        measured.insert(row.to_owned(), measure(&w, row, CELL, expect).await);
    };
    aws.add_cluster(cellbridge::doubles::cluster::MemCluster::active(CELL, "eu-west-1"));
    w.put_state(CELL, destroyed_state(2));
    step("destroyed, cluster still there (`destroyed`)", "destroyed").await;
    aws.remove_cluster(None, "eu-west-1", CELL);
    step("destroyed, cluster gone (`decommission-opened`)", "decommission-opened").await;
    step(
        "decommission replayed (`decommission-unchanged`)",
        "decommission-unchanged",
    )
    .await;
    w.apply(CELL, 3, "vpc-1");
    step("re-applied, decommission closed (`closed`)", "closed").await;

    // A cell that never reached main: its first pull request, open when the stack is destroyed.
    let new = "eu-c9";
    w.apply(new, 1, "vpc-1");
    assert_eq!(action(&w.deliver(new).await), "opened");
    aws.add_cluster(cellbridge::doubles::cluster::MemCluster::active(new, "eu-west-1"));
    w.put_state(new, destroyed_state(2));
    let mut step = async |row: &str, expect: &str| {
        measured.insert(row.to_owned(), measure(&w, row, new, expect).await);
    };
    step(
        "destroyed before it was merged, cluster still there (`destroyed`)",
        "destroyed",
    )
    .await;
    aws.remove_cluster(None, "eu-west-1", new);
    step("destroyed before it was merged, cluster gone (`closed`)", "closed").await;
    step(
        "destroyed, nothing on the base branch and nothing open (`destroyed`)",
        "destroyed",
    )
    .await;
    assert_budget(&table, &measured);
}

/// One delivery of `cell`, whose result must be `expect` (`row` names it): the API requests it
/// sent and how many of them wrote.
async fn measure(w: &World<HttpBed>, row: &str, cell: &str, expect: &str) -> (usize, usize) {
    let from = w.bed.gh.requests()["requests"].as_array().unwrap().len();
    let r = w.deliver(cell).await;
    assert_eq!(action(&r), expect, "{row}: {r}");
    let reqs = api_requests_since(w, from);
    if std::env::var("CELLBRIDGE_BUDGET_TRACE").is_ok() {
        eprintln!("{row}: {reqs:#?}");
    }
    let writes = reqs.iter().filter(|(_, write)| *write).count();
    (reqs.len(), writes)
}

/// Every measured row is docs/github.md's.
fn assert_budget(table: &BTreeMap<String, (usize, usize)>, measured: &BTreeMap<String, (usize, usize)>) {
    let wrong: Vec<String> = measured
        .iter()
        .filter(|(row, got)| table.get(*row) != Some(got))
        .map(|(row, got)| format!("{row:?}: docs/github.md {:?}, measured {got:?}", table.get(row)))
        .collect();
    assert!(
        wrong.is_empty(),
        "(API requests, writes) per outcome:\n{}",
        wrong.join("\n")
    );
}

/// Content-creating requests keep the process's share of GitHub's limits
/// (here 3 in any 2 s); a write that would wait past the deadline is not sent, and the state
/// fails retryably.
#[tokio::test]
async fn http_writes_are_paced_to_the_processs_share_of_githubs_limits() {
    use cellbridge::adapters::github::pacing::{Limit, Pacing};
    let pacing = Pacing {
        limits: vec![Limit {
            count: 3,
            window: Duration::from_secs(2),
        }],
    };
    let mut w = World::<HttpBed>::start();
    let creds = Credentials::Token(Secret::new(TOKEN.to_owned()));
    w.sync.fleet = GithubFleet::new(&w.bed.gh.url(), OWNER, REPO_NAME, None, &creds)
        .unwrap()
        .with_pacing(pacing);
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let log = w.bed.gh.requests();
    let writes: Vec<f64> = log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["write"] == true)
        .map(|r| r["t"].as_f64().unwrap())
        .collect();
    assert_eq!(writes.len(), 6, "{log}");
    for (i, t) in writes.iter().enumerate() {
        let inside = writes[i..].iter().filter(|u| **u - t < 1.95).count();
        assert!(inside <= 3, "more than 3 writes within 2 s from write {i}: {writes:?}");
    }
    assert!(
        writes[5] - writes[0] >= 1.9,
        "the fourth waits for the window: {writes:?}"
    );

    // With too little time left for the next window, the write is not sent: retryable.
    w.apply(CELL, 2, "vpc-2");
    let inv = cellbridge_tests::handle(
        &w.sync,
        &json!({"action": "sync", "cell": CELL}),
        Instant::now() + Duration::from_secs(4),
    )
    .await
    .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert!(r["error"].as_str().unwrap().contains("paced"), "{r}");

    // No room at all before the deadline: the state comes back without the base being read.
    let full = Pacing {
        limits: vec![Limit {
            count: 1,
            window: Duration::from_secs(60),
        }],
    };
    w.sync.fleet = GithubFleet::new(&w.bed.gh.url(), OWNER, REPO_NAME, None, &creds)
        .unwrap()
        .with_pacing(full);
    w.apply("eu-c9", 1, "vpc-1");
    let first = w.deliver("eu-c9").await;
    assert_eq!(
        (first["action"].as_str(), first["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "one write, then the window is full: {first}"
    );
    let before = w.bed.gh.requests()["requests"].as_array().unwrap().len();
    let r = w.deliver("eu-c9").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert!(r["error"].as_str().unwrap().contains("nothing was read"), "{r}");
    assert_eq!(
        w.bed.gh.requests()["requests"].as_array().unwrap().len(),
        before,
        "no request, not even the archive"
    );
}
