//! state-sync's GitHub behaviour as a user sees it, written once and run against both GitHubs
//! the project has: the in-memory double (`cellbridge::doubles::github::MemGithub`, feature
//! `test-support`) and the HTTP fake (`tests/fakes/github_fake.py`, checked against GitHub's
//! REST description) reached by the product's own client, `GithubFleet`.
//!
//! Each scenario is one generic function over [`Bed`], the GitHub side of a test: what a
//! scenario needs beyond the product's orchestrator (`Syncer`), which drives the repository the
//! same way in both (any `GithubRepo` is a `FleetRepo`). The `scenarios!` macro instantiates every
//! scenario once per bed, as `mem_github::<scenario>` and `http_fake::<scenario>`; run one half
//! with the filter `mem_` or `http_`.
//!
//! Where the two GitHubs model a fault differently on purpose, the bed says so
//! ([`Bed::RETRIES_IN_CLIENT`]); where they disagree on what GitHub does, the scenario says which
//! one is wrong.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cellbridge::adapters::github::operations::{self as ops, Operation};
use cellbridge::doubles::github::{Fault, MemGithub};
use cellbridge::doubles::s3::MemStates;
use cellbridge::jobs::sync::{DEFAULT_KEY_PATTERN, KeyPattern, SyncConfig, Syncer};
use cellbridge::pure::fleet::Keep;
use cellbridge::pure::plan::{LABEL_CELLBRIDGE, LABEL_NEW_CELL, STATUS_CONTEXT};
use cellbridge::pure::redact::Secret;
use cellbridge::{
    adapters::github::Credentials, adapters::github::GithubConfig, adapters::github::GithubFleet,
    ports::github::GitData as _, ports::github::GithubRepo,
};
use cellbridge_tests::github::{FakeGithub, REVIEWER_TOKEN, TOKEN, TOKEN_LOGIN, example_fleet};
use cellbridge_tests::leak;
use serde_json::{Value, json};

const OWNER: &str = "acme";
const REPO_NAME: &str = "fleet";
const REPO: &str = "acme/fleet";
const BUCKET: &str = "tfstate";
const LINEAGE: &str = "5f0c2b1e-0000-4000-8000-00000000cafe";
const CELL: &str = "eu-c1";
/// A value a cell's metadata must never carry: it looks like a GitHub token.
const PLANTED_SECRET: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";

/// A pull request as a user sees it on GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pull {
    number: u64,
    head: String,
    title: String,
    /// Sorted.
    labels: Vec<String>,
    open: bool,
    merged: bool,
    body: String,
    comments: Vec<String>,
}

/// A commit status as a user sees it on GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Status {
    context: String,
    success: bool,
    description: String,
}

/// An issue (not a pull request) as a user sees it on GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IssueSeen {
    number: u64,
    title: String,
    body: String,
    labels: Vec<String>,
    open: bool,
    /// Why it was closed (`completed`, `duplicate`); `None` while open.
    state_reason: Option<String>,
}

/// The GitHub side of a scenario: the repository handle the product is given, and what people
/// and a user's eyes do on GitHub around it. Methods that need the handle take it (the
/// orchestrator owns it).
trait Bed: Sized {
    type Repo: GithubRepo;

    /// Whether one 5xx is retried inside the product's client (the HTTP fake answers a 502 and
    /// `GithubFleet` retries it), or reaches the orchestrator as what the client reports after
    /// its retries (the in-memory double has no transport: its `Fault::Transient` is "5xx past
    /// the retries", and the retry is the next delivery, as SQS would redeliver).
    const RETRIES_IN_CLIENT: bool;

    /// A repository whose default branch `main` holds `files`.
    fn start(files: &[(String, String)]) -> (Self, Self::Repo);
    /// A person's commit on `branch` laying `files` over its tree; the commit's id.
    fn commit(&self, repo: &Self::Repo, branch: &str, files: &[(&str, &str)], message: &str) -> String;
    /// A person's commit on `branch` deleting `paths`; the commit's id.
    fn delete(&self, repo: &Self::Repo, branch: &str, paths: &[&str], message: &str) -> String;
    /// A reviewer merges pull request `number` (a merge commit; the head branch stays); what
    /// GitHub answered when it refused.
    fn merge(&self, repo: &Self::Repo, number: u64) -> Result<(), String>;
    /// A reviewer closes pull request `number` without merging (the head branch stays).
    fn close(&self, repo: &Self::Repo, number: u64);
    /// A reviewer presses "Update branch" on pull request `number` (a conflict changes nothing).
    fn update_branch(&self, repo: &Self::Repo, number: u64);
    /// Every pull request, open or not, by number.
    fn pulls(&self, repo: &Self::Repo) -> Vec<Pull>;
    /// Every issue that is not a pull request, open or not, by number.
    fn issues(&self, repo: &Self::Repo) -> Vec<IssueSeen>;
    /// The files of `branch` (path → text); empty when there is no such branch.
    fn files(&self, repo: &Self::Repo, branch: &str) -> BTreeMap<String, String>;
    fn head(&self, repo: &Self::Repo, branch: &str) -> Option<String>;
    /// Commits on `branch` that its pull request shows (not reachable from `main`).
    fn commits_ahead(&self, repo: &Self::Repo, branch: &str) -> usize;
    fn statuses(&self, repo: &Self::Repo, sha: &str) -> Vec<Status>;
    /// Requests that write, sent so far (with the people's that go through the API: scenarios
    /// compare counts around a delivery).
    fn writes(&self, repo: &Self::Repo) -> usize;
    /// Requests of any kind, sent so far.
    fn requests(&self, repo: &Self::Repo) -> usize;
    /// The next call of `op` fails once with a 5xx.
    fn transient(&self, repo: &Self::Repo, op: &Operation);
    /// GitHub answers the next call of `op` with `status`, a final answer (a run cut off there).
    fn refuse_once(&self, repo: &Self::Repo, op: &Operation, status: u16);
    /// The 5xx answers served so far, where the bed's log shows them.
    fn server_errors(&self, _repo: &Self::Repo) -> Option<usize> {
        None
    }
    /// Just before the next call of `op` is handled, another writer commits `files` on `branch`.
    fn race(&self, repo: &Self::Repo, op: &Operation, branch: &str, files: &[(&str, &str)]);
    /// Just before the next call of `op` is handled, a reviewer merges pull request `number`.
    fn merge_before(&self, repo: &Self::Repo, op: &Operation, number: u64);
    /// A reviewer edits pull request `number`'s description.
    fn edit_body(&self, repo: &Self::Repo, number: u64, body: &str);
    /// A person's commit on `branch` adding `path` with these bytes (a binary file); its id.
    fn commit_bytes(&self, repo: &Self::Repo, branch: &str, path: &str, bytes: &[u8], message: &str) -> String;
    /// A person force-pushes `branch` to `commit` (history rewritten).
    fn force_push(&self, repo: &Self::Repo, branch: &str, commit: &str);
    /// The listings of the repository's issues sent so far.
    fn issue_listings(&self, repo: &Self::Repo) -> usize;
    /// Someone else (another run, a person) opens an issue; its number.
    fn open_issue(&self, repo: &Self::Repo, title: &str, body: &str, labels: &[&str]) -> u64;
    /// The repository's issues are turned off in its settings.
    fn disable_issues(&self, repo: &Self::Repo);

    // auto-merge
    /// The login cellbridge's credentials act as on this GitHub.
    const CELLBRIDGE: &'static str;
    /// An administrator sets the repository's "Allow auto-merge".
    fn allow_auto_merge(&self, repo: &Self::Repo, on: bool);
    /// An administrator protects `main`: `contexts` required (up to date when `strict`),
    /// `approvals` approving reviews; `None` removes the protection.
    fn protect_main(&self, repo: &Self::Repo, protection: Option<(&[&str], u32, bool)>);
    /// The CI reports `context` on commit `sha`.
    fn ci(&self, repo: &Self::Repo, sha: &str, context: &str, passed: bool);
    /// A reviewer approves pull request `number`.
    fn approve(&self, repo: &Self::Repo, number: u64);
    /// A reviewer turns on auto-merge for pull request `number` themself.
    fn enable_auto_merge_as_reviewer(&self, repo: &Self::Repo, number: u64);
    /// Who turned on the auto-merge of pull request `number`, while it is on; who merged it.
    fn auto_merge(&self, repo: &Self::Repo, number: u64) -> (Option<String>, Option<String>);
}

const REVIEWER: &str = "alice";

/// The in-memory double: the Syncer's repository is the store itself.
struct MemBed;

impl Bed for MemBed {
    type Repo = MemGithub;
    const RETRIES_IN_CLIENT: bool = false;

    fn start(files: &[(String, String)]) -> (Self, MemGithub) {
        (MemBed, MemGithub::new("main", files))
    }

    fn commit(&self, repo: &MemGithub, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        repo.commit(branch, files, message)
    }

    fn delete(&self, repo: &MemGithub, branch: &str, paths: &[&str], message: &str) -> String {
        repo.delete_files(branch, paths, message)
    }

    fn merge(&self, repo: &MemGithub, number: u64) -> Result<(), String> {
        repo.try_merge(number).map(drop).map_err(|refused| refused.to_string())
    }

    fn close(&self, repo: &MemGithub, number: u64) {
        repo.close(number);
    }

    fn update_branch(&self, repo: &MemGithub, number: u64) {
        let _ = repo.update_branch(number);
    }

    fn pulls(&self, repo: &MemGithub) -> Vec<Pull> {
        repo.pulls()
            .into_iter()
            .map(|p| Pull {
                number: p.number,
                head: p.head,
                title: p.title,
                labels: p.labels,
                open: p.open,
                merged: p.merged,
                body: p.body,
                comments: p.comments,
            })
            .collect()
    }

