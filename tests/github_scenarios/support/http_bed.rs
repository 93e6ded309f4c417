//! The HTTP fake as a scenario's bed: `tests/fakes/github_fake.py` reached by the product's own
//! client, `GithubFleet`, with its fault switches; the HTTP-only helpers (credentials, the requests
//! the fake saw).

use super::*;
use cellbridge::adapters::github::operations::Operation;
use cellbridge::pure::redact::Secret;
use cellbridge::{adapters::github::Credentials, adapters::github::GithubFleet, adapters::github::Issuer};
use cellbridge_tests::github::{FakeGithub, REVIEWER_TOKEN, TOKEN, TOKEN_LOGIN};
use cellbridge_tests::leak;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The HTTP fake, one process per test, reached by the product's real client: a fake github.com
/// reached with a token (API version 2026-03-10), or with `GHES` a fake GitHub Enterprise Server
/// (REST below `/api/v3`, 2022-11-28) reached as a GitHub App installation.
pub(crate) struct HttpBed<const GHES: bool = false> {
    pub(crate) gh: FakeGithub,
}

/// The GitHub Enterprise Server bed: App credentials, API version 2022-11-28.
pub(crate) type GhesBed = HttpBed<true>;

impl<const GHES: bool> HttpBed<GHES> {
    pub(crate) fn state(&self) -> Value {
        self.gh.state(REPO)
    }

    /// A person's API call that must succeed.
    pub(crate) fn person(&self, method: &str, path: &str, body: &Value) -> Value {
        let (status, out) = self.gh.call(method, path, Some(body));
        assert!((200..300).contains(&status), "{method} {path}: HTTP {status}: {out}");
        out
    }
}

/// The fake's fault rules match `METHOD glob` on the API path: the operation's path template
/// with every `{parameter}` a `*`.
pub(crate) fn fault_match(op: &Operation) -> String {
    let mut glob = String::new();
    let mut in_param = false;
    for c in op.path.chars() {
        match c {
            '{' => {
                in_param = true;
                glob.push('*');
            }
            '}' => in_param = false,
            c if !in_param => glob.push(c),
            _ => {}
        }
    }
    format!("{} {glob}", op.method)
}

impl<const GHES: bool> Bed for HttpBed<GHES> {
    type Repo = GithubFleet;
    const RETRIES_IN_CLIENT: bool = true;

    fn start(files: &[(String, String)]) -> (Self, GithubFleet) {
        leak::init();
        leak::secret("github_scenarios: GitHub token", TOKEN);
        leak::secret("github_scenarios: a secret planted in cell_metadata", PLANTED_SECRET);
        let gh = if GHES {
            let gh = FakeGithub::start_enterprise();
            // A site that signs what GitHub writes for the API, as a fleet requiring signed
            // commits needs (cellbridge cannot tell whether a site does; the README says so).
            gh.web_commit_signing(true);
            gh
        } else {
            FakeGithub::start()
        };
        gh.seed_files(REPO, files);
        let creds = if GHES {
            app_credentials(&gh)
        } else {
            Credentials::Token(Secret::new(TOKEN.to_owned()))
        };
        // No base branch: the client asks GitHub for the default one, as the Lambda does.
        let repo = GithubFleet::new(&gh.url(), OWNER, REPO_NAME, None, &creds).unwrap();
        (HttpBed { gh }, repo)
    }

    fn commit(&self, _: &GithubFleet, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        let files: Vec<(&str, Option<&str>)> = files.iter().map(|(p, t)| (*p, Some(*t))).collect();
        self.gh.commit(REPO, branch, &files, message)
    }

    fn delete(&self, _: &GithubFleet, branch: &str, paths: &[&str], message: &str) -> String {
        let files: Vec<(&str, Option<&str>)> = paths.iter().map(|p| (*p, None)).collect();
        self.gh.commit(REPO, branch, &files, message)
    }

