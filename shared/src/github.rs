//! The fleet repo on GitHub: read the base branch as one archive, publish a plan as one commit
//! and one pull request per cell, through octocrab.
//!
//! Request budget (what `sync` costs, counted by [`RequestCounts`]): the base branch archive
//! (one API request answered with a redirect, plus the download), the cell's open pull request
//! (one), and for a change the tree, the commit, the ref, the pull request (plus its labels
//! when new) and the commit status. The base tree's id is computed locally from the archive,
//! so whatever the number of files there is no per-file request.
//!
//! Retries are ours, not octocrab's: octocrab would sleep for whatever `Retry-After` says,
//! however long, while a Lambda has a deadline. Every request here retries 5xx, transport
//! errors and rate limits with bounded exponential backoff, honours `Retry-After`, and gives up
//! with a retryable error as soon as waiting would cross the deadline.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use octocrab::Octocrab;
use octocrab::service::middleware::retry::RetryConfig;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::{Value, json};
use sha1::Digest as _;
use tokio::sync::OnceCell;

use crate::error::{Class, Classify};
use crate::fleet::MemFleet;
use crate::plan::{self, Outcome, Plan};
use crate::redact::Secret;

/// Every GitHub REST operation cellbridge sends, by its `operationId` in GitHub's OpenAPI
/// description (the `@octokit/openapi` package; <https://docs.github.com/rest>). Every request to
/// the API goes through one of these; the test suite checks each request against the
/// description and that every operation here was exercised (`tests/github_conformance.py` reads
/// the `id`s of this module).
pub mod operations {
    use http::Method;

    pub struct Operation {
        pub method: Method,
        /// The `operationId`.
        pub id: &'static str,
        /// The path template, below the API's base URL.
        pub path: &'static str,
    }

    macro_rules! operations {
        ($($name:ident = $method:ident $path:literal $id:literal;)*) => {
            $(pub const $name: Operation = Operation { method: Method::$method, id: $id, path: $path };)*
            /// All of them, in the order a sync meets them.
            pub const ALL: &[&Operation] = &[$(&$name),*];
        };
    }

    operations! {
        REPOS_GET = GET "/repos/{owner}/{repo}" "repos/get";
        // Answered with a redirect to the archive host (codeload on github.com), whose URL is
        // outside the description.
        REPOS_DOWNLOAD_TARBALL_ARCHIVE = GET "/repos/{owner}/{repo}/tarball/{ref}" "repos/download-tarball-archive";
        PULLS_LIST = GET "/repos/{owner}/{repo}/pulls" "pulls/list";
        GIT_GET_COMMIT = GET "/repos/{owner}/{repo}/git/commits/{commit_sha}" "git/get-commit";
        GIT_CREATE_TREE = POST "/repos/{owner}/{repo}/git/trees" "git/create-tree";
        GIT_CREATE_COMMIT = POST "/repos/{owner}/{repo}/git/commits" "git/create-commit";
        GIT_CREATE_REF = POST "/repos/{owner}/{repo}/git/refs" "git/create-ref";
        GIT_UPDATE_REF = PATCH "/repos/{owner}/{repo}/git/refs/{ref}" "git/update-ref";
        GIT_DELETE_REF = DELETE "/repos/{owner}/{repo}/git/refs/{ref}" "git/delete-ref";
        REPOS_GET_COMMIT = GET "/repos/{owner}/{repo}/commits/{ref}" "repos/get-commit";
        REPOS_CREATE_COMMIT_STATUS = POST "/repos/{owner}/{repo}/statuses/{sha}" "repos/create-commit-status";
        PULLS_CREATE = POST "/repos/{owner}/{repo}/pulls" "pulls/create";
        PULLS_UPDATE = PATCH "/repos/{owner}/{repo}/pulls/{pull_number}" "pulls/update";
        ISSUES_UPDATE = PATCH "/repos/{owner}/{repo}/issues/{issue_number}" "issues/update";
        ISSUES_ADD_LABELS = POST "/repos/{owner}/{repo}/issues/{issue_number}/labels" "issues/add-labels";
        // Sent by octocrab itself when cellbridge authenticates as a GitHub App.
        APPS_CREATE_INSTALLATION_ACCESS_TOKEN = POST "/app/installations/{installation_id}/access_tokens" "apps/create-installation-access-token";
    }
}

use operations::{self as ops, Operation};

pub mod config;
pub use config::{DEFAULT_GITHUB_API_URL, GithubConfig, LazyGithub};

/// Labels cellbridge manages; any other label a human put on the pull request stays.
const MANAGED_LABELS: [&str; 3] = [plan::LABEL_CELLBRIDGE, plan::LABEL_NEW_CELL, plan::LABEL_SCHEMA_CHANGE];
const MAX_ATTEMPTS: u32 = 6;
const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// Never start a request with less time left than this: a half-done write is worse than none.
const DEADLINE_MARGIN: Duration = Duration::from_millis(500);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    /// GitHub kept failing (5xx, rate limit, transport) or the deadline came first: try later.
    #[error("GitHub {what}: {detail} (retryable)")]
    Transient { what: String, detail: String },
    /// Someone else moved the cell's branch or opened its pull request meanwhile: redo the sync
    /// on a fresh snapshot.
    #[error("GitHub {what}: lost a race ({detail}); redo on the fresh base")]
    Conflict { what: String, detail: String },
    /// GitHub refused the request for good (bad credentials, no such repository, validation).
    #[error("GitHub {what}: HTTP {status}: {message}")]
    Api { what: String, status: u16, message: String },
    #[error("GitHub {what}: unexpected answer: {detail}")]
    Protocol { what: String, detail: String },
    #[error("GitHub client for {api_url}: {reason}")]
    Setup { api_url: String, reason: String },
}

