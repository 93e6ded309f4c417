//! Fault-injection matrix for state-sync: every external call the function makes (S3
//! GetObject, S3 ListObjectsV2 for sync-all, Secrets Manager GetSecretValue, and every kind of
//! GitHub request a clean sync sends) gets a 5xx, a throttle and a hang. Each case shows the
//! invocation either succeeds after bounded retries or fails with a retryable error, and that a
//! clean re-run then converges: one open pull request holding the latest state, nothing else.
//!
//! The GitHub request kinds are not hard-coded: a probe sync records them from the fake's
//! request log, so a new kind of request is covered (and must pass) as soon as the sync makes it.
//! States come from the recorded fixtures (`tests/fixtures/state_sync/faults-*.tfstate`, cell
//! `eu-c5`, vpc-1 then vpc-2), so no Terraform is needed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cellbridge::adapters::github::{GithubConfig, GithubFleet};
use cellbridge::adapters::s3::S3States;
use cellbridge::jobs::sync::{KeyPattern, SyncConfig, Syncer};
use cellbridge_tests::github::{FakeGithub, TOKEN};
use cellbridge_tests::kube::http_json;
use cellbridge_tests::{leak, moto, process};
use serde_json::{Value, json};

const OWNER: &str = "acme";
const REPO_NAME: &str = "fleet";
const REPO: &str = "acme/fleet";
const CELL: &str = "eu-c5";
const KEY: &str = "cells/eu-c5/terraform.tfstate";
/// A hang outlasts the deadline given to the faulted invocation (which must leave more than
/// the sync's start margin of 3 s plus its 1 s answer margin).
const HANG_SECS: u64 = 10;
const HANG_DEADLINE_SECS: u64 = 6;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    ServerError,
    Throttle,
    Hang,
    /// GitHub's answers that are no 5xx: inside an answer of HTTP 200 to a GraphQL request, an
    /// untyped error ("Something went wrong while executing your query",
    /// https://github.com/int128/wait-for-workflows-action/pull/104), `FORBIDDEN` at a path
    /// (https://github.com/philips-software/pull-request-report-action/issues/557) or a `type`
    /// cellbridge does not know (`INSUFFICIENT_SCOPES`, https://github.com/github/docs/issues/19712);
    /// to a REST request, 409 or 422. Each may fail the run for good, never as a refused state.
    Untyped,
    Forbidden,
    UnknownType,
    Conflict,
    Unprocessable,
}

impl Fault {
    /// Whether the shape is GitHub's answer inside a GraphQL 200 (`true`), a REST status
    /// (`false`), or neither (`None`: any call).
    fn graphql(self) -> Option<bool> {
        match self {
            Fault::Untyped | Fault::Forbidden | Fault::UnknownType => Some(true),
            Fault::Conflict | Fault::Unprocessable => Some(false),
            Fault::ServerError | Fault::Throttle | Fault::Hang => None,
        }
    }
}

/// Where the fault is injected: in the sync that opens the pull request, or in the one that
/// updates it (the update-only requests, such as PATCH of the branch, exist only there).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Open,
    Update,
}

#[derive(Clone, Debug)]
enum Call {
    S3Get,
    S3List,
    SecretValue,
    /// `METHOD /path-glob` as the fake GitHub matches it.
    Github(String),
}

struct Case {
    id: String,
    call: Call,
    phase: Phase,
    fault: Fault,
    /// How long a hang lasts.
    hang_secs: u64,
    /// The faulted invocation's deadline, for a hang.
    deadline_secs: u64,
    /// Skip the labels-and-status check.
    known_gap: bool,
}

/// The requests after which a cut-off run once left a pull request without its labels or
/// status for good (the status now goes before the body, and missing labels are added back);
/// `a_pull_request_cut_off_before_its_labels_and_status_is_completed_later` keeps them honest.
const LABELS_STATUS_GAP: [&str; 3] = [
    "POST /repos/acme/fleet/pulls",
    "POST /repos/acme/fleet/issues/*/labels",
    "PATCH /repos/acme/fleet/issues/*",
];

