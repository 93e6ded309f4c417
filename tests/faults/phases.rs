//! The fault matrix's later phases on the HTTP fake, as the in-memory matrix
//! (`shared/tests/rules/fault_matrix.rs`) runs them: a decommission (a destroyed state whose
//! cluster is gone from moto's EKS), auto-merge turned on, a merge by cellbridge, and the
//! dashboard. Every kind of GitHub request a clean run of the phase makes (a GraphQL request
//! by its operation) is given GitHub's unhappy answers: a 5xx past the retries; inside an answer
//! of HTTP 200 an untyped error, `FORBIDDEN` at a path and an error of a type cellbridge does not
//! know; to a REST write, 409 and 422. After each:
//!
//! - never a merge, nor an auto-merge enabled by cellbridge, of a head that changes more than the
//!   cell's `cell-metadata.yaml`;
//! - never a passing status on a head whose merge state cellbridge could not read;
//! - never a state reported refused for GitHub's failure: no refused cell, no `cellbridge-refused`
//!   issue, no failing `cellbridge/contract` status;
//! - a clean run after the fault converges, and the one after it writes nothing.
//!
//! By default each kind gets one shape (the shapes taken in turn across the kinds);
//! `CELLBRIDGE_FAULT_SHAPES=all` (`make bench`) gives each kind every shape.

use super::*;
use cellbridge::adapters::github::operations as ops;

const STRICT: &str = "cellbridge/strict-substitution";
const CONTRACT: &str = "cellbridge/contract";
const CI: &str = "ci/build";
const CM: &str = "clusters/eu-c5/cell-metadata.yaml";
const OPT_IN: &str = ".cellbridge/auto-merge.yaml";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Later {
    Decommission,
    AutoMergeEnabled,
    AutoMergeMerged,
    Dashboard,
}

const LATER: [Later; 4] = [
    Later::Decommission,
    Later::AutoMergeEnabled,
    Later::AutoMergeMerged,
    Later::Dashboard,
];

/// A kind of request: `METHOD /path-glob` as [`kind_of`] names it, and for `POST /graphql` the
/// operation the fake's request log names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Kind {
    call: String,
    operation: Option<String>,
}

impl Kind {
    fn shapes(&self) -> Vec<Fault> {
        if self.operation.is_some() {
            vec![Fault::ServerError, Fault::Untyped, Fault::Forbidden, Fault::UnknownType]
        } else if self.call.starts_with("GET ") || !self.call.contains(" /repos/") {
            // GitHub's general 409 and 422 refuse writes; a read (and the archive download,
            // which is no API operation) gets the 5xx only.
            vec![Fault::ServerError]
        } else {
            vec![Fault::ServerError, Fault::Conflict, Fault::Unprocessable]
        }
    }

    fn name(&self) -> String {
        match &self.operation {
            Some(op) => format!("{} {op}", self.call),
            None => self.call.clone(),
        }
    }
}

impl Later {
    fn event(self) -> Value {
        match self {
            Later::Dashboard => json!({"action": "dashboard"}),
            _ => sync_cell(),
        }
    }

    /// What a clean run of the phase answers.
    fn clean(self, resp: &Value) -> bool {
        let cell = &resp["cells"][0];
        match self {
            Later::Decommission => cell["action"] == "decommission-opened",
            Later::AutoMergeEnabled => cell["auto_merge"]["done"] == "enabled",
            Later::AutoMergeMerged => cell["auto_merge"]["done"] == "merged",
            Later::Dashboard => resp["dashboard"]["action"] == "created",
        }
    }
}

/// GitHub's "Merge a pull request" as a person does it
/// (https://docs.github.com/rest/pulls/pulls#merge-a-pull-request).
fn merge_as_person(bed: &Bed, number: u64) {
    let (status, out) = bed.gh.call(
        "PUT",
        &format!("/repos/{REPO}/pulls/{number}/merge"),
        Some(&json!({"merge_method": "merge"})),
    );
    assert_eq!(status, 200, "[{}] merge #{number}: {out}", bed.id);
}