impl Classify for GithubError {
    fn class(&self) -> Class {
        match self {
            GithubError::Transient { .. } | GithubError::Conflict { .. } => Class::Retryable,
            GithubError::Api { .. } | GithubError::Protocol { .. } | GithubError::Setup { .. } => Class::Final,
        }
    }
}

pub type Result<T, E = GithubError> = std::result::Result<T, E>;

/// How cellbridge authenticates: a GitHub App installation (preferred) or a token.
#[derive(Debug, Clone)]
pub enum Credentials {
    Token(Secret<String>),
    App {
        app_id: u64,
        installation_id: u64,
        private_key: Secret<String>,
    },
}

/// Requests sent so far by one client, for the benchmark and the request-budget tests.
#[derive(Debug, Default)]
pub struct RequestCounts {
    /// Requests to the REST API (each retry counts).
    pub api: AtomicUsize,
    /// Archive downloads from the redirect target (codeload on github.com).
    pub downloads: AtomicUsize,
}

impl RequestCounts {
    pub fn total(&self) -> usize {
        self.api.load(Ordering::Relaxed) + self.downloads.load(Ordering::Relaxed)
    }
}

/// The base branch as it was when read.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub base_branch: String,
    pub base_sha: String,
    /// The root tree id, computed from the archive (GitHub checks it when the tree is built).
    pub base_tree: Option<String>,
    pub fleet: MemFleet,
}

/// What publishing did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Published {
    /// A new pull request.
    Opened { number: u64, url: String, commit: String },
    /// The open pull request now holds the plan.
    Updated { number: u64, url: String, commit: String },
    /// The open pull request already holds exactly this plan: nothing was written.
    Unchanged { number: u64, url: String },
    /// The base branch holds the plan: the stale pull request was closed, its branch deleted.
    Closed { number: u64, url: String },
    /// The base branch holds the plan and nothing is open: nothing to do.
    InSync,
    /// A newer serial of this state is already proposed or merged: this event is old news.
    Stale {
        proposed_serial: u64,
        number: Option<u64>,
        url: Option<String>,
    },
}

/// The fleet repo as the orchestrator sees it; [`GithubFleet`] is the real one.
pub trait FleetRepo: Send + Sync {
    /// The base branch's files and head commit.
    fn snapshot(&self, deadline: Instant) -> impl Future<Output = Result<Snapshot>> + Send;
    /// Converges the cell's pull request to `plan`, computed against `snapshot`.
    fn publish(
        &self,
        snapshot: &Snapshot,
        plan: &Plan,
        deadline: Instant,
    ) -> impl Future<Output = Result<Published>> + Send;
}

struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Response {
    fn json(&self, what: &str) -> Result<Value> {
        serde_json::from_slice(&self.body).map_err(|e| GithubError::Protocol {
            what: what.to_owned(),
            detail: format!("not JSON: {e}"),
        })
    }

    fn message(&self) -> String {
        let v: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        let mut m = v.get("message").and_then(Value::as_str).unwrap_or("").to_owned();
        // Validation details ("A pull request already exists for ...") sit in `errors`.
        if let Some(errs) = v.get("errors").and_then(Value::as_array) {
            for e in errs {
                if let Some(s) = e.get("message").and_then(Value::as_str) {
                    m.push_str(": ");
                    m.push_str(s);
                } else if let Some(code) = e.get("code").and_then(Value::as_str) {
                    m.push_str(&format!(
                        ": {} {}",
                        e.get("field").and_then(Value::as_str).unwrap_or(""),
                        code
                    ));
                }
            }
        }
        if m.is_empty() {
            self.status.canonical_reason().unwrap_or("error").to_owned()
        } else {
            m
        }
    }

    fn api_error(&self, what: &str) -> GithubError {
        GithubError::Api {
            what: what.to_owned(),
            status: self.status.as_u16(),
            message: self.message(),
        }
    }
}

/// An open pull request of a cell, as far as cellbridge needs it.
#[derive(Debug, Clone)]
struct OpenPull {
    number: u64,
    url: String,
    head_sha: String,
    labels: Vec<String>,
    body: String,
}

/// Path segments keep `/` (branch names have them) and escape what a URL path cannot hold.
const PATH: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

fn enc(s: &str) -> String {
    utf8_percent_encode(s, PATH).to_string()
}

pub struct GithubFleet {
    crab: Octocrab,
    api_url: String,
    owner: String,
    repo: String,
    base_branch: OnceCell<String>,
    counts: RequestCounts,
}

impl GithubFleet {
    /// Builds the client; no request is sent until the first sync (a cold start stays cheap).
    pub fn new(
        api_url: &str,
        owner: &str,
        repo: &str,
        base_branch: Option<String>,
        creds: &Credentials,
    ) -> Result<Self> {
        let setup = |reason: String| GithubError::Setup {
            api_url: api_url.to_owned(),
            reason,
        };
        let builder = Octocrab::builder()
            .base_uri(api_url.trim_end_matches('/'))
            .map_err(|e| setup(format!("invalid GITHUB_API_URL: {e}")))?
            .add_retry_config(RetryConfig::None)
            .set_connect_timeout(Some(Duration::from_secs(5)))
            .set_read_timeout(Some(REQUEST_TIMEOUT));
        let crab = match creds {
            Credentials::Token(t) => builder
                .personal_token(t.expose().clone())
                .build()
                .map_err(|e| setup(e.to_string()))?,
            Credentials::App {
                app_id,
                installation_id,
                private_key,
            } => {
                // The key's parse error never includes the key.
                let key = octocrab::EncodingKey::from_rsa_pem(private_key.expose().as_bytes())
                    .map_err(|_| setup("the GitHub App private_key is not an RSA private key in PEM form".into()))?;
                let app = builder
                    .app((*app_id).into(), key)
                    .build()
                    .map_err(|e| setup(e.to_string()))?;
                app.installation((*installation_id).into())
                    .map_err(|e| setup(e.to_string()))?
            }
        };
        let base = OnceCell::new();
        if let Some(b) = base_branch {
            let _ = base.set(b);
        }
        Ok(Self {
            crab,
            api_url: api_url.to_owned(),
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            base_branch: base,
            counts: RequestCounts::default(),
        })
    }