struct Bed {
    id: String,
    gh: FakeGithub,
    bucket: String,
    secret_name: String,
    s3: aws_sdk_s3::Client,
    service: Syncer<S3States, GithubFleet>,
}

impl Bed {
    /// Its own bucket, secret and fake GitHub, so cases run side by side without sharing faults.
    async fn new(id: &str) -> Bed {
        leak::init();
        let conf = moto::sdk_config().await;
        let s3 = moto::s3().await;
        let secrets = aws_sdk_secretsmanager::Client::new(&conf);
        let bucket = format!("flt-{id}");
        moto::create_bucket(&s3, &bucket).await;
        let gh = FakeGithub::start();
        gh.seed_example_fleet(REPO);
        leak::secret("faults: GitHub token", TOKEN);
        let secret_name = format!("cellbridge/github-faults-{id}");
        secrets
            .create_secret()
            .name(&secret_name)
            .secret_string(json!({ "token": TOKEN }).to_string())
            .send()
            .await
            .unwrap();
        let config = SyncConfig {
            // No base branch, so the default-branch lookup is one of the calls under test.
            github: GithubConfig::checked(OWNER.into(), REPO_NAME.into(), None, secret_name.clone(), gh.url()).unwrap(),
            state_bucket: bucket.clone(),
            key_pattern: KeyPattern::parse(cellbridge::jobs::sync::DEFAULT_KEY_PATTERN).unwrap(),
            flux_git_url: None,
            flux_git_branch: None,
        };
        let service = cellbridge::jobs::sync::service_for(config, &conf);
        Bed {
            id: id.into(),
            gh,
            bucket,
            secret_name,
            s3,
            service,
        }
    }

    /// Uploads the recorded state `faults-<n>.tfstate` as the cell's latest state.
    async fn put_state(&self, n: usize) {
        let path = process::repo_root().join(format!("tests/fixtures/state_sync/faults-{n}.tfstate"));
        let body = std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(KEY)
            .body(body.into())
            .send()
            .await
            .unwrap();
    }

    /// The Lambda handler with `secs` before its deadline.
    async fn invoke(&self, event: &Value, secs: u64) -> Result<Value, String> {
        let mut ctx = lambda_runtime::Context::default();
        ctx.request_id = format!("faults-{}", self.id);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        ctx.deadline = now_ms + secs * 1000;
        let r = cellbridge_tests::lambda_handler(&self.service, lambda_runtime::LambdaEvent::new(event.clone(), ctx))
            .await
            .map_err(|e| format!("{}: {}", e.error_type, e.error_message));
        let text = match &r {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        };
        leak::capture(&format!("state-sync handler (faults {})", self.id), &text);
        r
    }

    /// A clean sync that must succeed with `action`.
    async fn sync_ok(&self, event: &Value, actions: &[&str]) -> Value {
        let resp = self
            .invoke(event, 60)
            .await
            .unwrap_or_else(|e| panic!("[{}] clean sync failed: {e}", self.id));
        let cells = resp["cells"].as_array().cloned().unwrap_or_default();
        assert_eq!(cells.len(), 1, "[{}] one cell expected: {resp}", self.id);
        let action = cells[0]["action"].as_str().unwrap_or("");
        assert!(
            actions.contains(&action),
            "[{}] clean sync: action {action:?}, expected one of {actions:?}: {resp}",
            self.id
        );
        cells[0].clone()
    }
}

fn sync_cell() -> Value {
    json!({"action": "sync", "cell": CELL})
}

fn sync_all() -> Value {
    json!({"action": "sync-all"})
}

/// `GET /repos/acme/fleet/git/commits/<sha>` → `GET /repos/acme/fleet/git/commits/*`: one
/// kind per method and path with object ids and numbers wildcarded.
fn kind_of(method: &str, path: &str) -> String {
    let segs: Vec<String> = path
        .split('/')
        .map(|s| {
            let id = |s: &str| s.len() == 40 && s.chars().all(|c| c.is_ascii_hexdigit());
            let num = !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
            // A comparison names two commits: `<sha>...<sha>`.
            let compare = s.split_once("...").is_some_and(|(a, b)| id(a) && id(b));
            if id(s) || num || compare {
                "*".to_owned()
            } else {
                s.to_owned()
            }
        })
        .collect();
    let mut p = segs.join("/");
    // Branch names after refs/heads/ vary with the cell.
    if let Some(i) = p.find("/git/refs/heads/").or_else(|| p.find("/git/ref/heads/")) {
        let head = p[..i].to_owned() + &p[i..].splitn(5, '/').take(4).collect::<Vec<_>>().join("/");
        p = head + "/*";
    }
    format!("{method} {p}")
}