    fn issues(&self, repo: &MemGithub) -> Vec<IssueSeen> {
        repo.issues()
            .into_iter()
            .map(|i| IssueSeen {
                number: i.number,
                state_reason: repo.issue_state_reason(i.number).map(str::to_owned),
                title: i.title,
                body: i.body,
                labels: i.labels,
                open: i.open,
            })
            .collect()
    }

    fn files(&self, repo: &MemGithub, branch: &str) -> BTreeMap<String, String> {
        repo.files(branch)
    }

    fn head(&self, repo: &MemGithub, branch: &str) -> Option<String> {
        repo.head(branch)
    }

    fn commits_ahead(&self, repo: &MemGithub, branch: &str) -> usize {
        repo.commits_ahead(branch)
    }

    fn statuses(&self, repo: &MemGithub, sha: &str) -> Vec<Status> {
        repo.statuses(sha)
            .into_iter()
            .map(|s| Status {
                context: s.context,
                success: s.success,
                description: s.description,
            })
            .collect()
    }

    fn writes(&self, repo: &MemGithub) -> usize {
        repo.writes()
    }

    fn requests(&self, repo: &MemGithub) -> usize {
        repo.calls().len()
    }

    fn transient(&self, repo: &MemGithub, op: &Operation) {
        repo.fail(op, 1, Fault::Transient);
    }

    fn refuse_once(&self, repo: &MemGithub, op: &Operation, status: u16) {
        repo.fail(op, 1, Fault::Status(status));
    }

    fn race(&self, repo: &MemGithub, op: &Operation, branch: &str, files: &[(&str, &str)]) {
        repo.race(op, branch, files);
    }

    fn merge_before(&self, repo: &MemGithub, op: &Operation, number: u64) {
        repo.merge_before(op, number);
    }

    fn edit_body(&self, repo: &MemGithub, number: u64, body: &str) {
        repo.edit_body(number, body);
    }

    fn commit_bytes(&self, repo: &MemGithub, branch: &str, path: &str, bytes: &[u8], message: &str) -> String {
        repo.commit_bytes(branch, path, bytes, message)
    }

    fn force_push(&self, repo: &MemGithub, branch: &str, commit: &str) {
        repo.force_push(branch, commit);
    }

    fn issue_listings(&self, repo: &MemGithub) -> usize {
        repo.calls()
            .iter()
            .filter(|c| **c == ops::ISSUES_LIST_FOR_REPO.id)
            .count()
    }

    fn open_issue(&self, repo: &MemGithub, title: &str, body: &str, labels: &[&str]) -> u64 {
        repo.open_issue(title, body, labels)
    }

    fn disable_issues(&self, repo: &MemGithub) {
        repo.disable_issues();
    }

    const CELLBRIDGE: &'static str = cellbridge::doubles::github::VIEWER;

    fn allow_auto_merge(&self, repo: &MemGithub, on: bool) {
        repo.allow_auto_merge(on);
    }

    fn protect_main(&self, repo: &MemGithub, protection: Option<(&[&str], u32, bool)>) {
        repo.protect_branch(
            "main",
            protection.map(
                |(contexts, approvals, strict)| cellbridge::doubles::github::Protection {
                    contexts: contexts.iter().map(|c| c.to_string()).collect(),
                    strict,
                    approvals,
                },
            ),
        );
    }

    fn ci(&self, repo: &MemGithub, sha: &str, context: &str, passed: bool) {
        let state = if passed {
            cellbridge::ports::github::CheckState::Passed
        } else {
            cellbridge::ports::github::CheckState::Failed
        };
        repo.post_check(sha, context, state);
    }

    fn approve(&self, repo: &MemGithub, number: u64) {
        repo.approve(number, REVIEWER);
    }

    fn enable_auto_merge_as_reviewer(&self, repo: &MemGithub, number: u64) {
        assert_eq!(
            repo.enable_auto_merge_as(number, REVIEWER).unwrap(),
            cellbridge::ports::github::AutoMergeAnswer::Enabled
        );
    }

    fn auto_merge(&self, repo: &MemGithub, number: u64) -> (Option<String>, Option<String>) {
        let p = repo.pulls().into_iter().find(|p| p.number == number).unwrap();
        (p.auto_merge.map(|a| a.enabled_by), p.merged_by)
    }
}

/// The HTTP fake, one process per test, reached by the product's real client.
struct HttpBed {
    gh: FakeGithub,
}

impl HttpBed {
    fn state(&self) -> Value {
        self.gh.state(REPO)
    }

    /// A person's API call that must succeed.
    fn person(&self, method: &str, path: &str, body: &Value) -> Value {
        let (status, out) = self.gh.call(method, path, Some(body));
        assert!((200..300).contains(&status), "{method} {path}: HTTP {status}: {out}");
        out
    }
}

