//! The fleet repo on GitHub as both functions configure it: which repository, which branch,
//! which API, and the credentials in Secrets Manager, read when GitHub is first needed and read
//! again when GitHub refuses them (rotated while the execution environment kept the old ones).

use std::sync::Arc;
use std::time::Instant;

use octocrab::Octocrab;

use crate::adapters::secrets;
use crate::shell::config::{self, ConfigError};
use crate::shell::error::Classify;

use super::Credentials;
use super::app::App;
use super::transport;
use crate::ports::github::GithubError;
use crate::pure::redact::Secret;

/// github.com's API; GitHub Enterprise Server's is `https://HOST/api/v3`.
pub const DEFAULT_GITHUB_API_URL: &str = "https://api.github.com";

/// `CELLBRIDGE_FLEET_REPO`, `CELLBRIDGE_BASE_BRANCH`, `CELLBRIDGE_GITHUB_SECRET` and
/// `GITHUB_API_URL`, checked; no client yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubConfig {
    pub owner: String,
    pub repo: String,
    /// Unset: the repository's default branch, asked of GitHub once per process.
    pub base_branch: Option<String>,
    /// Name or ARN of the Secrets Manager secret with the credentials (App or token).
    pub secret: String,
    pub api_url: String,
}

impl GithubConfig {
    /// Reads and checks every variable; the error names the variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        let repo_var = config::required("CELLBRIDGE_FLEET_REPO", "set it to the fleet repository, owner/name")?;
        let (owner, repo) = config::repo("CELLBRIDGE_FLEET_REPO", &repo_var)?;
        let secret = config::required(
            "CELLBRIDGE_GITHUB_SECRET",
            "set it to the name or ARN of the Secrets Manager secret with the GitHub credentials",
        )?;
        let api_url = config::optional("GITHUB_API_URL").unwrap_or_else(|| DEFAULT_GITHUB_API_URL.to_owned());
        // Read when the client is made; checked here so a bad value fails the cold start.
        super::pacing::Pacing::from_env()?;
        super::archive::memory_limit_from_env()?;
        Self::checked(owner, repo, config::optional("CELLBRIDGE_BASE_BRANCH"), secret, api_url)
    }

    /// The same checks on values given directly (tests, embedders), naming the variable each
    /// value stands for.
    pub fn checked(
        owner: String,
        repo: String,
        base_branch: Option<String>,
        secret: String,
        api_url: String,
    ) -> Result<Self, ConfigError> {
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            return Err(ConfigError::Invalid {
                name: "GITHUB_API_URL",
                value: api_url,
                reason: "expected an http(s) URL".into(),
            });
        }
        if let Some(b) = &base_branch
            && (b.contains("..") || b.starts_with('/') || b.contains(' '))
        {
            return Err(ConfigError::Invalid {
                name: "CELLBRIDGE_BASE_BRANCH",
                value: b.clone(),
                reason: "not a branch name".into(),
            });
        }
        Ok(Self {
            owner,
            repo,
            base_branch,
            secret,
            api_url,
        })
    }
}

/// Where the client's credentials come from.
enum Source {
    /// Given once (the command line, tests): a refusal is final.
    Given,
    /// A Secrets Manager secret, read when GitHub is first needed (not at cold start) and read
    /// again when GitHub refuses what it held (rotated while the process kept the old value).
    Secret {
        name: String,
        store: aws_sdk_secretsmanager::Client,
    },
}

/// The octocrab clients built from one set of credentials, and those credentials. The clients
/// carry none: every request is given its `Authorization` by the transport (the token, the App's
/// JWT for the App's own routes, else the installation token cellbridge minted).
#[derive(Clone)]
pub(super) struct Crabs {
    /// Every REST request.
    pub(super) api: Arc<Octocrab>,
    /// Who requests are from.
    pub(super) auth: Signer,
    // auto-merge
    /// GraphQL where it is not below the REST API's base (GitHub Enterprise Server: REST at
    /// `https://HOST/api/v3`, GraphQL at `https://HOST/api/graphql`): a client whose base is
    /// `https://HOST/api`. `None`: GraphQL is `{GITHUB_API_URL}/graphql` (github.com).
    pub(super) graphql: Option<Arc<Octocrab>>,
}