/// Every GitHub request kind of a clean open and of a clean update, with the phase it first
/// appears in. Asserts the kinds the sync is known to need are among them.
/// The labels and status contexts of the pull request a clean sync leaves (set by the probe).
static CLEAN_PR: std::sync::OnceLock<(Vec<String>, Vec<String>)> = std::sync::OnceLock::new();

fn labels_and_statuses(pr: &Value) -> (Vec<String>, Vec<String>) {
    let names = |v: &Value, field: &str| {
        let mut out: Vec<String> = v
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| x[field].as_str().unwrap_or("").to_owned())
            })
            .collect();
        out.sort();
        out
    };
    (names(&pr["labels"], "name"), names(&pr["statuses"], "context"))
}

async fn probe_github_kinds(tag: &str) -> Vec<(String, Phase)> {
    let bed = Bed::new(&format!("{tag}-probe")).await;
    bed.put_state(0).await;
    bed.gh.clear_requests();
    bed.sync_ok(&sync_cell(), &["opened"]).await;
    let open = bed.gh.requests();
    bed.put_state(1).await;
    bed.gh.clear_requests();
    bed.sync_ok(&sync_cell(), &["updated"]).await;
    let update = bed.gh.requests();
    let mut kinds: BTreeMap<String, Phase> = BTreeMap::new();
    for (log, phase) in [(&open, Phase::Open), (&update, Phase::Update)] {
        for r in log["requests"].as_array().unwrap() {
            let k = kind_of(r["method"].as_str().unwrap(), r["path"].as_str().unwrap());
            kinds.entry(k).or_insert(phase);
        }
    }
    let names: Vec<&String> = kinds.keys().collect();
    for needed in [
        // The cell's reading: its newest pull request, the refused issues, the base's tree.
        "POST /graphql",
        "POST /repos/acme/fleet/pulls",
        "POST /repos/acme/fleet/git/commits",
        "POST /repos/acme/fleet/git/refs",
    ] {
        assert!(kinds.contains_key(needed), "a clean sync makes {needed}: {names:?}");
    }
    assert!(
        names
            .iter()
            .any(|k| k.contains("/tarball") || k.contains("/_codeload/")),
        "a clean sync downloads the archive: {names:?}"
    );
    println!("GitHub request kinds of a clean sync: {kinds:?}");
    let state = bed.gh.state(REPO);
    let clean = labels_and_statuses(&state["pulls"][0]);
    assert!(
        !clean.0.is_empty() && !clean.1.is_empty(),
        "a clean sync labels the pull request and sets a status: {state}"
    );
    let _ = CLEAN_PR.set(clean);
    kinds.into_iter().collect()
}

fn moto_faults() -> Vec<Value> {
    let (status, v) = http_json("GET", &format!("{}/_cellbridge/faults", moto::endpoint()), None);
    assert_eq!(status, 200, "{v}");
    v.as_array().cloned().unwrap_or_default()
}

fn moto_fault(f: &Value) {
    let (status, v) = http_json(
        "POST",
        &format!("{}/_cellbridge/faults", moto::endpoint()),
        Some(f.clone()),
    );
    assert_eq!(status, 200, "{v}");
}