/// The fake's fault rules match `METHOD glob` on the API path: the operation's path template
/// with every `{parameter}` a `*`.
fn fault_match(op: &Operation) -> String {
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

impl Bed for HttpBed {
    type Repo = GithubFleet;
    const RETRIES_IN_CLIENT: bool = true;

    fn start(files: &[(String, String)]) -> (Self, GithubFleet) {
        leak::init();
        leak::secret("github_scenarios: GitHub token", TOKEN);
        leak::secret("github_scenarios: a secret planted in cell_metadata", PLANTED_SECRET);
        let gh = FakeGithub::start();
        gh.seed_files(REPO, files);
        // No base branch: the client asks GitHub for the default one, as the Lambda does.
        let repo = GithubFleet::new(
            &gh.url(),
            OWNER,
            REPO_NAME,
            None,
            &Credentials::Token(Secret::new(TOKEN.to_owned())),
        )
        .unwrap();
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
                description: s["description"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    }

    fn writes(&self, _: &GithubFleet) -> usize {
        self.gh.requests()["writes"].as_u64().unwrap() as usize
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

    const CELLBRIDGE: &'static str = TOKEN_LOGIN;

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
        let q = self.gh.graphql_as(
            REVIEWER_TOKEN,
            "query reviewerLooks($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { id } } }",
            json!({"owner": OWNER, "name": REPO_NAME, "number": number}),
        );
        let id = q["data"]["repository"]["pullRequest"]["id"].clone();
        let out = self.gh.graphql_as(
            REVIEWER_TOKEN,
            "mutation reviewerEnables($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }",
            json!({"id": id}),
        );
        assert!(out.get("errors").is_none(), "{out}");
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
}

/// One scenario's world: the product's orchestrator over a state bucket in memory and the bed's
/// repository, and the bed.
struct World<B: Bed> {
    sync: Syncer<MemStates, B::Repo>,
    bed: B,
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn branch(cell: &str) -> String {
    format!("cellbridge/{cell}")
}

fn metadata_path(cell: &str) -> String {
    format!("clusters/{cell}/cell-metadata.yaml")
}

/// The metadata every variable of the example fleet's layers needs, so the strict check passes.
fn metadata(cell: &str, vpc: &str) -> Value {
    json!({
        "cell_name": cell, "schema": "1", "aws_region": "eu-west-1", "cluster_name": cell,
        "dns_zone": "example.internal",
        "external_dns_role_arn": "arn:aws:iam::123456789012:role/external-dns",
        "karpenter_queue_name": "karpenter-q",
        "karpenter_role_arn": "arn:aws:iam::123456789012:role/karpenter",
        "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab", "podinfo_replicas": "2",
        "vpc_id": vpc,
    })
}

/// A Terraform state whose `cell_metadata` output is `meta`.
fn state_with(serial: u64, meta: Value) -> String {
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE,
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": meta}},
        "resources": [],
    })
    .to_string()
}

/// What a pull request of `cell` must hold: its `cell-metadata.yaml` and every file of
/// `clusters/_template/`, below `clusters/<cell>/`.
fn expected_cell_dir(cell: &str) -> Vec<String> {
    let mut paths: Vec<String> = example_fleet()
        .into_iter()
        .filter_map(|(p, _)| {
            p.strip_prefix("clusters/_template/")
                .map(|rest| format!("clusters/{cell}/{rest}"))
        })
        .collect();
    paths.push(metadata_path(cell));
    paths.sort();
    paths
}

/// What a user sees of one cell's sync on GitHub, without the ids that differ between runs
/// (commit ids carry a time on the HTTP fake, pull request numbers depend on what came before).
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    pulls: Vec<(String, String, Vec<String>, bool)>,
    files: BTreeMap<String, String>,
    statuses: Vec<Status>,
    commits_ahead: usize,
}

impl<B: Bed> World<B> {
    fn start() -> Self {
        let config = SyncConfig {
            github: GithubConfig::checked(
                OWNER.into(),
                REPO_NAME.into(),
                None,
                "unused".into(),
                "https://api.github.com".into(),
            )
            .unwrap(),
            state_bucket: BUCKET.into(),
            key_pattern: KeyPattern::parse(DEFAULT_KEY_PATTERN).unwrap(),
            flux_git_url: None,
            flux_git_branch: None,
        };
        let (bed, repo) = B::start(&example_fleet());
        World {
            sync: Syncer::new(config, MemStates::new(), repo),
            bed,
        }
    }

    fn repo(&self) -> &B::Repo {
        &self.sync.fleet
    }

    /// A `terraform apply` of `cell` writing `vpc` (every other value as the fleet needs).
    fn apply(&self, cell: &str, serial: u64, vpc: &str) {
        self.put_state(cell, state_with(serial, metadata(cell, vpc)));
    }

    fn put_state(&self, cell: &str, text: String) {
        self.sync
            .states
            .put(BUCKET, &format!("cells/{cell}/terraform.tfstate"), text);
    }

    /// Delivers the event "this cell's state may have changed"; the cell's one result.
    async fn deliver(&self, cell: &str) -> Value {
        let inv = cellbridge_tests::handle(&self.sync, &json!({"action": "sync", "cell": cell}), deadline())
            .await
            .unwrap();
        leak::capture("github_scenarios: state-sync's answer", &inv.response.to_string());
        let cells = inv.response["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 1, "{}", inv.response);
        cells[0].clone()
    }

    /// Invokes with `event` (a manual payload); the answer.
    async fn handle(&self, event: Value) -> cellbridge::shell::lambda::Invocation {
        let inv = cellbridge_tests::handle(&self.sync, &event, deadline()).await.unwrap();
        leak::capture("github_scenarios: state-sync's answer", &inv.response.to_string());
        inv
    }

    /// `{"action": "dashboard"}`; the answer's `dashboard`.
    async fn dashboard(&self) -> Value {
        let inv = self.handle(json!({"action": "dashboard"})).await;
        assert_eq!(inv.class, None, "{}", inv.response);
        inv.response["dashboard"].clone()
    }

    /// The open fleet dashboards.
    fn dashboards(&self) -> Vec<IssueSeen> {
        self.bed
            .issues(self.repo())
            .into_iter()
            .filter(|i| i.open && i.labels.iter().any(|l| l == "cellbridge-dashboard"))
            .collect()
    }

    /// Delivers, and once more when the first delivery failed retryably (SQS redelivers it).
    async fn deliver_until_done(&self, cell: &str) -> Vec<Value> {
        let first = self.deliver(cell).await;
        if first["action"] == "failed" && first["retryable"] == true {
            let second = self.deliver(cell).await;
            vec![first, second]
        } else {
            vec![first]
        }
    }

    fn pulls(&self) -> Vec<Pull> {
        self.bed.pulls(self.repo())
    }

    fn open_pulls(&self) -> Vec<Pull> {
        self.pulls().into_iter().filter(|p| p.open).collect()
    }

    fn files(&self, branch: &str) -> BTreeMap<String, String> {
        self.bed.files(self.repo(), branch)
    }

    fn head(&self, branch: &str) -> Option<String> {
        self.bed.head(self.repo(), branch)
    }

    /// The `cellbridge/strict-substitution` statuses of `sha`.
    fn strict_statuses(&self, sha: &str) -> Vec<Status> {
        self.statuses(sha)
            .into_iter()
            .filter(|s| s.context == STATUS_CONTEXT)
            .collect()
    }

    fn statuses(&self, sha: &str) -> Vec<Status> {
        self.bed.statuses(self.repo(), sha)
    }

    fn writes(&self) -> usize {
        self.bed.writes(self.repo())
    }

    fn requests(&self) -> usize {
        self.bed.requests(self.repo())
    }

    fn metadata_on(&self, branch: &str, cell: &str) -> String {
        self.files(branch)
            .remove(&metadata_path(cell))
            .unwrap_or_else(|| panic!("{} missing on {branch}", metadata_path(cell)))
    }

    /// The cell's pull requests, branch (its cell directory) and head status, as `cell`.
    fn outcome(&self, cell: &str, as_cell: &str) -> Outcome {
        let b = branch(cell);
        let rename = |s: &str| s.replace(cell, as_cell);
        let head = self.head(&b).expect("the cell's branch");
        Outcome {
            pulls: self
                .pulls()
                .into_iter()
                .filter(|p| p.head == b)
                .map(|p| (rename(&p.head), rename(&p.title), p.labels, p.open))
                .collect(),
            files: self
                .files(&b)
                .into_iter()
                .filter(|(p, _)| p.starts_with(&format!("clusters/{cell}/")))
                .map(|(p, t)| (rename(&p), rename(&t)))
                .collect(),
            statuses: self
                .statuses(&head)
                .into_iter()
                .map(|s| Status {
                    description: rename(&s.description),
                    ..s
                })
                .collect(),
            commits_ahead: self.bed.commits_ahead(self.repo(), &b),
        }
    }

    /// The head of the cell's branch carries one successful strict-substitution status.
    fn assert_checked(&self, cell: &str) {
        let head = self.head(&branch(cell)).expect("the cell's branch");
        let statuses = self.statuses(&head);
        assert_eq!(statuses.len(), 1, "{statuses:?}");
        assert_eq!(statuses[0].context, STATUS_CONTEXT, "{statuses:?}");
        assert!(statuses[0].success, "{statuses:?}");
    }
}

fn action(r: &Value) -> &str {
    r["action"].as_str().unwrap_or_default()
}

// --- the scenarios ------------------------------------------------------------------------------

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

/// A reviewer merges the pull request after a person committed on main: nothing conflicts (the
/// person's file is outside the cell), so GitHub merges, and main then holds both the person's
/// commit and the cell; the next delivery finds the cell in sync.
///
/// GitHub merges a pull request that is behind its base when nothing conflicts ("Merge a pull
/// request" refuses with 405 only "if merge cannot be performed",
/// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request; a branch behind its base is
/// `mergeable_state: behind`, still mergeable unless branch protection requires it up to date,
/// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging),
/// and the merge commit holds both sides. (Both GitHubs once got this wrong: the HTTP fake
/// refused whenever main was not an ancestor of the head, MemGithub's merge commit took the
/// head's tree and dropped main's commit; both now merge three ways.)
async fn a_reviewer_merging_after_main_moved_keeps_both_sides<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed
        .commit(w.repo(), "main", &[("OWNERS", "platform-team\n")], "a person's commit");

    let merged = w.bed.merge(w.repo(), 1);
    assert_eq!(
        merged,
        Ok(()),
        "GitHub merges a pull request behind its base when nothing conflicts"
    );
    let main = w.files("main");
    assert_eq!(
        main.get("OWNERS").map(String::as_str),
        Some("platform-team\n"),
        "the merge keeps main's side"
    );
    assert!(
        main[&metadata_path(CELL)].contains("vpc-1"),
        "the merge brings the cell"
    );
    assert_eq!(action(&w.deliver(CELL).await), "in-sync");
}

/// A reviewer and a person on main change the same file differently: GitHub cannot merge the pull
/// request (405 "Pull Request is not mergeable" "if merge cannot be performed",
/// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request; "You must resolve all merge
/// conflicts before you can merge a pull request",
/// https://docs.github.com/pull-requests/collaborating-with-pull-requests/addressing-merge-conflicts/about-merge-conflicts),
/// and nothing on main changes: the pull request stays open and unmerged.
async fn a_reviewer_merging_a_conflicting_pull_request_is_refused_and_main_is_unchanged<B: Bed>() {
    const SHARED: &str = "infrastructure/base/kustomization.yaml";
    let w = World::<B>::start();
    assert!(w.files("main").contains_key(SHARED), "the example fleet has {SHARED}");
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(SHARED, "# the reviewer's version\n")],
        "a reviewer's suggestion",
    );
    w.bed
        .commit(w.repo(), "main", &[(SHARED, "# main's version\n")], "a person's commit");
    let (main, main_head) = (w.files("main"), w.head("main"));

    let refused = w
        .bed
        .merge(w.repo(), 1)
        .expect_err("GitHub cannot merge a pull request that conflicts with its base");
    assert!(
        refused.contains("405") && refused.contains("Pull Request is not mergeable"),
        "{refused}"
    );
    assert_eq!(w.head("main"), main_head, "main did not move");
    assert_eq!(w.files("main"), main, "main's files are unchanged");
    let pulls = w.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert!(pulls[0].open && !pulls[0].merged, "{pulls:?}");
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

/// e. A lost race: another writer moves the cell's branch between cellbridge's read and its
/// fast-forward. The update is refused as not a fast-forward, and the whole sync is redone on a
/// fresh read: the same pull request ends up holding the new value.
async fn a_lost_race_for_the_branch_is_redone_on_a_fresh_read<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.apply(CELL, 2, "vpc-2");
    w.bed.race(
        w.repo(),
        &ops::GIT_UPDATE_REF,
        &branch(CELL),
        &[("NOTES.md", "someone else\n")],
    );
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert_eq!(r["attempts"], 2, "one redo: {r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    assert_eq!(w.pulls().len(), 1);
    let files = w.files(&branch(CELL));
    assert!(files[&metadata_path(CELL)].contains("vpc-2"));
    // The other writer's commit and its file stay: cellbridge's update is a commit on the
    // branch's current head that rewrites its own file only.
    assert_eq!(files["NOTES.md"], "someone else\n", "{:?}", files.keys());
    assert_eq!(w.bed.commits_ahead(w.repo(), &branch(CELL)), 3);
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

/// g. A refused state (a value that looks like a secret; no `cell_name`) opens no pull request
/// and writes nothing of the cell; with no pull request open, it is reported in one issue per
/// cell, labelled `cellbridge-refused`, naming the key and never the value. Replayed, nothing is
/// written; the cell's next good state opens its pull request and closes the issue.
async fn a_refused_state_opens_no_pull_request_and_is_reported_in_one_issue<B: Bed>() {
    let w = World::<B>::start();
    let mut meta = metadata(CELL, "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(1, meta));
    let mut nameless = metadata("eu-c2", "vpc-1");
    nameless.as_object_mut().unwrap().remove("cell_name");
    w.put_state("eu-c2", state_with(1, nameless));

    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("refused", Some(false)), "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("api_token"), "names the key: {r}");
    assert!(!r.to_string().contains(PLANTED_SECRET), "never the value: {r}");
    assert_eq!(
        (r["reported"]["on"].as_str(), r["reported"]["created"].as_bool()),
        (Some("issue"), Some(true)),
        "{r}"
    );

    let r = w.deliver("eu-c2").await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("refused", Some(false)), "{r}");
    assert!(r["error"].as_str().unwrap().contains("cell_name"), "{r}");

    assert!(w.pulls().is_empty());
    assert_eq!(w.head(&branch(CELL)), None);
    let issues = w.bed.issues(w.repo());
    assert_eq!(issues.len(), 2, "{issues:?}");
    for (issue, (cell, key)) in issues.iter().zip([(CELL, "api_token"), ("eu-c2", "cell_name")]) {
        assert!(issue.open && issue.labels == ["cellbridge-refused"], "{issue:?}");
        assert!(issue.title.contains(cell) && issue.body.contains(key), "{issue:?}");
        assert!(!issue.body.contains(PLANTED_SECRET));
    }

    let writes = w.writes();
    assert_eq!(w.deliver(CELL).await["reported"]["created"], false);
    assert_eq!(w.writes(), writes, "replayed: nothing written");

    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(r["resolved_issues"], json!([issues[0].number]), "{r}");
    let issues = w.bed.issues(w.repo());
    assert_eq!(
        issues.iter().map(|i| i.open).collect::<Vec<_>>(),
        [false, true],
        "{issues:?}"
    );
    w.assert_checked(CELL);
}

/// h. A refused state of a cell whose pull request is open: its head gets a failing
/// `cellbridge/contract` status and one comment naming the key (never the value); the values
/// stay; the next good state sets the status back to success on the head it writes.
async fn a_refused_state_fails_the_pull_requests_contract_status_until_a_good_state<B: Bed>() {
    use cellbridge::rules::report::CONTRACT_CONTEXT;
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let head = w.head(&branch(CELL)).unwrap();
    let mut meta = metadata(CELL, "vpc-9");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(2, meta));
    for _ in 0..2 {
        let r = w.deliver(CELL).await;
        assert_eq!(
            (action(&r), r["reported"]["on"].as_str()),
            ("refused", Some("pull-request")),
            "{r}"
        );
    }
    let contract: Vec<Status> = w
        .statuses(&head)
        .into_iter()
        .filter(|s| s.context == CONTRACT_CONTEXT)
        .collect();
    assert_eq!(contract.len(), 1, "posted once: {contract:?}");
    assert!(
        !contract[0].success && contract[0].description.contains("api_token"),
        "{contract:?}"
    );
    let pr = &w.open_pulls()[0];
    assert_eq!(pr.comments.len(), 1, "{pr:?}");
    assert!(pr.comments[0].contains("api_token") && !pr.comments[0].contains(PLANTED_SECRET));
    assert!(!pr.body.contains(PLANTED_SECRET));
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-1"), "the values stay");

    w.apply(CELL, 3, "vpc-3");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let new_head = w.head(&branch(CELL)).unwrap();
    let contract: Vec<Status> = w
        .statuses(&new_head)
        .into_iter()
        .filter(|s| s.context == CONTRACT_CONTEXT)
        .collect();
    assert_eq!(
        contract.iter().map(|s| s.success).collect::<Vec<_>>(),
        [true],
        "{contract:?}"
    );
    assert_eq!(w.open_pulls()[0].comments.len(), 1);
}