/// The credentials requests carry.
#[derive(Clone)]
pub(super) enum Signer {
    Token(Secret<String>),
    /// Shared: the installation token it keeps is the process's.
    App(Arc<App>),
}

/// The `X-GitHub-Api-Version` cellbridge sends to the REST API at `api_url`: `2026-03-10` to
/// github.com (and GHE.com, `api.SUBDOMAIN.ghe.com`), `2022-11-28` to GitHub Enterprise Server
/// (`…/api/v3`), whose REST API knows no other ("API Versions",
/// <https://docs.github.com/rest/about-the-rest-api/api-versions>: a version is supported for at
/// least 24 months after its successor's release, so 2022-11-28 until March 2028). cellbridge
/// reads none of the fields 2026-03-10 removes ("Breaking changes",
/// <https://docs.github.com/rest/about-the-rest-api/breaking-changes>).
pub(super) fn api_version(api_url: &str) -> &'static str {
    if graphql_base(api_url).is_some() {
        "2022-11-28"
    } else {
        "2026-03-10"
    }
}

// auto-merge
/// Where GraphQL lives for the REST API at `api_url`: GitHub Enterprise Server's REST API is
/// `http(s)://HOST/api/v3` and its GraphQL endpoint `http(s)://HOST/api/graphql` ("Forming calls
/// with GraphQL", <https://docs.github.com/enterprise-server@3.19/graphql/guides/forming-calls-with-graphql#the-graphql-endpoint>);
/// github.com's are `https://api.github.com` and `https://api.github.com/graphql`. The base a
/// GraphQL client needs (`/graphql` is appended), when it is not `api_url` itself.
pub(super) fn graphql_base(api_url: &str) -> Option<String> {
    api_url
        .trim_end_matches('/')
        .strip_suffix("/api/v3")
        .map(|host| format!("{host}/api"))
}

/// The octocrab clients of one [`GithubFleet`](super::GithubFleet): built once, kept for the life of the process,
/// rebuilt from the secret after a 401. Shared behind an `Arc` because a clone of an App
/// client would not share its cached installation token.
pub(super) struct Client {
    source: Source,
    crab: tokio::sync::Mutex<Option<Crabs>>,
}

impl Client {
    pub(super) fn given(crabs: Crabs) -> Self {
        Self {
            source: Source::Given,
            crab: tokio::sync::Mutex::new(Some(crabs)),
        }
    }