/// Injects the case's fault; returns how to tell it was hit.
fn inject(bed: &Bed, case: &Case) -> Value {
    let aws_kind = match case.fault {
        Fault::Throttle => "throttle",
        Fault::Hang => "timeout",
        _ => "5xx",
    };
    let aws = |service: &str, operation: String, body_contains: Option<&str>| {
        // One failure: the SDK's own retries carry the call through, or the deadline ends it.
        let f = json!({"service": service, "operation": operation, "kind": aws_kind, "count": 1,
                       "sleep": case.hang_secs, "body_contains": body_contains});
        moto_fault(&f);
        f
    };
    match &case.call {
        Call::S3Get => aws("s3", format!("^GET /{}/cells/", bed.bucket), None),
        Call::S3List => aws("s3", format!("^GET /{}/?$", bed.bucket), None),
        Call::SecretValue => aws("secretsmanager", "GetSecretValue".into(), Some(&bed.secret_name)),
        Call::Github(kind) => {
            let rule = match case.fault {
                Fault::ServerError => json!({"match": kind, "status": 502, "times": 2}),
                Fault::Throttle => {
                    json!({"match": kind, "secondary_rate_limit": true, "retry_after": 1, "times": 1})
                }
                Fault::Hang => json!({"match": kind, "delay_ms": case.hang_secs * 1000, "times": 1}),
                Fault::Untyped => json!({"match": kind, "times": 1, "graphql_errors": [
                    {"message": "Something went wrong while executing your query. Please include `9C8E:4B15:1F4E2A:3E1C7B:64DCF39F` when reporting this issue."}]}),
                Fault::Forbidden => json!({"match": kind, "times": 1, "graphql_errors": [
                    {"type": "FORBIDDEN", "path": ["repository"], "extensions": {"saml_failure": false},
                     "message": "Resource not accessible by personal access token"}]}),
                // Asked again twice, then final: each answer counts.
                Fault::UnknownType => json!({"match": kind, "times": 3, "graphql_errors": [
                    {"type": "INSUFFICIENT_SCOPES", "message": "Your token has not been granted the required scopes to execute this query."}]}),
                Fault::Conflict => json!({"match": kind, "status": 409, "message": "Conflict", "times": 1}),
                Fault::Unprocessable => {
                    json!({"match": kind, "status": 422, "message": "Validation Failed", "times": 1})
                }
            };
            bed.gh.fault(rule.clone());
            rule
        }
    }
}

/// The injected fault was met by the invocation (a case that never reached its call proves
/// nothing).
fn was_hit(bed: &Bed, case: &Case, rule: &Value) -> bool {
    match &case.call {
        Call::Github(_) => {
            let (_, v) = bed.gh.call("GET", "/_fake/faults", None);
            let left = v["faults"][0]["times"].as_i64().unwrap_or(-1);
            left < rule["times"].as_i64().unwrap()
        }
        _ => moto_faults()
            .iter()
            .filter(|f| f["operation"] == rule["operation"] && f["body_contains"] == rule["body_contains"])
            .any(|f| f["hits"].as_u64().unwrap_or(0) > 0),
    }
}

