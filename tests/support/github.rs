//! The fake GitHub (`tests/fakes/github_fake.py`): starting it and driving its control API.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

use crate::process::Service;

/// The personal access token every fake accepts.
pub const TOKEN: &str = "ghp_cellbridge_test_token_0123456789";
/// The login [`TOKEN`] acts as on the fake (GraphQL's `viewer`): cellbridge's identity there.
pub const TOKEN_LOGIN: &str = "cellbridge-machine-user";
/// A reviewer's own token (auto-merge): approvals, CI statuses and a person's
/// auto-merge go through it, so that they are not cellbridge's.
pub const REVIEWER_TOKEN: &str = "ghp_reviewer_alice_0123456789abcdefghij";
pub const REVIEWER_LOGIN: &str = "alice";

/// One fake GitHub per test (each has its own repositories, faults and request log).
///
/// Every request it receives is checked against GitHub's own REST description; when the handle
/// is dropped at the end of a test that has not already failed, any request that broke the
/// description (or any answer of the fake that drifted from it) fails the test, listed.
pub struct FakeGithub {
    service: Service,
    /// `""` for github.com, `/api/v3` for GitHub Enterprise Server.
    prefix: &'static str,
}

/// Where `make testbed` installs `@octokit/openapi`'s descriptions:
/// `CELLBRIDGE_GITHUB_OPENAPI_DIR`, else the project's `.testbed/openapi`.
pub fn openapi_dir() -> std::path::PathBuf {
    std::env::var_os("CELLBRIDGE_GITHUB_OPENAPI_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::process::repo_root().join(".testbed/openapi/node_modules/@octokit/openapi/generated"))
}

/// Why a bench against the fake GitHub cannot run here, if it cannot: the test bed's Python
/// (moto, the GitHub fake) and GitHub's REST description the fake checks every request against.
pub fn missing_bed() -> Option<String> {
    let python = std::env::var_os("CELLBRIDGE_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::process::repo_root().join(".venv/bin/python"));
    if !python.exists() {
        return Some(format!(
            "the test bed's Python ({}) is missing: run `make testbed`",
            python.display()
        ));
    }
    let openapi = openapi_dir();
    if !openapi.is_dir() {
        return Some(format!(
            "GitHub's REST description ({}) is missing: run `make testbed`",
            openapi.display()
        ));
    }
    None
}

/// state-sync's configuration for `repo` (`owner/name`, base branch `main`) on the fake at
/// `gh_url`, its states in `bucket` under the default key pattern, its credentials in `secret`.
pub fn sync_config(gh_url: &str, repo: &str, bucket: &str, secret: &str) -> cellbridge::jobs::sync::SyncConfig {
    let (owner, name) = repo.split_once('/').expect("owner/name");
    cellbridge::jobs::sync::SyncConfig {
        github: cellbridge::adapters::github::GithubConfig::checked(
            owner.into(),
            name.into(),
            Some("main".into()),
            secret.into(),
            gh_url.into(),
        )
        .expect("a valid GitHub configuration"),
        state_bucket: bucket.into(),
        key_pattern: cellbridge::jobs::sync::KeyPattern::parse(cellbridge::jobs::sync::DEFAULT_KEY_PATTERN)
            .expect("the default key pattern"),
        flux_git_url: None,
        flux_git_branch: None,
    }
}

impl FakeGithub {
    /// A fake github.com (checked against `api.github.com.json`).
    pub fn start() -> FakeGithub {
        Self::start_flavor("api.github.com", "")
    }

    /// A fake GitHub Enterprise Server: the API below `/api/v3`, checked against the newest GHES
    /// description in the package.
    pub fn start_enterprise() -> FakeGithub {
        Self::start_flavor("ghes", "/api/v3")
    }

    fn start_flavor(flavor: &str, prefix: &'static str) -> FakeGithub {
        let dir = openapi_dir();
        let dir = dir.to_str().expect("a UTF-8 path");
        let gh = FakeGithub {
            service: Service::start(
                "github_fake.py",
                &["--token", TOKEN, "--openapi", dir, "--flavor", flavor],
            ),
            prefix,
        };
        gh.control(
            "POST",
            "/_fake/tokens",
            Some(&json!({"token": REVIEWER_TOKEN, "login": REVIEWER_LOGIN})),
        );
        gh
    }

    // auto-merge
    /// [`FakeGithub::call`] with another token (a reviewer's).
    pub fn call_as(&self, token: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        http(
            self.service.port,
            method,
            &format!("{}{path}", self.prefix),
            body,
            Some(token),
        )
    }

    /// A GraphQL request with `token` to the fake's GraphQL endpoint (`/graphql`, or
    /// `/api/graphql` on GitHub Enterprise Server).
    pub fn graphql_as(&self, token: &str, query: &str, variables: Value) -> Value {
        let path = format!("{}/graphql", self.prefix.trim_end_matches("/v3"));
        let (status, out) = http(
            self.service.port,
            "POST",
            &path,
            Some(&json!({"query": query, "variables": variables})),
            Some(token),
        );
        assert_eq!(status, 200, "{out}");
        out
    }

    /// The repository's "Allow auto-merge" setting, as an administrator sets it.
    pub fn allow_auto_merge(&self, repo: &str, on: bool) {
        self.control(
            "POST",
            "/_fake/settings",
            Some(&json!({"repo": repo, "allow_auto_merge": on})),
        );
    }

    /// GitHub Enterprise Server's site-wide "web commit signing" (the site administrator's
    /// switch): GitHub signs what it writes for the API only with it on.
    pub fn web_commit_signing(&self, on: bool) {
        self.control("POST", "/_fake/settings", Some(&json!({"web_commit_signing": on})));
    }

    /// GraphQL fields ("Type.field") this GitHub does not have, as on a GitHub Enterprise Server
    /// older than them: a document asking one is refused whole (`undefinedField`).
    pub fn lacks(&self, fields: &[&str]) {
        self.control("POST", "/_fake/schema", Some(&json!({"lacks": fields})));
    }

    /// An administrator requires a merge queue on `branch` merging by `method` (`merge`,
    /// `squash`, `rebase`), or none (`None`).
    pub fn merge_queue(&self, repo: &str, branch: &str, method: Option<&str>) {
        self.control(
            "POST",
            "/_fake/merge_queue",
            Some(&json!({"repo": repo, "branch": branch, "merge_method": method})),
        );
    }

    /// The `merge_group` event's object for pull request `number`'s queue entry while its
    /// merge group awaits checks (`head_sha`, `head_ref`, `base_sha`, `base_ref`), or `None`.
    pub fn merge_group(&self, repo: &str, number: u64) -> Option<Value> {
        let state = self.state(repo);
        let pull = state["pulls"].as_array()?.iter().find(|p| p["number"] == number)?;
        let group = &pull["merge_queue_entry"]["merge_group"];
        (!group.is_null()).then(|| group.clone())
    }

    /// The files of commit `sha` (path → text), read as a CI's checkout reads them, through the
    /// REST API with `token`: "Get a commit object", "Get a tree" (`recursive`), "Get a blob"
    /// (<https://docs.github.com/rest/git>).
    pub fn commit_files(&self, token: &str, repo: &str, sha: &str) -> std::collections::BTreeMap<String, String> {
        use base64::Engine as _;
        let get = |path: String| {
            let (status, out) = self.call_as(token, "GET", &path, None);
            assert_eq!(status, 200, "GET {path}: {out}");
            out
        };
        let commit = get(format!("/repos/{repo}/git/commits/{sha}"));
        let tree = get(format!(
            "/repos/{repo}/git/trees/{}?recursive=1",
            commit["tree"]["sha"].as_str().unwrap()
        ));
        assert_eq!(tree["truncated"], false, "{sha}: a truncated tree");
        let mut files = std::collections::BTreeMap::new();
        for entry in tree["tree"].as_array().unwrap() {
            if entry["type"] != "blob" {
                continue;
            }
            let blob = get(format!("/repos/{repo}/git/blobs/{}", entry["sha"].as_str().unwrap()));
            let b64: String = blob["content"].as_str().unwrap().split_whitespace().collect();
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
            files.insert(
                entry["path"].as_str().unwrap().to_owned(),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        }
        files
    }

    /// What `GITHUB_API_URL` points at.
    pub fn url(&self) -> String {
        format!("{}{}", self.service.url(), self.prefix)
    }

    /// What the description check saw: `{"flavor", "operations": {id: n}, "violations": [...]}`.
    pub fn conformance(&self) -> Value {
        self.control("GET", "/_fake/conformance", None)
    }

    /// Forgets what the check saw (after a test planted bad requests on purpose).
    pub fn clear_conformance(&self) {
        self.control("DELETE", "/_fake/conformance", None);
    }

    /// An API call as a person's client makes it (a reviewer merging, say); `path` is below the
    /// API's base. Returns (status, JSON body or Null).
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        http(
            self.service.port,
            method,
            &format!("{}{path}", self.prefix),
            body,
            Some(TOKEN),
        )
    }

    fn control(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, v) = http(self.service.port, method, path, body, None);
        assert!(
            (200..300).contains(&status),
            "fake GitHub {method} {path}: HTTP {status}: {v}"
        );
        v
    }

    /// Commits `files` (path → text) as the whole tree of `branch`, creating the repo if needed.
    /// Seeds `repo`'s `main` with every file of `examples/fleet/`; the head commit's id.
    pub fn seed_example_fleet(&self, repo: &str) -> String {
        self.seed_files(repo, &example_fleet())
    }

    /// Seeds `repo`'s `main` with every file of the directory `root` as Git would commit it:
    /// executables as 100755, symlinks as 120000 (not followed); the head commit's id.
    pub fn seed_dir(&self, repo: &str, root: &std::path::Path) -> String {
        let files: serde_json::Map<String, Value> = fleet_entries(root)
            .into_iter()
            .map(|(p, mode, text)| (p, json!({"text": text, "mode": mode})))
            .collect();
        let v = self.control(
            "POST",
            "/_fake/seed",
            Some(&json!({"repo": repo, "branch": "main", "files": files, "replace": true})),
        );
        v["sha"].as_str().unwrap().to_owned()
    }

    /// Seeds `repo`'s `main` with `files` (path, text); the head commit's id.
    pub fn seed_files(&self, repo: &str, files: &[(String, String)]) -> String {
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        self.seed(repo, "main", &refs)
    }

    /// Whether GitHub has computed pull request `number`'s merge state (`UNKNOWN` until then).
    pub fn merge_state_computed(&self, repo: &str, number: u64, computed: bool) {
        self.control(
            "POST",
            "/_fake/merge_state",
            Some(&json!({"repo": repo, "number": number, "computed": computed})),
        );
    }

    /// Turns `repo`'s issues off, as its settings can (creating one is then 410).
    pub fn disable_issues(&self, repo: &str) {
        self.control(
            "POST",
            "/_fake/seed",
            Some(&json!({"repo": repo, "files": {}, "replace": false, "has_issues": false})),
        );
    }

    /// Someone's pull request from their fork `fork`'s `branch` into `repo`'s default branch,
    /// closed at once unless `open`; its number.
    pub fn fork_pull(&self, repo: &str, fork: &str, branch: &str, open: bool) -> u64 {
        let state = if open { "open" } else { "closed" };
        let v = self.control(
            "POST",
            "/_fake/fork_pull",
            Some(&json!({"repo": repo, "branch": branch, "fork": fork, "state": state})),
        );
        v["number"].as_u64().unwrap()
    }

    pub fn seed(&self, repo: &str, branch: &str, files: &[(&str, &str)]) -> String {
        let files: serde_json::Map<String, Value> = files.iter().map(|(p, t)| (p.to_string(), json!(t))).collect();
        let v = self.control(
            "POST",
            "/_fake/seed",
            Some(&json!({"repo": repo, "branch": branch, "files": files, "replace": true})),
        );
        v["sha"].as_str().unwrap().to_owned()
    }

    /// Commits changes on top of `branch` (a `None` text deletes the file).
    pub fn commit(&self, repo: &str, branch: &str, files: &[(&str, Option<&str>)], message: &str) -> String {
        let files: serde_json::Map<String, Value> = files.iter().map(|(p, t)| (p.to_string(), json!(t))).collect();
        let v = self.control(
            "POST",
            "/_fake/seed",
            Some(&json!({"repo": repo, "branch": branch, "files": files, "replace": false, "message": message})),
        );
        v["sha"].as_str().unwrap().to_owned()
    }

    /// A person's commit on `branch` adding `path` with these bytes (a binary file).
    pub fn commit_bytes(&self, repo: &str, branch: &str, path: &str, bytes: &[u8], message: &str) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        let v = self.control(
            "POST",
            "/_fake/seed",
            Some(&json!({"repo": repo, "branch": branch, "files": {path: {"base64": b64}}, "replace": false, "message": message})),
        );
        v["sha"].as_str().unwrap().to_owned()
    }

    /// A person's commit on `branch` adding a submodule at `path` (a gitlink naming `commit`, a
    /// commit of another repository).
    // signatures
    /// An administrator requires signed commits on `branch`: a ruleset's `required_signatures`
    /// rule, or classic protection's "Require signed commits" (the branch protected first, as
    /// "Create commit signature protection" requires).
    pub fn require_signatures(&self, repo: &str, branch: &str, ruleset: bool) {
        if ruleset {
            self.control(
                "POST",
                "/_fake/rulesets",
                Some(&json!({"repo": repo, "branch": branch, "required_signatures": true})),
            );
            return;
        }
        let protection = format!("/repos/{repo}/branches/{branch}/protection");
        let (status, out) = self.call(
            "PUT",
            &protection,
            Some(&json!({"required_status_checks": null, "enforce_admins": true,
                         "required_pull_request_reviews": null, "restrictions": null})),
        );
        assert!((200..300).contains(&status), "{protection}: HTTP {status}: {out}");
        let path = format!("{protection}/required_signatures");
        let (status, out) = self.call("POST", &path, None);
        assert!((200..300).contains(&status), "{path}: HTTP {status}: {out}");
    }

    /// A person's commit on `branch` adding `path` as an executable (mode 100755).
    pub fn commit_executable(&self, repo: &str, branch: &str, path: &str, text: &str, message: &str) -> String {
        let v = self.control(
            "POST",
            "/_fake/seed",
            Some(
                &json!({"repo": repo, "branch": branch, "files": {path: {"text": text, "mode": "100755"}},
                         "replace": false, "message": message}),
            ),
        );
        v["sha"].as_str().unwrap().to_owned()
    }

    pub fn commit_gitlink(&self, repo: &str, branch: &str, path: &str, commit: &str, message: &str) -> String {
        let v = self.control(
            "POST",
            "/_fake/seed",
            Some(&json!({"repo": repo, "branch": branch, "files": {path: {"gitlink": commit}}, "replace": false, "message": message})),
        );
        v["sha"].as_str().unwrap().to_owned()
    }

    /// Adds a fault rule (see the fake's docstring).
    pub fn fault(&self, rule: Value) {
        self.control("POST", "/_fake/faults", Some(&rule));
    }

    pub fn clear_faults(&self) {
        self.control("DELETE", "/_fake/faults", None);
    }

    /// The request log: `{"requests": [...], "count": n, "writes": n}`.
    pub fn requests(&self) -> Value {
        self.control("GET", "/_fake/requests", None)
    }

    pub fn clear_requests(&self) {
        self.control("DELETE", "/_fake/requests", None);
    }

    /// Branches, pull requests (labels, statuses, commits) and files of every branch.
    pub fn state(&self, repo: &str) -> Value {
        self.control("GET", &format!("/_fake/state?repo={repo}"), None)
    }

    /// Accepts (`revoke` false) or revokes a personal access token.
    pub fn token(&self, token: &str, revoke: bool) {
        self.control(
            if revoke { "DELETE" } else { "POST" },
            "/_fake/tokens",
            Some(&json!({"token": token})),
        );
    }

    /// Revokes every installation token the fake's App was given.
    pub fn revoke_installation_tokens(&self) {
        self.control("DELETE", "/_fake/tokens", Some(&json!({"installation": true})));
    }

    /// Accepts `token` (a classic personal access token, or the one the fake started with) with an
    /// expiry, `expires_at` in ISO 8601 (`2026-12-19T08:30:00Z`): every answer to a request made
    /// with it carries `GitHub-Authentication-Token-Expiration`.
    pub fn expiring_token(&self, token: &str, expires_at: &str) {
        self.control(
            "POST",
            "/_fake/tokens",
            Some(&json!({"token": token, "expires_at": expires_at})),
        );
    }

    /// Accepts a fine-grained personal access token holding `permissions`
    /// (`{"contents": "read", ...}`): the fake answers 403 "Resource not accessible by personal
    /// access token" to a request none of whose accepted permission sets it holds.
    pub fn fine_grained_token(&self, token: &str, permissions: Value) {
        self.control(
            "POST",
            "/_fake/tokens",
            Some(&json!({"token": token, "permissions": permissions})),
        );
    }

    /// The GitHub App the fake trusts: `{"app_id", "client_id", "installation_id", "private_key",
    /// "permissions", "repositories"}`.
    pub fn app(&self) -> Value {
        self.control("GET", "/_fake/app", None)
    }

    /// Sets the App installation's `permissions` (`{"contents": "write", ...}`) and/or
    /// `repositories` (`["owner/repo", ...]`, or null for all); each key given replaces its value.
    /// `app()` shows the result.
    pub fn set_app(&self, body: Value) {
        self.control("POST", "/_fake/app", Some(&body));
    }

    /// The plain issues of `repo` (pull requests left out), by number:
    /// `{"number", "title", "body", "labels": [names], "state", "state_reason", "comments": [bodies]}`.
    pub fn issues(&self, repo: &str) -> Vec<Value> {
        self.state(repo)["issues"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let seen = self.conformance();
        let violations = seen["violations"].as_array().cloned().unwrap_or_default();
        assert!(
            violations.is_empty(),
            "{} request(s) to the fake GitHub broke GitHub's REST description ({}):\n{}",
            violations.len(),
            seen["flavor"],
            violations
                .iter()
                .map(|v| format!(
                    "  {} {} [{}] {}: {}",
                    v["method"], v["path"], v["user_agent"], v["check"], v["detail"]
                ))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// A minimal HTTP/1.1 client: the tests crate needs nothing more for a local fake. API calls
/// (with a token) carry the headers GitHub asks every client for.
pub fn http(port: u16, method: &str, path: &str, body: Option<&Value>, token: Option<&str>) -> (u16, Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the fake");
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut headers = String::from("User-Agent: cellbridge-tests\r\nAccept: application/vnd.github+json\r\n");
    if let Some(t) = token {
        headers.push_str(&format!(
            "Authorization: Bearer {t}\r\nX-GitHub-Api-Version: 2022-11-28\r\n"
        ));
    }
    if body.is_some() {
        headers.push_str("Content-Type: application/json\r\n");
    }
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Every file of `examples/fleet/` as (repo path, text): what the fake GitHub is seeded with,
/// so the end-to-end tests and the bench sync against the same fleet `make demo` shows.
pub fn example_fleet() -> Vec<(String, String)> {
    fleet_files(&crate::process::repo_root().join("examples/fleet"))
}

/// Every file and symlink below `root` as (path relative to it, Git mode, text or link target),
/// sorted; symlinks are not followed.
pub fn fleet_entries(root: &std::path::Path) -> Vec<(String, &'static str, String)> {
    use std::os::unix::fs::PermissionsExt;
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, &'static str, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if meta.file_type().is_symlink() {
                out.push((
                    rel,
                    "120000",
                    std::fs::read_link(&p).unwrap().to_string_lossy().into_owned(),
                ));
            } else if meta.is_dir() {
                walk(&p, root, out);
            } else {
                let mode = if meta.permissions().mode() & 0o111 != 0 {
                    "100755"
                } else {
                    "100644"
                };
                out.push((rel, mode, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Every file below `root` as (path relative to it, text), sorted.
pub fn fleet_files(root: &std::path::Path) -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                out.push((
                    p.strip_prefix(root).unwrap().to_string_lossy().into_owned(),
                    std::fs::read_to_string(&p).unwrap(),
                ));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}