/// Instantiates every scenario once per bed: `mod <bed module> { #[tokio::test] <scenario> }`;
/// attributes written before a scenario's name (an `#[ignore]`) go on both of its tests.
/// A reviewer and main change the same file of the cell: cellbridge cannot merge main into the
/// branch, so the next state leaves the branch as it is, the head's status says so and one
/// comment asks for "Update branch" (a second event does not comment again).
async fn a_conflict_between_a_reviewer_and_main_is_reported_once_and_the_branch_left_alone<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let layers = format!("clusters/{CELL}/layers.yaml");
    w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&layers, "# the reviewer's version\n")],
        "a reviewer",
    );
    w.bed
        .commit(w.repo(), "main", &[(&layers, "# main's version\n")], "someone on main");
    let head = w.head(&branch(CELL));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "conflicted", "{r}");
    assert_eq!(w.head(&branch(CELL)), head, "the branch is left as it is");
    let statuses = w.statuses(head.as_deref().unwrap());
    assert!(
        statuses
            .iter()
            .any(|s| !s.success && s.description.contains("Update branch")),
        "{statuses:?}"
    );
    assert_eq!(action(&w.deliver(CELL).await), "conflicted");
    let pulls = w.open_pulls();
    assert_eq!(pulls[0].comments.len(), 1, "one comment: {pulls:?}");
    assert!(pulls[0].comments[0].contains("Update branch"));
}

/// Randomized, end to end: for a few seeds, two deliveries of each of three successive states
/// race each other while people push to the pull request's branch and to main, merge, close and
/// press "Update branch" between them. Whatever the interleaving: no person's file is lost,
/// merging never undoes main, there is never more than one open pull request. (The in-memory
/// double runs a thousand such schedules with every GitHub call interleaved:
/// `shared/tests/rules/sync.rs`.)
async fn people_and_racing_deliveries_lose_nothing<B: Bed>() {
    for seed in 1..=3u64 {
        let w = World::<B>::start();
        let mut dice = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut roll = |sides: u64| {
            dice ^= dice << 13;
            dice ^= dice >> 7;
            dice ^= dice << 17;
            dice % sides
        };
        let (mut on_main, mut on_branch) = (Vec::new(), Vec::new());
        for serial in 1..=3u64 {
            w.apply(CELL, serial, &format!("vpc-{serial}"));
            let people = async {
                tokio::task::yield_now().await;
                let open = w.open_pulls().first().map(|p| p.number);
                let step = format!("seed {seed} serial {serial}");
                match (roll(6), open) {
                    (0, _) => {
                        let path = format!("docs/{seed}-{serial}.md");
                        w.bed.commit(w.repo(), "main", &[(&path, &step)], "a person on main");
                        on_main.push((path, step));
                    }
                    (1 | 2, Some(n)) => {
                        let path = format!("clusters/{CELL}/review-{serial}.yaml");
                        w.bed.commit(
                            w.repo(),
                            &branch(CELL),
                            &[(&path, &format!("# {step}\n"))],
                            "a reviewer",
                        );
                        on_branch.push((n, path, format!("# {step}\n")));
                    }
                    (3, Some(n)) => {
                        let _ = w.bed.merge(w.repo(), n);
                    }
                    (4, Some(n)) => w.bed.update_branch(w.repo(), n),
                    (5, Some(n)) if roll(2) == 0 => w.bed.close(w.repo(), n),
                    _ => {}
                }
            };
            let (a, b, ()) = tokio::join!(w.deliver(CELL), w.deliver(CELL), people);
            for r in [a, b] {
                assert!(r["action"] != "failed" || r["retryable"] == true, "seed {seed}: {r}");
            }
        }
        w.deliver_until_done(CELL).await;
        let pulls = w.pulls();
        assert!(pulls.iter().filter(|p| p.open).count() <= 1, "seed {seed}: {pulls:?}");
        let main = w.files("main");
        for (path, text) in &on_main {
            assert_eq!(main.get(path), Some(text), "seed {seed}: main lost {path}");
        }
        for (n, path, text) in &on_branch {
            let pr = pulls.iter().find(|p| p.number == *n).unwrap();
            if pr.merged {
                assert_eq!(main.get(path), Some(text), "seed {seed}: merging #{n} lost {path}");
            } else if pr.open {
                assert_eq!(
                    w.files(&branch(CELL)).get(path),
                    Some(text),
                    "seed {seed}: #{n} lost {path}"
                );
            }
        }
    }
}

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

// --- auto-merge ----------------------------------------------------------------------

const OPT_IN: &str = ".cellbridge/auto-merge.yaml";
const CI: &str = "ci/build";

/// A world where `CELL` exists on main (its first pull request merged) and is opted in, and the
/// repository allows auto-merge.
async fn opted_in_world<B: Bed>(opt_in: &str) -> World<B> {
    opted_in(World::<B>::start(), opt_in).await
}

/// `w` with `CELL` merged on main and opted in, and auto-merge allowed.
async fn opted_in<B: Bed>(w: World<B>, opt_in: &str) -> World<B> {
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.merge(w.repo(), 1).unwrap();
    w.bed.commit(w.repo(), "main", &[(OPT_IN, opt_in)], "opt cells in");
    w.bed.allow_auto_merge(w.repo(), true);
    w
}

fn done(r: &Value) -> &str {
    r["auto_merge"]["done"].as_str().unwrap_or("-")
}

/// An opted-in cell's value-only change gets GitHub's auto-merge, and GitHub merges it once the
/// last required check passes; a replay writes nothing.
async fn an_opted_in_value_only_change_gets_auto_merge_and_merges_once_its_checks_pass<B: Bed>() {
    let w = opted_in_world::<B>("cells:\n  - eu-*\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 1, true)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{r}");
    assert_eq!(r["auto_merge"]["opted_in_by"], "eu-*", "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert_eq!(w.bed.auto_merge(w.repo(), n), (Some(B::CELLBRIDGE.to_owned()), None));
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.body.contains("**Auto-merge: eligible.**"), "{}", pr.body);

    let writes = w.writes();
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("unchanged", "already-enabled"), "{r}");
    assert_eq!(w.writes(), writes, "a replay writes nothing");

    let head = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &head, CI, true);
    assert!(
        w.pulls().iter().any(|p| p.number == n && p.open),
        "the required review is still missing"
    );
    w.bed.approve(w.repo(), n);
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged, "GitHub's auto-merge merged it: {pr:?}");
    assert_eq!(w.bed.auto_merge(w.repo(), n).1.as_deref(), Some(B::CELLBRIDGE));
    assert!(w.metadata_on("main", CELL).contains("vpc-2"));
}

/// Without branch protection GitHub refuses to wait ("clean status"): cellbridge merges it with
/// the head's sha.
async fn with_nothing_to_wait_for_an_opted_in_change_is_merged_with_its_heads_sha<B: Bed>() {
    let w = opted_in_world::<B>("cells: [eu-c1]\n").await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "merged"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(w.pulls().iter().any(|p| p.number == n && p.merged));
    assert!(w.metadata_on("main", CELL).contains("vpc-2"));
    assert_eq!(action(&w.deliver(CELL).await), "in-sync");
}

