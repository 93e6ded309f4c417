//! Flux's Git credentials: the Secret `flux-system`, built from one Secrets Manager secret and
//! validated against the GitRepository that will use it before anything is applied, so a broken
//! key never leaves a half-installed Flux.
//!
//! Accepted shapes of the secret's JSON, with Flux's own key names (GitRepository docs,
//! <https://fluxcd.io/flux/components/source/gitrepositories/#secret-reference>, and fluxcd/pkg
//! `git/options.go`, which picks the fields by the URL's scheme):
//! - SSH, for an `ssh://` URL: `identity` (the private key), `known_hosts`, optional
//!   `identity.pub` (derived from `identity` when absent, checked against it when present),
//!   optional `password` (the key's passphrase). `identity` is read as Flux reads it (go-git
//!   `ssh.NewPublicKeys`, which calls golang.org/x/crypto `ssh.ParsePrivateKey`, then
//!   `ParsePrivateKeyWithPassphrase` for an encrypted key):
//!   - PKCS#8 `PRIVATE KEY` (RSA, ECDSA, Ed25519): what `flux create secret git` generates
//!     (fluxcd/pkg `ssh/key_pair.go`, `x509.MarshalPKCS8PrivateKey`; ECDSA P-384 by default in
//!     flux2 `cmd/flux/create_secret_git.go`), and what many `--private-key-file` users have;
//!   - OpenSSH `OPENSSH PRIVATE KEY` (RSA, ECDSA, Ed25519; `ssh-keygen`'s default), encrypted
//!     too, with aes256-ctr or aes256-cbc and bcrypt (x/crypto `passphraseProtectedOpenSSHKey`);
//!   - PKCS#1 `RSA PRIVATE KEY` and SEC1 `EC PRIVATE KEY` (`ssh-keygen -m PEM`, OpenSSL), also
//!     with the legacy PEM encryption (`Proc-Type: 4,ENCRYPTED`, x/crypto via
//!     `x509.DecryptPEMBlock`). `flux create secret git --private-key-file` copies any of these
//!     as they are (flux2 `pkg/manifestgen/sourcesecret`, `LoadKeyPair`).
//!
//!   Refused, as Flux cannot use them: encrypted PKCS#8 (`ENCRYPTED PRIVATE KEY`), DSA keys
//!   (x/crypto's client signs with none), security-key (`sk-`) keys, RSA under 1024 bits.
//! - HTTPS basic access, for an `https://` or `http://` URL: `username`, `password`, optional
//!   `ca.crt`;
//! - HTTPS bearer token, for the same URLs: `bearerToken`, optional `ca.crt` (docs, "Bearer token
//!   authentication"; `flux create secret git --bearer-token`);
//! - GitHub App, only for a GitRepository with `spec.provider: github` and an HTTP(S) URL:
//!   `githubAppID`, `githubAppPrivateKey` (RSA, PKCS#1 or PKCS#8: golang-jwt
//!   `ParseRSAPrivateKeyFromPEM`, as called by fluxcd/pkg `auth/githubapp`), exactly one of
//!   `githubAppInstallationID` and `githubAppInstallationOwner`, optional `githubAppBaseURL` and
//!   `ca.crt` (docs, "Provider" / "GitHub"; fluxcd/pkg `runtime/secrets` `GitHubAppDataFromSecret`).
//!
//! The provider rules are source-controller's (`getAuthOpts` in
//! `internal/controller/gitrepository_controller.go`): `github` needs GitHub App data, the default
//! `generic` refuses it, and `azure` and `aws` authenticate with the controller's workload
//! identity, never with the secret's credentials.
//!
//! No value ever reaches an error, a log line or the report: errors name the secret and the
//! field only.
//!
//! Where each part lives: this module decides, from the GitRepository, which credentials the
//! secret must hold and builds the Secret; `credentials.rs` reads and checks each kind's fields;
//! `keys/` reads private keys as Flux's Go libraries do (`keys/pem.rs`: PEM framing and the legacy
//! PEM encryption).

mod credentials;
mod keys;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use crate::shell::error::{Class, Classify};
use base64::Engine as _;
use serde_json::{Value, json};

use credentials::{bearer_token, github_app, https, present, ssh};

pub const SECRET_NAME: &str = "flux-system";
pub const NAMESPACE: &str = "flux-system";

#[derive(Debug, thiserror::Error)]
pub enum GitSecretError {
    #[error("Flux Git secret {secret}: {reason}")]
    Malformed { secret: String, reason: String },
    #[error("Flux Git secret {secret}, field `{field}`: {reason}")]
    BadField {
        secret: String,
        field: String,
        reason: String,
    },
    #[error("Flux Git secret {secret} holds {kind} credentials but Flux syncs from {url}: {hint}")]
    WrongScheme {
        secret: String,
        kind: &'static str,
        url: String,
        hint: &'static str,
    },
    #[error("Flux Git secret {secret} does not fit the GitRepository's `spec.provider: {provider}`: {reason}")]
    WrongProvider {
        secret: String,
        provider: String,
        reason: String,
    },
    #[error(
        "Flux Git secret {secret}: Flux syncs from {url}, which is no ssh://, https:// or http:// URL, the only ones Flux takes (not the scp-like `git@host:path` either)"
    )]
    UnsupportedUrl { secret: String, url: String },
}