    pub fn counts(&self) -> &RequestCounts {
        &self.counts
    }

    pub fn repo_name(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }

    fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{}", enc(&self.owner), enc(&self.repo), rest)
    }

    /// One request with retries. Returns any final HTTP answer (the caller reads 404 and 422);
    /// fails only when retrying cannot help or time ran out.
    async fn send(
        &self,
        what: &str,
        method: Method,
        uri: &str,
        body: Option<&Value>,
        accept: Option<&str>,
        deadline: Instant,
    ) -> Result<Response> {
        let download = uri.starts_with("http://") || uri.starts_with("https://");
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            if left <= DEADLINE_MARGIN {
                return Err(GithubError::Transient {
                    what: what.to_owned(),
                    detail: "the function's deadline is too close to send it".into(),
                });
            }
            if download {
                &self.counts.downloads
            } else {
                &self.counts.api
            }
            .fetch_add(1, Ordering::Relaxed);
            let fut = self.send_once(method.clone(), uri, body, accept);
            let outcome = match tokio::time::timeout(left.min(REQUEST_TIMEOUT), fut).await {
                Err(_) => Err(format!("no answer within {} ms", left.min(REQUEST_TIMEOUT).as_millis())),
                Ok(Err(e)) => match classify_octocrab(&e) {
                    // octocrab reports an installation token refused or failed as a GitHub error.
                    Some(status) if !transient_status(status) => {
                        return Err(GithubError::Api {
                            what: what.to_owned(),
                            status: status.as_u16(),
                            message: octocrab_message(&e),
                        });
                    }
                    _ => Err(octocrab_message(&e)),
                },
                Ok(Ok(resp)) => Ok(resp),
            };
            let (detail, retry_after) = match outcome {
                Ok(resp) if !is_transient(&resp) => return Ok(resp),
                Ok(resp) => (
                    format!("HTTP {}: {}", resp.status.as_u16(), resp.message()),
                    retry_after(&resp.headers),
                ),
                Err(detail) => (detail, None),
            };
            if attempt >= MAX_ATTEMPTS {
                return Err(GithubError::Transient {
                    what: what.to_owned(),
                    detail: format!("{detail}, after {attempt} attempts"),
                });
            }
            let backoff = (Duration::from_millis(250) * 2u32.pow(attempt - 1)).min(MAX_BACKOFF) + jitter();
            let wait = retry_after.map_or(backoff, |ra| ra.max(Duration::from_millis(100)));
            if Instant::now() + wait + DEADLINE_MARGIN >= deadline {
                return Err(GithubError::Transient {
                    what: what.to_owned(),
                    detail: format!(
                        "{detail}; the next try (in {} ms) would pass the function's deadline",
                        wait.as_millis()
                    ),
                });
            }
            tracing::warn!(request = what, attempt, wait_ms = wait.as_millis() as u64, error = %detail, "GitHub request failed, retrying");
            tokio::time::sleep(wait).await;
        }
    }

    /// A request to this repository's API (`path` under `/repos/{owner}/{repo}`), with retries.
    async fn repo_send(
        &self,
        what: &str,
        op: &Operation,
        path: &str,
        body: Option<&Value>,
        deadline: Instant,
    ) -> Result<Response> {
        debug_assert!(
            op.path.starts_with("/repos/{owner}/{repo}"),
            "{} is not a repository operation",
            op.id
        );
        self.send(what, op.method.clone(), &self.repo_path(path), body, None, deadline)
            .await
    }

    /// A repository request that must succeed: any other final answer is an API error naming `what`.
    async fn repo_call(
        &self,
        what: &str,
        op: &Operation,
        path: &str,
        body: Option<&Value>,
        deadline: Instant,
    ) -> Result<Response> {
        let r = self.repo_send(what, op, path, body, deadline).await?;
        if !r.status.is_success() {
            return Err(r.api_error(what));
        }
        Ok(r)
    }

    async fn send_once(
        &self,
        method: Method,
        uri: &str,
        body: Option<&Value>,
        accept: Option<&str>,
    ) -> std::result::Result<Response, octocrab::Error> {
        // Archive downloads go elsewhere (codeload, or `/_codeload/` on GitHub Enterprise
        // Server): a client of their own, without our credentials (the URL carries a token)
        // and without the API's base path, which octocrab would otherwise prepend.
        // (A clone of the API client would not share its cached installation token.)
        let download;
        let (crab, uri) = match http::Uri::try_from(uri).ok().filter(|u| u.authority().is_some()) {
            Some(abs) => {
                let origin = format!(
                    "{}://{}",
                    abs.scheme_str().unwrap_or("https"),
                    abs.authority().map(|a| a.as_str()).unwrap_or_default()
                );
                let path = abs
                    .path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_else(|| "/".into());
                download = Octocrab::builder()
                    .base_uri(origin)?
                    .add_retry_config(RetryConfig::None)
                    .set_read_timeout(Some(REQUEST_TIMEOUT))
                    .build()?;
                (&download, path)
            }
            None => (&self.crab, uri.to_owned()),
        };
        let mut req = http::Request::builder().method(method).uri(uri);
        req = req.header(http::header::ACCEPT, accept.unwrap_or("application/vnd.github+json"));
        // `X-GitHub-Api-Version` is octocrab's to set (`build_request` adds it to every request);
        // a second copy here would reach GitHub as two lines, which it joins with a comma into a
        // value it does not support.
        let req = crab.build_request(req, body)?;
        let resp = crab.execute(req).await?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Response {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    async fn base_branch(&self, deadline: Instant) -> Result<String> {
        self.base_branch
            .get_or_try_init(|| async {
                let what = format!("reading repository {}", self.repo_name());
                let r = self.repo_call(&what, &ops::REPOS_GET, "", None, deadline).await?;
                r.json(&what)?
                    .get("default_branch")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| GithubError::Protocol {
                        what,
                        detail: "no default_branch".into(),
                    })
            })
            .await
            .cloned()
    }

    async fn open_pull(&self, branch: &str, deadline: Instant) -> Result<Option<OpenPull>> {
        let what = format!("listing open pull requests of {branch}");
        let q: String = url_query(&[
            ("state", "open"),
            ("head", &format!("{}:{branch}", self.owner)),
            ("per_page", "10"),
        ]);
        let r = self
            .repo_call(&what, &ops::PULLS_LIST, &format!("/pulls?{q}"), None, deadline)
            .await?;
        let list = r.json(&what)?;
        let Some(pr) = list.as_array().and_then(|a| a.first()) else {
            return Ok(None);
        };
        Ok(Some(OpenPull {
            number: pr["number"].as_u64().ok_or_else(|| GithubError::Protocol {
                what: what.clone(),
                detail: "pull request without number".into(),
            })?,
            url: pr["html_url"].as_str().unwrap_or_default().to_owned(),
            head_sha: pr["head"]["sha"].as_str().unwrap_or_default().to_owned(),
            labels: pr["labels"]
                .as_array()
                .map(|ls| {
                    ls.iter()
                        .filter_map(|l| l["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            body: pr["body"].as_str().unwrap_or_default().to_owned(),
        }))
    }

    async fn create_tree(&self, snap: &Snapshot, plan: &Plan, deadline: Instant) -> Result<String> {
        let what = format!("creating the tree for {}", plan.branch);
        let entries: Vec<Value> = plan
            .files
            .iter()
            .map(|f| json!({"path": f.path, "mode": "100644", "type": "blob", "content": f.new}))
            .collect();
        let mut base_tree = snap.base_tree.clone();
        loop {
            let base = match &base_tree {
                Some(t) => t.clone(),
                None => self.commit_tree(&snap.base_sha, deadline).await?,
            };
            let r = self
                .repo_send(
                    &what,
                    &ops::GIT_CREATE_TREE,
                    "/git/trees",
                    Some(&json!({"base_tree": base, "tree": entries})),
                    deadline,
                )
                .await?;
            if r.status.is_success() {
                return sha_of(&r, &what);
            }
            // A tree id computed from the archive can miss what archives leave out (submodules,
            // export-ignore): ask GitHub for the real one once.
            if r.status == StatusCode::UNPROCESSABLE_ENTITY && snap.base_tree.is_some() && base_tree.is_some() {
                tracing::info!(base = %snap.base_sha, "locally computed base tree unknown to GitHub; reading it");
                base_tree = None;
                continue;
            }
            return Err(r.api_error(&what));
        }
    }

    async fn commit_tree(&self, sha: &str, deadline: Instant) -> Result<String> {
        let what = format!("reading commit {sha}");
        let r = self
            .repo_call(
                &what,
                &ops::GIT_GET_COMMIT,
                &format!("/git/commits/{sha}"),
                None,
                deadline,
            )
            .await?;
        r.json(&what)?["tree"]["sha"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| GithubError::Protocol {
                what,
                detail: "commit without tree".into(),
            })
    }

    async fn create_commit(&self, tree: &str, parents: &[String], message: &str, deadline: Instant) -> Result<String> {
        let what = "creating the commit";
        let r = self
            .repo_call(
                what,
                &ops::GIT_CREATE_COMMIT,
                "/git/commits",
                Some(&json!({"message": message, "tree": tree, "parents": parents})),
                deadline,
            )
            .await?;
        sha_of(&r, what)
    }

    /// Moves the branch only by fast-forward: the commit descends from the head we read, so a
    /// writer that moved the branch meanwhile makes this fail instead of being overwritten.
    async fn move_branch(&self, branch: &str, commit: &str, deadline: Instant) -> Result<()> {
        let what = format!("updating branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::GIT_UPDATE_REF,
                &format!("/git/refs/heads/{}", enc(branch)),
                Some(&json!({"sha": commit, "force": false})),
                deadline,
            )
            .await?;
        match r.status {
            s if s.is_success() => Ok(()),
            StatusCode::UNPROCESSABLE_ENTITY | StatusCode::CONFLICT => Err(GithubError::Conflict {
                what,
                detail: r.message(),
            }),
            _ => Err(r.api_error(&what)),
        }
    }

    /// Creates the branch; `Ok(false)` when it already exists.
    async fn create_branch(&self, branch: &str, commit: &str, deadline: Instant) -> Result<bool> {
        let what = format!("creating branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::GIT_CREATE_REF,
                "/git/refs",
                Some(&json!({"ref": format!("refs/heads/{branch}"), "sha": commit})),
                deadline,
            )
            .await?;
        match r.status {
            s if s.is_success() => Ok(true),
            StatusCode::UNPROCESSABLE_ENTITY if r.message().contains("already exists") => Ok(false),
            _ => Err(r.api_error(&what)),
        }
    }

    /// The branch head's id and commit message.
    async fn branch_head(&self, branch: &str, deadline: Instant) -> Result<Option<(String, String)>> {
        let what = format!("reading branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::REPOS_GET_COMMIT,
                &format!("/commits/heads/{}", enc(branch)),
                None,
                deadline,
            )
            .await?;
        if r.status == StatusCode::NOT_FOUND || r.status == StatusCode::UNPROCESSABLE_ENTITY {
            return Ok(None);
        }
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        let v = r.json(&what)?;
        Ok(Some((
            v["sha"].as_str().unwrap_or_default().to_owned(),
            v["commit"]["message"].as_str().unwrap_or_default().to_owned(),
        )))
    }

    async fn set_status(&self, commit: &str, plan: &Plan, deadline: Instant) -> Result<()> {
        let what = format!("setting status {} on {commit}", plan::STATUS_CONTEXT);
        let state = if plan.status_ok() { "success" } else { "failure" };
        let body = json!({"state": state, "context": plan::STATUS_CONTEXT, "description": plan.status_description()});
        self.repo_call(
            &what,
            &ops::REPOS_CREATE_COMMIT_STATUS,
            &format!("/statuses/{commit}"),
            Some(&body),
            deadline,
        )
        .await?;
        Ok(())
    }

    async fn close(&self, pr: &OpenPull, branch: &str, deadline: Instant) -> Result<()> {
        let what = format!("closing pull request #{}", pr.number);
        self.repo_call(
            &what,
            &ops::PULLS_UPDATE,
            &format!("/pulls/{}", pr.number),
            Some(&json!({"state": "closed"})),
            deadline,
        )
        .await?;
        let what = format!("deleting branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::GIT_DELETE_REF,
                &format!("/git/refs/heads/{}", enc(branch)),
                None,
                deadline,
            )
            .await?;
        // Already gone is fine: someone (or GitHub's auto-delete) was first.
        if !r.status.is_success() && r.status != StatusCode::UNPROCESSABLE_ENTITY && r.status != StatusCode::NOT_FOUND {
            return Err(r.api_error(&what));
        }
        Ok(())
    }

    async fn write(
        &self,
        snap: &Snapshot,
        plan: &Plan,
        existing: Option<OpenPull>,
        digest: &str,
        deadline: Instant,
    ) -> Result<Published> {
        let branch = &plan.branch;
        let message = commit_message(plan, digest);
        let body = format!(
            "{}\n<!-- cellbridge:digest={digest} base={} -->\n",
            fit_body(&plan.body, plan.serial, &plan.lineage),
            snap.base_sha
        );
        let tree = self.create_tree(snap, plan, deadline).await?;

        if let Some(pr) = existing {
            // Merging the fresh base in keeps the pull request's diff exactly the plan's files,
            // and keeps the branch moving forward so the update can be compare-and-swap.
            let parents = if recorded_base(&pr.body).as_deref() == Some(snap.base_sha.as_str()) {
                vec![pr.head_sha.clone()]
            } else {
                vec![pr.head_sha.clone(), snap.base_sha.clone()]
            };
            let commit = self.create_commit(&tree, &parents, &message, deadline).await?;
            self.move_branch(branch, &commit, deadline).await?;
            let mut labels: Vec<String> = pr
                .labels
                .iter()
                .filter(|l| !MANAGED_LABELS.contains(&l.as_str()))
                .cloned()
                .collect();
            labels.extend(plan.labels.iter().cloned());
            // The status goes first: once the body carries the new digest, later runs take the
            // pull request as complete, so everything else must already be there.
            self.set_status(&commit, plan, deadline).await?;
            let what = format!("updating pull request #{}", pr.number);
            // The issues endpoint sets title, body and labels in one request.
            self.repo_call(
                &what,
                &ops::ISSUES_UPDATE,
                &format!("/issues/{}", pr.number),
                Some(&json!({"title": plan.title, "body": body, "labels": labels})),
                deadline,
            )
            .await?;
            return Ok(Published::Updated {
                number: pr.number,
                url: pr.url,
                commit,
            });
        }

        let fresh = self
            .create_commit(&tree, std::slice::from_ref(&snap.base_sha), &message, deadline)
            .await?;
        let commit = if self.create_branch(branch, &fresh, deadline).await? {
            fresh
        } else {
            // The branch exists without an open pull request: a sync running right now, or one
            // that stopped between the branch and the pull request, or a closed pull request's.
            match self.branch_head(branch, deadline).await? {
                None => {
                    return Err(GithubError::Conflict {
                        what: format!("creating branch {branch}"),
                        detail: "the branch vanished".into(),
                    });
                }
                Some((head, msg)) => {
                    let t = trailers(&msg);
                    if let (Some(s), Some(l)) = (
                        t.get("Cellbridge-Serial").and_then(|s| s.parse::<u64>().ok()),
                        t.get("Cellbridge-Lineage"),
                    ) && *l == plan.lineage
                        && s > plan.serial
                    {
                        return Ok(Published::Stale {
                            proposed_serial: s,
                            number: None,
                            url: None,
                        });
                    }
                    if t.get("Cellbridge-Digest").map(String::as_str) == Some(digest) {
                        head
                    } else {
                        let merged = self
                            .create_commit(&tree, &[head, snap.base_sha.clone()], &message, deadline)
                            .await?;
                        self.move_branch(branch, &merged, deadline).await?;
                        merged
                    }
                }
            }
        };

        self.set_status(&commit, plan, deadline).await?;
        let what = format!("opening the pull request for {branch}");
        let base = &snap.base_branch;
        let r = self
            .repo_send(&what, &ops::PULLS_CREATE, "/pulls", Some(&json!({"title": plan.title, "head": branch, "base": base, "body": body, "maintainer_can_modify": false})), deadline)
            .await?;
        if r.status == StatusCode::UNPROCESSABLE_ENTITY && r.message().contains("already exists") {
            return Err(GithubError::Conflict {
                what,
                detail: r.message(),
            });
        }
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        let pr = r.json(&what)?;
        let number = pr["number"].as_u64().ok_or_else(|| GithubError::Protocol {
            what: what.clone(),
            detail: "no number".into(),
        })?;
        let url = pr["html_url"].as_str().unwrap_or_default().to_owned();
        self.add_labels(number, &plan.labels, deadline).await?;
        Ok(Published::Opened { number, url, commit })
    }

    /// Adds labels to a pull request (GitHub keeps the ones it already has).
    async fn add_labels(&self, number: u64, labels: &[String], deadline: Instant) -> Result<()> {
        let what = format!("labelling pull request #{number}");
        self.repo_call(
            &what,
            &ops::ISSUES_ADD_LABELS,
            &format!("/issues/{number}/labels"),
            Some(&json!({ "labels": labels })),
            deadline,
        )
        .await?;
        Ok(())
    }
}

impl FleetRepo for GithubFleet {
    async fn snapshot(&self, deadline: Instant) -> Result<Snapshot> {
        let base_branch = self.base_branch(deadline).await?;
        let what = format!("downloading {} at {base_branch}", self.repo_name());
        let r = self
            .repo_send(
                &what,
                &ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE,
                &format!("/tarball/{}", enc(&base_branch)),
                None,
                deadline,
            )
            .await?;
        let archive = if r.status.is_redirection() {
            let loc = r
                .headers
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| GithubError::Protocol {
                    what: what.clone(),
                    detail: "redirect without Location".into(),
                })?;
            let loc = match loc
                .starts_with('/')
                .then(|| http::Uri::try_from(self.api_url.as_str()).ok())
                .flatten()
            {
                // A path is relative to the server, not to the API's base path.
                Some(api) => format!(
                    "{}://{}{loc}",
                    api.scheme_str().unwrap_or("https"),
                    api.authority().map(|a| a.as_str()).unwrap_or_default()
                ),
                None => loc.to_owned(),
            };
            let d = self
                .send(&what, Method::GET, &loc, None, Some("application/x-gzip"), deadline)
                .await?;
            if !d.status.is_success() {
                return Err(d.api_error(&what));
            }
            d.body
        } else if r.status.is_success() {
            r.body
        } else {
            return Err(r.api_error(&what));
        };
        let parsed = tokio::task::spawn_blocking(move || read_archive(&archive))
            .await
            .map_err(|e| GithubError::Protocol {
                what: what.clone(),
                detail: e.to_string(),
            })?
            .map_err(|detail| GithubError::Protocol {
                what: what.clone(),
                detail,
            })?;
        Ok(Snapshot {
            base_branch,
            base_sha: parsed.sha,
            base_tree: parsed.tree,
            fleet: parsed.fleet,
        })
    }

    async fn publish(&self, snap: &Snapshot, plan: &Plan, deadline: Instant) -> Result<Published> {
        let existing = self.open_pull(&plan.branch, deadline).await?;
        if let Some(pr) = &existing
            && let Some((serial, lineage)) = plan::recorded_serial(&pr.body)
            && lineage == plan.lineage
            && serial > plan.serial
        {
            return Ok(Published::Stale {
                proposed_serial: serial,
                number: Some(pr.number),
                url: Some(pr.url.clone()),
            });
        }
        match plan.outcome {
            Outcome::Stale => Ok(Published::Stale {
                proposed_serial: plan.base_serial.unwrap_or_default(),
                number: existing.as_ref().map(|p| p.number),
                url: existing.map(|p| p.url),
            }),
            Outcome::InSync => match existing {
                Some(pr) => {
                    self.close(&pr, &plan.branch, deadline).await?;
                    Ok(Published::Closed {
                        number: pr.number,
                        url: pr.url,
                    })
                }
                None => Ok(Published::InSync),
            },
            Outcome::Change => {
                let digest = plan_digest(plan);
                if let Some(pr) = &existing
                    && recorded_digest(&pr.body).as_deref() == Some(digest.as_str())
                {
                    // A run cut off between opening the pull request and labelling it left the
                    // labels out; the status was set before the body, so it is there.
                    let missing: Vec<String> = plan.labels.iter().filter(|l| !pr.labels.contains(l)).cloned().collect();
                    if !missing.is_empty() {
                        self.add_labels(pr.number, &missing, deadline).await?;
                    }
                    return Ok(Published::Unchanged {
                        number: pr.number,
                        url: pr.url.clone(),
                    });
                }
                self.write(snap, plan, existing, &digest, deadline).await
            }
        }
    }
}

fn url_query(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn sha_of(r: &Response, what: &str) -> Result<String> {
    r.json(what)?["sha"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| GithubError::Protocol {
            what: what.to_owned(),
            detail: "no sha".into(),
        })
}

fn is_transient(r: &Response) -> bool {
    if r.status.is_server_error() || r.status == StatusCode::TOO_MANY_REQUESTS {
        return true;
    }
    // Secondary rate limits are 403s: tell them from a real "forbidden" by GitHub's signals.
    r.status == StatusCode::FORBIDDEN
        && (r.headers.contains_key(http::header::RETRY_AFTER)
            || r.headers.get("x-ratelimit-remaining").and_then(|v| v.to_str().ok()) == Some("0")
            || r.message().to_ascii_lowercase().contains("rate limit"))
}

fn transient_status(s: StatusCode) -> bool {
    s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS || s == StatusCode::FORBIDDEN
}

fn retry_after(h: &HeaderMap) -> Option<Duration> {
    if let Some(secs) = h
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return Some(Duration::from_secs(secs));
    }
    if h.get("x-ratelimit-remaining").and_then(|v| v.to_str().ok()) == Some("0") {
        let reset = h
            .get("x-ratelimit-reset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs();
        return Some(Duration::from_secs(reset.saturating_sub(now).max(1)));
    }
    None
}

fn jitter() -> Duration {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(u64::from(n % 100))
}

fn classify_octocrab(e: &octocrab::Error) -> Option<StatusCode> {
    match e {
        octocrab::Error::GitHub { source, .. } => Some(source.status_code),
        _ => None,
    }
}

/// octocrab's error text, never with credentials (it carries none: headers are not printed).
fn octocrab_message(e: &octocrab::Error) -> String {
    match e {
        octocrab::Error::GitHub { source, .. } => format!("HTTP {}: {}", source.status_code.as_u16(), source.message),
        other => crate::redact::chain(other),
    }
}

/// What the pull request must hold: its files, labels and check verdict. The serial and the
/// state version are left out on purpose: an apply that changes nothing in the map changes
/// nothing in Git.
pub fn plan_digest(plan: &Plan) -> String {
    let mut h = sha1::Sha1::new();
    for f in &plan.files {
        h.update(f.path.as_bytes());
        h.update([0]);
        h.update(f.new.as_bytes());
        h.update([0]);
    }
    let mut labels = plan.labels.clone();
    labels.sort();
    h.update(labels.join(",").as_bytes());
    h.update(if plan.status_ok() { b"|ok" } else { b"|ko" });
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn marker(body: &str, field: &str) -> Option<String> {
    let start = body.rfind("<!-- cellbridge:digest=")?;
    let line = &body[start..];
    let line = &line[..line.find("-->")?];
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{field}=")).map(str::to_owned))
        .filter(|s| !s.is_empty())
}

fn recorded_digest(body: &str) -> Option<String> {
    marker(body, "cellbridge:digest")
}

fn recorded_base(body: &str) -> Option<String> {
    marker(body, "base")
}

/// GitHub refuses a body over 65,536 characters; a long findings table is cut, keeping the
/// serial marker cellbridge reads back.
fn fit_body(body: &str, serial: u64, lineage: &str) -> String {
    const MAX: usize = 60_000;
    let body = body.trim_end();
    if body.chars().count() <= MAX {
        return body.to_owned();
    }
    let cut: String = body.chars().take(MAX).collect();
    let cut = cut.rsplit_once('\n').map_or(cut.as_str(), |(head, _)| head);
    format!(
        "{cut}\n\n… (cut to fit GitHub's limit; `cellbridge plan` prints the whole report)\n<!-- cellbridge:serial={serial} lineage={lineage} -->"
    )
}

fn commit_message(plan: &Plan, digest: &str) -> String {
    format!(
        "{}\n\nTerraform state {}\n\nCellbridge-Serial: {}\nCellbridge-Lineage: {}\nCellbridge-Digest: {digest}\n",
        plan.title, plan.source, plan.serial, plan.lineage
    )
}

fn trailers(msg: &str) -> BTreeMap<String, String> {
    msg.lines()
        .filter_map(|l| l.split_once(": "))
        .filter(|(k, _)| k.starts_with("Cellbridge-"))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

struct Archive {
    sha: String,
    tree: Option<String>,
    fleet: MemFleet,
}

/// Reads a GitHub archive: a gzip'd pax tar whose global header's `comment` is the commit id
/// and whose entries sit under one `owner-repo-<short sha>/` directory.
fn read_archive(bytes: &[u8]) -> std::result::Result<Archive, String> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut sha = None;
    let mut files: BTreeMap<String, (&'static str, Vec<u8>)> = BTreeMap::new();
    let mut fleet = MemFleet::new();
    for entry in tar.entries().map_err(|e| format!("not a tar.gz archive: {e}"))? {
        let mut entry = entry.map_err(|e| format!("corrupt archive: {e}"))?;
        let kind = entry.header().entry_type();
        if kind == tar::EntryType::XGlobalHeader {
            let mut buf = Vec::new();
            entry
                .read_to_end(&mut buf)
                .map_err(|e| format!("corrupt archive: {e}"))?;
            sha = pax_comment(&buf);
            continue;
        }
        let path = entry
            .path()
            .map_err(|e| format!("corrupt archive: {e}"))?
            .to_string_lossy()
            .into_owned();
        let Some((_, rel)) = path.split_once('/') else { continue };
        let rel = rel.trim_end_matches('/');
        if rel.is_empty() || rel.split('/').any(|s| s == ".." || s == "." || s.is_empty()) {
            continue;
        }
        if kind.is_file() {
            let exec = entry.header().mode().map(|m| m & 0o111 != 0).unwrap_or(false);
            let mut buf = Vec::with_capacity(entry.size() as usize);
            entry
                .read_to_end(&mut buf)
                .map_err(|e| format!("corrupt archive at {rel}: {e}"))?;
            fleet.insert(rel.to_owned(), buf.clone());
            files.insert(rel.to_owned(), (if exec { "100755" } else { "100644" }, buf));
        } else if kind.is_symlink() {
            // Git stores a link as a blob of its target; the fleet view does not follow links.
            let target = entry
                .link_name()
                .ok()
                .flatten()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.insert(rel.to_owned(), ("120000", target.into_bytes()));
        }
    }
    let sha = sha.ok_or("the archive has no pax header naming its commit")?;
    Ok(Archive {
        sha,
        tree: Some(git_tree_id(&files)),
        fleet,
    })
}

fn pax_comment(records: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(records);
    text.lines()
        .find_map(|l| {
            l.split_once(' ')
                .and_then(|(_, kv)| kv.strip_prefix("comment="))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| s.len() == 40)
}

fn git_object_id(kind: &str, content: &[u8]) -> [u8; 20] {
    let mut h = sha1::Sha1::new();
    h.update(format!("{kind} {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize().into()
}

/// The id git gives the root tree holding `files` ({path: (mode, content)}).
fn git_tree_id(files: &BTreeMap<String, (&'static str, Vec<u8>)>) -> String {
    enum Node<'a> {
        Blob(&'static str, &'a [u8]),
        Dir(BTreeMap<&'a str, Node<'a>>),
    }
    let mut root: BTreeMap<&str, Node> = BTreeMap::new();
    for (path, (mode, content)) in files {
        let mut parts: Vec<&str> = path.split('/').collect();
        let leaf = parts.pop().unwrap_or_default();
        let mut node = &mut root;
        for p in parts {
            let n = node.entry(p).or_insert_with(|| Node::Dir(BTreeMap::new()));
            node = match n {
                Node::Dir(m) => m,
                Node::Blob(..) => return String::new(),
            };
        }
        node.insert(leaf, Node::Blob(mode, content));
    }
    fn write(dir: &BTreeMap<&str, Node>) -> [u8; 20] {
        // Git orders entries by name, a directory's name compared as if it ended in `/`.
        let mut entries: Vec<(String, &str, [u8; 20])> = dir
            .iter()
            .map(|(name, n)| match n {
                Node::Blob(mode, content) => (name.to_string(), *mode, git_object_id("blob", content)),
                Node::Dir(m) => (format!("{name}/"), "40000", write(m)),
            })
            .collect();
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut raw = Vec::new();
        for (key, mode, id) in entries {
            raw.extend_from_slice(mode.as_bytes());
            raw.push(b' ');
            raw.extend_from_slice(key.trim_end_matches('/').as_bytes());
            raw.push(0);
            raw.extend_from_slice(&id);
        }
        git_object_id("tree", &raw)
    }
    hex(&write(&root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_ids_are_gits() {
        // `git hash-object` / `git write-tree` of a.txt = "hello\n", d/b.txt = "x".
        let mut files = BTreeMap::new();
        files.insert("a.txt".to_owned(), ("100644", b"hello\n".to_vec()));
        files.insert("d/b.txt".to_owned(), ("100644", b"x".to_vec()));
        assert_eq!(
            hex(&git_object_id("blob", b"hello\n")),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(git_tree_id(&files), "6cea91b04bb0ee583812deb647f220c6dde4ff82");
    }

    #[test]
    fn markers_and_trailers_read_back() {
        let body = "text\n<!-- cellbridge:serial=3 lineage=L -->\n<!-- cellbridge:digest=abc base=def -->\n";
        assert_eq!(recorded_digest(body).as_deref(), Some("abc"));
        assert_eq!(recorded_base(body).as_deref(), Some("def"));
        assert_eq!(recorded_digest("no marker"), None);
        let t = trailers("title\n\nCellbridge-Serial: 4\nCellbridge-Digest: ff\n");
        assert_eq!(t["Cellbridge-Serial"], "4");
    }

    #[test]
    fn secondary_rate_limits_are_transient_and_forbidden_is_not() {
        let mut h = HeaderMap::new();
        let forbidden = Response {
            status: StatusCode::FORBIDDEN,
            headers: h.clone(),
            body: Bytes::from_static(br#"{"message":"Resource not accessible by integration"}"#),
        };
        assert!(!is_transient(&forbidden));
        h.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
        let limited = Response {
            status: StatusCode::FORBIDDEN,
            headers: h,
            body: Bytes::from_static(br#"{"message":"You have exceeded a secondary rate limit"}"#),
        };
        assert!(is_transient(&limited));
        assert_eq!(retry_after(&limited.headers), Some(Duration::from_secs(3)));
    }

    #[test]
    fn long_bodies_are_cut_but_keep_the_serial() {
        let body = format!(
            "{}\n<!-- cellbridge:serial=7 lineage=L -->\n",
            "| row |\n".repeat(20_000)
        );
        let fitted = fit_body(&body, 7, "L");
        assert!(fitted.chars().count() < 65_536);
        assert_eq!(plan::recorded_serial(&fitted), Some((7, "L".into())));
        assert_eq!(fit_body("short", 1, "L"), "short");
    }

    /// What reaches the wire: one request to a listener that records its header lines and
    /// answers like GitHub's `GET /repos/{owner}/{repo}`.
    async fn header_lines_of_one_request(creds: Credentials) -> Vec<(String, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0, "the client closed before its headers ended");
                raw.extend_from_slice(&buf[..n]);
            }
            let body = br#"{"default_branch":"main"}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            conn.write_all(head.as_bytes()).await.unwrap();
            conn.write_all(body).await.unwrap();
            String::from_utf8(raw).unwrap()
        });
        let fleet = GithubFleet::new(&url, "o", "r", None, &creds).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        assert_eq!(fleet.base_branch(deadline).await.unwrap(), "main");
        let raw = server.await.unwrap();
        raw.split("\r\n")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect()
    }

    #[tokio::test]
    async fn every_request_carries_one_api_version_accept_and_user_agent() {
        let lines = header_lines_of_one_request(Credentials::Token(Secret::new("t0k".to_owned()))).await;
        for name in ["x-github-api-version", "accept", "user-agent"] {
            let values: Vec<&str> = lines
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .collect();
            assert_eq!(values.len(), 1, "{name} sent {} times: {values:?}", values.len());
        }
        let get = |name: &str| lines.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(get("x-github-api-version"), Some("2022-11-28"));
        assert_eq!(get("accept"), Some("application/vnd.github+json"));
    }

    #[test]
    fn pax_comment_is_the_commit() {
        let sha = "48e9c0b5358ffbb0edb88f0f4db3b893b419c1a6";
        assert_eq!(
            pax_comment(format!("52 comment={sha}\n").as_bytes()).as_deref(),
            Some(sha)
        );
    }
}
