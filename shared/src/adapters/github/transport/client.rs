//! The octocrab clients: one for the API with cellbridge's credentials and User-Agent, one per
//! archive host; and a [`GithubFleet`]'s construction around them.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::Method;
use http_body_util::combinators::BoxBody;
use octocrab::Octocrab;
use serde_json::Value;
use tokio::sync::OnceCell;

use super::{CONNECT_TIMEOUT, REQUEST_TIMEOUT, enc};
use crate::adapters::github::archive;
use crate::adapters::github::config::{self, Client, GithubConfig};
use crate::adapters::github::pacing::{Pacer, Pacing};
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
            access_checked: std::sync::Mutex::new(None),
            pacer: Pacer::new(Pacing::default()),
            // Checked at init (`GithubConfig::from_env`).
            fleet_memory: archive::memory_limit_from_env().unwrap_or(archive::DEFAULT_LIMIT),
            signatures: std::sync::Mutex::new(None),
        }
    }

    /// At most `bytes` of the fleet repo kept in memory per read (see [`archive`]).
    pub fn with_fleet_memory(mut self, bytes: u64) -> Self {
        self.fleet_memory = bytes;
        self
    }

    /// The App installation these credentials act as; `None` for a token.
    pub(crate) async fn installation(&self, deadline: Instant) -> Result<Option<u64>> {
        Ok(self.client.get(&self.api_url, deadline).await?.app.map(|(_, id)| id))
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
    Ok(Some((client(&origin, Auth::None)?, path)))
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

/// Who a client's requests are from.
pub(crate) enum Auth {
    /// No one: an archive download (its URL carries a token), or a client given a token per
    /// request.
    None,
    Token(String),
    App {
        app_id: u64,
        key: octocrab::EncodingKey,
    },
}

/// An octocrab client of `base` (an API's root, or an archive host's origin) whose requests
/// carry [`USER_AGENT`] and no other User-Agent.
///
/// octocrab's `Octocrab::builder()` always adds `User-Agent: octocrab` (`prepare_config`), and a
/// header given to its `add_header` goes through the same layer, which appends
/// (`ExtraHeaders::call`: `HeaderMap::extend`): two User-Agent lines. Its service-stack builder
/// (`OctocrabBuilder::new_empty().with_service(..).with_layer(..)`) sends only the headers its
/// layers add; octocrab's own example `examples/custom_client.rs` sets this very header that way.
/// The stack is the one `Octocrab::builder().build()` makes for cellbridge's features (rustls with
/// the process's crypto provider and the system's roots, connect and read timeouts, extra
/// headers, base URI, credentials for the API's host only), less octocrab's retries: ours are
/// the transport's.
pub(crate) fn client(base: &str, auth: Auth) -> std::result::Result<Octocrab, String> {
    use octocrab::service::middleware::auth_header::AuthHeaderLayer;
    use octocrab::service::middleware::base_uri::BaseUriLayer;
    use octocrab::service::middleware::extra_headers::ExtraHeadersLayer;
    use octocrab::{AuthState, OctocrabBuilder, auth::AppAuth};

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
    let (authorization, state) = match auth {
        Auth::None => (None, AuthState::None),
        Auth::Token(token) => {
            let mut value = http::HeaderValue::try_from(format!("Bearer {token}"))
                .map_err(|_| "the token holds characters no HTTP header may carry".to_owned())?;
            value.set_sensitive(true);
            (Some(value), AuthState::None)
        }
        Auth::App { app_id, key } => (
            None,
            AuthState::App(AppAuth {
                app_id: app_id.into(),
                key,
            }),
        ),
    };
    // As octocrab's own builder: credentials go to the API's host and GitHub's upload host only.
    let uploads = http::Uri::from_static("https://uploads.github.com");
    let agent = vec![(http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT))];
    let built = OctocrabBuilder::new_empty()
        .with_service(http)
        .with_layer(&ExtraHeadersLayer::new(Arc::new(agent)))
        .with_layer(&BaseUriLayer::new(base.clone()))
        .with_layer(&AuthHeaderLayer::new(authorization, base, uploads))
        .with_auth(state)
        .build();
    match built {
        Ok(crab) => Ok(crab),
        Err(never) => match never {},
    }
}

/// One request through `crab`, its body not read yet.
pub(crate) async fn execute(
    crab: &Octocrab,
    method: Method,
    uri: &str,
    body: Option<&Value>,
    accept: Option<&str>,
) -> std::result::Result<http::Response<BoxBody<Bytes, octocrab::Error>>, octocrab::Error> {
    let mut req = http::Request::builder().method(method).uri(uri);
    req = req.header(http::header::ACCEPT, accept.unwrap_or("application/vnd.github+json"));
    // `X-GitHub-Api-Version` is octocrab's to set (`build_request` adds it to every request);
    // a second copy here would reach GitHub as two lines, which it joins with a comma into a
    // value it does not support.
    let req = crab.build_request(req, body)?;
    crab.execute(req).await
}
