//! The credentials as an operator sees them: a token about to expire is in the
//! `GithubTokenDaysLeft` metric and warned of on the fleet dashboard (the double and github.com
//! with a token); a GitHub App installation whose grant lacks a permission is refused naming it,
//! before anything is written, and one without `checks: read` keeps working without check runs
//! (the double and GitHub Enterprise Server with an App). On the HTTP
//! fake only: an App identified by its client ID gets one installation token for the process,
//! narrowed to the fleet repository, and the installation's permissions are not read again.

use super::support::*;
use cellbridge::ports::cluster::access::format_rfc3339;
use cellbridge::shell::lambda::Shell;
use cellbridge::shell::metrics::{Captured, GITHUB_TOKEN_DAYS_LEFT, Metrics};
use cellbridge_tests::github::TOKEN;
use cellbridge_tests::leak;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime};

/// A bed whose credentials are a token GitHub can say expires.
pub(crate) trait ExpiringToken: Bed {
    /// GitHub's answers say from now on that the token expires at `at`.
    fn token_expires(&self, repo: &Self::Repo, at: SystemTime);
}

impl ExpiringToken for MemBed {
    fn token_expires(&self, repo: &Self::Repo, at: SystemTime) {
        repo.set_token_expiry(Some(at));
    }
}

impl ExpiringToken for HttpBed {
    fn token_expires(&self, _: &Self::Repo, at: SystemTime) {
        self.gh.expiring_token(TOKEN, &format_rfc3339(at));
    }
}

/// A bed whose credentials are a GitHub App installation's.
pub(crate) trait AppBed: Bed {
    /// An administrator sets the installation's repository permissions to exactly these.
    fn grant(&self, repo: &Self::Repo, permissions: &[(&str, &str)]);
}

impl AppBed for MemBed {
    fn grant(&self, repo: &Self::Repo, permissions: &[(&str, &str)]) {
        repo.grant(permissions);
    }
}

impl AppBed for GhesBed {
    fn grant(&self, _: &Self::Repo, permissions: &[(&str, &str)]) {
        let p: serde_json::Map<String, Value> = permissions.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
        self.gh.set_app(json!({ "permissions": p }));
    }
}

/// Invokes state-sync with `event`, its metric records kept: (answer, records).
async fn invoke_counted<B: Bed>(w: &World<B>, event: Value) -> (Value, Vec<Value>) {
    let captured = Captured::default();
    let shell = Shell {
        pause: Ok(None),
        metrics: Ok(Metrics::new("state-sync", &captured)),
        backoff: None,
    };
    let inv = cellbridge::shell::lambda::handler(&w.sync, &event, deadline(), &shell)
        .await
        .unwrap();
    leak::capture("github_scenarios: state-sync's answer", &inv.response.to_string());
    (inv.response, captured.records())
}

fn days_left(records: &[Value]) -> Vec<f64> {
    records
        .iter()
        .filter_map(|r| r[GITHUB_TOKEN_DAYS_LEFT].as_f64())
        .collect()
}

/// A token without expiry reports no `GithubTokenDaysLeft` and the dashboard says nothing of it;
/// once GitHub says it expires in five days, each invocation reports the days left once and the
/// dashboard warns, naming the date and the secret to put a new one in.
async fn a_token_about_to_expire_is_in_the_metric_and_warned_of_on_the_dashboard<B: ExpiringToken>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    let (r, records) = invoke_counted(&w, json!({"action": "sync", "cell": CELL})).await;
    assert_eq!(action(&r["cells"][0]), "opened", "{r}");
    assert_eq!(
        days_left(&records),
        Vec::<f64>::new(),
        "no datapoint without an expiry: {records:?}"
    );
    w.dashboard().await;
    assert!(!w.dashboards()[0].body.contains("GitHub token"), "{:?}", w.dashboards());

    // Whole seconds, as GitHub's header gives it.
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(now + 5 * 86_400 + 3_600);
    w.bed.token_expires(w.repo(), at);
    w.apply(CELL, 2, "vpc-2");
    let (r, records) = invoke_counted(&w, json!({"action": "sync", "cell": CELL})).await;
    assert_eq!(action(&r["cells"][0]), "updated", "{r}");
    let days = days_left(&records);
    assert!(days.len() == 1 && (5.0..5.1).contains(&days[0]), "{records:?}");
    let (_, records) = invoke_counted(&w, json!({"action": "dashboard"})).await;
    assert_eq!(days_left(&records).len(), 1, "{records:?}");
    let board = w.dashboards();
    assert_eq!(board.len(), 1, "{board:?}");
    let body = &board[0].body;
    assert!(
        body.contains("> [!WARNING]") && body.contains("expires in 5 days") && body.contains(&format_rfc3339(at)),
        "{body}"
    );
    assert!(body.contains("CELLBRIDGE_GITHUB_SECRET"), "{body}");
}

