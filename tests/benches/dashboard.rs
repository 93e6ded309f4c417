//! `cargo bench -p cellbridge-tests --bench dashboard`: the fleet dashboard over 1,000 pending
//! cells, against moto and the fake GitHub: every cell's state differs from the fleet repo, 400
//! have their pull request open (the head's strict check passing, failing or not posted, a third
//! each), 100 were declined (their newest pull request closed unmerged while it proposed exactly
//! the state's values), 500 have nothing on GitHub.
//!
//! `{"action": "dashboard"}` runs once in a child process, as Lambda runs an invocation in a
//! process of its own. The bench prints the GitHub requests it made, by operation, and the
//! GraphQL points they cost (the fake's cost model), next to the goal of at most 20 requests
//! (over it: `BUDGET CHECK FAILED`, and the bench fails); then it reads the written issue as a
//! person would and checks every row against what was seeded, failing on any row that is wrong.
//! The single syncs' requests (new cell, in sync) are the `github` bench's, held to docs/github.md's
//! table there.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cellbridge_tests::fleetgen;
use cellbridge_tests::github::{FakeGithub, TOKEN};
use cellbridge_tests::moto;
use futures::StreamExt;
use serde_json::{Value, json};

const CELLS: usize = 1000;
/// The goal: the whole dashboard of 1,000 pending cells in at most this many GitHub requests.
const GOAL_REQUESTS: usize = 20;
const REPO: &str = "acme/fleet-dashboard";
const BUCKET: &str = "bench-dashboard";
const SECRET: &str = "bench-dashboard/github";
/// state-sync's timeout (`state_sync_timeout_seconds`' default): the invocation's deadline.
const TIMEOUT: Duration = Duration::from_secs(300);
/// How the child hands its answer back: the last stdout line starting with this.
const RESULT: &str = "BENCH-RESULT ";
const CONTEXT: &str = "cellbridge/strict-substitution";
const FAILING: &str = "unset variable: ingress_class";

/// What GitHub holds for a cell, as seeded: what its row must say.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seeded {
    Open { number: u64, check: Check },
    Declined { number: u64 },
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Passes,
    Fails,
    NotPosted,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--child" {
        child(serde_json::from_str(&args[2]).expect("the child's spec"));
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and test harness probes
    }
    println!("== The fleet dashboard over 1,000 pending cells ==");
    if let Some(why) = cellbridge_tests::github::missing_bed() {
        println!("SKIPPED: {why}");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let failed = rt.block_on(run());
    if failed {
        std::process::exit(1);
    }
}

/// The measured side: `{"action": "dashboard"}` in a process of its own (the AWS endpoint and
/// credentials come from the environment).
fn child(spec: Value) {
    cellbridge::shell::telemetry::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(async {
        let conf = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        let service = cellbridge::jobs::sync::service_for(
            cellbridge_tests::github::sync_config(spec["gh"].as_str().unwrap(), REPO, BUCKET, SECRET),
            &conf,
        );
        let t = Instant::now();
        let answer = cellbridge_tests::lambda_handler(
            &service,
            lambda_runtime::LambdaEvent::new(
                json!({"action": "dashboard"}),
                cellbridge_tests::lambda_context(TIMEOUT.as_secs()),
            ),
        )
        .await;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        match answer {
            Ok(v) => json!({"answer": v, "handler_ms": ms}),
            Err(e) => json!({"error": format!("{e:?}"), "handler_ms": ms}),
        }
    });
    println!("{RESULT}{result}");
}