async fn run_case(case: Case) -> Result<String, String> {
    let bed = Bed::new(&case.id).await;
    let id = &case.id;
    let event = match case.call {
        Call::S3List => sync_all(),
        _ => sync_cell(),
    };
    let latest = match case.phase {
        Phase::Open => {
            bed.put_state(0).await;
            "vpc-1"
        }
        Phase::Update => {
            bed.put_state(0).await;
            bed.sync_ok(&event, &["opened"]).await;
            bed.put_state(1).await;
            "vpc-2"
        }
    };
    let rule = inject(&bed, &case);
    let secs = if case.fault == Fault::Hang {
        case.deadline_secs
    } else {
        30
    };
    let t = Instant::now();
    let r = bed.invoke(&event, secs).await;
    let took = t.elapsed();
    if !was_hit(&bed, &case, &rule) {
        return Err(format!("{NOT_REACHED}[{id}] the fault was never reached: {r:?}"));
    }
    let outcome = match &r {
        // GitHub's answers that are no 5xx may fail the run for good: never as a refused state.
        Ok(resp) if case.fault.graphql().is_some() => {
            let cells = resp["cells"].as_array().cloned().unwrap_or_default();
            if cells.len() != 1 || cells[0]["action"] == "refused" || cells[0].get("reported").is_some() {
                return Err(format!("[{id}] GitHub's failure reported as a refused state: {resp}"));
            }
            let issues = bed.gh.state(REPO)["issues"].as_array().cloned().unwrap_or_default();
            if !issues.is_empty() {
                return Err(format!("[{id}] an issue for GitHub's failure: {issues:?}"));
            }
            "answered"
        }
        Ok(resp) => {
            let cells = resp["cells"].as_array().cloned().unwrap_or_default();
            let ok = cells.len() == 1 && ["opened", "updated"].contains(&cells[0]["action"].as_str().unwrap_or(""));
            if !ok {
                return Err(format!("[{id}] neither synced nor a retryable failure: {resp}"));
            }
            "retried"
        }
        Err(e) => {
            // Lambda's errorType says so too, for alarms and the asynchronous-invocation retry.
            if !(e.contains("(retryable)") && e.starts_with("cellbridge.Retryable: ")) {
                return Err(format!("[{id}] failed without saying it is retryable: {e}"));
            }
            println!("{id}: {e}");
            "failed-retryable"
        }
    };
    // Bounded: no retry loop past the function's deadline (with a little slack to return).
    if took > Duration::from_secs(secs + 2) {
        return Err(format!("[{id}] ran {took:?} past a {secs} s deadline"));
    }
    // A hung request the client gave up on still lands at the server when its sleep ends;
    // let it, so the re-run meets the world the fault left behind.
    if case.fault == Fault::Hang {
        tokio::time::sleep(Duration::from_secs(case.hang_secs + 3).saturating_sub(took)).await;
    }
    bed.gh.clear_faults();

    // The clean re-run converges.
    let resp = bed
        .invoke(&event, 60)
        .await
        .map_err(|e| format!("[{id}] clean re-run failed: {e}"))?;
    let cells = resp["cells"].as_array().cloned().unwrap_or_default();
    let action = cells
        .first()
        .map(|c| c["action"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default();
    if cells.len() != 1 || !["opened", "updated", "unchanged", "in-sync"].contains(&action.as_str()) {
        return Err(format!("[{id}] clean re-run did not converge: {resp}"));
    }
    let state = bed.gh.state(REPO);
    let pulls = state["pulls"].as_array().cloned().unwrap_or_default();
    let open: Vec<&Value> = pulls.iter().filter(|p| p["state"] == "open").collect();
    if open.len() != 1 || pulls.len() != 1 {
        return Err(format!("[{id}] expected exactly one pull request, open: {pulls:?}"));
    }
    let branch_name = format!("cellbridge/{CELL}");
    if let Some(clean) = CLEAN_PR.get().filter(|_| !case.known_gap) {
        let got = labels_and_statuses(open[0]);
        if &got != clean {
            return Err(format!(
                "[{id}] the pull request's labels and statuses {got:?} differ from a clean sync's {clean:?}"
            ));
        }
    }
    if open[0]["head"]["ref"] != json!(branch_name) {
        return Err(format!("[{id}] the pull request is not on {branch_name}: {}", open[0]));
    }
    let files = &state["files"][&branch_name];
    let cm = files[format!("clusters/{CELL}/cell-metadata.yaml")]
        .as_str()
        .unwrap_or("");
    if !cm.contains(latest) {
        return Err(format!(
            "[{id}] the pull request does not hold the latest state ({latest}): {cm:?}"
        ));
    }
    if latest == "vpc-2" && cm.contains("vpc-1") {
        return Err(format!("[{id}] stale content on the branch: {cm:?}"));
    }
    // Nothing half-written: the only branches are the base and the cell's, and the base is
    // untouched.
    let branches: Vec<String> = match &state["branches"] {
        Value::Object(m) => m.keys().cloned().collect(),
        Value::Array(a) => a
            .iter()
            .map(|b| {
                b.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| b["name"].as_str().unwrap_or("").to_owned())
            })
            .collect(),
        _ => vec![],
    };
    if branches.iter().any(|b| b != "main" && *b != branch_name) {
        return Err(format!("[{id}] stray branches left behind: {branches:?}"));
    }
    if state["files"]["main"][format!("clusters/{CELL}/cell-metadata.yaml")].is_string() {
        return Err(format!("[{id}] the base branch was written to"));
    }
    Ok(format!("{id}: {outcome} in {took:.1?}, then converged ({action})"))
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty() && *p != "repos" && *p != "acme" && *p != "fleet")
        .collect::<Vec<_>>()
        .join("-")
}