/// An App installation granted `statuses` read only (cellbridge posts statuses): the token
/// cellbridge asks for, narrowed to its permissions, is refused, and the state fails naming
/// `statuses=write` and what the installation grants, with nothing written and nothing reported
/// (GitHub refuses cellbridge). Once an administrator grants it, the next event opens the pull
/// request.
async fn an_installation_lacking_a_permission_is_refused_naming_it_before_any_write<B: AppBed>() {
    let w = World::<B>::start();
    let mut granted = vec![
        ("metadata", "read"),
        ("contents", "write"),
        ("pull_requests", "write"),
        ("issues", "write"),
        ("statuses", "read"),
    ];
    w.bed.grant(w.repo(), &granted);
    w.apply(CELL, 1, "vpc-1");
    let writes = w.writes();
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(
        e.contains("lacks the repository permission statuses=write") && e.contains("statuses=read"),
        "{e}"
    );
    assert!(
        r.get("reported").is_none(),
        "access failures are not reported on GitHub: {r}"
    );
    assert_eq!(w.writes(), writes, "nothing written");
    assert!(w.pulls().is_empty() && w.bed.issues(w.repo()).is_empty());

    granted[4] = ("statuses", "write");
    w.bed.grant(w.repo(), &granted);
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.assert_checked(CELL);
}

/// An App installation without `checks: read`: its token is asked for without it (GitHub refuses
/// one asking for a permission the installation lacks), the merge state is read without any check
/// run (nothing refused inside the answer), GitHub's auto-merge is turned on where a required check
/// is missing, and cellbridge never merges by itself, since it cannot see the head's check runs.
async fn an_installation_without_checks_read_keeps_working_without_check_runs<B: AppBed>() {
    let w = World::<B>::start();
    w.bed.grant(
        w.repo(),
        &[
            ("metadata", "read"),
            ("contents", "write"),
            ("pull_requests", "write"),
            ("issues", "write"),
            ("statuses", "write"),
        ],
    );
    let w = opted_in(w, "cells: ['*']\n").await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "waiting"), "{r}");
    assert!(
        r["auto_merge"]["detail"].as_str().unwrap().contains("checks=read"),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(w.pulls().iter().any(|p| p.number == n && p.open && !p.merged));

    w.bed.protect_main(
        w.repo(),
        Some((&[cellbridge::pure::plan::STATUS_CONTEXT, CI], 0, false)),
    );
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    let head = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &head, CI, true);
    assert!(
        w.pulls().iter().any(|p| p.number == n && p.merged),
        "GitHub's auto-merge merged it"
    );
}

/// On github.com, an App whose secret gives its client ID (GitHub's recommended JWT issuer):
/// one installation token for the process, asked for the fleet repository and cellbridge's
/// permissions; its answer is the permission check (the installation is not read); the pull
/// request opens with its status, and later events reuse the token.
#[tokio::test]
async fn http_an_app_by_its_client_id_mints_one_narrowed_token_for_the_process() {
    let w = http_world(app_credentials_by_client_id);
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.assert_checked(CELL);
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let app: Vec<String> = api_requests_since(&w, 0)
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| path.contains(" /app/"))
        .collect();
    assert_eq!(app, ["POST /app/installations/777/access_tokens"], "{app:?}");
}

/// An installation token GitHub stops accepting (revoked) is minted again once, and the state
/// syncs as without it.
#[tokio::test]
async fn http_a_revoked_installation_token_is_minted_again() {
    let w = http_world(app_credentials);
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.gh.revoke_installation_tokens();
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    w.assert_checked(CELL);
    let mints = api_requests_since(&w, 0)
        .into_iter()
        .filter(|(path, _)| path.ends_with("/access_tokens"))
        .count();
    assert_eq!(mints, 2);
}

scenarios!(
    mem_token: super::MemBed,
    http_fake: super::HttpBed;
    [a_token_about_to_expire_is_in_the_metric_and_warned_of_on_the_dashboard]
);

scenarios!(
    mem_app: super::MemBed,
    http_ghes: super::GhesBed;
    [
        an_installation_lacking_a_permission_is_refused_naming_it_before_any_write,
        an_installation_without_checks_read_keeps_working_without_check_runs,
    ]
);
