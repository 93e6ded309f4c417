//! One request to GitHub, with retries: cellbridge builds it (its credentials, the
//! `X-GitHub-Api-Version` the API at hand supports), octocrab's client sends it, this file decides
//! what is worth another try.
//!
//! Retries are ours, not octocrab's: octocrab would sleep for whatever `Retry-After` says,
//! however long, while a Lambda has a deadline. Every request here retries 5xx, transport
//! errors and rate limits with bounded exponential backoff, honours `Retry-After`, and gives up
//! with a retryable error as soon as waiting would cross the deadline.
//!
//! The octocrab clients themselves, and a [`GithubFleet`]'s construction, are in `client`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use octocrab::Octocrab;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::Value;

use super::config::{self, Signer};
use super::operations::Operation;
use crate::shell::retry::{Again, GaveUp, Policy, retry};
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

mod client;
#[cfg(test)]
mod tests;

pub(super) use client::{Headers, Unanswered, bearer, client, download_client, execute};

pub(super) const MAX_ATTEMPTS: u32 = 6;
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(250);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// Never start a request with less time left than this: a half-done write is worse than none.
pub(super) const DEADLINE_MARGIN: Duration = Duration::from_millis(500);
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One try's failure: worth another, or final.
pub(super) enum Try {
    Again {
        detail: String,
        retry_after: Option<Duration>,
    },
    Stop(GithubError),
}

// auto-merge
/// Where a request goes: the REST API, or the GraphQL endpoint (`mutation`: content-creating;
/// `paged`: the caller asks a smaller page when GitHub gives up on one, so a timeout is handed
/// to it at once rather than asked again as it was).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Rest,
    Graphql { mutation: bool, paged: bool },
}

pub(super) struct Response {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    /// The permission the documented operation needs ([`Operation::permission`]), for a 403.
    pub(super) permission: &'static str,
}

impl Response {
    pub(super) fn json(&self, what: &str) -> Result<Value> {
        serde_json::from_slice(&self.body).map_err(|e| GithubError::Protocol {
            what: what.to_owned(),
            detail: format!("not JSON: {e}"),
        })
    }

    pub(super) fn message(&self) -> String {
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

    /// A final answer as an error ([`GithubError::from_status`]); a 403 names the permission
    /// GitHub's `X-Accepted-GitHub-Permissions` header gives (App installations and
    /// fine-grained tokens get it), else the operation's documented one when GitHub says the
    /// resource is "not accessible" to the credentials.
    pub(super) fn api_error(&self, what: &str) -> GithubError {
        let message = self.message();
        let permission = (self.status == StatusCode::FORBIDDEN)
            .then(|| {
                let accepted = self
                    .headers
                    .get("x-accepted-github-permissions")
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|v| !v.is_empty());
                accepted.map(str::to_owned).or_else(|| {
                    (!self.permission.is_empty() && message.contains("not accessible"))
                        .then(|| self.permission.to_owned())
                })
            })
            .flatten();
        GithubError::from_status(what, self.status.as_u16(), message, permission)
    }
}

/// Path segments keep `/` (branch names have them) and escape what a URL path cannot hold.
pub(super) const PATH: &AsciiSet = &CONTROLS
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

pub(super) fn enc(s: &str) -> String {
    utf8_percent_encode(s, PATH).to_string()
}

impl GithubFleet {
    /// One request with retries ([`crate::shell::retry`]). Returns any final HTTP answer (the caller
    /// reads 404 and 422); fails only when retrying cannot help or time ran out.
    pub(super) async fn send(
        &self,
        what: &str,
        method: Method,
        uri: &str,
        body: Option<&Value>,
        accept: Option<&str>,
        deadline: Instant,
    ) -> Result<Response> {
        self.send_to(what, method, uri, body, accept, deadline, Target::Rest)
            .await
    }