/// What the cell's state holds: the fleet's values but one (`podinfo_replicas` 3 for 2), so every
/// cell is pending with one key changed.
fn state_values(i: usize, cell: &str) -> BTreeMap<String, String> {
    fleetgen::cell_data(i, cell, 3)
        .into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// Which cells get what: spread over the names (every tenth cell from the fifth declined, so some
/// sit far past the 300th name), the open ones' checks in turn.
fn plan_for(i: usize) -> Option<(bool, Check)> {
    match i % 10 {
        0..=3 => Some((
            true,
            [Check::Passes, Check::Fails, Check::NotPosted][(i / 10 + i % 10) % 3],
        )),
        4 => Some((false, Check::NotPosted)),
        _ => None,
    }
}

/// The fake's control API, without a token.
fn control(gh: &FakeGithub, path: &str, body: &Value) -> Value {
    let port: u16 = gh
        .url()
        .trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("the fake's port");
    let (status, v) = cellbridge_tests::github::http(port, "POST", path, Some(body), None);
    assert!((200..300).contains(&status), "{path}: HTTP {status}: {v}");
    v
}

/// The 500 pull requests, in one request to the fake; what each cell's row must say.
fn seed_pulls(gh: &FakeGithub, cells: &[String]) -> BTreeMap<String, Seeded> {
    let mut pulls = Vec::new();
    let mut whose = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let Some((open, check)) = plan_for(i) else { continue };
        let values = state_values(i, cell);
        let digest = cellbridge::rules::pull_request::values_digest_of(&values);
        let mut p = json!({
            "head": format!("cellbridge/{cell}"),
            "title": format!("cellbridge: {cell}: 1 key changed"),
            "files": {format!("clusters/{cell}/cell-metadata.yaml"): format!("data:\n  podinfo_replicas: \"3\"\n  cell_name: {cell}\n")},
            "body": format!("podinfo_replicas: 2 → 3\n\n<!-- cellbridge:kind=metadata values={digest} -->\n"),
        });
        if open {
            let state = match check {
                Check::Passes => Some("success"),
                Check::Fails => Some("failure"),
                Check::NotPosted => None,
            };
            if let Some(s) = state {
                p["statuses"] = json!({CONTEXT: s});
                p["description"] = json!(if s == "failure" {
                    FAILING
                } else {
                    "every variable is set"
                });
            }
        } else {
            p["state"] = json!("closed");
        }
        pulls.push(p);
        whose.push((cell.clone(), open, check));
    }
    let seeded = control(
        gh,
        "/_fake/pulls",
        &json!({"repo": REPO, "base": "main", "pulls": pulls}),
    );
    let mut expect: BTreeMap<String, Seeded> = cells.iter().map(|c| (c.clone(), Seeded::Nothing)).collect();
    for ((cell, open, check), p) in whose.into_iter().zip(seeded["pulls"].as_array().unwrap()) {
        let number = p["number"].as_u64().unwrap();
        expect.insert(
            cell,
            if open {
                Seeded::Open { number, check }
            } else {
                Seeded::Declined { number }
            },
        );
    }
    expect
}

/// A request's operation: a GraphQL call's name, else the method and the path with the
/// repository, numbers and names that vary left out.
fn operation(r: &Value) -> String {
    if let Some(op) = r["graphql"].as_str() {
        // A page GitHub gave up on, or a refusal, is counted apart from the answers.
        return match r["status"].as_u64() {
            Some(200) | None => op.to_owned(),
            Some(status) => format!("{op} (HTTP {status})"),
        };
    }
    let path = r["path"].as_str().unwrap_or_default();
    if path.starts_with("/_codeload/") {
        return "archive download (codeload)".into();
    }
    let path = path.replace(REPO, "{repo}");
    let shape: Vec<&str> = path
        .split('/')
        .map(|seg| {
            if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) {
                "{n}"
            } else {
                seg
            }
        })
        .collect();
    format!("{} {}", r["method"].as_str().unwrap_or("?"), shape.join("/"))
}