fn case(id: String, call: Call, phase: Phase, fault: Fault, hang_secs: u64, known_gap: bool) -> Case {
    Case {
        id,
        call,
        phase,
        fault,
        hang_secs,
        deadline_secs: HANG_DEADLINE_SECS,
        known_gap,
    }
}

async fn matrix(fault: Fault, tag: &str) {
    moto::configure_env();
    let started = Instant::now();
    let unbounded = HANG_SECS;
    let mut cases = vec![
        case(
            format!("{tag}-s3get"),
            Call::S3Get,
            Phase::Open,
            fault,
            HANG_SECS,
            false,
        ),
        case(
            format!("{tag}-s3list"),
            Call::S3List,
            Phase::Open,
            fault,
            unbounded,
            false,
        ),
        case(
            format!("{tag}-secret"),
            Call::SecretValue,
            Phase::Open,
            fault,
            unbounded,
            false,
        ),
    ];
    for (kind, phase) in probe_github_kinds(tag).await {
        let id = format!("{tag}-gh-{}", slug(&kind));
        cases.push(case(id, Call::Github(kind), phase, fault, HANG_SECS, false));
    }
    run_all(cases, fault, started).await;
}

/// The REST kinds of a clean sync whose operation documents 409 or 422 in GitHub's REST
/// description (`@octokit/openapi`, as `make testbed` pins it): `git/create-tree`,
/// `git/create-commit`, `git/create-ref`, `git/update-ref` document both; `pulls/create`,
/// `issues/add-labels`, `issues/update` 422 only; `repos/get`, `repos/compare-commits` and
/// `repos/create-commit-status` neither, and are given neither.
fn documents(kind: &str, status: u16) -> bool {
    let both = [
        "POST /repos/acme/fleet/git/trees",
        "POST /repos/acme/fleet/git/commits",
        "POST /repos/acme/fleet/git/refs",
        "PATCH /repos/acme/fleet/git/refs/heads/*",
    ];
    let unprocessable = [
        "POST /repos/acme/fleet/pulls",
        "POST /repos/acme/fleet/issues/*/labels",
        "PATCH /repos/acme/fleet/issues/*",
    ];
    both.contains(&kind) || (status == 422 && unprocessable.contains(&kind))
}

/// GitHub's answers that are no 5xx, each given to every kind of request that answers it: the
/// GraphQL shapes to `POST /graphql`, 409 and 422 to every REST kind that documents it.
async fn answers_matrix(fault: Fault, tag: &str) {
    moto::configure_env();
    let started = Instant::now();
    let cases = probe_github_kinds(tag)
        .await
        .into_iter()
        .filter(|(kind, _)| match fault {
            Fault::Conflict => documents(kind, 409),
            Fault::Unprocessable => documents(kind, 422),
            _ => kind == "POST /graphql",
        })
        .map(|(kind, phase)| {
            let id = format!("{tag}-gh-{}", slug(&kind));
            case(id, Call::Github(kind), phase, fault, HANG_SECS, false)
        })
        .collect();
    run_all(cases, fault, started).await;
}

/// How a case says its fault was never met.
const NOT_REACHED: &str = "not reached: ";

/// A hang case whose deadline came before the sync reached the faulted call (the calls before
/// it took longer, on a loaded machine) proves nothing: it runs once more with twice the
/// deadline and a hang twice as long, on a bed of its own. Any other outcome stands.
async fn run_case_until_reached(case: Case) -> Result<String, String> {
    let again = Case {
        id: format!("{}-slow", case.id),
        call: case.call.clone(),
        hang_secs: case.hang_secs * 2,
        deadline_secs: case.deadline_secs * 2,
        ..case
    };
    match run_case(case).await {
        Err(e) if again.fault == Fault::Hang && e.starts_with(NOT_REACHED) => {
            println!("{e}; once more with a {} s deadline", again.deadline_secs);
            run_case(again).await.map_err(|e| e.replacen(NOT_REACHED, "", 1))
        }
        other => other.map_err(|e| e.replacen(NOT_REACHED, "", 1)),
    }
}