/// A schema change and a new cell never get auto-merge, and their bodies say why; a failing
/// required check never merges.
async fn a_schema_change_and_a_new_cell_never_get_auto_merge_and_the_body_says_why<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT], 0, false)));
    let mut meta = metadata(CELL, "vpc-1");
    meta["queue_url"] = json!("q-1");
    meta["schema"] = json!("2");
    w.put_state(CELL, state_with(2, meta));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["auto_merge"]["eligible"].as_bool()),
        ("opened", Some(false)),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert_eq!(w.bed.auto_merge(w.repo(), n), (None, None));
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.body.contains("a schema change needs a person"), "{}", pr.body);
    assert!(pr.open && !pr.merged);

    w.apply("eu-c9", 1, "vpc-1");
    let r = w.deliver("eu-c9").await;
    assert_eq!(r["auto_merge"]["eligible"], false, "{r}");
    assert!(r["auto_merge"]["reasons"].to_string().contains("new cell"), "{r}");
    let pr = w.pulls().into_iter().find(|p| p.head == branch("eu-c9")).unwrap();
    assert!(pr.body.contains("This is a new cell"), "{}", pr.body);
    assert_eq!(w.bed.auto_merge(w.repo(), pr.number), (None, None));
}

/// A reviewer pushes a layer change after cellbridge enabled auto-merge: the next event turns it
/// off before posting the new head's status, so the change waits for a person.
async fn a_reviewers_push_makes_the_next_event_turn_cellbridges_auto_merge_off<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    let (n, pushed) = a_push_turns_cellbridges_auto_merge_off(&w, B::CELLBRIDGE).await;
    let statuses = w.statuses(&pushed);
    assert!(
        statuses.iter().any(|s| s.context == STATUS_CONTEXT && s.success),
        "{statuses:?}"
    );
    assert!(w.pulls().iter().any(|p| p.number == n && p.open));

    // The CI fails on the reviewer's head, and the reviewer turns auto-merge on themself (GitHub
    // refuses that while the pull request could merge at once): their choice, left alone.
    w.bed.ci(w.repo(), &pushed, CI, false);
    w.bed.enable_auto_merge_as_reviewer(w.repo(), n);
    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("updated", "left-alone"), "{r}");
    assert_eq!(w.bed.auto_merge(w.repo(), n).0.as_deref(), Some(REVIEWER));
}

/// An opted-in value change gets cellbridge's auto-merge (recorded in the body); a reviewer pushes
/// a layer; the next event turns cellbridge's own auto-merge off, and nothing merged it. The pull
/// request's number and the reviewer's head. `login`: whom GitHub says enabled it (cellbridge's
/// credentials' login).
async fn a_push_turns_cellbridges_auto_merge_off<B: Bed>(w: &World<B>, login: &str) -> (u64, String) {
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert_eq!(w.bed.auto_merge(w.repo(), n).0.as_deref(), Some(login));
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.body.contains("automerge-by=cellbridge"), "recorded: {}", pr.body);
    let pushed = w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/extra-layer.yaml"), "# a reviewer's layer\n")],
        "a reviewer adds a layer",
    );
    w.bed.ci(w.repo(), &pushed, CI, true);
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("unchanged", "disabled"), "{r}");
    assert_eq!(
        w.bed.auto_merge(w.repo(), n),
        (None, None),
        "off, and nothing merged it"
    );
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.body.contains("automerge-by="), "{}", pr.body);
    (n, pushed)
}

/// A repository whose "Allow auto-merge" is off: the body and the result say so, the sync
/// succeeds, and once an administrator allows it the next event enables it.
async fn a_repository_that_does_not_allow_auto_merge_is_said_and_the_sync_succeeds<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.allow_auto_merge(w.repo(), false);
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), done(&r), r["retryable"].as_bool()),
        ("opened", "not-allowed", Some(false)),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(
        w.pulls()
            .iter()
            .any(|p| p.number == n && p.body.contains("**Allow auto-merge**"))
    );
    w.bed.allow_auto_merge(w.repo(), true);
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    assert!(
        w.pulls()
            .iter()
            .any(|p| p.number == n && !p.body.contains("**Allow auto-merge**"))
    );
}

/// Reviewers approving, pushing and CI reporting around racing deliveries: whatever the
/// interleaving, what cellbridge (or the auto-merge it enabled) merged is a value-only change
/// of the cell's metadata. (The in-memory double runs many more schedules:
/// `shared/tests/rules/auto_merge.rs`.)
async fn people_and_auto_merge_never_merge_anything_ineligible<B: Bed>() {
    for seed in 1..=3u64 {
        let w = opted_in_world::<B>("cells: ['*']\n").await;
        w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
        let mut dice = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut roll = |sides: u64| {
            dice ^= dice << 13;
            dice ^= dice >> 7;
            dice ^= dice << 17;
            dice % sides
        };
        for serial in 2..=6u64 {
            w.apply(CELL, serial, &format!("vpc-{serial}"));
            let people = async {
                tokio::task::yield_now().await;
                let head = w.head(&branch(CELL));
                // A reviewer pushes to the pull request while it is open (a push to a branch no
                // pull request shows is a final failure of its own scenario).
                let open = !w.open_pulls().is_empty();
                match (roll(4), head) {
                    (0, Some(h)) => w.bed.ci(w.repo(), &h, CI, roll(3) != 0),
                    (1, Some(_)) if open => {
                        w.bed.commit(
                            w.repo(),
                            &branch(CELL),
                            &[(&format!("clusters/{CELL}/review-{serial}.yaml"), "# review\n")],
                            "a reviewer",
                        );
                    }
                    _ => {}
                }
            };
            let (a, b, ()) = tokio::join!(w.deliver(CELL), w.deliver(CELL), people);
            for r in [a, b] {
                assert!(r["action"] != "failed" || r["retryable"] == true, "seed {seed}: {r}");
            }
        }
        let main = w.files("main");
        assert!(
            !main.keys().any(|p| p.contains("/review-")),
            "seed {seed}: a reviewer's file reached main without a person"
        );
    }
}