    fn merge(&self, _: &GithubFleet, number: u64) -> Result<(), String> {
        // "Merge a pull request": https://docs.github.com/rest/pulls/pulls#merge-a-pull-request
        let (status, out) = self.gh.call(
            "PUT",
            &format!("/repos/{REPO}/pulls/{number}/merge"),
            Some(&json!({"merge_method": "merge"})),
        );
        if status == 200 && out["merged"] == true {
            Ok(())
        } else {
            Err(format!("HTTP {status}: {out}"))
        }
    }

    fn close(&self, _: &GithubFleet, number: u64) {
        // "Update a pull request": https://docs.github.com/rest/pulls/pulls#update-a-pull-request
        self.person(
            "PATCH",
            &format!("/repos/{REPO}/pulls/{number}"),
            &json!({"state": "closed"}),
        );
    }

    fn update_branch(&self, _: &GithubFleet, number: u64) {
        // "Update a pull request branch": https://docs.github.com/rest/pulls/pulls#update-a-pull-request-branch
        // (202, or 422 on a conflict or nothing to merge: a person then does nothing more).
        let _ = self.gh.call(
            "PUT",
            &format!("/repos/{REPO}/pulls/{number}/update-branch"),
            Some(&json!({})),
        );
    }

    fn pulls(&self, _: &GithubFleet) -> Vec<Pull> {
        let state = self.state();
        let mut pulls: Vec<Pull> = state["pulls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let mut labels: Vec<String> = p["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap().to_owned())
                    .collect();
                labels.sort();
                Pull {
                    number: p["number"].as_u64().unwrap(),
                    head: p["head"]["ref"].as_str().unwrap().to_owned(),
                    title: p["title"].as_str().unwrap().to_owned(),
                    labels,
                    open: p["state"] == "open",
                    merged: p["merged"] == true,
                    body: p["body"].as_str().unwrap_or_default().to_owned(),
                    comments: p["comments"]
                        .as_array()
                        .map(|cs| cs.iter().filter_map(|c| c.as_str().map(str::to_owned)).collect())
                        .unwrap_or_default(),
                }
            })
            .collect();
        pulls.sort_by_key(|p| p.number);
        pulls
    }

    fn issues(&self, _: &GithubFleet) -> Vec<IssueSeen> {
        self.gh
            .issues(REPO)
            .iter()
            .map(|i| IssueSeen {
                number: i["number"].as_u64().unwrap(),
                title: i["title"].as_str().unwrap_or_default().to_owned(),
                body: i["body"].as_str().unwrap_or_default().to_owned(),
                labels: i["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap().to_owned())
                    .collect(),
                open: i["state"] == "open",
                state_reason: i["state_reason"].as_str().map(str::to_owned),
            })
            .collect()
    }

    fn files(&self, _: &GithubFleet, branch: &str) -> BTreeMap<String, String> {
        serde_json::from_value(self.state()["files"][branch].clone()).unwrap_or_default()
    }

    fn head(&self, _: &GithubFleet, branch: &str) -> Option<String> {
        self.state()["branches"][branch].as_str().map(str::to_owned)
    }

    fn commits_ahead(&self, _: &GithubFleet, branch: &str) -> usize {
        // The fake reports, per pull request, the commits it shows; the newest one of `branch`.
        let state = self.state();
        let pull = state["pulls"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|p| p["head"]["ref"] == branch)
            .unwrap_or_else(|| panic!("no pull request from {branch}"));
        pull["commits"].as_array().unwrap().len()
    }

    fn statuses(&self, _: &GithubFleet, sha: &str) -> Vec<Status> {
        // "Get the combined status for a specific reference", as a user's client reads it:
        // https://docs.github.com/rest/commits/statuses#get-the-combined-status-for-a-specific-reference
        let (status, out) = self
            .gh
            .call("GET", &format!("/repos/{REPO}/commits/{sha}/status"), None);
        assert_eq!(status, 200, "{out}");
        out["statuses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| Status {
                context: s["context"].as_str().unwrap().to_owned(),
                success: s["state"] == "success",
                pending: s["state"] == "pending",
                description: s["description"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    }

    fn writes(&self, _: &GithubFleet) -> usize {
        // The App's installation token is minted once per process, not written to the repository.
        self.gh.requests()["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["write"] == true && !r["path"].as_str().unwrap_or("").starts_with("/app/"))
            .count()
    }

    fn requests(&self, _: &GithubFleet) -> usize {
        self.gh.requests()["count"].as_u64().unwrap() as usize
    }

    fn transient(&self, _: &GithubFleet, op: &Operation) {
        self.gh
            .fault(json!({"match": fault_match(op), "status": 502, "times": 1}));
    }

    fn refuse_once(&self, _: &GithubFleet, op: &Operation, status: u16) {
        self.gh
            .fault(json!({"match": fault_match(op), "status": status, "times": 1}));
    }

    fn open_pull_as_person(&self, _: &GithubFleet, head: &str, title: &str) -> u64 {
        // "Create a pull request": https://docs.github.com/rest/pulls/pulls#create-a-pull-request
        let out = self.person(
            "POST",
            &format!("/repos/{REPO}/pulls"),
            &json!({"title": title, "head": head, "base": "main"}),
        );
        out["number"].as_u64().unwrap()
    }

    fn graphql_times_out(&self, _: &GithubFleet, op: &Operation, times: usize) {
        let name = op.id.trim_start_matches("graphql/");
        self.gh
            .fault(json!({"match": "POST /graphql", "operation": name, "timeout": true, "times": times}));
    }

    fn graphql_field_refused(&self, _: &GithubFleet, op: &Operation, path: &'static str) {
        // GitHub's field-level refusal: `type: FORBIDDEN`, the field's `path`, HTTP 200.
        let name = op.id.trim_start_matches("graphql/");
        let who = if GHES { "integration" } else { "personal access token" };
        let path: Vec<serde_json::Value> = path
            .split('.')
            .map(|p| p.parse::<u64>().map_or_else(|_| json!(p), |n| json!(n)))
            .collect();
        let error = json!({"type": "FORBIDDEN", "path": path, "message": format!("Resource not accessible by {who}")});
        self.gh
            .fault(json!({"match": "POST /graphql", "operation": name, "graphql_errors": [error], "times": 1}));
    }

    fn graphql_untyped_error(&self, _: &GithubFleet, op: &Operation, times: usize) {
        // https://github.com/int128/wait-for-workflows-action/pull/104: no `type`, no `path`.
        let name = op.id.trim_start_matches("graphql/");
        let error = json!({"message": "Something went wrong while executing your query. Please include `9C8E:4B15:1F4E2A:3E1C7B:64DCF39F` when reporting this issue."});
        self.gh
            .fault(json!({"match": "POST /graphql", "operation": name, "graphql_errors": [error], "times": times}));
    }

    fn graphql_unknown_error(&self, _: &GithubFleet, op: &Operation, times: usize) {
        // https://github.com/github/docs/issues/19712: a `type` cellbridge does not know.
        let name = op.id.trim_start_matches("graphql/");
        let error = json!({"type": "INSUFFICIENT_SCOPES", "locations": [{"line": 2, "column": 3}],
                           "message": "Your token has not been granted the required scopes to execute this query."});
        self.gh
            .fault(json!({"match": "POST /graphql", "operation": name, "graphql_errors": [error], "times": times}));
    }

    fn graphql_server_error(&self, _: &GithubFleet, op: &Operation) {
        // Every try the client makes of one request (the transport's six attempts).
        let name = op.id.trim_start_matches("graphql/");
        self.gh
            .fault(json!({"match": "POST /graphql", "operation": name, "status": 502, "times": 6}));
    }

    fn merge_state_unknown_enum(&self, _: &GithubFleet) {
        self.gh.fault(json!({"match": "POST /graphql", "operation": "pullRequestMergeState", "times": 1,
                             "answer_patch": {"path": ["repository", "pullRequest", "mergeStateStatus"], "value": "QUEUED"}}));
    }

    fn merge_answer_lost(&self, _: &GithubFleet) {
        // Carried out, and the connection closed before any byte of the answer.
        self.gh
            .fault(json!({"match": "PUT /repos/*/pulls/*/merge", "cut_after": 0, "times": 1}));
    }

    fn merge_state_not_computed(&self, _: &GithubFleet, number: u64) {
        self.gh.merge_state_computed(REPO, number, false);
    }

    fn server_errors(&self, _: &GithubFleet) -> Option<usize> {
        let log = self.gh.requests();
        Some(
            log["requests"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["status"].as_u64().is_some_and(|s| s >= 500))
                .count(),
        )
    }

    fn race(&self, _: &GithubFleet, op: &Operation, branch: &str, files: &[(&str, &str)]) {
        let files: serde_json::Map<String, Value> = files.iter().map(|(p, t)| (p.to_string(), json!(t))).collect();
        self.gh.fault(json!({
            "match": fault_match(op),
            "times": 1,
            "lose_race": {"ref": format!("heads/{branch}"), "files": files, "message": "another writer"},
        }));
    }

    fn merge_before(&self, _: &GithubFleet, op: &Operation, number: u64) {
        self.gh.fault(json!({
            "match": fault_match(op),
            "times": 1,
            "lose_race": {"merge_pull": number},
        }));
    }

    fn edit_body(&self, _: &GithubFleet, number: u64, body: &str) {
        // "Update a pull request": https://docs.github.com/rest/pulls/pulls#update-a-pull-request
        self.person(
            "PATCH",
            &format!("/repos/{REPO}/pulls/{number}"),
            &json!({"body": body}),
        );
    }

    fn commit_bytes(&self, _: &GithubFleet, branch: &str, path: &str, bytes: &[u8], message: &str) -> String {
        self.gh.commit_bytes(REPO, branch, path, bytes, message)
    }

    fn force_push(&self, _: &GithubFleet, branch: &str, commit: &str) {
        // "Update a reference" with `force`: https://docs.github.com/rest/git/refs#update-a-reference
        self.person(
            "PATCH",
            &format!("/repos/{REPO}/git/refs/heads/{branch}"),
            &json!({"sha": commit, "force": true}),
        );
    }

    fn issue_listings(&self, _: &GithubFleet) -> usize {
        let log = self.gh.requests();
        log["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == "GET" && r["path"] == format!("/repos/{REPO}/issues"))
            .count()
    }

    fn open_issue(&self, _: &GithubFleet, title: &str, body: &str, labels: &[&str]) -> u64 {
        // "Create an issue": https://docs.github.com/rest/issues/issues#create-an-issue
        self.person(
            "POST",
            &format!("/repos/{REPO}/issues"),
            &json!({"title": title, "body": body, "labels": labels}),
        )["number"]
            .as_u64()
            .unwrap()
    }

    fn disable_issues(&self, _: &GithubFleet) {
        self.gh.disable_issues(REPO);
    }

    fn fork_pull(&self, _: &GithubFleet, branch: &str, open: bool) -> u64 {
        self.gh.fork_pull(REPO, FORK, branch, open)
    }

    const CELLBRIDGE: &'static str = if GHES { APP_LOGIN } else { TOKEN_LOGIN };

    fn allow_auto_merge(&self, _: &GithubFleet, on: bool) {
        self.gh.allow_auto_merge(REPO, on);
    }

    fn protect_main(&self, _: &GithubFleet, protection: Option<(&[&str], u32, bool)>) {
        // "Update branch protection" / "Delete branch protection":
        // https://docs.github.com/rest/branches/branch-protection
        let path = format!("/repos/{REPO}/branches/main/protection");
        let (status, out) = match protection {
            Some((contexts, approvals, strict)) => self.gh.call(
                "PUT",
                &path,
                Some(&json!({
                    "required_status_checks": {"strict": strict, "contexts": contexts},
                    "enforce_admins": true,
                    "required_pull_request_reviews": if approvals > 0 {
                        json!({"required_approving_review_count": approvals})
                    } else {
                        Value::Null
                    },
                    "restrictions": null,
                })),
            ),
            None => self.gh.call("DELETE", &path, None),
        };
        assert!((200..300).contains(&status), "{path}: HTTP {status}: {out}");
    }

    fn ci(&self, _: &GithubFleet, sha: &str, context: &str, passed: bool) {
        // The CI's commit status: https://docs.github.com/rest/commits/statuses#create-a-commit-status
        let state = if passed { "success" } else { "failure" };
        let (status, out) = self.gh.call_as(
            REVIEWER_TOKEN,
            "POST",
            &format!("/repos/{REPO}/statuses/{sha}"),
            Some(&json!({"state": state, "context": context, "description": "the CI"})),
        );
        assert_eq!(status, 201, "{out}");
    }

    fn approve(&self, _: &GithubFleet, number: u64) {
        // https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request
        let (status, out) = self.gh.call_as(
            REVIEWER_TOKEN,
            "POST",
            &format!("/repos/{REPO}/pulls/{number}/reviews"),
            Some(&json!({"event": "APPROVE"})),
        );
        assert_eq!(status, 200, "{out}");
    }

    fn enable_auto_merge_as_reviewer(&self, _: &GithubFleet, number: u64) {
        self.reviewer_mutation(
            number,
            "mutation reviewerEnables($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }",
        );
    }

    fn auto_merge(&self, _: &GithubFleet, number: u64) -> (Option<String>, Option<String>) {
        let state = self.state();
        let p = state["pulls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["number"] == number)
            .unwrap()
            .clone();
        (
            p["auto_merge"]["enabled_by"].as_str().map(str::to_owned),
            p["merged_by"].as_str().map(str::to_owned),
        )
    }

    fn credentials(w: &mut World<Self>, token: bool) {
        // The github.com bed starts with a personal access token, the GHES bed as an App.
        if token == GHES {
            let creds = if token {
                Credentials::Token(Secret::new(TOKEN.to_owned()))
            } else {
                app_credentials(&w.bed.gh)
            };
            w.sync.fleet = GithubFleet::new(&w.bed.gh.url(), OWNER, REPO_NAME, None, &creds).unwrap();
        }
    }

    fn require_signatures(&self, _: &GithubFleet, ruleset: bool) {
        self.gh.require_signatures(REPO, "main", ruleset);
    }

    fn verified_commits(&self, _: &GithubFleet, branch: &str) -> Vec<(String, bool)> {
        // "Compare two commits": each commit's `commit.verification.verified`.
        let path = format!("/repos/{REPO}/compare/main...{branch}");
        let (status, v) = self.gh.call("GET", &path, None);
        assert_eq!(status, 200, "{path}: {v}");
        v["commits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["sha"].as_str().unwrap().to_owned(),
                    c["commit"]["verification"]["verified"] == true,
                )
            })
            .collect()
    }

    fn commit_executable(&self, _: &GithubFleet, branch: &str, path: &str, text: &str) -> String {
        self.gh.commit_executable(REPO, branch, path, text, "a script")
    }

    fn signature_reads(&self, _: &GithubFleet) -> usize {
        self.gh.requests()["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["path"].as_str().unwrap_or_default().contains("/rules/branches/"))
            .count()
    }

    fn require_merge_queue(&self, _: &GithubFleet, method: Option<cellbridge::ports::github::MergeMethod>) {
        self.gh.merge_queue(REPO, "main", method.map(|m| m.rest()));
    }

    fn merge_group(&self, _: &GithubFleet, number: u64) -> Option<MergeGroup> {
        let g = self.gh.merge_group(REPO, number)?;
        let field = |k: &str| g[k].as_str().unwrap().to_owned();
        Some(MergeGroup {
            head_sha: field("head_sha"),
            head_ref: field("head_ref"),
            base_sha: field("base_sha"),
            base_ref: field("base_ref"),
        })
    }

    fn commit_files(&self, _: &GithubFleet, sha: &str) -> BTreeMap<String, String> {
        // The CI's checkout, with a reviewer's token as a CI's own would be.
        self.gh.commit_files(REVIEWER_TOKEN, REPO, sha)
    }

    fn queued_by(&self, _: &GithubFleet, number: u64) -> Option<String> {
        self.pull_state(number)["merge_queue_entry"]["enqueuer"]
            .as_str()
            .map(str::to_owned)
    }

    fn enqueue_as_reviewer(&self, _: &GithubFleet, number: u64) {
        self.reviewer_mutation(
            number,
            "mutation reviewerEnqueues($id: ID!) { enqueuePullRequest(input: {pullRequestId: $id}) { clientMutationId } }",
        );
    }
}

impl<const GHES: bool> HttpBed<GHES> {
    /// A reviewer's GraphQL `mutation` on pull request `number`, given its node id as `$id`.
    fn reviewer_mutation(&self, number: u64, mutation: &str) {
        let q = self.gh.graphql_as(
            REVIEWER_TOKEN,
            "query reviewerLooks($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { id } } }",
            json!({"owner": OWNER, "name": REPO_NAME, "number": number}),
        );
        let id = q["data"]["repository"]["pullRequest"]["id"].clone();
        let out = self.gh.graphql_as(REVIEWER_TOKEN, mutation, json!({"id": id}));
        assert!(out.get("errors").is_none(), "{out}");
    }

    fn pull_state(&self, number: u64) -> Value {
        self.state()["pulls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["number"] == number)
            .unwrap()
            .clone()
    }
}

/// A world on the HTTP fake whose client authenticates with `creds(fake)`.
pub(crate) fn http_world(creds: impl FnOnce(&FakeGithub) -> Credentials) -> World<HttpBed> {
    let mut w = World::<HttpBed>::start();
    let creds = creds(&w.bed.gh);
    w.sync.fleet = GithubFleet::new(&w.bed.gh.url(), OWNER, REPO_NAME, None, &creds).unwrap();
    w
}

/// The login the fake's App installation acts as (its bot).
pub(crate) const APP_LOGIN: &str = "cellbridge[bot]";

/// The fake's GitHub App, its JWT issued by its numeric App ID.
pub(crate) fn app_credentials(gh: &FakeGithub) -> Credentials {
    let a = gh.app();
    app_credentials_issued_by(gh, Issuer::AppId(a["app_id"].as_u64().unwrap()))
}

/// The fake's GitHub App, its JWT issued by its client ID (what GitHub recommends).
pub(crate) fn app_credentials_by_client_id(gh: &FakeGithub) -> Credentials {
    let a = gh.app();
    app_credentials_issued_by(gh, Issuer::ClientId(a["client_id"].as_str().unwrap().to_owned()))
}

fn app_credentials_issued_by(gh: &FakeGithub, issuer: Issuer) -> Credentials {
    let a = gh.app();
    let key = a["private_key"]
        .as_str()
        .expect("the fake GitHub needs the `cryptography` package to act as a GitHub App");
    leak::secret("github_scenarios: GitHub App private key", key);
    Credentials::App {
        issuer,
        installation_id: a["installation_id"].as_u64().unwrap(),
        private_key: Secret::new(key.to_owned()),
    }
}

/// The requests the fake logged since `from`: (operation path, write), archive downloads left out.
pub(crate) fn api_requests_since(w: &World<HttpBed>, from: usize) -> Vec<(String, bool)> {
    let log = w.bed.gh.requests();
    log["requests"].as_array().unwrap()[from..]
        .iter()
        .filter(|r| !r["path"].as_str().unwrap().starts_with("/_codeload/"))
        .map(|r| {
            (
                format!("{} {}", r["method"].as_str().unwrap(), r["path"].as_str().unwrap()),
                r["write"] == true,
            )
        })
        .collect()
}

/// Writes to the repository (an installation token's creation is the App's, not the fleet's).
pub(crate) fn repo_writes(w: &World<HttpBed>) -> usize {
    api_requests_since(w, 0)
        .iter()
        .filter(|(path, write)| *write && path.contains(" /repos/"))
        .count()
}