/// The world just before the phase's run: the cell's first pull request opened (and, but for
/// the dashboard, merged), then what the phase needs.
async fn before(later: Later, id: &str) -> Bed {
    let bed = Bed::new(id).await;
    bed.put_state(0).await;
    let opened = bed.sync_ok(&sync_cell(), &["opened"]).await;
    let number = opened["pull_request"]["number"]
        .as_u64()
        .unwrap_or_else(|| panic!("[{id}] no pull request: {opened}"));
    if later == Later::Dashboard {
        bed.gh.clear_requests();
        return bed;
    }
    merge_as_person(&bed, number);
    match later {
        Later::Decommission => {
            // `terraform destroy`'s state: the same lineage, a later serial, nothing left. No
            // cluster of the cell's name exists in moto's EKS.
            let path = process::repo_root().join("tests/fixtures/state_sync/faults-1.tfstate");
            let mut state: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            state["serial"] = json!(state["serial"].as_u64().unwrap() + 1);
            state["outputs"] = json!({});
            state["resources"] = json!([]);
            bed.s3
                .put_object()
                .bucket(&bed.bucket)
                .key(KEY)
                .body(state.to_string().into_bytes().into())
                .send()
                .await
                .unwrap();
        }
        Later::AutoMergeEnabled | Later::AutoMergeMerged => {
            bed.gh
                .commit(REPO, "main", &[(OPT_IN, Some("cells: ['*']\n"))], "opt cells in");
            bed.gh.allow_auto_merge(REPO, true);
            if later == Later::AutoMergeEnabled {
                // A required CI context not yet reported: GitHub's auto-merge waits for it.
                // https://docs.github.com/rest/branches/branch-protection#update-branch-protection
                let (status, out) = bed.gh.call(
                    "PUT",
                    &format!("/repos/{REPO}/branches/main/protection"),
                    Some(&json!({
                        "required_status_checks": {"strict": false, "contexts": [STRICT, CI]},
                        "enforce_admins": true,
                        "required_pull_request_reviews": null,
                        "restrictions": null,
                    })),
                );
                assert!((200..300).contains(&status), "[{id}] protection: HTTP {status}: {out}");
            }
            bed.put_state(1).await;
        }
        Later::Dashboard => unreachable!("returned above"),
    }
    bed.gh.clear_requests();
    bed
}