macro_rules! scenarios {
    ($($module:ident: $bed:ty),+ ; $scenarios:tt) => {
        $(scenarios!(@bed $module, $bed, $scenarios);)+
    };
    (@bed $module:ident, $bed:ty, [$($(#[$meta:meta])* $scenario:ident),+ $(,)?]) => {
        mod $module {
            $(
                #[tokio::test]
                $(#[$meta])*
                async fn $scenario() {
                    super::$scenario::<$bed>().await
                }
            )+
        }
    };
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed;
    [
        a_new_cell_opens_one_pull_request_with_its_whole_directory,
        the_same_state_delivered_twice_writes_nothing_the_second_time,
        a_changed_value_updates_the_same_pull_request,
        values_equal_to_the_base_open_nothing_and_close_the_open_pull_request,
        a_reviewer_merging_after_main_moved_keeps_both_sides,
        a_reviewer_merging_a_conflicting_pull_request_is_refused_and_main_is_unchanged,
        a_pull_request_closed_by_a_reviewer_stays_closed_for_its_values,
        a_lost_race_for_the_branch_is_redone_on_a_fresh_read,
        main_moving_is_merged_in_at_the_next_change,
        a_transient_5xx_on_one_call_ends_as_without_it,
        a_refused_state_opens_no_pull_request_and_is_reported_in_one_issue,
        a_refused_state_fails_the_pull_requests_contract_status_until_a_good_state,
        a_conflict_between_a_reviewer_and_main_is_reported_once_and_the_branch_left_alone,
        people_and_racing_deliveries_lose_nothing,
        an_opted_in_value_only_change_gets_auto_merge_and_merges_once_its_checks_pass,
        with_nothing_to_wait_for_an_opted_in_change_is_merged_with_its_heads_sha,
        a_schema_change_and_a_new_cell_never_get_auto_merge_and_the_body_says_why,
        a_reviewers_push_makes_the_next_event_turn_cellbridges_auto_merge_off,
        a_repository_that_does_not_allow_auto_merge_is_said_and_the_sync_succeeds,
        people_and_auto_merge_never_merge_anything_ineligible,
        a_destroyed_cell_whose_cluster_is_gone_gets_one_decommission_and_a_reapply_closes_it,
        a_decommission_stays_one_after_a_refusal_and_a_reapply_still_closes_it,
        a_cut_off_decommissions_branch_is_never_built_on_by_the_next_values,
        a_decommission_leaves_a_metadata_pull_request_people_committed_to,
        a_cell_of_another_account_without_a_role_is_never_taken_for_gone,
        a_branch_someone_pushed_without_a_pull_request_is_never_built_on_and_said_once,
        a_file_a_reviewer_deleted_is_gone_from_what_the_heads_status_checks,
        a_decommission_replayed_after_main_moved_elsewhere_writes_nothing,
        a_decommission_of_a_cell_larger_than_a_comparison_lists_is_brought_up_to_date,
        a_head_larger_than_a_comparison_lists_is_checked_whole,
        an_eligible_head_behind_a_base_that_must_be_up_to_date_is_brought_up_to_date,
        a_body_edited_to_read_eligible_never_turns_auto_merge_on,
        a_pull_request_merged_while_a_run_wrote_it_keeps_saying_what_it_merged,
        a_new_cells_unmerged_pull_request_is_closed_once_its_cluster_is_gone,
        a_binary_file_on_the_branch_never_blocks_the_cell,
        main_rewritten_under_the_pull_request_is_no_lost_race,
        refused_states_of_many_cells_list_the_refused_issues_once,
        the_fleet_dashboard_is_one_issue_rewritten_only_when_what_it_shows_changed,
        a_repository_without_issues_fails_the_dashboard_not_the_sync_all,
        thousands_of_cells_needing_attention_fit_githubs_body_limit,
    ]
);

/// What `terraform destroy` leaves: no outputs, no resources.
fn destroyed_state(serial: u64) -> String {
    json!({"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE, "outputs": {}, "resources": []})
        .to_string()
}

impl<B: Bed> World<B> {
    /// EKS as `aws` has it (the cells' clusters: none, unless added).
    fn with_eks(mut self, aws: &cellbridge::doubles::cluster::MemAws) -> Self {
        self.sync.clusters = Some(cellbridge::jobs::sync::ClusterAccess {
            probe: aws.clone().into(),
            account_roles: BTreeMap::new(),
        });
        self
    }
}

/// A destroyed stack whose cluster EKS no longer knows gets
/// one pull request removing exactly its directory, built on main, labelled `decommission`; a
/// replay writes nothing; a re-apply closes it as cellbridge's own close.
async fn a_destroyed_cell_whose_cluster_is_gone_gets_one_decommission_and_a_reapply_closes_it<B: Bed>() {
    let aws = cellbridge::doubles::cluster::MemAws::new("arn:aws:iam::123456789012:role/cellbridge");
    let w = World::<B>::start().with_eks(&aws);
    w.apply(CELL, 1, "vpc-1");
    let opened = w.deliver(CELL).await;
    w.bed
        .merge(w.repo(), opened["pull_request"]["number"].as_u64().unwrap())
        .unwrap();
    let main = w.bed.files(w.repo(), "main");
    let dir = format!("clusters/{CELL}/");
    assert!(main.keys().any(|p| p.starts_with(&dir)));

    w.put_state(CELL, destroyed_state(2));
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "decommission-opened", "{r}");
    let pr = w.pulls().into_iter().find(|p| p.open).expect("one open pull request");
    assert_eq!(
        (pr.head.as_str(), pr.labels.clone()),
        (
            branch(CELL).as_str(),
            vec!["cellbridge".to_owned(), "decommission".to_owned()]
        )
    );
    let mut expected = main.clone();
    expected.retain(|p, _| !p.starts_with(&dir));
    assert_eq!(w.bed.files(w.repo(), &branch(CELL)), expected);
    assert_eq!(w.bed.commits_ahead(w.repo(), &branch(CELL)), 1);
    let head = w.bed.head(w.repo(), &branch(CELL)).unwrap();
    assert!(w.bed.statuses(w.repo(), &head).iter().all(|s| s.success));

    let before = w.bed.writes(w.repo());
    assert_eq!(action(&w.deliver(CELL).await), "decommission-unchanged");
    assert_eq!(w.bed.writes(w.repo()), before, "a replay writes nothing");

    w.apply(CELL, 3, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "closed", "{r}");
    assert!(w.pulls().iter().all(|p| !p.open && !p.merged || p.number == 1));
    assert_eq!(w.bed.head(w.repo(), &branch(CELL)), None, "its branch is deleted");
}

// --- proposals among people: one record, one branch rule ----------------------------------------

impl<B: Bed> World<B> {
    /// `CELL` on main: its first pull request, of `state`, merged.
    async fn merged(self, state: String) -> Self {
        self.put_state(CELL, state);
        let opened = self.deliver(CELL).await;
        self.bed
            .merge(self.repo(), opened["pull_request"]["number"].as_u64().unwrap())
            .unwrap();
        self
    }

    /// `CELL` merged on main, EKS as `aws` has it (the cell's cluster: none).
    async fn merged_then_destroyed(aws: &cellbridge::doubles::cluster::MemAws) -> Self {
        World::<B>::start()
            .with_eks(aws)
            .merged(state_with(1, metadata(CELL, "vpc-1")))
            .await
    }

    /// The files of `main` under the cell's directory.
    fn cell_dir(&self, branch: &str) -> BTreeMap<String, String> {
        self.files(branch)
            .into_iter()
            .filter(|(p, _)| p.starts_with(&format!("clusters/{CELL}/")))
            .collect()
    }
}

fn home_aws() -> cellbridge::doubles::cluster::MemAws {
    cellbridge::doubles::cluster::MemAws::new("arn:aws:iam::123456789012:role/cellbridge")
}

/// A decommission pull request stays one when a field is recorded in its body after it was
/// opened (a refused state reported on it): a later apply that brings the cell back closes it,
/// rather than rewriting it in place as a values change whose diff still deletes the directory.
async fn a_decommission_stays_one_after_a_refusal_and_a_reapply_still_closes_it<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.put_state(CELL, destroyed_state(2));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-opened");
    let mut meta = metadata(CELL, "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(3, meta));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["reported"]["on"].as_str()),
        ("refused", Some("pull-request")),
        "{r}"
    );
    let pr = w.open_pulls().remove(0);
    assert!(pr.body.contains("refused="), "the refusal is recorded: {}", pr.body);

    w.put_state(CELL, destroyed_state(4));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-unchanged");
    w.apply(CELL, 5, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!(
        action(&r),
        "closed",
        "the cell is back: its decommission is withdrawn: {r}"
    );
    assert!(w.open_pulls().is_empty(), "{:?}", w.open_pulls());
    assert_eq!(
        w.cell_dir("main").len(),
        expected_cell_dir(CELL).len(),
        "main keeps the cell"
    );
}

/// A run cut off between the decommission's branch and its pull request leaves a branch that
/// removes the cell's directory. A later apply's values are never built on it: the branch,
/// cellbridge's alone, is recreated from main, and what auto-merge merges keeps the directory.
async fn a_cut_off_decommissions_branch_is_never_built_on_by_the_next_values<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.bed
        .commit(w.repo(), "main", &[(OPT_IN, "cells: ['*']\n")], "opt cells in");
    w.bed.allow_auto_merge(w.repo(), true);
    w.put_state(CELL, destroyed_state(2));
    w.bed.refuse_once(w.repo(), &ops::PULLS_CREATE, 422);
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "failed", "{r}");
    assert!(w.open_pulls().is_empty());
    assert!(
        w.cell_dir(&branch(CELL)).is_empty(),
        "the cut-off run's branch removes the directory"
    );

    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened", "{r}");
    assert_eq!(
        done(&r),
        "merged",
        "a value-only change, opted in, nothing to wait for: {r}"
    );
    let main = w.cell_dir("main");
    assert_eq!(main.len(), expected_cell_dir(CELL).len(), "{:?}", main.keys());
    assert!(main[&metadata_path(CELL)].contains("vpc-3"));
}

/// The cell's metadata pull request holds a reviewer's commit when its stack is destroyed and
/// its cluster gone: the decommission leaves it open and says so once; once a person closes it,
/// the decommission opens on a branch recreated from main.
async fn a_decommission_leaves_a_metadata_pull_request_people_committed_to<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "opened");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(
        !pr.body.contains("Do not push"),
        "reviewers' commits are kept: {}",
        pr.body
    );
    let note = format!("clusters/{CELL}/NOTES.md");
    let pushed = w
        .bed
        .commit(w.repo(), &branch(CELL), &[(&note, "why\n")], "a reviewer's note");

    w.put_state(CELL, destroyed_state(3));
    for _ in 0..2 {
        let r = w.deliver(CELL).await;
        assert_eq!(
            (action(&r), r["decommission"]["proposed"].as_bool()),
            ("destroyed", Some(false)),
            "{r}"
        );
    }
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open, "left open for a person");
    assert_eq!(
        w.head(&branch(CELL)).as_deref(),
        Some(pushed.as_str()),
        "the branch is untouched"
    );
    assert_eq!(pr.comments.len(), 1, "said once: {:?}", pr.comments);
    assert!(pr.comments[0].contains("merge it or close it"), "{:?}", pr.comments);
    let writes = w.writes();
    w.deliver(CELL).await;
    assert_eq!(w.writes(), writes, "a replay writes nothing");

    w.bed.close(w.repo(), n);
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "decommission-opened", "{r}");
    assert!(w.cell_dir(&branch(CELL)).is_empty());
    assert_eq!(
        w.bed.commits_ahead(w.repo(), &branch(CELL)),
        1,
        "built on main, not on the reviewer's branch"
    );
}

/// A cell whose metadata names another account, which no role reaches: EKS's "not found" in
/// cellbridge's own account proves nothing there, so nothing is proposed and the result says why.
async fn a_cell_of_another_account_without_a_role_is_never_taken_for_gone<B: Bed>() {
    let mut meta = metadata(CELL, "vpc-1");
    meta["aws_account_id"] = json!("210987654321");
    let w = World::<B>::start()
        .with_eks(&home_aws())
        .merged(state_with(1, meta))
        .await;
    w.put_state(CELL, destroyed_state(2));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["decommission"]["proposed"].as_bool()),
        ("destroyed", Some(false)),
        "{r}"
    );
    let reason = r["decommission"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("210987654321") && reason.contains("CELLBRIDGE_ACCOUNT_ROLES"),
        "{r}"
    );
    assert!(w.open_pulls().is_empty());
}

/// Someone pushes to `cellbridge/<cell>` with no pull request: cellbridge neither builds on the
/// branch nor deletes it. It fails for good (no retry), and names the branch and the commit in
/// the cell's issue, once.
async fn a_branch_someone_pushed_without_a_pull_request_is_never_built_on_and_said_once<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    let theirs = w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/NOTES.md"), "mine\n")],
        "someone's own work",
    );
    w.apply(CELL, 2, "vpc-2");
    for _ in 0..2 {
        let r = w.deliver(CELL).await;
        assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
        assert!(r["error"].as_str().unwrap().contains(&theirs[..12]), "{r}");
        assert_eq!(r["reported"]["on"], "issue", "{r}");
    }
    assert_eq!(
        w.head(&branch(CELL)).as_deref(),
        Some(theirs.as_str()),
        "the branch is untouched"
    );
    let reports: Vec<IssueSeen> = w.bed.issues(w.repo()).into_iter().filter(|i| i.open).collect();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].body.contains(&branch(CELL)) && reports[0].body.contains("delete the branch"),
        "{}",
        reports[0].body
    );
    assert!(w.open_pulls().is_empty());
}

