//! The octocrab clients: one for the API with cellbridge's credentials and User-Agent, one per
//! archive host; and a [`GithubFleet`]'s construction around them.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::Method;
use http_body_util::combinators::BoxBody;
use octocrab::Octocrab;
use serde_json::Value;
use tokio::sync::OnceCell;

use super::{CONNECT_TIMEOUT, REQUEST_TIMEOUT, enc};
use crate::adapters::github::app::{self, App};
use crate::adapters::github::archive;
use crate::adapters::github::config::{self, Client, GithubConfig, Signer};
use crate::adapters::github::pacing::{Pacer, Pacing};
use crate::pure::redact::Secret;
use crate::{
    adapters::github::Credentials, adapters::github::GithubFleet, adapters::github::RequestCounts,
    ports::github::Result,
};

impl GithubFleet {
    /// A client with these credentials (checked now; no request is sent until the first sync).
    pub fn new(
        api_url: &str,
        owner: &str,
        repo: &str,
        base_branch: Option<String>,
        creds: &Credentials,
    ) -> Result<Self> {
        let crab = config::octocrab_for(api_url, creds)?;
        Ok(Self::with_client(
            api_url,
            owner,
            repo,
            base_branch,
            Client::given(crab),
        ))
    }

    /// The fleet repo both functions configure: credentials from the secret, read when GitHub is
    /// first needed and again when GitHub refuses them.
    pub fn from_config(config: &GithubConfig, secrets: aws_sdk_secretsmanager::Client) -> Self {
        Self::with_client(
            &config.api_url,
            &config.owner,
            &config.repo,
            config.base_branch.clone(),
            Client::from_secret(config.secret.clone(), secrets),
        )
        // Checked at init (`GithubConfig::from_env`).
        .with_pacing(Pacing::from_env().unwrap_or_default())
    }