async fn run_all(cases: Vec<Case>, fault: Fault, started: Instant) {
    let covered: Vec<String> = cases.iter().map(|c| format!("{:?} {:?}", c.call, c.phase)).collect();
    let handles: Vec<_> = cases
        .into_iter()
        .map(|c| tokio::spawn(run_case_until_reached(c)))
        .collect();
    let mut failures = Vec::new();
    for h in handles {
        match h.await.unwrap() {
            Ok(line) => println!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    println!(
        "{fault:?}: {} calls in {:.1?}: {covered:?}",
        covered.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} case(s) misbehaved:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_5xx_at_any_call_is_retried_or_fails_retryably_and_a_rerun_converges() {
    matrix(Fault::ServerError, "e5xx").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_throttle_at_any_call_is_retried_or_fails_retryably_and_a_rerun_converges() {
    matrix(Fault::Throttle, "thr").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn githubs_answers_that_are_no_5xx_at_any_call_are_never_a_refused_state_and_a_rerun_converges() {
    for (fault, tag) in [
        (Fault::Untyped, "unt"),
        (Fault::Forbidden, "fbd"),
        (Fault::UnknownType, "unk"),
        (Fault::Conflict, "409"),
        (Fault::Unprocessable, "422"),
    ] {
        answers_matrix(fault, tag).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "slow: every hang waits out a timeout (about a minute of the suite); `make bench` runs it"]
async fn a_hang_at_any_call_is_cut_by_the_deadline_and_a_rerun_converges() {
    matrix(Fault::Hang, "hang").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "slow: every hang waits out a timeout (about a minute of the suite); `make bench` runs it"]
async fn a_hang_at_the_listing_or_the_secret_is_cut_by_the_deadline() {
    moto::configure_env();
    let started = Instant::now();
    let fault = Fault::Hang;
    let cases = vec![
        case("gap-s3list".into(), Call::S3List, Phase::Open, fault, HANG_SECS, false),
        case(
            "gap-secret".into(),
            Call::SecretValue,
            Phase::Open,
            fault,
            HANG_SECS,
            false,
        ),
    ];
    run_all(cases, fault, started).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pull_request_cut_off_before_its_labels_and_status_is_completed_later() {
    moto::configure_env();
    let started = Instant::now();
    let fault = Fault::Hang;
    let cases = probe_github_kinds("gapl")
        .await
        .into_iter()
        .filter(|(k, _)| LABELS_STATUS_GAP.contains(&k.as_str()))
        .map(|(k, phase)| {
            case(
                format!("gapl-{}", slug(&k)),
                Call::Github(k),
                phase,
                fault,
                HANG_SECS,
                false,
            )
        })
        .collect();
    run_all(cases, fault, started).await;
}

/// S3 refusing a read (a missing IAM grant: 403 AccessDenied) is a final failure in one line an
/// operator can act on: the object, S3's status and code, and the permission the role needs;
/// never the SDK's nested debug context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_refusing_a_read_is_one_final_line_naming_the_permission() {
    moto::configure_env();
    let bed = Bed::new("denied").await;
    bed.put_state(1).await;
    moto_fault(
        &json!({"service": "s3", "operation": format!("^GET /{}/cells/", bed.bucket),
                       "kind": "denied", "count": 1}),
    );
    let resp = bed.invoke(&sync_cell(), 60).await.expect("a handled answer");
    let r = &resp["cells"][0];
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{resp}"
    );
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("s3://{}/{KEY}", bed.bucket))
            && error.contains("HTTP 403 AccessDenied")
            && error.contains("s3:GetObject"),
        "{error}"
    );
    for shape in ["Some(", "Error {", "ServiceError", "\n"] {
        assert!(!error.contains(shape), "debug shape {shape:?} in {error:?}");
    }
    assert!(error.len() < 400, "{} characters: {error}", error.len());
}

#[path = "faults/phases.rs"]
mod phases;