/// A reviewer deletes a manifest a layer still lists: Flux would fail to build that layer, and so
/// does the head's check, which reads the head's content with its deletions (not the base's file
/// in its place). Putting it back makes the status pass again.
async fn a_file_a_reviewer_deleted_is_gone_from_what_the_heads_status_checks<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let manifest = "apps/base/podinfo/deployment.yaml";
    let text = w.files("main")[manifest].clone();
    let deleted = w
        .bed
        .delete(w.repo(), &branch(CELL), &[manifest], "a reviewer deletes a manifest");
    w.apply(CELL, 3, "vpc-3");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let head = w.head(&branch(CELL)).unwrap();
    assert_ne!(head, deleted);
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(
        status.len() == 1 && !status[0].success && status[0].description.contains("deployment.yaml"),
        "{status:?}"
    );
    let restored = w
        .bed
        .commit(w.repo(), &branch(CELL), &[(manifest, &text)], "put it back");
    assert_eq!(action(&w.deliver(CELL).await), "unchanged");
    let status: Vec<Status> = w.strict_statuses(&restored);
    assert!(status.len() == 1 && status[0].success, "{status:?}");
}

/// A decommission is replayed after people changed main outside the cell's directory: nothing is
/// written (no merge commit that would dismiss approvals, no status, no body); a change under
/// the directory is merged in and removed too.
async fn a_decommission_replayed_after_main_moved_elsewhere_writes_nothing<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    w.put_state(CELL, destroyed_state(2));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-opened");
    let head = w.head(&branch(CELL));
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "elsewhere");
    let writes = w.writes();
    assert_eq!(action(&w.deliver(CELL).await), "decommission-unchanged");
    assert_eq!(w.writes(), writes, "a replay writes nothing");
    assert_eq!(w.head(&branch(CELL)), head);

    let added = format!("clusters/{CELL}/added-on-main.yaml");
    w.bed
        .commit(w.repo(), "main", &[(&added, "# added\n")], "under the cell");
    assert_eq!(action(&w.deliver(CELL).await), "decommission-updated");
    assert!(w.cell_dir(&branch(CELL)).is_empty(), "{:?}", w.cell_dir(&branch(CELL)));
}

/// A cell with more files than a comparison lists (GitHub's 300): its decommission, brought up to
/// date after a file is added under the cell on main, removes that file too, from the head's
/// whole tree, and never asks to remove a path already gone.
async fn a_decommission_of_a_cell_larger_than_a_comparison_lists_is_brought_up_to_date<B: Bed>() {
    let w = World::<B>::merged_then_destroyed(&home_aws()).await;
    let bulk: Vec<(String, String)> = (0..310)
        .map(|i| (format!("clusters/{CELL}/bulk/f{i:03}.yaml"), format!("# {i}\n")))
        .collect();
    let refs: Vec<(&str, &str)> = bulk.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    w.bed.commit(w.repo(), "main", &refs, "a large cell");
    w.put_state(CELL, destroyed_state(2));
    assert_eq!(action(&w.deliver(CELL).await), "decommission-opened");
    let added = format!("clusters/{CELL}/late.yaml");
    w.bed.commit(w.repo(), "main", &[(&added, "# late\n")], "one more");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "decommission-updated", "{r}");
    assert!(
        w.cell_dir(&branch(CELL)).is_empty(),
        "{:?}",
        w.cell_dir(&branch(CELL)).keys().take(5).collect::<Vec<_>>()
    );
}

/// A head whose changes run past the 300 files a comparison lists is checked whole: a reviewer's
/// broken manifest sorting after 310 other files still fails the head's status, naming it.
async fn a_head_larger_than_a_comparison_lists_is_checked_whole<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let manifest = "apps/base/podinfo/deployment.yaml";
    let broken = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  owner: ${no_such_key}\n";
    // 310 files that sort before the manifest (identical, so read once).
    let bulk: Vec<String> = (0..310).map(|i| format!("aaa-bulk/f{i:03}.yaml")).collect();
    let mut files: Vec<(&str, &str)> = bulk.iter().map(|p| (p.as_str(), "# bulk\n")).collect();
    files.push((manifest, broken));
    let pushed = w
        .bed
        .commit(w.repo(), &branch(CELL), &files, "a reviewer's large change");
    w.apply(CELL, 3, "vpc-3");
    assert_eq!(action(&w.deliver(CELL).await), "updated");
    let head = w.head(&branch(CELL)).unwrap();
    assert_ne!(head, pushed);
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(
        status.len() == 1 && !status[0].success && status[0].description.contains("no_such_key"),
        "{status:?}"
    );
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-3"));
}

/// An eligible head left behind a base that requires branches to be up to date ("Require
/// branches to be up to date before merging"; GitHub's auto-merge waits and never updates the
/// branch) is brought up to date by the next event, its status posted on the new head, and
/// GitHub's auto-merge merges it once the CI passes there.
async fn an_eligible_head_behind_a_base_that_must_be_up_to_date_is_brought_up_to_date<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, true)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "elsewhere");
    let behind = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &behind, CI, true);
    assert!(
        w.pulls().iter().any(|p| p.number == n && p.open),
        "behind main: GitHub's auto-merge waits"
    );

    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("updated", "already-enabled"), "{r}");
    let head = w.head(&branch(CELL)).unwrap();
    assert_ne!(head, behind);
    assert!(w.files(&branch(CELL)).contains_key("docs/elsewhere.md"));
    assert!(
        w.statuses(&head)
            .iter()
            .any(|s| s.context == STATUS_CONTEXT && s.success),
        "{:?}",
        w.statuses(&head)
    );
    let writes = w.writes();
    assert_eq!(done(&w.deliver(CELL).await), "already-enabled");
    assert_eq!(w.writes(), writes, "up to date: a replay writes nothing");
    w.bed.ci(w.repo(), &head, CI, true);
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged, "GitHub's auto-merge merged it: {pr:?}");
    let main = w.files("main");
    assert!(main.contains_key("docs/elsewhere.md") && w.metadata_on("main", CELL).contains("vpc-2"));
}

/// Whether GitHub may merge a head is never read back from the body: a person who edits a schema
/// change's description to read "eligible" (its paragraph and its record) gets no auto-merge.
async fn a_body_edited_to_read_eligible_never_turns_auto_merge_on<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    let mut meta = metadata(CELL, "vpc-1");
    meta["queue_url"] = json!("q-1");
    w.put_state(CELL, state_with(2, meta));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["auto_merge"]["eligible"].as_bool()),
        ("opened", Some(false)),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    let (open, close) = ("<!-- cellbridge-auto-merge -->", "<!-- /cellbridge-auto-merge -->");
    let (a, b) = (pr.body.find(open).unwrap(), pr.body.find(close).unwrap());
    let edited = format!("{}{open}\n**Auto-merge: eligible.**\n{}", &pr.body[..a], &pr.body[b..]);
    let edited = cellbridge::pure::record::with_field(&edited, "automerge", Some("eligible"));
    w.bed.edit_body(w.repo(), n, &edited);

    let r = w.deliver(CELL).await;
    assert_eq!(r["auto_merge"]["eligible"].as_bool(), Some(false), "{r}");
    assert_eq!(w.bed.auto_merge(w.repo(), n), (None, None), "{r}");
    let head = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &head, CI, true);
    assert!(w.pulls().iter().any(|p| p.number == n && p.open && !p.merged));
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

/// A new cell's first pull request, never merged, when its stack is destroyed: it stays open
/// while EKS still knows the cluster (and the dashboard lists the cell as needing attention,
/// linking it); once EKS confirms the cluster gone in the cell's account it is closed with a
/// comment, its branch deleted, and the dashboard calls the cell decommissioned.
async fn a_new_cells_unmerged_pull_request_is_closed_once_its_cluster_is_gone<B: Bed>() {
    use cellbridge::doubles::cluster::MemCluster;
    let aws = home_aws();
    aws.add_cluster(MemCluster::active(CELL, "eu-west-1"));
    let w = World::<B>::start().with_eks(&aws);
    w.apply(CELL, 1, "vpc-1");
    let n = w.deliver(CELL).await["pull_request"]["number"].as_u64().unwrap();
    w.put_state(CELL, destroyed_state(2));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["pull_request"]["number"].as_u64()),
        ("destroyed", Some(n)),
        "{r}"
    );
    assert!(w.pulls().iter().any(|p| p.number == n && p.open));
    w.dashboard().await;
    let board = w.dashboards().pop().expect("the dashboard issue").body;
    let row = board.lines().find(|l| l.contains(CELL)).unwrap_or_default();
    assert!(row.contains(&format!("#{n}")) && row.contains("still open"), "{board}");

    aws.remove_cluster(None, "eu-west-1", CELL);
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "closed", "{r}");
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(!pr.open && !pr.merged, "{pr:?}");
    assert!(
        pr.comments
            .iter()
            .any(|c| c.contains("destroyed") && c.contains("is gone")),
        "{pr:?}"
    );
    assert_eq!(w.head(&branch(CELL)), None, "its branch held only cellbridge's commit");
    let writes = w.writes();
    assert_eq!(action(&w.deliver(CELL).await), "destroyed");
    assert_eq!(w.writes(), writes, "a replay writes nothing");
    w.dashboard().await;
    let board = w.dashboards().pop().unwrap().body;
    let row = board.lines().find(|l| l.contains(CELL)).unwrap_or_default();
    assert!(!row.contains("still open"), "{board}");
}

/// A binary file a reviewer commits on the cell's branch (an image) stays opaque: it never
/// blocks the cell, no layer reads it, and the next values are written with a passing status.
async fn a_binary_file_on_the_branch_never_blocks_the_cell<B: Bed>() {
    let w = World::<B>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    let png: &[u8] = &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0xfe, 0x00, 0x80];
    w.bed.commit_bytes(
        w.repo(),
        &branch(CELL),
        &format!("clusters/{CELL}/diagram.png"),
        png,
        "a reviewer's diagram",
    );
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    let pr = w.open_pulls().remove(0);
    assert!(pr.comments.is_empty(), "nothing refused: {:?}", pr.comments);
    let head = w.head(&branch(CELL)).unwrap();
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(status.len() == 1 && status[0].success, "{status:?}");
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
}