/// One table row as a person reads it: the cell (between backticks), what, and the last column.
fn rows(body: &str) -> Vec<(String, String, String)> {
    body.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cols: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            (
                cols[0].trim_matches('`').to_owned(),
                cols.get(1).copied().unwrap_or_default().to_owned(),
                cols.last().copied().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Why the row is wrong for what was seeded, if it is.
fn wrong(seeded: &Seeded, what: &str, detail: &str) -> Option<String> {
    if what != "pending" {
        return Some(format!("shown {what:?}, not pending"));
    }
    let has = |s: &str| detail.contains(s);
    let ok = match seeded {
        Seeded::Open { number, check } => {
            has(&format!("pull request #{number} open"))
                && match check {
                    Check::Passes => has("strict check passes"),
                    Check::Fails => has("strict check fails") && has(FAILING),
                    Check::NotPosted => has("strict check not posted"),
                }
        }
        Seeded::Declined { number } => has(&format!("declined: #{number} ")),
        Seeded::Nothing => has("no pull request open yet") && !has("#"),
    };
    (!ok).then(|| format!("seeded {seeded:?}, shown {detail:?}"))
}

/// The figures and checks; `true` when the bench failed.
async fn run() -> bool {
    let conf = moto::sdk_config().await;
    let s3 = moto::s3().await;
    let _ = aws_sdk_secretsmanager::Client::new(&conf)
        .create_secret()
        .name(SECRET)
        .secret_string(json!({"token": TOKEN}).to_string())
        .send()
        .await;
    let gh = FakeGithub::start();
    let t = Instant::now();
    let fleet = fleetgen::fleet(CELLS);
    fleetgen::seed_from_disk(&gh, REPO, &fleet.root);
    moto::create_bucket(&s3, BUCKET).await;
    let puts = fleet.cells.iter().enumerate().map(|(i, cell)| {
        let s3 = s3.clone();
        async move {
            s3.put_object()
                .bucket(BUCKET)
                .key(format!("cells/{cell}/terraform.tfstate"))
                .body(fleetgen::state(i, cell, 2, 3).into_bytes().into())
                .send()
                .await
                .unwrap();
        }
    });
    futures::stream::iter(puts)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    let expect = seed_pulls(&gh, &fleet.cells);
    let count = |f: &dyn Fn(&Seeded) -> bool| expect.values().filter(|s| f(s)).count();
    println!(
        "seeded in {:.1} s: {CELLS} pending states (one value differs from the fleet repo); {} pull requests open ({} passing, {} failing, {} not checked), {} declined, {} with nothing",
        t.elapsed().as_secs_f64(),
        count(&|s| matches!(s, Seeded::Open { .. })),
        count(&|s| matches!(
            s,
            Seeded::Open {
                check: Check::Passes,
                ..
            }
        )),
        count(&|s| matches!(
            s,
            Seeded::Open {
                check: Check::Fails,
                ..
            }
        )),
        count(&|s| matches!(
            s,
            Seeded::Open {
                check: Check::NotPosted,
                ..
            }
        )),
        count(&|s| matches!(s, Seeded::Declined { .. })),
        count(&|s| *s == Seeded::Nothing),
    );

    gh.clear_requests();
    let out = tempfile::NamedTempFile::new().unwrap();
    let start = Instant::now();
    let spec = json!({"gh": gh.url()});
    // Waited for by `rusage::wait` (wait4, which also gives its resource use).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .arg(spec.to_string())
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let usage = cellbridge_tests::rusage::wait(&child);
    let wall = start.elapsed();
    let text = std::fs::read_to_string(out.path()).unwrap();
    let result: Value = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(RESULT))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| json!({"error": format!("the child ended ({}) without a result", usage.status)}));
    let dashboard = &result["answer"]["dashboard"];
    println!(
        "{{\"action\": \"dashboard\"}} in a child process: {} in {:.1} s wall, {:.1} s CPU, {:.0} MB peak RSS",
        dashboard["action"].as_str().unwrap_or("no answer"),
        wall.as_secs_f64(),
        usage.cpu.as_secs_f64(),
        usage.max_rss_kb as f64 / 1024.0
    );

    let log = gh.requests();
    let reqs = log["requests"].as_array().cloned().unwrap_or_default();
    let mut by_op: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for r in &reqs {
        let e = by_op.entry(operation(r)).or_default();
        e.0 += 1;
        e.1 += r["points"].as_u64().unwrap_or(0);
    }
    println!("GitHub requests by operation (GraphQL points, the fake's cost model):");
    for (op, (n, points)) in &by_op {
        let points = if op.starts_with("graphql/") {
            format!("{points} points")
        } else {
            String::new()
        };
        println!("  {n:>4}  {op:<48} {points}");
    }
    let points: u64 = by_op.values().map(|(_, p)| p).sum();
    let within = reqs.len() <= GOAL_REQUESTS;
    println!(
        "total: {} requests ({} writes), {points} GraphQL points; goal: at most {GOAL_REQUESTS} requests: {}",
        reqs.len(),
        reqs.iter().filter(|r| r["write"].as_bool().unwrap_or(false)).count(),
        if within { "yes" } else { "no" }
    );

    let mut failures = Vec::new();
    if !within {
        failures.push(format!(
            "BUDGET CHECK FAILED: the dashboard made {} GitHub requests, the goal is at most {GOAL_REQUESTS}",
            reqs.len()
        ));
    }
    match check_issue(&gh, &expect) {
        Ok(line) => println!("{line}"),
        Err(why) => failures.push(format!("DASHBOARD CHECK FAILED: {why}")),
    }
    println!(
        "(the single syncs' requests, new cell and in sync, are the `github` bench's, held to docs/github.md's table)"
    );
    for f in &failures {
        println!("{f}");
    }
    !failures.is_empty()
}