impl Classify for GitSecretError {
    /// The secret's content (or the GitRepository) is wrong: only a person changing it helps.
    fn class(&self) -> Class {
        Class::Final
    }
}

/// The GitRepository that will use the secret: what Flux decides the credentials by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxGitRepository {
    /// `spec.url`.
    pub url: String,
    /// `spec.provider`: `generic` (the default, also when `None`), `aws`, `azure` or `github`.
    pub provider: Option<String>,
}

/// Which kind of credentials, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    Ssh,
    Https,
    BearerToken,
    GithubApp,
}

impl CredentialKind {
    fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Ssh => "SSH",
            CredentialKind::Https => "HTTPS",
            CredentialKind::BearerToken => "HTTPS bearer token",
            CredentialKind::GithubApp => "GitHub App",
        }
    }
}

/// Validated credentials: the Secret's data keys with their values. `Debug` shows keys only.
pub struct GitCredentials {
    pub kind: CredentialKind,
    data: BTreeMap<String, String>,
}

impl fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitCredentials")
            .field("kind", &self.kind)
            .field("keys", &self.keys())
            .finish()
    }
}

impl GitCredentials {
    pub fn keys(&self) -> Vec<&str> {
        self.data.keys().map(String::as_str).collect()
    }

    /// Every value, so a caller can prove none of them leaked into its output.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.data.values().map(String::as_str)
    }

    /// Whether the Secret `held`, as the API server answers it (`data`, base64), holds exactly
    /// these credentials: the same keys, each with the same value. A Secret that cannot be read
    /// as one holds something else. Compares without copying or reporting any value.
    pub fn held_by(&self, held: &Value) -> bool {
        let b64 = base64::engine::general_purpose::STANDARD;
        let Some(data) = held.get("data").and_then(Value::as_object) else {
            return false;
        };
        data.len() == self.data.len()
            && self.data.iter().all(|(k, want)| {
                data.get(k)
                    .and_then(Value::as_str)
                    .and_then(|v| b64.decode(v).ok())
                    .is_some_and(|got| got == want.as_bytes())
            })
    }

    /// The Secret `flux-system/flux-system` as a Kubernetes object.
    pub fn to_secret(&self) -> Value {
        let b64 = base64::engine::general_purpose::STANDARD;
        let data: serde_json::Map<String, Value> = self
            .data
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(b64.encode(v))))
            .collect();
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": SECRET_NAME,
                "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/managed-by": "cellbridge"}
            },
            "type": "Opaque",
            "data": data
        })
    }
}

type Object = serde_json::Map<String, Value>;

/// The fields of a GitHub App secret (fluxcd/pkg `auth/githubapp/client.go`).
const GITHUB_APP_FIELDS: [&str; 5] = [
    "githubAppID",
    "githubAppInstallationID",
    "githubAppInstallationOwner",
    "githubAppPrivateKey",
    "githubAppBaseURL",
];

/// `spec.provider`, as source-controller acts on it (api/v1 `gitrepository_types.go`:
/// `Enum=generic;aws;azure;github`).
enum Provider {
    Generic,
    GitHub,
    /// `azure`, `aws`: the controller's workload identity, never the secret's credentials.
    WorkloadIdentity(&'static str),
}

/// How Flux reaches the URL: it takes `ssh://`, `https://` and `http://` only (docs, "URL").
#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    Ssh,
    Http,
    Other,
}

impl Transport {
    fn of(url: &str) -> Transport {
        match url.split_once("://").map(|(s, _)| s.to_ascii_lowercase()).as_deref() {
            Some("ssh") => Transport::Ssh,
            Some("https" | "http") => Transport::Http,
            _ => Transport::Other,
        }
    }
}

/// The URL for a message: Flux also reads a password from the URL's user info, so one there
/// never reaches the message.
fn shown_url(url: &str) -> String {
    crate::pure::redact::userinfo(url)
}