    fn with_client(api_url: &str, owner: &str, repo: &str, base_branch: Option<String>, client: Client) -> Self {
        let base = OnceCell::new();
        if let Some(b) = base_branch {
            let _ = base.set(b);
        }
        Self {
            client,
            api_url: api_url.to_owned(),
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            base_branch: base,
            repository_id: OnceCell::new(),
            counts: RequestCounts::default(),
            token_expiry: std::sync::Mutex::new(None),
            pacer: Pacer::new(Pacing::default()),
            // Checked at init (`GithubConfig::from_env`).
            fleet_memory: archive::memory_limit_from_env().unwrap_or(archive::DEFAULT_LIMIT),
            signatures: std::sync::Mutex::new(None),
            reading_without_rules: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// At most `bytes` of the fleet repo kept in memory per read (see [`archive`]).
    pub fn with_fleet_memory(mut self, bytes: u64) -> Self {
        self.fleet_memory = bytes;
        self
    }

    /// The App installation these credentials act as; `None` for a token.
    pub(crate) async fn installation(&self, deadline: Instant) -> Result<Option<Arc<App>>> {
        Ok(match self.client.get(&self.api_url, deadline).await?.auth {
            Signer::App(app) => Some(app),
            Signer::Token(_) => None,
        })
    }

    /// When the token these credentials hold expires, as GitHub's answers last said
    /// (`GitHub-Authentication-Token-Expiration`); `None` before any answer, for a token without
    /// expiry, and for a GitHub App (whose installation tokens cellbridge renews itself).
    pub fn token_expires_at(&self) -> Option<SystemTime> {
        *self.token_expiry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps what an answer's headers say of the token's expiry.
    pub(super) fn note_token_expiry(&self, headers: &http::HeaderMap) {
        if let Some(t) = headers
            .get("github-authentication-token-expiration")
            .and_then(|v| v.to_str().ok())
            .and_then(app::parse_token_expiration)
        {
            *self.token_expiry.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        }
    }

    /// Writes paced to `pacing` instead of GitHub's whole limits.
    pub fn with_pacing(mut self, pacing: Pacing) -> Self {
        self.pacer = Pacer::new(pacing);
        self
    }

    pub fn counts(&self) -> &RequestCounts {
        &self.counts
    }

    pub fn repo_name(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }

    pub(super) fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{}", enc(&self.owner), enc(&self.repo), rest)
    }
}

/// For an absolute URL (an archive download): a client of its own for the URL's origin, and the
/// path to ask it for; `None` for a path of the API.
pub(crate) fn download_client(uri: &str) -> std::result::Result<Option<(Octocrab, String)>, String> {
    let Some(abs) = http::Uri::try_from(uri).ok().filter(|u| u.authority().is_some()) else {
        return Ok(None);
    };
    let origin = format!(
        "{}://{}",
        abs.scheme_str().unwrap_or("https"),
        abs.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    let path = abs
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    Ok(Some((client(&origin)?, path)))
}

/// What cellbridge's requests to GitHub say they come from. GitHub asks every request to name
/// the application in its User-Agent, so that it can reach whoever runs it when its requests
/// cause trouble
/// (<https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent>).
pub const USER_AGENT: &str = concat!(
    "cellbridge/",
    env!("CARGO_PKG_VERSION"),
    " (+",
    env!("CARGO_PKG_REPOSITORY"),
    ")"
);

/// An octocrab client of `base` (an API's root, or an archive host's origin) whose requests
/// carry [`USER_AGENT`] and no other User-Agent, and no credentials: [`execute`] gives each
/// request its own.
///
/// octocrab's `Octocrab::builder()` always adds `User-Agent: octocrab` (`prepare_config`), and a
/// header given to its `add_header` goes through the same layer, which appends
/// (`ExtraHeaders::call`: `HeaderMap::extend`): two User-Agent lines. Its service-stack builder
/// (`OctocrabBuilder::new_empty().with_service(..).with_layer(..)`) sends only the headers its
/// layers add; octocrab's own example `examples/custom_client.rs` sets this very header that way.
/// The stack is the one `Octocrab::builder().build()` makes for cellbridge's features (rustls with
/// the process's crypto provider and the system's roots, connect and read timeouts, extra
/// headers, base URI), less octocrab's retries (ours are the transport's) and its credentials
/// (cellbridge mints and sends its own).
pub(crate) fn client(base: &str) -> std::result::Result<Octocrab, String> {
    use octocrab::service::middleware::base_uri::BaseUriLayer;
    use octocrab::service::middleware::extra_headers::ExtraHeadersLayer;
    use octocrab::{AuthState, OctocrabBuilder};

    let base: http::Uri = base.parse().map_err(|e| format!("{base} is not a URL: {e}"))?;
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| format!("the system's root certificates: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    let mut connector = hyper_timeout::TimeoutConnector::new(tls);
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_read_timeout(Some(REQUEST_TIMEOUT));
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let agent = vec![(http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT))];
    let built = OctocrabBuilder::new_empty()
        .with_service(http)
        .with_layer(&ExtraHeadersLayer::new(Arc::new(agent)))
        .with_layer(&BaseUriLayer::new(base))
        .with_auth(AuthState::None)
        .build();
    match built {
        Ok(crab) => Ok(crab),
        Err(never) => match never {},
    }
}

/// `Authorization: Bearer <token>`, marked sensitive (never printed by `http`'s `Debug`).
pub(crate) fn bearer(token: &Secret<String>) -> std::result::Result<http::HeaderValue, String> {
    let mut value = http::HeaderValue::try_from(format!("Bearer {}", token.expose()))
        .map_err(|_| "the token holds characters no HTTP header may carry".to_owned())?;
    value.set_sensitive(true);
    Ok(value)
}

/// Why a request got no answer: octocrab's (transport, body) or, before it was sent, its URI.
#[derive(Debug)]
pub(crate) enum Unanswered {
    Client(octocrab::Error),
    Unsendable(String),
}

impl Unanswered {
    /// The status of an answer octocrab turned into an error.
    pub(crate) fn status(&self) -> Option<http::StatusCode> {
        match self {
            Unanswered::Client(e) => super::classify_octocrab(e),
            Unanswered::Unsendable(_) => None,
        }
    }

    /// The error's text, never with credentials (octocrab prints no header).
    pub(crate) fn message(&self) -> String {
        match self {
            Unanswered::Client(e) => super::octocrab_message(e),
            Unanswered::Unsendable(m) => m.clone(),
        }
    }
}

/// What a request is sent with besides its method, path and body.
#[derive(Clone, Copy, Default)]
pub(crate) struct Headers<'a> {
    /// `Accept`; GitHub's JSON media type when `None`.
    pub(crate) accept: Option<&'a str>,
    /// `X-GitHub-Api-Version` ([`config::api_version`]); none to an archive host.
    pub(crate) version: Option<&'static str>,
    pub(crate) authorization: Option<&'a http::HeaderValue>,
}

/// One request through `crab`, its body not read yet. Built here rather than by octocrab's
/// `build_request`, which adds `X-GitHub-Api-Version: 2022-11-28` to every request (its
/// `_SET_HEADERS_MAP`), where cellbridge sends the version the API at hand supports; the rest
/// is as `build_request` does it: a JSON body with `Content-Type: application/json`, none with
/// `Content-Length: 0`.
pub(crate) async fn execute(
    crab: &Octocrab,
    method: Method,
    uri: &str,
    body: Option<&Value>,
    headers: Headers<'_>,
) -> std::result::Result<http::Response<BoxBody<Bytes, octocrab::Error>>, Unanswered> {
    let mut req = http::Request::builder().method(method).uri(uri).header(
        http::header::ACCEPT,
        headers.accept.unwrap_or("application/vnd.github+json"),
    );
    if let Some(v) = headers.version {
        req = req.header("x-github-api-version", v);
    }
    if let Some(a) = headers.authorization {
        req = req.header(http::header::AUTHORIZATION, a.clone());
    }
    let req = match body {
        Some(b) => {
            let text =
                serde_json::to_string(b).map_err(|e| Unanswered::Unsendable(format!("the request body: {e}")))?;
            req.header(http::header::CONTENT_TYPE, "application/json")
                .body(octocrab::OctoBody::from(text))
        }
        None => req
            .header(http::header::CONTENT_LENGTH, "0")
            .body(octocrab::OctoBody::empty()),
    }
    .map_err(|e| Unanswered::Unsendable(format!("{uri}: {e}")))?;
    crab.execute(req).await.map_err(Unanswered::Client)
}