/// Reads the written dashboard issue and checks every row against `expect`: the counts line and
/// a row per cell shown, each saying what GitHub holds for it; cells not shown within GitHub's
/// body limit must be the ones the issue counts as not shown.
fn check_issue(gh: &FakeGithub, expect: &BTreeMap<String, Seeded>) -> Result<String, String> {
    // Through the API, as a person's client lists it (the fake's whole state, 500 branches of a
    // 1,000-cell fleet, is too much to answer).
    let (status, listed) = gh.call(
        "GET",
        &format!(
            "/repos/{REPO}/issues?state=open&labels={}",
            cellbridge::rules::dashboard::LABEL_DASHBOARD
        ),
        None,
    );
    if status != 200 {
        return Err(format!("listing the dashboard issue: HTTP {status}: {listed}"));
    }
    let issues: Vec<Value> = listed
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i.get("pull_request").is_none())
        .collect();
    let [issue] = issues.as_slice() else {
        return Err(format!("{} open dashboard issues, expected one", issues.len()));
    };
    let body = issue["body"].as_str().unwrap_or_default();
    let plain = body.replace(',', "");
    if !plain.contains(&format!("{} cells: {} pending", expect.len(), expect.len())) {
        return Err(format!(
            "the counts line does not say {} cells, all pending: {:?}",
            expect.len(),
            body.lines().find(|l| l.starts_with("**"))
        ));
    }
    let open = expect.values().filter(|s| matches!(s, Seeded::Open { .. })).count();
    if !plain.contains(&format!("{open} pull requests open")) {
        return Err(format!("the issue does not say {open} pull requests open"));
    }
    let mut wrongs = Vec::new();
    let mut seen = BTreeMap::new();
    for (cell, what, detail) in rows(body) {
        match expect.get(&cell) {
            None => wrongs.push(format!("{cell}: a row for a cell not seeded")),
            Some(s) => {
                if let Some(why) = wrong(s, &what, &detail) {
                    wrongs.push(format!("{cell}: {why}"));
                }
            }
        }
        *seen.entry(cell).or_insert(0) += 1;
    }
    wrongs.extend(
        seen.iter()
            .filter(|(_, n)| **n > 1)
            .map(|(c, n)| format!("{c}: {n} rows")),
    );
    let not_shown: usize = body
        .lines()
        .find_map(|l| {
            l.strip_prefix("… and ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.replace(',', "").parse().ok())
        })
        .unwrap_or(0);
    if seen.len() + not_shown != expect.len() {
        wrongs.push(format!(
            "{} rows shown and {not_shown} counted as not shown, for {} cells",
            seen.len(),
            expect.len()
        ));
    }
    if !wrongs.is_empty() {
        return Err(format!(
            "{} wrong (of {} rows):\n  {}",
            wrongs.len(),
            seen.len(),
            wrongs.iter().take(20).cloned().collect::<Vec<_>>().join("\n  ")
        ));
    }
    let kinds = |f: &dyn Fn(&Seeded) -> bool| seen.keys().filter(|c| f(&expect[*c])).count();
    Ok(format!(
        "the dashboard issue: {} rows checked against the seed, every one right ({} open: {} passing, {} failing, {} not checked; {} declined; {} with nothing){}",
        seen.len(),
        kinds(&|s| matches!(s, Seeded::Open { .. })),
        kinds(&|s| matches!(
            s,
            Seeded::Open {
                check: Check::Passes,
                ..
            }
        )),
        kinds(&|s| matches!(
            s,
            Seeded::Open {
                check: Check::Fails,
                ..
            }
        )),
        kinds(&|s| matches!(
            s,
            Seeded::Open {
                check: Check::NotPosted,
                ..
            }
        )),
        kinds(&|s| matches!(s, Seeded::Declined { .. })),
        kinds(&|s| *s == Seeded::Nothing),
        if not_shown > 0 {
            format!("; {not_shown} more counted as not shown (GitHub's 65,536-character body limit)")
        } else {
            String::new()
        }
    ))
}