/// Parses the secret's JSON text and validates it against the GitRepository that will use it.
pub fn parse(secret: &str, text: &str, repo: &FluxGitRepository) -> Result<GitCredentials, GitSecretError> {
    let obj = object(secret, text)?;
    let wrong_provider = |provider: &str, reason: String| GitSecretError::WrongProvider {
        secret: secret.into(),
        provider: provider.into(),
        reason,
    };
    let provider = match repo.provider.as_deref().map(str::trim) {
        None | Some("" | "generic") => Provider::Generic,
        Some("github") => Provider::GitHub,
        Some("azure") => Provider::WorkloadIdentity("azure"),
        Some("aws") => Provider::WorkloadIdentity("aws"),
        Some(other) => {
            return Err(wrong_provider(
                other,
                "Flux's GitRepository takes only `generic`, `aws`, `azure` or `github`".into(),
            ));
        }
    };
    let transport = Transport::of(&repo.url);
    let app = GITHUB_APP_FIELDS.iter().any(|f| present(&obj, f));
    let creds = match provider {
        // source-controller asks the cloud for a token with the controller's (or the
        // GitRepository's service account's) workload identity, and that token replaces any
        // username, password or bearer token of the secret: a bootstrap that writes credentials
        // into `flux-system` would write ones Flux never uses, so it stops here instead.
        Provider::WorkloadIdentity(name) => {
            return Err(wrong_provider(
                name,
                format!(
                    "Flux authenticates this provider with the source-controller's workload identity and would not use the secret's credentials ({}), while cellbridge bootstraps Flux with the secret: remove `spec.provider` from the GitRepository",
                    described(&obj)
                ),
            ));
        }
        Provider::GitHub => {
            if !app {
                return Err(wrong_provider(
                    "github",
                    format!(
                        "Flux authenticates this provider only with a GitHub App, and the secret holds {}; it needs `githubAppID`, `githubAppPrivateKey` and one of `githubAppInstallationID` or `githubAppInstallationOwner` (optional `githubAppBaseURL`)",
                        described(&obj)
                    ),
                ));
            }
            url_taken(secret, repo, transport)?;
            github_app(&obj, secret)?
        }
        Provider::Generic => {
            if app {
                return Err(wrong_provider(
                    "generic",
                    "the secret holds GitHub App credentials, which Flux uses only for a GitRepository with `spec.provider: github`: set it there (or put SSH or HTTPS credentials in the secret)".into(),
                ));
            }
            url_taken(secret, repo, transport)?;
            // Flux picks the fields by the URL (fluxcd/pkg `git/options.go`, `NewAuthOptions`):
            // `identity` over SSH; `bearerToken`, else `username` and `password`, over HTTP(S).
            let (identity, bearer) = (present(&obj, "identity"), present(&obj, "bearerToken"));
            let basic = present(&obj, "username") || (present(&obj, "password") && !identity);
            match transport {
                Transport::Ssh if identity => ssh(&obj, secret)?,
                Transport::Http if bearer => bearer_token(&obj, secret)?,
                Transport::Http if basic => https(&obj, secret)?,
                // Valid or not, credentials of the other kind: validated, then refused below
                // for the URL's scheme.
                _ if identity => ssh(&obj, secret)?,
                _ if bearer => bearer_token(&obj, secret)?,
                _ if basic => https(&obj, secret)?,
                _ => return Err(no_credentials(secret, &obj)),
            }
        }
    };
    let fits = match creds.kind {
        CredentialKind::Ssh => transport == Transport::Ssh,
        _ => transport == Transport::Http,
    };
    if fits {
        return Ok(creds);
    }
    Err(GitSecretError::WrongScheme {
        secret: secret.into(),
        kind: creds.kind.as_str(),
        url: shown_url(&repo.url),
        hint: match creds.kind {
            CredentialKind::Ssh => "set CELLBRIDGE_FLUX_GIT_URL to the ssh:// URL of the fleet repo",
            CredentialKind::GithubApp => {
                "a GitHub App's token works over HTTPS only: set CELLBRIDGE_FLUX_GIT_URL to the https:// URL of the fleet repo"
            }
            _ => "set CELLBRIDGE_FLUX_GIT_URL to the https:// URL of the fleet repo",
        },
    })
}

fn object(secret: &str, text: &str) -> Result<Object, GitSecretError> {
    let value: Value = serde_json::from_str(text).map_err(|e| GitSecretError::Malformed {
        secret: secret.into(),
        // serde_json's message carries only a position, never the input.
        reason: format!(
            "not a JSON object ({} at line {} column {})",
            category(&e),
            e.line(),
            e.column()
        ),
    })?;
    match value {
        Value::Object(obj) => Ok(obj),
        _ => Err(GitSecretError::Malformed {
            secret: secret.into(),
            reason: "not a JSON object".into(),
        }),
    }
}

fn url_taken(secret: &str, repo: &FluxGitRepository, transport: Transport) -> Result<(), GitSecretError> {
    if transport == Transport::Other {
        return Err(GitSecretError::UnsupportedUrl {
            secret: secret.into(),
            url: shown_url(&repo.url),
        });
    }
    Ok(())
}

/// The secret's keys (never its values), for a message.
fn described(obj: &Object) -> String {
    let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    if keys.is_empty() {
        "no keys".to_owned()
    } else {
        format!("the keys {}", keys.join(", "))
    }
}

fn no_credentials(secret: &str, obj: &Object) -> GitSecretError {
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    GitSecretError::Malformed {
        secret: secret.into(),
        reason: format!(
            "no credentials found (keys present: {}); expected `identity` + `known_hosts` (ssh:// URL), `username` + `password` or `bearerToken` (https:// URL), or `githubAppID` + `githubAppInstallationID` + `githubAppPrivateKey` (GitRepository `spec.provider: github`)",
            if keys.is_empty() {
                "none".to_owned()
            } else {
                keys.join(", ")
            }
        ),
    }
}

fn category(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Eof => "truncated",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected data",
        serde_json::error::Category::Io => "read error",
    }
}