    /// [`Self::send`] to `target`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn send_to(
        &self,
        what: &str,
        method: Method,
        uri: &str,
        body: Option<&Value>,
        accept: Option<&str>,
        deadline: Instant,
        target: Target,
    ) -> Result<Response> {
        let download = uri.starts_with("http://") || uri.starts_with("https://");
        let policy = Policy {
            first: FIRST_BACKOFF,
            max: MAX_BACKOFF,
            attempts: MAX_ATTEMPTS,
            jitter: true,
            deadline: Some((deadline, DEADLINE_MARGIN)),
        };
        let reread = AtomicBool::new(false);
        let once = || async {
            let left = deadline.saturating_duration_since(Instant::now());
            if left <= DEADLINE_MARGIN {
                return Err(Try::Stop(GithubError::Transient {
                    what: what.to_owned(),
                    detail: "the function's deadline is too close to send it".into(),
                }));
            }
            // Content-creating requests keep this process's share of GitHub's limits: REST's
            // writes, and GraphQL's mutations ("Content creation limits include actions taken
            // ... via the REST API and GraphQL API", "Rate limits for the REST API"); a GraphQL
            // query is a POST that creates nothing.
            // Minting the App's installation token creates nothing in the repository.
            let app_route = uri.starts_with("/app/");
            let writes = match target {
                Target::Rest => !download && !app_route && !matches!(method, Method::GET | Method::HEAD),
                Target::Graphql { mutation, .. } => mutation,
            };
            if writes
                && let Err(too_soon) = self
                    .pacer
                    .acquire(deadline.checked_sub(DEADLINE_MARGIN).unwrap_or(deadline))
                    .await
            {
                return Err(Try::Stop(GithubError::Transient {
                    what: what.to_owned(),
                    detail: format!(
                        "paced: the next write keeps GitHub's limits on content-creating requests only in {} s, after the deadline",
                        too_soon.wait.as_secs()
                    ),
                }));
            }
            let crabs = self.client.get(&self.api_url, deadline).await.map_err(Try::Stop)?;
            let setup = |reason: String| {
                Try::Stop(GithubError::Setup {
                    api_url: self.api_url.clone(),
                    reason,
                })
            };
            // Who the request is from: the token; for an App, its JWT on the App's own routes and
            // the installation token (minted when there is none, or it is about to expire) on
            // every other. An archive download carries none (its URL carries a token).
            let authorization = match (&crabs.auth, download) {
                (_, true) => None,
                (Signer::Token(t), _) => Some(bearer(t).map_err(setup)?),
                (Signer::App(app), _) if app_route => {
                    Some(bearer(&app.jwt(SystemTime::now()).map_err(setup)?).map_err(setup)?)
                }
                (Signer::App(app), _) => {
                    let minted = self
                        .installation_token(app.clone(), deadline)
                        .await
                        .map_err(Try::Stop)?;
                    Some(bearer(&minted.token).map_err(setup)?)
                }
            };
            // GitHub Enterprise Server's GraphQL is beside the REST API, through its own client.
            let crab = match (target, &crabs.graphql) {
                (Target::Graphql { .. }, Some(g)) => g.clone(),
                _ => crabs.api.clone(),
            };
            // Credentials GitHub refuses were probably rotated in Secrets Manager while this
            // process kept the old ones: read the secret again and try once more. An App's
            // installation token refused (revoked, the installation changed) is minted again.
            let app_token = matches!(crabs.auth, Signer::App(_)) && !app_route;
            let refused = |status: StatusCode| {
                status == StatusCode::UNAUTHORIZED
                    && !download
                    && (self.client.rereadable() || app_token)
                    && !reread.swap(true, Ordering::Relaxed)
            };
            let reread_secret = || async {
                if self.client.rereadable() {
                    tracing::warn!(
                        request = what,
                        "GitHub refused the credentials; reading the secret again"
                    );
                    self.client.forget().await;
                } else if let Signer::App(app) = &crabs.auth {
                    tracing::warn!(request = what, "GitHub refused the installation token; minting another");
                    app.forget_token();
                }
                Err(Try::Again {
                    detail: "GitHub refused the credentials".into(),
                    retry_after: Some(Duration::ZERO),
                })
            };
            if download {
                &self.counts.downloads
            } else {
                &self.counts.api
            }
            .fetch_add(1, Ordering::Relaxed);
            // Archive downloads go elsewhere (codeload, or `/_codeload/` on GitHub Enterprise
            // Server): a client of their own, without our credentials (the URL carries a token)
            // and without the API's base path, which octocrab would otherwise prepend.
            let elsewhere = match download_client(uri) {
                Ok(c) => c,
                Err(reason) => {
                    return Err(Try::Again {
                        detail: reason,
                        retry_after: None,
                    });
                }
            };
            let (crab, uri) = match &elsewhere {
                Some((client, path)) => (client, path.as_str()),
                None => (&*crab, uri),
            };
            let headers = Headers {
                accept,
                version: (!download).then(|| config::api_version(&self.api_url)),
                authorization: authorization.as_ref(),
            };
            let limit = left.min(REQUEST_TIMEOUT);
            match tokio::time::timeout(limit, send_once(crab, method.clone(), uri, body, headers)).await {
                Err(_) => Err(Try::Again {
                    detail: format!("no answer within {} ms", limit.as_millis()),
                    retry_after: None,
                }),
                Ok(Err(e)) if e.status().is_some_and(refused) => reread_secret().await,
                Ok(Ok(resp)) if refused(resp.status) => reread_secret().await,
                Ok(Err(e)) => match e.status() {
                    Some(status) if !transient_status(status) => Err(Try::Stop(GithubError::Access {
                        what: what.to_owned(),
                        status: status.as_u16(),
                        message: e.message(),
                        permission: None,
                    })),
                    _ => Err(Try::Again {
                        detail: e.message(),
                        retry_after: None,
                    }),
                },
                Ok(Ok(resp)) => {
                    if !download && matches!(crabs.auth, Signer::Token(_)) {
                        self.note_token_expiry(&resp.headers);
                    }
                    if matches!(target, Target::Graphql { paged: true, .. }) && graphql_timed_out(&resp) {
                        // Asked again as it was, it would time out again and cost points again
                        // ("If a timeout occurs for any of your API requests, additional points
                        // will be deducted"): the caller asks less, or tries later.
                        Err(Try::Stop(GithubError::Transient {
                            what: what.to_owned(),
                            detail: format!("HTTP {}: {GRAPHQL_TIMEOUT}: {}", resp.status.as_u16(), resp.message()),
                        }))
                    } else if is_transient(&resp) {
                        Err(Try::Again {
                            detail: format!("HTTP {}: {}", resp.status.as_u16(), resp.message()),
                            retry_after: retry_after(&resp.headers),
                        })
                    } else {
                        Ok(resp)
                    }
                }
            }
        };
        let judge = |t: &Try| match t {
            Try::Stop(_) => Again::No,
            Try::Again {
                retry_after: Some(ra), ..
            } => Again::After((*ra).max(Duration::from_millis(100))),
            Try::Again { .. } => Again::Yes,
        };
        let notify = |t: &Try, attempt: u32, wait: Duration| {
            if let Try::Again { detail, .. } = t {
                tracing::warn!(request = what, attempt, wait_ms = wait.as_millis() as u64, error = %detail, "GitHub request failed, retrying");
            }
        };
        // Boxed: every GitHub call nests this future, and the callers' futures stay small.
        Box::pin(retry(&policy, once, judge, notify))
            .await
            .map_err(|gave_up| match gave_up {
                GaveUp::Final(Try::Stop(e)) | GaveUp::Attempts(Try::Stop(e), _) | GaveUp::Deadline(Try::Stop(e), _) => {
                    e
                }
                GaveUp::Attempts(Try::Again { detail, .. }, n) => GithubError::Transient {
                    what: what.to_owned(),
                    detail: format!("{detail}, after {n} attempts"),
                },
                GaveUp::Deadline(Try::Again { detail, .. }, wait) => GithubError::Transient {
                    what: what.to_owned(),
                    detail: format!(
                        "{detail}; the next try (in {} ms) would pass the function's deadline",
                        wait.as_millis()
                    ),
                },
                GaveUp::Final(Try::Again { detail, .. }) => GithubError::Transient {
                    what: what.to_owned(),
                    detail,
                },
            })
    }

    /// A request to this repository's API (`path` under `/repos/{owner}/{repo}`), with retries.
    pub(super) async fn repo_send(
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
        let mut r = self
            .send(what, op.method.clone(), &self.repo_path(path), body, None, deadline)
            .await?;
        r.permission = op.permission;
        Ok(r)
    }

    /// A repository request that must succeed: any other final answer is an API error naming `what`.
    pub(super) async fn repo_call(
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
}