/// Every kind of GitHub request a clean run of the phase makes, in the order first made.
async fn probe(later: Later) -> Vec<Kind> {
    let id = format!("{}-probe", tag(later));
    let bed = before(later, &id).await;
    let resp = bed
        .invoke(&later.event(), 60)
        .await
        .unwrap_or_else(|e| panic!("[{id}] a clean {later:?} failed: {e}"));
    assert!(later.clean(&resp), "[{id}] a clean {later:?}: {resp}");
    let mut kinds: Vec<Kind> = Vec::new();
    for r in bed.gh.requests()["requests"].as_array().unwrap() {
        let mut call = kind_of(r["method"].as_str().unwrap(), r["path"].as_str().unwrap());
        // A comparison of the base's name with a commit, as one of two commits.
        if let Some(i) = call.find("/compare/") {
            call = format!("{}/compare/*", &call[..i]);
        }
        let kind = Kind {
            call,
            // The log names `graphql/<operation>`; a fault rule names the operation.
            operation: r["graphql"]
                .as_str()
                .map(|op| op.trim_start_matches("graphql/").to_owned()),
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    println!("GitHub request kinds of a clean {later:?}: {kinds:?}");
    kinds
}

fn tag(later: Later) -> &'static str {
    match later {
        Later::Decommission => "dec",
        Later::AutoMergeEnabled => "ame",
        Later::AutoMergeMerged => "amm",
        Later::Dashboard => "dsh",
    }
}

/// The fake's rule for `fault` at `kind`.
fn rule(kind: &Kind, fault: Fault) -> Value {
    let mut rule = match fault {
        Fault::ServerError => json!({"status": 502, "times": 2}),
        Fault::Untyped => json!({"times": 1, "graphql_errors": [
            {"message": "Something went wrong while executing your query. Please include `9C8E:4B15:1F4E2A:3E1C7B:64DCF39F` when reporting this issue."}]}),
        Fault::Forbidden => {
            // At the root field the operation asks: `repository` for the queries here, the
            // mutation's own name for a mutation.
            let name = kind.operation.clone().unwrap_or_default();
            let mutation = ops::GRAPHQL.iter().any(|g| g.name == name && g.mutation);
            let path = if mutation { name } else { "repository".to_owned() };
            json!({"times": 1, "graphql_errors": [
                {"type": "FORBIDDEN", "path": [path], "extensions": {"saml_failure": false},
                 "message": "Resource not accessible by integration"}]})
        }
        // Asked again twice, then final: each answer counts.
        Fault::UnknownType => json!({"times": 3, "graphql_errors": [
            {"type": "INSUFFICIENT_SCOPES", "message": "Your token has not been granted the required scopes to execute this query."}]}),
        Fault::Conflict => json!({"status": 409, "message": "Conflict", "times": 1}),
        Fault::Unprocessable => json!({"status": 422, "message": "Validation Failed", "times": 1}),
        Fault::Throttle | Fault::Hang => unreachable!("the later phases give no throttle or hang"),
    };
    rule["match"] = json!(kind.call);
    if let Some(op) = &kind.operation {
        rule["operation"] = json!(op);
    }
    rule
}

fn open_pull(state: &Value) -> Option<Value> {
    state["pulls"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["state"] == "open" && p["head"]["ref"] == json!(format!("cellbridge/{CELL}")))
        .cloned()
}

/// Paths whose content differs between two `{path: text}` maps, but the cell's metadata.
fn beyond_metadata(a: &Value, b: &Value) -> Vec<String> {
    let (a, b) = (
        a.as_object().cloned().unwrap_or_default(),
        b.as_object().cloned().unwrap_or_default(),
    );
    let mut paths: Vec<&String> = a.keys().chain(b.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|p| a.get(*p) != b.get(*p) && *p != CM)
        .cloned()
        .collect()
}

/// The four invariants after a run that began with `main_before` on main.
fn invariants(
    id: &str,
    bed: &Bed,
    r: &Result<Value, String>,
    main_before: &Value,
    merge_state_faulted: bool,
) -> Result<(), String> {
    let state = bed.gh.state(REPO);
    // Never a merge of a head that brings more than the cell's metadata: what main gained in
    // this run.
    let beyond = beyond_metadata(main_before, &state["files"]["main"]);
    if !beyond.is_empty() {
        return Err(format!("[{id}] main gained {beyond:?}"));
    }
    if let Some(p) = open_pull(&state) {
        let head_files = &state["files"][format!("cellbridge/{CELL}")];
        // No person enables auto-merge in these phases: whoever did is cellbridge.
        let by_cellbridge = p["auto_merge"]["enabled_by"].is_string();
        if by_cellbridge {
            let beyond = beyond_metadata(&state["files"]["main"], head_files);
            if !beyond.is_empty() {
                return Err(format!("[{id}] cellbridge's auto-merge on a head bringing {beyond:?}"));
            }
        }
        let passed = p["statuses"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["context"] == STRICT && s["state"] == "success");
        let failed = match r {
            Err(_) => true,
            Ok(resp) => resp["cells"][0]["action"] == "failed",
        };
        if merge_state_faulted && failed && passed {
            return Err(format!(
                "[{id}] a passing status on a head whose merge state was not read: {r:?}"
            ));
        }
        if merge_state_faulted && failed && by_cellbridge {
            return Err(format!(
                "[{id}] cellbridge's auto-merge left on a head whose merge state was not read: {r:?}"
            ));
        }
    }
    // Never a refused state for GitHub's failure.
    if let Ok(resp) = r {
        for c in resp["cells"].as_array().into_iter().flatten() {
            if c["action"] == "refused" || c.get("reported").is_some() {
                return Err(format!("[{id}] GitHub's failure reported as a refused state: {c}"));
            }
        }
    }
    for i in state["issues"].as_array().into_iter().flatten() {
        if i["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|l| l == "cellbridge-refused")
        {
            return Err(format!("[{id}] a refused issue for GitHub's failure: {i}"));
        }
    }
    for p in state["pulls"].as_array().into_iter().flatten() {
        for s in p["statuses"].as_array().into_iter().flatten() {
            if s["context"] == CONTRACT && s["state"] != "success" {
                return Err(format!("[{id}] a failing {CONTRACT} status for GitHub's failure: {s}"));
            }
        }
    }
    Ok(())
}

/// Case `n` (its bed's bucket and secret are named by it): `fault` at `kind` in `later`.
async fn run_later(n: usize, later: Later, kind: Kind, fault: Fault) -> Result<String, String> {
    let bed = before(later, &format!("{}-{n}", tag(later))).await;
    let id = format!("{later:?} {} {fault:?}", kind.name());
    let event = later.event();
    let main_before = bed.gh.state(REPO)["files"]["main"].clone();
    let rule = rule(&kind, fault);
    bed.gh.fault(rule.clone());
    let t = Instant::now();
    let r = bed.invoke(&event, 30).await;
    let took = t.elapsed();
    let (_, v) = bed.gh.call("GET", "/_fake/faults", None);
    let left = v["faults"][0]["times"].as_i64().unwrap_or(-1);
    if left >= rule["times"].as_i64().unwrap() {
        return Err(format!("[{id}] the fault was never reached: {r:?}"));
    }
    if let Err(e) = &r {
        // Lambda's errorType says so, for alarms and the asynchronous-invocation retry.
        if !e.starts_with("cellbridge.Retryable: ") {
            return Err(format!("[{id}] failed without saying it is retryable: {e}"));
        }
    }
    let merge_state = kind.operation.as_deref() == Some(ops::GRAPHQL_MERGE_STATE.name);
    invariants(&id, &bed, &r, &main_before, merge_state)?;
    let outcome = match &r {
        Ok(resp) if later.clean(resp) => "answered".to_owned(),
        Ok(resp) => resp["cells"][0]["action"]
            .as_str()
            .or(resp["dashboard"]["action"].as_str())
            .unwrap_or("?")
            .to_owned(),
        Err(_) => "failed-retryable".to_owned(),
    };
    bed.gh.clear_faults();

    // The clean run converges, and the one after it writes nothing.
    let r = bed.invoke(&event, 60).await;
    let resp = r.clone().map_err(|e| format!("[{id}] clean re-run failed: {e}"))?;
    let action = resp["cells"][0]["action"]
        .as_str()
        .or(resp["dashboard"]["action"].as_str())
        .unwrap_or("")
        .to_owned();
    if ["failed", "refused", ""].contains(&action.as_str()) {
        return Err(format!("[{id}] clean re-run did not converge: {resp}"));
    }
    invariants(&id, &bed, &r, &main_before, false)?;
    // Converged means where a clean run ends: the pull request merged, or auto-merge on with
    // the head passed.
    let state = bed.gh.state(REPO);
    let open = open_pull(&state);
    let passed = |p: &Value| {
        p["statuses"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["context"] == STRICT && s["state"] == "success")
    };
    match later {
        Later::AutoMergeMerged if open.is_some() => {
            return Err(format!(
                "[{id}] the clean re-run left the pull request unmerged: {resp}"
            ));
        }
        Later::AutoMergeEnabled
            if !open
                .as_ref()
                .is_some_and(|p| p["auto_merge"]["enabled_by"].is_string() && passed(p)) =>
        {
            return Err(format!(
                "[{id}] the clean re-run left no auto-merge on a passed head: {resp} {open:?}"
            ));
        }
        _ => {}
    }
    let writes = bed.gh.requests()["writes"].as_u64();
    let again = bed
        .invoke(&event, 60)
        .await
        .map_err(|e| format!("[{id}] the run after the clean one failed: {e}"))?;
    if bed.gh.requests()["writes"].as_u64() != writes {
        return Err(format!("[{id}] converged, yet wrote again: {again}"));
    }
    Ok(format!("{id}: {outcome} in {took:.1?}, then converged ({action})"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_request_of_a_decommission_an_auto_merge_and_the_dashboard_given_githubs_unhappy_answers_keeps_the_invariants()
 {
    moto::configure_env();
    let all = std::env::var("CELLBRIDGE_FAULT_SHAPES").as_deref() == Ok("all");
    let started = Instant::now();
    let mut turn = 0;
    let mut cases = Vec::new();
    for later in LATER {
        for kind in probe(later).await {
            let shapes = kind.shapes();
            let chosen = if all {
                shapes
            } else {
                turn += 1;
                vec![shapes[turn % shapes.len()]]
            };
            for fault in chosen {
                cases.push((later, kind.clone(), fault));
            }
        }
    }
    let covered = cases.len();
    // A bounded number of beds (each its own fake GitHub) at a time: every shape is over a
    // hundred cases, and their deadlines must not be spent waiting for a core.
    let beds = std::sync::Arc::new(tokio::sync::Semaphore::new(16));
    let handles: Vec<_> = cases
        .into_iter()
        .enumerate()
        .map(|(n, (later, kind, fault))| {
            let beds = beds.clone();
            tokio::spawn(async move {
                let _bed = beds.acquire_owned().await.unwrap();
                run_later(n, later, kind, fault).await
            })
        })
        .collect();
    let mut failures = Vec::new();
    for h in handles {
        match h.await.unwrap() {
            Ok(line) => println!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    println!("{covered} cases in {:.1?}", started.elapsed());
    assert!(
        failures.is_empty(),
        "{} case(s) misbehaved:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