    pub(super) fn from_secret(name: String, store: aws_sdk_secretsmanager::Client) -> Self {
        Self {
            source: Source::Secret { name, store },
            crab: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether a 401 may be credentials rotated under us.
    pub(super) fn rereadable(&self) -> bool {
        matches!(self.source, Source::Secret { .. })
    }

    /// The client, built from the secret when there is none yet.
    pub(super) async fn get(&self, api_url: &str, deadline: Instant) -> Result<Crabs, GithubError> {
        let mut slot = self.crab.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let Source::Secret { name, store } = &self.source else {
            unreachable!("a client with given credentials is built at once and never forgotten")
        };
        // Secrets Manager has its own retries; the deadline bounds them so the record goes
        // back to SQS as a retryable failure instead of the function being killed.
        let left = deadline.saturating_duration_since(Instant::now());
        let secret = tokio::time::timeout(left, secrets::fetch_json(store, name))
            .await
            .map_err(|_| GithubError::Transient {
                what: "reading its credentials".into(),
                detail: "Secrets Manager did not answer before the function's deadline".into(),
            })?
            .map_err(|e| {
                if e.retryable() {
                    GithubError::Transient {
                        what: "reading its credentials".into(),
                        detail: e.to_string(),
                    }
                } else {
                    setup(api_url, e.to_string())
                }
            })?;
        let creds = secrets::github_credentials(&secret).map_err(|e| setup(api_url, e.to_string()))?;
        let crabs = octocrab_for(api_url, &creds)?;
        *slot = Some(crabs.clone());
        Ok(crabs)
    }

    /// Drops a client built from the secret, so the next request reads the secret again.
    pub(super) async fn forget(&self) {
        if self.rereadable() {
            *self.crab.lock().await = None;
        }
    }
}

fn setup(api_url: &str, reason: String) -> GithubError {
    GithubError::Setup {
        api_url: api_url.to_owned(),
        reason,
    }
}

/// The octocrab clients for `creds` ([`transport::client`]: cellbridge's User-Agent, no retries
/// of octocrab's, no credentials of their own); no request is sent (a cold start stays cheap).
pub(super) fn octocrab_for(api_url: &str, creds: &Credentials) -> Result<Crabs, GithubError> {
    let api = api_url.trim_end_matches('/');
    let client = |base: &str| transport::client(base).map_err(|reason| setup(api_url, reason));
    let graphql = match graphql_base(api_url) {
        Some(base) => Some(Arc::new(client(&base)?)),
        None => None,
    };
    let auth = match creds {
        Credentials::Token(t) => {
            // Checked now: a token no header can carry is a setup error, never a request's.
            transport::bearer(t).map_err(|reason| setup(api_url, reason))?;
            Signer::Token(t.clone())
        }
        Credentials::App {
            issuer,
            installation_id,
            private_key,
        } => Signer::App(Arc::new(
            App::new(issuer.clone(), *installation_id, private_key).map_err(|reason| setup(api_url, reason))?,
        )),
    };
    Ok(Crabs {
        api: Arc::new(client(api)?),
        auth,
        graphql,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(branch: Option<&str>, url: &str) -> Result<GithubConfig, ConfigError> {
        GithubConfig::checked(
            "acme".into(),
            "fleet".into(),
            branch.map(str::to_owned),
            "s".into(),
            url.into(),
        )
    }

    #[test]
    fn bad_values_name_their_variable() {
        assert!(cfg(Some("main"), "https://github.example/api/v3").is_ok());
        let e = cfg(None, "ftp://github.example").unwrap_err().to_string();
        assert!(e.starts_with("GITHUB_API_URL="), "{e}");
        let e = cfg(Some("../main"), DEFAULT_GITHUB_API_URL).unwrap_err().to_string();
        assert!(e.starts_with("CELLBRIDGE_BASE_BRANCH="), "{e}");
    }

    #[test]
    fn github_com_gets_2026_03_10_and_enterprise_server_2022_11_28() {
        assert_eq!(api_version(DEFAULT_GITHUB_API_URL), "2026-03-10");
        assert_eq!(api_version("https://api.acme.ghe.com"), "2026-03-10");
        assert_eq!(api_version("http://127.0.0.1:8080"), "2026-03-10");
        assert_eq!(api_version("https://github.example/api/v3"), "2022-11-28");
        assert_eq!(api_version("http://127.0.0.1:8080/api/v3/"), "2022-11-28");
    }

    #[test]
    fn graphql_is_below_the_api_on_github_com_and_beside_v3_on_enterprise_server() {
        assert_eq!(graphql_base(DEFAULT_GITHUB_API_URL), None);
        assert_eq!(graphql_base("https://api.acme.ghe.com"), None);
        assert_eq!(
            graphql_base("https://github.example/api/v3").as_deref(),
            Some("https://github.example/api")
        );
        assert_eq!(
            graphql_base("http://127.0.0.1:8080/api/v3/").as_deref(),
            Some("http://127.0.0.1:8080/api")
        );
    }
}