/// One try through `crab`, no retry.
async fn send_once(
    crab: &Octocrab,
    method: Method,
    uri: &str,
    body: Option<&Value>,
    headers: Headers<'_>,
) -> std::result::Result<Response, Unanswered> {
    let resp = execute(crab, method, uri, body, headers).await?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.map_err(Unanswered::Client)?.to_bytes();
    Ok(Response {
        status: parts.status,
        headers: parts.headers,
        body,
        permission: "",
    })
}

pub(super) fn url_query(pairs: &[(&str, &str)]) -> String {
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

pub(super) fn sha_of(r: &Response, what: &str) -> Result<String> {
    r.json(what)?["sha"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| GithubError::Protocol {
            what: what.to_owned(),
            detail: "no sha".into(),
        })
}

/// What a GraphQL query GitHub stopped for taking too long fails with (retryable): "If GitHub
/// takes more than 10 seconds to process an API request, GitHub will terminate the request and
/// you will receive a timeout response and a message reporting that \"We couldn't respond to your
/// request in time\"" ("Rate limits and query limits for the GraphQL API", Timeouts), a 502 or a
/// 504; the 502's body GitHub sends says "This may be the result of a timeout".
pub(crate) const GRAPHQL_TIMEOUT: &str = "GitHub could not answer the query in time";

fn graphql_timed_out(r: &Response) -> bool {
    let m = r.message().to_ascii_lowercase();
    r.status == StatusCode::GATEWAY_TIMEOUT
        || (r.status == StatusCode::BAD_GATEWAY
            && (m.contains("timeout") || m.contains("respond to your request in time")))
}

pub(super) fn is_transient(r: &Response) -> bool {
    if r.status.is_server_error() || r.status == StatusCode::TOO_MANY_REQUESTS {
        return true;
    }
    // Secondary rate limits are 403s: tell them from a real "forbidden" by GitHub's signals.
    r.status == StatusCode::FORBIDDEN
        && (r.headers.contains_key(http::header::RETRY_AFTER)
            || r.headers.get("x-ratelimit-remaining").and_then(|v| v.to_str().ok()) == Some("0")
            || r.message().to_ascii_lowercase().contains("rate limit"))
}

pub(super) fn transient_status(s: StatusCode) -> bool {
    s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS || s == StatusCode::FORBIDDEN
}

pub(super) fn retry_after(h: &HeaderMap) -> Option<Duration> {
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

pub(super) fn classify_octocrab(e: &octocrab::Error) -> Option<StatusCode> {
    match e {
        octocrab::Error::GitHub { source, .. } => Some(source.status_code),
        _ => None,
    }
}

/// octocrab's error text, never with credentials (it carries none: headers are not printed).
pub(super) fn octocrab_message(e: &octocrab::Error) -> String {
    match e {
        octocrab::Error::GitHub { source, .. } => format!("HTTP {}: {}", source.status_code.as_u16(), source.message),
        other => crate::pure::redact::chain(other),
    }
}