/// A person rewrites main's history after the pull request was written (a force-push that drops
/// a commit the pull request recorded as its base): the next state is no lost race, retried
/// forever, but written on main as it now is.
async fn main_rewritten_under_the_pull_request_is_no_lost_race<B: Bed>() {
    let w = World::<B>::start().merged(state_with(1, metadata(CELL, "vpc-1"))).await;
    let before = w.head("main").unwrap();
    w.bed
        .commit(w.repo(), "main", &[("docs/oops.md", "pushed by mistake\n")], "oops");
    w.apply(CELL, 2, "vpc-2");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.force_push(w.repo(), "main", &before);
    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-3"));
    assert_eq!(action(&w.deliver(CELL).await), "unchanged");
}

/// Refused states of many cells in one invocation (an SQS batch) list the `cellbridge-refused`
/// issues once, whatever the number of cells, and each cell gets its own issue.
async fn refused_states_of_many_cells_list_the_refused_issues_once<B: Bed>() {
    let w = World::<B>::start();
    let cells: Vec<String> = (1..=6).map(|i| format!("eu-r{i}")).collect();
    for c in &cells {
        let mut meta = metadata(c, "vpc-1");
        meta["api_token"] = json!(PLANTED_SECRET);
        w.put_state(c, state_with(1, meta));
    }
    let records: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": json!({
                "source": "aws.s3", "detail-type": "Object Created",
                "detail": {"bucket": {"name": BUCKET}, "object": {"key": format!("cells/{c}/terraform.tfstate")}},
            }).to_string()})
        })
        .collect();
    let listed = w.bed.issue_listings(w.repo());
    let inv = w.handle(json!({ "Records": records })).await;
    let reported: Vec<&Value> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reported"]["on"] == "issue")
        .collect();
    assert_eq!(reported.len(), cells.len(), "{}", inv.response);
    assert_eq!(w.bed.issue_listings(w.repo()) - listed, 1, "one listing for the batch");
    let issues = w.bed.issues(w.repo());
    for c in &cells {
        assert_eq!(
            issues.iter().filter(|i| i.open && i.title.contains(c.as_str())).count(),
            1,
            "{issues:?}"
        );
    }
}

// --- the HTTP fake only: what GitHub's permissions and the request budget look like ----------

/// With GitHub App credentials, GraphQL names the App that enabled auto-merge as a `Bot` by its
/// slug (`cellbridge`) while `viewer.login` is `cellbridge[bot]`: cellbridge still knows the
/// auto-merge as its own and turns it off when a reviewer's push makes the head ineligible,
/// where taking it for a person's would leave GitHub to merge a change nobody reviewed.
#[tokio::test]
async fn http_with_app_credentials_cellbridge_knows_its_own_auto_merge_and_turns_it_off() {
    let w = opted_in(http_world(app_credentials), "cells: ['*']\n").await;
    // The App's REST login; GraphQL names it `cellbridge`, a `Bot`, and cellbridge knows it.
    a_push_turns_cellbridges_auto_merge_off(&w, "cellbridge[bot]").await;
}

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

/// A reviewer adds a submodule under the cell on its pull request: a comparison lists the
/// gitlink like a file, whose "blob" the repository does not have. The head is then read from
/// its trees, where the submodule is no file: the next values are written, the status passes,
/// nothing is refused. (The in-memory double has no gitlinks: this runs on the HTTP fake.)
#[tokio::test]
async fn http_a_submodule_on_the_branch_is_no_file_and_never_blocks_the_cell() {
    let w = World::<HttpBed>::start();
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.gh.commit_gitlink(
        REPO,
        &branch(CELL),
        &format!("clusters/{CELL}/vendor/charts"),
        "0123456789abcdef0123456789abcdef01234567",
        "a reviewer vendors charts as a submodule",
    );
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(action(&r), "updated", "{r}");
    assert!(w.open_pulls()[0].comments.is_empty(), "nothing refused");
    let head = w.head(&branch(CELL)).unwrap();
    let status: Vec<Status> = w.strict_statuses(&head);
    assert!(status.len() == 1 && status[0].success, "{status:?}");
    assert!(w.metadata_on(&branch(CELL), CELL).contains("vpc-2"));
}

/// A world on the HTTP fake whose client authenticates with `creds(fake)`.
fn http_world(creds: impl FnOnce(&FakeGithub) -> Credentials) -> World<HttpBed> {
    let mut w = World::<HttpBed>::start();
    let creds = creds(&w.bed.gh);
    w.sync.fleet = GithubFleet::new(&w.bed.gh.url(), OWNER, REPO_NAME, None, &creds).unwrap();
    w
}

fn app_credentials(gh: &FakeGithub) -> Credentials {
    let a = gh.app();
    let key = a["private_key"]
        .as_str()
        .expect("the fake GitHub needs the `cryptography` package to act as a GitHub App");
    leak::secret("github_scenarios: GitHub App private key", key);
    Credentials::App {
        app_id: a["app_id"].as_u64().unwrap(),
        installation_id: a["installation_id"].as_u64().unwrap(),
        private_key: Secret::new(key.to_owned()),
    }
}

/// The requests the fake logged since `from`: (operation path, write), archive downloads left out.
fn api_requests_since(w: &World<HttpBed>, from: usize) -> Vec<(String, bool)> {
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
fn repo_writes(w: &World<HttpBed>) -> usize {
    api_requests_since(w, 0)
        .iter()
        .filter(|(path, write)| *write && path.contains(" /repos/"))
        .count()
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

#[tokio::test]
async fn http_an_app_installation_missing_a_permission_is_refused_before_any_write_naming_it() {
    let w = http_world(app_credentials);
    w.bed.gh.set_app(json!({"permissions": {
        "metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "statuses": "read",
    }}));
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(
        e.contains("lacks the repository permission statuses=write") && e.contains("statuses=read"),
        "{e}"
    );
    assert_eq!(repo_writes(&w), 0, "nothing written: {}", w.bed.gh.requests());
    assert!(
        r.get("reported").is_none(),
        "access failures are not reported on GitHub: {r}"
    );

    // The administrator grants it: the next event opens the pull request.
    w.bed.gh.set_app(json!({"permissions": {
        "metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "statuses": "write",
    }}));
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.assert_checked(CELL);
}

#[tokio::test]
async fn http_a_fine_grained_token_missing_a_permission_fails_naming_the_one_github_gives() {
    const FINE: &str = "github_pat_11AAAAAAA0123456789_scenarioFineGrainedTokenWithoutStatuses";
    let w = http_world(|gh| {
        leak::secret("github_scenarios: fine-grained token", FINE);
        gh.fine_grained_token(
            FINE,
            json!({"metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write"}),
        );
        Credentials::Token(Secret::new(FINE.to_owned()))
    });
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(
        e.contains("HTTP 403") && e.contains("lack the repository permission statuses=write"),
        "{e}"
    );
    assert!(r.get("reported").is_none(), "{r}");
    assert!(w.bed.issues(w.repo()).is_empty() && w.pulls().is_empty());
}

#[tokio::test]
async fn http_an_app_not_installed_on_the_repository_is_an_access_failure_not_a_report() {
    let w = http_world(app_credentials);
    w.bed.gh.set_app(json!({"repositories": ["acme/another-repo"]}));
    w.apply(CELL, 1, "vpc-1");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("failed", Some(false)), "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("is the GitHub App installed on the repository"),
        "{r}"
    );
    assert_eq!(repo_writes(&w), 0);
}

/// The README's table "GitHub requests per outcome", row by row, measured on the HTTP fake with
/// the product's own client (the default branch, read once per process, left out as the table says).
#[tokio::test]
async fn http_the_request_budget_per_outcome_is_the_readmes() {
    let table = readme_budget();

    let w = World::<HttpBed>::start();
    // The default branch, once per process: read now, so that every row counts one sync.
    w.sync.fleet.read_base(&Keep::all(), deadline()).await.unwrap();
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
    assert!(measured.len() >= 16, "{measured:?}");
}

/// The README's table "GitHub requests per outcome": row → (API requests, writes).
fn readme_budget() -> BTreeMap<String, (usize, usize)> {
    let readme = include_str!("../README.md");
    let start = readme
        .find("| outcome | API requests | of which writes |")
        .expect("README: the table of GitHub requests per outcome");
    readme[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            Some((cells[1].to_owned(), (cells[2].parse().ok()?, cells[3].parse().ok()?)))
        })
        .collect()
}

/// The decommission rows of the README's table, measured on the HTTP fake.
#[tokio::test]
async fn http_the_decommission_request_budget_is_the_readmes() {
    let table = readme_budget();
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

/// Every measured row is the README's.
fn assert_budget(table: &BTreeMap<String, (usize, usize)>, measured: &BTreeMap<String, (usize, usize)>) {
    let wrong: Vec<String> = measured
        .iter()
        .filter(|(row, got)| table.get(*row) != Some(got))
        .map(|(row, got)| format!("{row:?}: README {:?}, measured {got:?}", table.get(row)))
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

/// A repository whose issues are turned off answers 410 to the refused issue
/// (https://docs.github.com/rest/issues/issues#create-an-issue): the refusal stands, is not
/// redelivered, and the report's failure is in the answer; nothing else is written.
#[tokio::test]
async fn http_a_refusal_in_a_repository_without_issues_is_answered_with_why_it_was_not_reported() {
    let w = World::<HttpBed>::start();
    w.bed.gh.disable_issues(REPO);
    let mut meta = metadata(CELL, "vpc-1");
    meta["api_token"] = json!(PLANTED_SECRET);
    w.put_state(CELL, state_with(1, meta));
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), r["retryable"].as_bool()), ("refused", Some(false)), "{r}");
    assert!(r.get("reported").is_none(), "{r}");
    assert!(r["report_error"].as_str().unwrap().contains("410"), "{r}");
    assert!(w.bed.issues(w.repo()).is_empty() && w.pulls().is_empty());
    assert_eq!(repo_writes(&w), 1, "the one refused attempt: {}", w.bed.gh.requests());
}
