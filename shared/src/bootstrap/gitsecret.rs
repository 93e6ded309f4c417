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

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Class, Classify};
use base64::Engine as _;
use serde_json::{Value, json};

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

fn field<'a>(obj: &'a Object, secret: &str, name: &str) -> Result<Option<&'a str>, GitSecretError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Err(GitSecretError::BadField {
            secret: secret.into(),
            field: name.into(),
            reason: "is empty".into(),
        }),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(GitSecretError::BadField {
            secret: secret.into(),
            field: name.into(),
            reason: "is not a string".into(),
        }),
    }
}

fn present(obj: &Object, name: &str) -> bool {
    obj.get(name).is_some_and(|v| !v.is_null())
}

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

/// The URL for a message: Flux also reads a password from the URL's user info (fluxcd/pkg
/// `git/options.go`), so one there never reaches the message.
fn shown_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some((userinfo, host)) = rest[..end].rsplit_once('@')
            && let Some((user, _)) = userinfo.split_once(':')
        {
            return format!("{scheme}://{user}:[redacted]@{host}{}", &rest[end..]);
        }
    }
    url.to_owned()
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

fn ssh(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
    let bad = |field: &str, reason: String| GitSecretError::BadField {
        secret: secret.into(),
        field: field.into(),
        reason,
    };
    let identity = field(obj, secret, "identity")?.unwrap_or_default();
    let passphrase = field(obj, secret, "password")?;
    let key = keys::identity(identity, passphrase).map_err(|e| bad(e.field, e.reason))?;
    let public = match field(obj, secret, "identity.pub")? {
        Some(p) => {
            let pk = ssh_key::PublicKey::from_openssh(p.trim())
                .map_err(|e| bad("identity.pub", format!("not an OpenSSH public key ({e})")))?;
            if pk.key_data() != &key.public {
                return Err(bad("identity.pub", "does not belong to `identity`".into()));
            }
            p.trim().to_owned()
        }
        None => ssh_key::PublicKey::new(key.public, key.comment)
            .to_openssh()
            .map_err(|e| bad("identity", format!("cannot encode its public key ({e})")))?,
    };
    let known_hosts = field(obj, secret, "known_hosts")?.ok_or_else(|| {
        bad(
            "known_hosts",
            "is missing: Flux refuses SSH hosts it cannot verify".into(),
        )
    })?;
    validate_known_hosts(known_hosts).map_err(|(line, reason)| bad("known_hosts", format!("line {line}: {reason}")))?;
    let mut data = BTreeMap::new();
    data.insert("identity".to_owned(), format!("{}\n", identity.trim_end()));
    data.insert("identity.pub".to_owned(), format!("{public}\n"));
    data.insert("known_hosts".to_owned(), format!("{}\n", known_hosts.trim_end()));
    if let Some(p) = passphrase {
        data.insert("password".to_owned(), p.to_owned());
    }
    Ok(GitCredentials {
        kind: CredentialKind::Ssh,
        data,
    })
}

fn validate_known_hosts(text: &str) -> Result<(), (usize, String)> {
    let mut entries = 0;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first().is_some_and(|f| f.starts_with('@')) {
            fields.remove(0);
        }
        if fields.len() < 3 {
            return Err((i + 1, "expected `hosts key-type base64-key`".into()));
        }
        ssh_key::PublicKey::from_openssh(&format!("{} {}", fields[1], fields[2]))
            .map_err(|e| (i + 1, format!("host key does not parse ({e})")))?;
        entries += 1;
    }
    if entries == 0 {
        return Err((1, "no host keys".into()));
    }
    Ok(())
}

/// `ca.crt`, which Flux takes with HTTPS credentials of every kind (docs, "HTTPS Certificate
/// Authority").
fn copy_ca(obj: &Object, secret: &str, data: &mut BTreeMap<String, String>) -> Result<(), GitSecretError> {
    if let Some(ca) = field(obj, secret, "ca.crt")? {
        data.insert("ca.crt".to_owned(), ca.to_owned());
    }
    Ok(())
}

fn missing(secret: &str, field: &str) -> GitSecretError {
    GitSecretError::BadField {
        secret: secret.into(),
        field: field.into(),
        reason: "is missing".into(),
    }
}

fn https(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
    let username = field(obj, secret, "username")?.ok_or_else(|| missing(secret, "username"))?;
    let password = field(obj, secret, "password")?.ok_or_else(|| missing(secret, "password"))?;
    let mut data = BTreeMap::new();
    data.insert("username".to_owned(), username.to_owned());
    data.insert("password".to_owned(), password.to_owned());
    copy_ca(obj, secret, &mut data)?;
    Ok(GitCredentials {
        kind: CredentialKind::Https,
        data,
    })
}

fn bearer_token(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
    let token = field(obj, secret, "bearerToken")?.ok_or_else(|| missing(secret, "bearerToken"))?;
    if present(obj, "username") || present(obj, "password") {
        // Flux would send the token and ignore the pair (fluxcd/pkg `git/options.go`);
        // `flux create secret git` refuses both ("user credentials and bearer token cannot be
        // used together").
        return Err(GitSecretError::BadField {
            secret: secret.into(),
            field: "bearerToken".into(),
            reason: "is set together with `username`/`password`: Flux would use the token only; keep one of the two"
                .into(),
        });
    }
    let mut data = BTreeMap::new();
    data.insert("bearerToken".to_owned(), token.to_owned());
    copy_ca(obj, secret, &mut data)?;
    Ok(GitCredentials {
        kind: CredentialKind::BearerToken,
        data,
    })
}

fn github_app(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
    let bad = |field: &str, reason: &str| GitSecretError::BadField {
        secret: secret.into(),
        field: field.into(),
        reason: reason.into(),
    };
    // Numbers are accepted too: that is how people paste them into the console.
    let number = |f: &str| -> Result<Option<String>, GitSecretError> {
        let v = match obj.get(f) {
            Some(Value::Number(n)) => n.to_string(),
            _ => match field(obj, secret, f)? {
                Some(v) => v.to_owned(),
                None => return Ok(None),
            },
        };
        if !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(f, "is not a number"));
        }
        Ok(Some(v))
    };
    let mut data = BTreeMap::new();
    let app_id = number("githubAppID")?.ok_or_else(|| missing(secret, "githubAppID"))?;
    data.insert("githubAppID".to_owned(), app_id);
    // Exactly one of the two (fluxcd/pkg `runtime/secrets`, `GitHubAppDataFromSecret`).
    let installation_id = number("githubAppInstallationID")?;
    let owner = field(obj, secret, "githubAppInstallationOwner")?;
    match (installation_id, owner) {
        (Some(id), None) => {
            data.insert("githubAppInstallationID".to_owned(), id);
        }
        (None, Some(owner)) => {
            if owner.trim() != owner || owner.contains(char::is_whitespace) {
                return Err(bad(
                    "githubAppInstallationOwner",
                    "is not a GitHub user or organization name",
                ));
            }
            data.insert("githubAppInstallationOwner".to_owned(), owner.to_owned());
        }
        (Some(_), Some(_)) => {
            return Err(bad(
                "githubAppInstallationOwner",
                "is set together with `githubAppInstallationID`: Flux needs exactly one of the two",
            ));
        }
        (None, None) => {
            return Err(bad(
                "githubAppInstallationID",
                "is missing (or set `githubAppInstallationOwner`: Flux needs exactly one of the two)",
            ));
        }
    }
    let pem = field(obj, secret, "githubAppPrivateKey")?.ok_or_else(|| missing(secret, "githubAppPrivateKey"))?;
    keys::github_app_key(pem).map_err(|reason| GitSecretError::BadField {
        secret: secret.into(),
        field: "githubAppPrivateKey".into(),
        reason,
    })?;
    data.insert("githubAppPrivateKey".to_owned(), format!("{}\n", pem.trim()));
    if let Some(u) = field(obj, secret, "githubAppBaseURL")? {
        // `http(s)://HOSTNAME/api/v3` for GitHub Enterprise Server (docs, "GitHub").
        if !(u.starts_with("https://") || u.starts_with("http://")) {
            return Err(bad("githubAppBaseURL", "is not an https:// or http:// URL"));
        }
        data.insert("githubAppBaseURL".to_owned(), u.to_owned());
    }
    copy_ca(obj, secret, &mut data)?;
    Ok(GitCredentials {
        kind: CredentialKind::GithubApp,
        data,
    })
}

/// Private keys as Flux's Go libraries read them. Every message names the field to blame and
/// says what is wrong with it; none carries a byte of the key.
mod keys {
    use base64::Engine as _;
    use pkcs8::ObjectIdentifier;
    use pkcs8::der::Decode as _;
    use rsa::pkcs1::DecodeRsaPrivateKey as _;
    use rsa::pkcs8::DecodePrivateKey as _;
    use rsa::traits::PublicKeyParts as _;
    use ssh_key::private::KeypairData;
    use ssh_key::public::{EcdsaPublicKey, Ed25519PublicKey, KeyData, RsaPublicKey};
    use ssh_key::{Cipher, EcdsaCurve, Kdf, Mpint};
    use zeroize::Zeroizing;

    pub(super) struct KeyError {
        pub field: &'static str,
        pub reason: String,
    }

    fn identity_err(reason: impl Into<String>) -> KeyError {
        KeyError {
            field: "identity",
            reason: reason.into(),
        }
    }

    fn password_err(reason: &str) -> KeyError {
        KeyError {
            field: "password",
            reason: reason.into(),
        }
    }

    const WRONG_PASSPHRASE: &str = "does not decrypt `identity` (wrong passphrase)";
    const NO_PASSPHRASE: &str = "is missing: `identity` is encrypted, and Flux reads its passphrase from `password`";
    const USABLE: &str = "Flux's SSH client signs only with Ed25519, ECDSA (P-256, P-384, P-521) or RSA keys";

    /// The most bcrypt rounds x/crypto decrypts (`passphraseProtectedOpenSSHKey`, `maxRounds`;
    /// `ssh-keygen` uses 16 unless told otherwise).
    const MAX_BCRYPT_ROUNDS: u32 = 1 << 11;

    /// Go 1.24's crypto/rsa refuses keys under 1024 bits (go.dev/doc/go1.24, "crypto/rsa";
    /// golang/go#68762), so Flux cannot sign with them.
    const MIN_RSA_BITS: usize = 1024;

    const OID_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
    const OID_EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
    const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
    const OID_DSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10040.4.1");
    const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
    const OID_P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
    const OID_P521: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");

    /// One PEM block, read as Go's `encoding/pem` `Decode` reads it: text before the BEGIN line
    /// is skipped, `Key: value` headers follow it, the base64 body may be wrapped at any width.
    pub(super) struct Pem {
        pub label: String,
        headers: Vec<(String, String)>,
        pub der: Zeroizing<Vec<u8>>,
    }

    impl Pem {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
        }

        /// The legacy PEM encryption (RFC 1423), as x/crypto `encryptedBlock` tells it.
        fn encrypted(&self) -> bool {
            self.header("Proc-Type").is_some_and(|v| v.contains("ENCRYPTED"))
        }
    }

    /// A label fit for a message: only the usual upper-case names, never arbitrary text.
    fn shown_label(label: &str) -> String {
        if !label.is_empty() && label.len() <= 40 && label.bytes().all(|b| b.is_ascii_uppercase() || b == b' ') {
            format!("`{label}`")
        } else {
            "with an unusual label".to_owned()
        }
    }

    pub(super) fn decode_pem(text: &str) -> Result<Pem, String> {
        const BEGIN: &str = "-----BEGIN ";
        let start = text
            .find(BEGIN)
            .ok_or("holds no PEM block (no `-----BEGIN ...-----` line)")?;
        let mut lines = text[start + BEGIN.len()..]
            .split('\n')
            .map(|l| l.trim_end_matches([' ', '\t', '\r']));
        let label = lines
            .next()
            .and_then(|l| l.strip_suffix("-----"))
            .filter(|l| !l.contains("-----"))
            .ok_or("its BEGIN line goes on after the label (were the line breaks lost when it was pasted?)")?
            .to_owned();
        let mut headers = Vec::new();
        let mut body = Zeroizing::new(String::new());
        let mut in_headers = true;
        let mut end = None;
        for line in lines {
            if line.starts_with("-----END ") {
                end = Some(line);
                break;
            }
            if in_headers {
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_owned(), v.trim().to_owned()));
                    continue;
                }
                in_headers = false;
            }
            body.extend(line.chars().filter(|c| !c.is_ascii_whitespace()));
        }
        if end != Some(format!("-----END {label}-----").as_str()) {
            return Err(format!(
                "has no `-----END ...-----` line closing its PEM block {}",
                shown_label(&label)
            ));
        }
        let der = base64::engine::general_purpose::STANDARD
            .decode(body.as_bytes())
            .map_err(|_| "its PEM body is not valid base64".to_owned())?;
        Ok(Pem {
            label,
            headers,
            der: Zeroizing::new(der),
        })
    }

    /// The SSH private key of `identity`: its public key and comment.
    pub(super) struct SshKey {
        pub public: KeyData,
        pub comment: String,
    }

    /// Reads `identity` in every encoding x/crypto `ssh.ParseRawPrivateKey` and
    /// `ParseRawPrivateKeyWithPassphrase` read, and derives its public key from the private one.
    pub(super) fn identity(text: &str, passphrase: Option<&str>) -> Result<SshKey, KeyError> {
        let pem = decode_pem(text).map_err(identity_err)?;
        let public = match pem.label.as_str() {
            "OPENSSH PRIVATE KEY" => return openssh(&pem.der, passphrase),
            "RSA PRIVATE KEY" | "EC PRIVATE KEY" => {
                let decrypted;
                let der: &[u8] = if pem.encrypted() {
                    decrypted = legacy_decrypt(&pem, passphrase)?;
                    &decrypted
                } else {
                    &pem.der
                };
                if pem.label == "RSA PRIVATE KEY" {
                    let key = rsa::RsaPrivateKey::from_pkcs1_der(der)
                        .map_err(|_| identity_err("is not a valid PKCS#1 RSA private key"))?;
                    rsa_public(&key)?
                } else {
                    let ec = sec1::EcPrivateKey::from_der(der)
                        .map_err(|_| identity_err("is not a valid SEC1 EC private key"))?;
                    let curve = ec
                        .parameters
                        .and_then(|p| p.named_curve())
                        .ok_or_else(|| identity_err("is an EC private key that names no curve"))?;
                    ec_public(curve_of(curve)?, ec.private_key)?
                }
            }
            "PRIVATE KEY" => pkcs8_public(&pem.der)?,
            "ENCRYPTED PRIVATE KEY" => {
                return Err(identity_err(
                    "is an encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`), which Flux's SSH library cannot read: convert it with `ssh-keygen -p -f FILE` (OpenSSH format) and keep the passphrase in `password`",
                ));
            }
            "DSA PRIVATE KEY" => return Err(identity_err(format!("is a DSA key; {USABLE}"))),
            other => {
                return Err(identity_err(format!(
                    "is a PEM block {}, not a private key Flux reads (`OPENSSH PRIVATE KEY`, `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`)",
                    shown_label(other)
                )));
            }
        };
        Ok(SshKey {
            public,
            comment: String::new(),
        })
    }

    fn openssh(der: &[u8], passphrase: Option<&str>) -> Result<SshKey, KeyError> {
        // ssh-key's errors describe the encoding problem, never the key bytes.
        let key = ssh_key::PrivateKey::from_bytes(der)
            .map_err(|e| identity_err(format!("is not a valid OpenSSH private key ({e})")))?;
        let key = if key.is_encrypted() {
            let passphrase = passphrase.ok_or_else(|| password_err(NO_PASSPHRASE))?;
            // x/crypto `passphraseProtectedOpenSSHKey`: bcrypt, aes256-ctr or aes256-cbc.
            if !matches!(key.cipher(), Cipher::Aes256Ctr | Cipher::Aes256Cbc) {
                return Err(identity_err(format!(
                    "is encrypted with {}, and Flux's SSH library decrypts only aes256-ctr and aes256-cbc: re-encrypt it with `ssh-keygen -p -Z aes256-ctr`",
                    key.cipher()
                )));
            }
            match key.kdf() {
                Kdf::Bcrypt { rounds, .. } if *rounds > MAX_BCRYPT_ROUNDS => {
                    return Err(identity_err(format!(
                        "is encrypted with {rounds} bcrypt rounds, more than the {MAX_BCRYPT_ROUNDS} Flux's SSH library accepts: re-encrypt it with `ssh-keygen -p` (16 rounds by default)"
                    )));
                }
                Kdf::Bcrypt { .. } => {}
                _ => return Err(identity_err("is encrypted without bcrypt, the only KDF Flux reads")),
            }
            key.decrypt(passphrase).map_err(|_| password_err(WRONG_PASSPHRASE))?
        } else {
            key
        };
        let public = match key.key_data() {
            KeypairData::Ed25519(kp) => {
                let derived = ed25519_dalek::SigningKey::from_bytes(&kp.private.to_bytes()).verifying_key();
                KeyData::Ed25519(Ed25519PublicKey(derived.to_bytes()))
            }
            KeypairData::Rsa(kp) => {
                let int = |m: &Mpint| rsa::BigUint::from_bytes_be(m.as_positive_bytes().unwrap_or_default());
                let rsa_key = rsa::RsaPrivateKey::from_components(
                    int(&kp.public.n),
                    int(&kp.public.e),
                    int(&kp.private.d),
                    vec![int(&kp.private.p), int(&kp.private.q)],
                )
                .map_err(|_| identity_err("is not a valid RSA private key (its numbers do not agree)"))?;
                rsa_public(&rsa_key)?
            }
            KeypairData::Ecdsa(kp) => ec_public(kp.curve(), kp.private_key_bytes())?,
            other => {
                let name = other
                    .algorithm()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|_| "unknown".into());
                return Err(identity_err(format!("is a {name} key; {USABLE}")));
            }
        };
        if &public != key.public_key().key_data() {
            return Err(identity_err(
                "is not a valid OpenSSH private key (its public key does not match its private key)",
            ));
        }
        Ok(SshKey {
            public,
            comment: key.comment().to_owned(),
        })
    }

    fn pkcs8_public(der: &[u8]) -> Result<KeyData, KeyError> {
        let info =
            pkcs8::PrivateKeyInfo::from_der(der).map_err(|_| identity_err("is not a valid PKCS#8 private key"))?;
        match info.algorithm.oid {
            OID_RSA => {
                let key = rsa::RsaPrivateKey::try_from(info)
                    .map_err(|_| identity_err("is not a valid PKCS#8 RSA private key"))?;
                rsa_public(&key)
            }
            OID_EC => {
                let curve = info
                    .algorithm
                    .parameters_oid()
                    .map_err(|_| identity_err("is a PKCS#8 EC private key that names no curve"))?;
                let ec = sec1::EcPrivateKey::from_der(info.private_key)
                    .map_err(|_| identity_err("is not a valid PKCS#8 EC private key"))?;
                if ec.parameters.and_then(|p| p.named_curve()).is_some_and(|c| c != curve) {
                    return Err(identity_err(
                        "is a PKCS#8 EC private key that names two different curves",
                    ));
                }
                ec_public(curve_of(curve)?, ec.private_key)
            }
            OID_ED25519 => {
                // RFC 8410: the private key is an OCTET STRING of the 32-byte seed.
                let seed = pkcs8::der::asn1::OctetStringRef::from_der(info.private_key)
                    .ok()
                    .and_then(|s| <[u8; 32]>::try_from(s.as_bytes()).ok())
                    .map(Zeroizing::new)
                    .ok_or_else(|| identity_err("is not a valid PKCS#8 Ed25519 private key"))?;
                let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
                Ok(KeyData::Ed25519(Ed25519PublicKey(public.to_bytes())))
            }
            OID_DSA => Err(identity_err(format!("is a DSA key; {USABLE}"))),
            other => Err(identity_err(format!("is a PKCS#8 key of algorithm {other}; {USABLE}"))),
        }
    }

    fn rsa_public(key: &rsa::RsaPrivateKey) -> Result<KeyData, KeyError> {
        let bits = key.n().bits();
        if bits < MIN_RSA_BITS {
            return Err(identity_err(format!(
                "is a {bits}-bit RSA key, and Flux (Go 1.24 and later) refuses RSA keys under {MIN_RSA_BITS} bits"
            )));
        }
        let mpint = |v: &rsa::BigUint| {
            Mpint::from_positive_bytes(&v.to_bytes_be()).map_err(|_| identity_err("is not a valid RSA private key"))
        };
        Ok(KeyData::Rsa(RsaPublicKey {
            e: mpint(key.e())?,
            n: mpint(key.n())?,
        }))
    }

    /// The curves x/crypto's SSH client signs with (`NewSignerFromKey`: P-256, P-384, P-521).
    fn curve_of(oid: ObjectIdentifier) -> Result<EcdsaCurve, KeyError> {
        match oid {
            OID_P256 => Ok(EcdsaCurve::NistP256),
            OID_P384 => Ok(EcdsaCurve::NistP384),
            OID_P521 => Ok(EcdsaCurve::NistP521),
            other => Err(identity_err(format!("is an EC key on curve {other}; {USABLE}"))),
        }
    }

    /// The public point of an ECDSA private scalar, as OpenSSH encodes it (uncompressed SEC1).
    fn ec_public(curve: EcdsaCurve, scalar: &[u8]) -> Result<KeyData, KeyError> {
        use p256::elliptic_curve::sec1::ToEncodedPoint as _;
        let point =
            match curve {
                EcdsaCurve::NistP256 => p256::SecretKey::from_slice(scalar)
                    .map(|k| k.public_key().to_encoded_point(false).as_bytes().to_vec()),
                EcdsaCurve::NistP384 => p384::SecretKey::from_slice(scalar)
                    .map(|k| k.public_key().to_encoded_point(false).as_bytes().to_vec()),
                EcdsaCurve::NistP521 => p521::SecretKey::from_slice(scalar)
                    .map(|k| k.public_key().to_encoded_point(false).as_bytes().to_vec()),
            }
            .map_err(|_| identity_err(format!("is not a valid {curve} private key")))?;
        EcdsaPublicKey::from_sec1_bytes(&point)
            .map(KeyData::Ecdsa)
            .map_err(|_| identity_err(format!("is not a valid {curve} private key")))
    }

    /// The legacy PEM encryption (`Proc-Type: 4,ENCRYPTED`, `DEK-Info: CIPHER,IV`) as Go's
    /// `x509.DecryptPEMBlock` undoes it, with the ciphers it knows (its `rfc1423Algos`) and
    /// OpenSSL's `EVP_BytesToKey` (MD5, one round, the IV's first 8 bytes as salt).
    fn legacy_decrypt(pem: &Pem, passphrase: Option<&str>) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        let passphrase = passphrase.ok_or_else(|| password_err(NO_PASSPHRASE))?;
        let (cipher, iv) = pem
            .header("DEK-Info")
            .and_then(|v| v.split_once(','))
            .ok_or_else(|| identity_err("is encrypted but has no valid `DEK-Info` header"))?;
        let (cipher, iv) = (cipher.trim(), iv.trim());
        let (key_len, block_len) = match cipher {
            "DES-CBC" => (8, 8),
            "DES-EDE3-CBC" => (24, 8),
            "AES-128-CBC" => (16, 16),
            "AES-192-CBC" => (24, 16),
            "AES-256-CBC" => (32, 16),
            other => {
                let shown = if other.len() <= 24 && other.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    other
                } else {
                    "an unknown cipher"
                };
                return Err(identity_err(format!(
                    "is encrypted with {shown}, which Flux cannot decrypt: convert it with `ssh-keygen -p -f FILE` (OpenSSH format)"
                )));
            }
        };
        let iv = hex(iv)
            .filter(|iv| iv.len() == block_len)
            .ok_or_else(|| identity_err("is encrypted but its `DEK-Info` IV is not valid"))?;
        let key = evp_bytes_to_key(passphrase.as_bytes(), &iv[..8], key_len);
        let mut buf = pem.der.clone();
        if buf.is_empty() || !buf.len().is_multiple_of(block_len) {
            return Err(identity_err(
                "is encrypted but its body is not a whole number of cipher blocks",
            ));
        }
        let plain_len = match cipher {
            "DES-CBC" => cbc_decrypt::<des::Des>(&key, &iv, &mut buf),
            "DES-EDE3-CBC" => cbc_decrypt::<des::TdesEde3>(&key, &iv, &mut buf),
            "AES-128-CBC" => cbc_decrypt::<aes::Aes128>(&key, &iv, &mut buf),
            "AES-192-CBC" => cbc_decrypt::<aes::Aes192>(&key, &iv, &mut buf),
            _ => cbc_decrypt::<aes::Aes256>(&key, &iv, &mut buf),
        }
        .ok_or_else(|| password_err(WRONG_PASSPHRASE))?;
        buf.truncate(plain_len);
        // A wrong passphrase can still end in valid padding; what it cannot make is DER (Go
        // turns the ASN.1 structural error into `IncorrectPasswordError` the same way).
        if pkcs8::der::Document::from_der(&buf).is_err() {
            return Err(password_err(WRONG_PASSPHRASE));
        }
        Ok(buf)
    }

    fn cbc_decrypt<C>(key: &[u8], iv: &[u8], buf: &mut [u8]) -> Option<usize>
    where
        C: cbc::cipher::BlockDecryptMut + cbc::cipher::BlockCipher + cbc::cipher::KeyInit,
    {
        use cbc::cipher::{BlockDecryptMut as _, KeyIvInit as _, block_padding::Pkcs7};
        let decryptor = cbc::Decryptor::<C>::new_from_slices(key, iv).ok()?;
        decryptor.decrypt_padded_mut::<Pkcs7>(buf).ok().map(|plain| plain.len())
    }

    fn evp_bytes_to_key(passphrase: &[u8], salt: &[u8], len: usize) -> Zeroizing<Vec<u8>> {
        use md5::Digest as _;
        let mut out = Zeroizing::new(Vec::with_capacity(len + 16));
        let mut digest: Vec<u8> = Vec::new();
        while out.len() < len {
            let mut h = md5::Md5::new();
            h.update(&digest);
            h.update(passphrase);
            h.update(salt);
            digest = h.finalize().to_vec();
            out.extend_from_slice(&digest);
        }
        out.truncate(len);
        out
    }

    fn hex(s: &str) -> Option<Vec<u8>> {
        if !s.len().is_multiple_of(2) {
            return None;
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
            .collect()
    }

    /// A GitHub App key as golang-jwt `ParseRSAPrivateKeyFromPEM` reads it (fluxcd/pkg
    /// `auth/githubapp`): the first PEM block, PKCS#1 or else PKCS#8, RSA, unencrypted.
    pub(super) fn github_app_key(text: &str) -> Result<(), String> {
        let pem = decode_pem(text)?;
        if pem.encrypted() {
            return Err("is encrypted, and Flux reads a GitHub App key unencrypted".into());
        }
        rsa::RsaPrivateKey::from_pkcs1_der(&pem.der)
            .or_else(|_| rsa::RsaPrivateKey::from_pkcs8_der(&pem.der))
            .map(drop)
            .map_err(|_| "is not an RSA private key in PKCS#1 or PKCS#8 PEM (GitHub App keys are RSA)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    const HOSTS: &str = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    fn generic(url: &str) -> FluxGitRepository {
        FluxGitRepository {
            url: url.into(),
            provider: None,
        }
    }

    fn with_provider(url: &str, provider: &str) -> FluxGitRepository {
        FluxGitRepository {
            url: url.into(),
            provider: Some(provider.into()),
        }
    }

    const SSH_URL: &str = "ssh://git@github.com/o/fleet";
    const HTTPS_URL: &str = "https://github.com/o/fleet";

    fn ssh_secret(identity: &str, password: Option<&str>) -> String {
        let mut s = json!({"identity": identity, "known_hosts": HOSTS});
        if let Some(p) = password {
            s["password"] = p.into();
        }
        s.to_string()
    }

    /// `identity.pub` as the Secret will carry it: key type and key, without the comment.
    fn public_of(c: &GitCredentials) -> String {
        c.data["identity.pub"]
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn accepted(identity: &str, password: Option<&str>) -> GitCredentials {
        parse("flux-git", &ssh_secret(identity, password), &generic(SSH_URL)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn refused(text: &str, repo: &FluxGitRepository) -> String {
        let e = parse("flux-git", text, repo).unwrap_err();
        assert_eq!(e.class(), Class::Final, "{e}");
        let msg = e.to_string();
        assert!(msg.contains("flux-git"), "{msg}");
        msg
    }

    #[test]
    fn the_keys_flux_create_secret_git_generates_are_accepted() {
        // fluxcd/pkg ssh/key_pair.go: PKCS#8 for all three algorithms; ECDSA P-384 by default.
        for (name, identity, public) in [
            ("ecdsa p384 (default)", EC384_PKCS8, EC384_PUB),
            ("rsa", RSA_PKCS8, RSA_PUB),
            ("ed25519", ED25519_PKCS8, ED25519_PKCS8_PUB),
        ] {
            let c = accepted(identity, None);
            assert_eq!(c.kind, CredentialKind::Ssh, "{name}");
            assert_eq!(public_of(&c), public, "{name}");
            assert_eq!(c.data["identity"], identity, "{name}: stored as given");
        }
    }

    #[test]
    fn private_key_files_in_every_encoding_flux_reads_are_accepted() {
        for (name, identity, public) in [
            ("rsa pkcs1", RSA_PKCS1, RSA_PUB),
            ("rsa openssh", RSA_OPENSSH, RSA_PUB),
            ("p256 sec1", EC256_SEC1, EC256_PUB),
            ("p384 sec1", EC384_SEC1, EC384_PUB),
            ("p384 openssh", EC384_OPENSSH, EC384_PUB),
            ("p521 sec1", EC521_SEC1, EC521_PUB),
            ("ed25519 openssh", ED25519_OPENSSH, ED25519_PUB),
        ] {
            assert_eq!(public_of(&accepted(identity, None)), public, "{name}");
        }
        // The OpenSSH key's comment stays on the derived public key.
        assert_eq!(
            accepted(ED25519_OPENSSH, None).data["identity.pub"],
            format!("{ED25519_PUB} flux@test\n")
        );
    }

    #[test]
    fn pem_is_read_as_go_reads_it() {
        // Any line width and CRLF line ends, as Go's encoding/pem takes them.
        let body: String = RSA_OPENSSH.lines().filter(|l| !l.starts_with("-----")).collect();
        let rewrapped = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
            body.as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_eq!(public_of(&accepted(&rewrapped, None)), RSA_PUB);
        assert_eq!(public_of(&accepted(&EC256_SEC1.replace('\n', "\r\n"), None)), EC256_PUB);
        // A key whose line breaks were lost when pasted does not parse in Go either.
        let one_line = ED25519_OPENSSH.replace('\n', " ");
        let msg = refused(&ssh_secret(&one_line, None), &generic(SSH_URL));
        assert!(msg.contains("`identity`") && msg.contains("line breaks"), "{msg}");
    }

    #[test]
    fn identity_pub_is_checked_against_the_key() {
        let text = json!({"identity": EC384_PKCS8, "identity.pub": format!("{EC384_PUB} me"), "known_hosts": HOSTS});
        let c = parse("s", &text.to_string(), &generic(SSH_URL)).unwrap();
        assert_eq!(c.data["identity.pub"], format!("{EC384_PUB} me\n"));
        let text = json!({"identity": EC384_PKCS8, "identity.pub": RSA_PUB, "known_hosts": HOSTS});
        let msg = refused(&text.to_string(), &generic(SSH_URL));
        assert!(msg.contains("`identity.pub`: does not belong to `identity`"), "{msg}");
    }

    #[test]
    fn encrypted_keys_need_their_passphrase_in_password() {
        for (name, identity, public) in [
            ("openssh aes256-ctr", ED25519_OPENSSH_ENCRYPTED, ED25519_PUB),
            ("pkcs1 aes-128-cbc", RSA_PKCS1_AES128, RSA_PUB),
            ("sec1 des-ede3-cbc", EC256_SEC1_DES3, EC256_PUB),
            ("sec1 aes-256-cbc", EC521_SEC1_AES256, EC521_PUB),
        ] {
            let c = accepted(identity, Some(PASSPHRASE));
            assert_eq!(public_of(&c), public, "{name}");
            assert_eq!(c.data["password"], PASSPHRASE, "{name}");
            assert_eq!(c.data["identity"], identity, "{name}: stored encrypted, as given");
            assert!(!format!("{c:?}").contains(PASSPHRASE), "{name}");

            let msg = refused(&ssh_secret(identity, None), &generic(SSH_URL));
            assert!(msg.contains("`password`: is missing"), "{name}: {msg}");
            let msg = refused(&ssh_secret(identity, Some("not-the-passphrase")), &generic(SSH_URL));
            assert!(msg.contains("`password`: does not decrypt"), "{name}: {msg}");
            assert!(!msg.contains("not-the-passphrase"), "{name}: {msg}");
        }
        // A passphrase for a key that has none is what Flux ignores too.
        assert_eq!(public_of(&accepted(ED25519_OPENSSH, Some(PASSPHRASE))), ED25519_PUB);
    }

    #[test]
    fn keys_flux_cannot_read_are_refused_before_anything_is_applied() {
        let repo = generic(SSH_URL);
        let msg = refused(&ssh_secret(ED25519_PKCS8_ENCRYPTED, Some(PASSPHRASE)), &repo);
        assert!(
            msg.contains("`identity`") && msg.contains("ENCRYPTED PRIVATE KEY"),
            "{msg}"
        );
        let dsa = "-----BEGIN DSA PRIVATE KEY-----\nMIIBuwIBAAKBgQ==\n-----END DSA PRIVATE KEY-----\n";
        assert!(refused(&ssh_secret(dsa, None), &repo).contains("DSA"));
        let cert = "-----BEGIN CERTIFICATE-----\nMIIBuwIBAAKBgQ==\n-----END CERTIFICATE-----\n";
        assert!(refused(&ssh_secret(cert, None), &repo).contains("`CERTIFICATE`, not a private key"));
        let truncated: String = RSA_PKCS1.lines().take(10).collect::<Vec<_>>().join("\n");
        assert!(refused(&ssh_secret(&truncated, None), &repo).contains("`identity`: has no `-----END"));
        assert!(refused(&ssh_secret("just-a-password", None), &repo).contains("holds no PEM block"));
        // Base64 that decodes, but to no key of the label's kind.
        for label in [
            "OPENSSH PRIVATE KEY",
            "RSA PRIVATE KEY",
            "EC PRIVATE KEY",
            "PRIVATE KEY",
        ] {
            let garbage = format!("-----BEGIN {label}-----\nU0VDUkVUQllURVNTRUNSRVRCWVRFUw==\n-----END {label}-----\n");
            let msg = refused(&ssh_secret(&garbage, None), &repo);
            assert!(msg.contains("`identity`: is not a valid"), "{label}: {msg}");
            assert!(!msg.contains("U0VDUkVU") && !msg.contains("SECRETBYTES"), "{msg}");
        }
        // A body that is no base64 at all.
        let text = format!(
            r#"{{"identity":"-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key-SECRETBYTES\n-----END OPENSSH PRIVATE KEY-----\n","known_hosts":"{HOSTS}"}}"#
        );
        let msg = refused(&text, &repo);
        assert!(msg.contains("`identity`") && !msg.contains("SECRETBYTES"), "{msg}");
    }

    #[test]
    fn https_credentials_become_secret_data() {
        let c = parse(
            "git",
            r#"{"username":"flux","password":"hunter2-very-secret"}"#,
            &generic(HTTPS_URL),
        )
        .unwrap();
        assert_eq!(c.kind, CredentialKind::Https);
        assert_eq!(c.keys(), vec!["password", "username"]);
        let s = c.to_secret();
        assert_eq!(
            s["data"]["password"],
            base64::engine::general_purpose::STANDARD.encode("hunter2-very-secret")
        );
        assert!(!format!("{c:?}").contains("hunter2"));
        // Flux sends credentials over plain HTTP too (source-controller sets
        // `WithInsecureCredentialsOverHTTP` for an http:// URL).
        let c = parse(
            "git",
            r#"{"username":"u","password":"p"}"#,
            &generic("http://git.local/fleet"),
        )
        .unwrap();
        assert_eq!(c.kind, CredentialKind::Https);
    }

    #[test]
    fn a_bearer_token_is_https_credentials_of_its_own() {
        let c = parse(
            "git",
            r#"{"bearerToken":"tok-very-secret","ca.crt":"-----BEGIN CERTIFICATE-----"}"#,
            &generic(HTTPS_URL),
        )
        .unwrap();
        assert_eq!(c.kind, CredentialKind::BearerToken);
        assert_eq!(c.keys(), vec!["bearerToken", "ca.crt"]);
        assert!(!format!("{c:?}").contains("tok-very"));
        let msg = refused(
            r#"{"bearerToken":"tok-very-secret","username":"u","password":"p"}"#,
            &generic(HTTPS_URL),
        );
        assert!(
            msg.contains("`bearerToken`: is set together with `username`/`password`"),
            "{msg}"
        );
        let msg = refused(r#"{"bearerToken":"tok-very-secret"}"#, &generic(SSH_URL));
        assert!(
            msg.contains("HTTPS bearer token credentials") && msg.contains("https://"),
            "{msg}"
        );
        assert!(!msg.contains("tok-very"), "{msg}");
    }

    fn app_secret(key: &str, installation: serde_json::Value) -> serde_json::Value {
        let mut s = json!({"githubAppID": 12345, "githubAppPrivateKey": key});
        for (k, v) in installation.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    }

    #[test]
    fn a_github_app_needs_provider_github_and_provider_github_needs_a_github_app() {
        let github = with_provider(HTTPS_URL, "github");
        let by_id = app_secret(RSA_PKCS1, json!({"githubAppInstallationID": "678"}));
        let c = parse("s", &by_id.to_string(), &github).unwrap();
        assert_eq!(c.kind, CredentialKind::GithubApp);
        assert_eq!(
            c.keys(),
            vec!["githubAppID", "githubAppInstallationID", "githubAppPrivateKey"]
        );
        assert_eq!(c.data["githubAppID"], "12345");
        let mut by_owner = app_secret(RSA_PKCS8, json!({"githubAppInstallationOwner": "acme"}));
        by_owner["githubAppBaseURL"] = "https://ghe.example.com/api/v3".into();
        let c = parse("s", &by_owner.to_string(), &github).unwrap();
        assert_eq!(
            c.keys(),
            vec![
                "githubAppBaseURL",
                "githubAppID",
                "githubAppInstallationOwner",
                "githubAppPrivateKey"
            ]
        );

        // Exactly one of the installation's ID and owner.
        let both = app_secret(
            RSA_PKCS1,
            json!({"githubAppInstallationID": "678", "githubAppInstallationOwner": "acme"}),
        );
        assert!(refused(&both.to_string(), &github).contains("exactly one"));
        let neither = app_secret(RSA_PKCS1, json!({}));
        assert!(refused(&neither.to_string(), &github).contains("`githubAppInstallationID`: is missing"));
        let bad_id = app_secret(RSA_PKCS1, json!({"githubAppInstallationID": "x"}));
        assert!(refused(&bad_id.to_string(), &github).contains("`githubAppInstallationID`: is not a number"));

        // The default provider does not use GitHub App data: Flux fails the GitRepository.
        for repo in [generic(HTTPS_URL), with_provider(HTTPS_URL, "generic")] {
            let msg = refused(&by_id.to_string(), &repo);
            assert!(
                msg.contains("`spec.provider: generic`") && msg.contains("set it there"),
                "{msg}"
            );
        }
        // Provider github with anything but a GitHub App.
        for other in [
            ssh_secret(ED25519_OPENSSH, None),
            json!({"username": "u", "password": "p"}).to_string(),
            json!({"bearerToken": "t"}).to_string(),
        ] {
            let msg = refused(&other, &github);
            assert!(
                msg.contains("`spec.provider: github`") && msg.contains("`githubAppID`, `githubAppPrivateKey`"),
                "{msg}"
            );
            assert!(!msg.contains("BEGIN"), "{msg}");
        }
        // A GitHub App's token is for HTTPS.
        let msg = refused(&by_id.to_string(), &with_provider(SSH_URL, "github"));
        assert!(
            msg.contains("GitHub App credentials") && msg.contains("https://"),
            "{msg}"
        );
    }

    #[test]
    fn a_github_app_key_is_an_rsa_key_flux_can_read() {
        let github = with_provider(HTTPS_URL, "github");
        for (name, key) in [
            ("ecdsa", EC384_PKCS8),
            ("encrypted", RSA_PKCS1_AES128),
            (
                "garbage",
                "-----BEGIN RSA PRIVATE KEY-----\nU0VDUkVUQllURVM=\n-----END RSA PRIVATE KEY-----\n",
            ),
            ("no pem", "SECRETBYTES"),
        ] {
            let text = app_secret(key, json!({"githubAppInstallationID": 1})).to_string();
            let msg = refused(&text, &github);
            assert!(msg.contains("`githubAppPrivateKey`"), "{name}: {msg}");
            assert!(
                !msg.contains("U0VDUkVU") && !msg.contains("SECRETBYTES"),
                "{name}: {msg}"
            );
        }
    }

    #[test]
    fn workload_identity_providers_take_no_secret_credentials() {
        for provider in ["azure", "aws"] {
            let msg = refused(
                r#"{"username":"u","password":"p"}"#,
                &with_provider(HTTPS_URL, provider),
            );
            assert!(
                msg.contains(&format!("`spec.provider: {provider}`")) && msg.contains("workload identity"),
                "{msg}"
            );
        }
        let msg = refused(
            r#"{"username":"u","password":"p"}"#,
            &with_provider(HTTPS_URL, "gitlab"),
        );
        assert!(
            msg.contains("takes only `generic`, `aws`, `azure` or `github`"),
            "{msg}"
        );
    }

    #[test]
    fn wrong_scheme_and_missing_fields_are_named() {
        let e = parse(
            "s",
            r#"{"username":"u","password":"p"}"#,
            &generic("ssh://git@github.com/o/f"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("https://"), "{e}");
        let msg = refused(&ssh_secret(ED25519_OPENSSH, None), &generic(HTTPS_URL));
        assert!(msg.contains("holds SSH credentials") && msg.contains("ssh://"), "{msg}");
        let e = parse("s", r#"{"username":"u"}"#, &generic("https://x/y")).unwrap_err();
        assert!(e.to_string().contains("`password`: is missing"), "{e}");
        let e = parse("s", r#"{"password":"p"}"#, &generic("https://x/y")).unwrap_err();
        assert!(e.to_string().contains("`username`: is missing"), "{e}");
        let e = parse("s", r#"{"token":"abc"}"#, &generic("https://x/y")).unwrap_err();
        assert!(
            e.to_string().contains("keys present: token") && !e.to_string().contains("abc"),
            "{e}"
        );
        let e = parse("s", r#"{"password": "p@ss"#, &generic("https://x/y")).unwrap_err();
        assert!(
            e.to_string().contains("truncated") && !e.to_string().contains("p@ss"),
            "{e}"
        );
        let e = parse(
            "s",
            &ssh_secret(ED25519_OPENSSH, None).replace(HOSTS, ""),
            &generic(SSH_URL),
        )
        .unwrap_err();
        assert!(e.to_string().contains("`known_hosts`: is empty"), "{e}");
    }

    #[test]
    fn urls_flux_does_not_take_are_refused_and_url_passwords_never_shown() {
        let msg = refused(
            &ssh_secret(ED25519_OPENSSH, None),
            &generic("git@github.com:o/fleet.git"),
        );
        assert!(msg.contains("scp-like"), "{msg}");
        let msg = refused(
            &ssh_secret(ED25519_OPENSSH, None),
            &generic("https://flux:url-secret@github.com/o/fleet"),
        );
        assert!(msg.contains("https://flux:[redacted]@github.com/o/fleet"), "{msg}");
        assert!(!msg.contains("url-secret"), "{msg}");
    }

    #[test]
    fn known_hosts_lines_must_parse() {
        assert!(validate_known_hosts(HOSTS).is_ok());
        assert!(validate_known_hosts("# only a comment\n").is_err());
        assert_eq!(
            validate_known_hosts(&format!("{HOSTS}\ngithub.com ssh-ed25519 !!!"))
                .unwrap_err()
                .0,
            2
        );
    }
}

#[cfg(test)]
mod fixtures {
    //! Test keys, in the encodings `flux create secret git` writes and `--private-key-file` takes.
    //!
    //! Keys made for these tests only, with OpenSSH 9.2p1's `ssh-keygen` and OpenSSL 3.0
    //! (commands beside each); they guard nothing. The public keys are `ssh-keygen -y`'s.

    pub const PASSPHRASE: &str = "test-passphrase";
    /// `ssh-keygen -t rsa -b 2048 -m PEM -N ''`: PKCS#1.
    pub const RSA_PKCS1: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAxUmTci2OHatDL2RSPFhSpeE79QuV31rzOVL7IqUA6Wgj/pon
hb6Gaohe/QvWS0GrTFVR3gqntd19qcCQ1jWSFTsOTr7xxYInL944ZAmdhnDkqhPo
la+C3FBCNr/HQu6OBJ0tTDcrvozEtvG/k55XUl8xER+JUUscxFTd6cHaOo4QqsBL
yr47c6gMGdWiNiGj6lokkos/c81IL8WdNG0Nr4539umcoVW1cRKCLOik9oUClsGD
lWfGHagBj2yOgF+s0yswBzHSmA2JKc1vP2Re5cf/mL3crY2D2JK4xTxZEY3bzINL
OnUWNSOhvIjv0X8Fc8wNii4XeWxOv/XZ3z0/1wIDAQABAoIBAAayzqlNR6p/4p+X
eef88w1uc3vd9qrnP86In+iXY/ZeJ/612uACeIuMcXaJB4UgR9cnJx5GtqwI8a0o
/HdGyVzO160FHwNe6G1fz61XMDyHf767P1CPGCkv0Re3yjsJC38M8SP0fu07gqsC
0/IzVEatNGbJmdQjRz5D8rxEQzXCsWeriV5J+VpUu7ElHh8P7BHw+LZ5SzGRYinh
mlh19mCpZP52vHqf7wNr9XuiK/vKRzM+GibbICRysdR5EKEupmNEGpFbqqavaoIE
W1Xt0p0CtlboDokPKBrURwloos+G2lAXgX1ZEM1UXQbERAxeUeaqsPEhANwhjowA
QbjxiakCgYEA+KxsMkC2Rh5yCdBBh9ZRMGmO1oVzfdISzr/1AeFmpjIcYiqppCBz
rr2C6OgPTjN16TMeyKnp0x1RmKep/nB65nlA3BHSBC3iOtVtmq7S/7l/9f0eGoOi
ClNPFsOZvJX400iNVEk0zr2UHbolPR5WdC7hLRBI5ITjTPr4xV1bgM8CgYEAyxmV
E/q9AfjgGqc19qaGcPMM/506O3HXMMD4LRn230w7RCi9pcf0OeUhZOR6lXK03Vnm
BqUqgGfNn+XfskKixI748F67GHIZhzChGTIxA7q2DzZf/Y2k2t8hP8DmrMz/c5fA
K6an0uqvXK+7hRFqsFVlo6fmxcxHMsrSMv24QnkCgYEAgnhsuB0NxVJaAN4cU7nV
lTH8+H7CLqSWq5U5ZkgtxEsMa1D4+pzwNSFHWw3OYfhMCBODNkM35EVAt3hYj5/S
S7QYnJ5Y80pjpPyv6fWJzRQ1mAm6zqx7yzEUkNwFgFWrXKd3R161bzc2TDaLLTsK
nyCtkig2Jne2joArH9owlS8CgYAZeuYnEYfw3WZQMbYlcZLgTL3Ou8z4dDnJFgyM
q/s63Hd6/5l7WPCc6tAbtkZixXdHZeXj44jHfz5e1xoPZSjCfCVjEp9qW7Y0Lbeo
T5GypBP/KJU2XDTYeLHVK8BE4ZsSx3EGiOv5HBRQDoP6F8tIwA32UDQ1kIFGMAfa
+dXKEQKBgElKSKrdndMfZCUcopH+v7fzQydGl3Q1twHJpqAz8Ew2ty84pOqQDZxk
XMJtS3zemc/bl/Cb3aIO3icoHsX5DYP0DR+UUkAQiCVr2LKhLLcX0U6N3jl7psdf
pnib2sujduiZcbst0smHee/7Q9NPpIzWtToz9wOVrpqvSbCQpoKG
-----END RSA PRIVATE KEY-----
";
    /// The same key, `ssh-keygen -p -m PEM -N PASSPHRASE`: PKCS#1 with `DEK-Info: AES-128-CBC`.
    pub const RSA_PKCS1_AES128: &str = "-----BEGIN RSA PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-128-CBC,86BBC635FEDD9A389060548517AC5FD3

IVy/hTZ8Pfvap+ry1kpYcnk5wlwEExYRcMnFlNTfOr579poL4L6a9Fz9ko3Mq7n0
bq0CbAp3F3AG/F+i9cAxA3PN3bmIYYvUtdXsAhP6oG4MYn5TYfWq5A5Iw3We6W3W
N15SV4TBsoc/JCKsfJlgOyA1BTJs/BTFdxqchI3PhdFH6S9xcO2iooHwVoaJt+hh
NnCOazTdq7qv2RtV1PGd2uF6+p5wjJy50xA5Szfl1CxuAcQQyaEqI2FQ1j0H8jqz
H+TNtV/eewAqrUFM2u9PAXRac//xD9woYelhEkrWHj9X4MMqkANfYRSVlhjkbaQj
YoXE2S2UfSaGdhkPZEZSa+WdIG9noDRjyz9A+76licdJXlnNbyTwAMQ1KxU93MU8
jimoekCJ89F0zAyd2youssq3JpWBdqQVb/5VSiZ2WsYjKgprlTE13lDVNqHVWgEK
yv1n6YQ/ABg3zerMxkGUB7K4+Ogo1NMEC2TKVLPYTi1I7TdfRBpF0fWEfRxLCJYQ
EfDYc41DtQZM2+LCqZkHb+NEZiRZNRzs4oRSeCkIc+KWcMz8J2i6aQsQI7Jb1XEe
RXf9+rAnrXv3g9rZRtyCkxvuJBECHZYWVHa9Tf3ey7PU/PIRLcXxr6nZRpkGrN22
Z52+xkAMv6Q4bW8ULDQzUooI48zh0lpXqwU4XpPzmqKRk7SMcNmP+X+34r3fIAXW
edNyUkWEZMCWO6qpjRfAv9eX3CSdq/5TKSSHYvc9U/sWD8qBUJEBymAZP7ERf0Pc
pDjJgRSnUrVKiDidYO8ZLWvA8aFZRycxm87e6xS9ouvuakan8iu+OI7x6h1xD3Cv
RIoDlbgebQiwFLlF6s6+DjcvJ/UhxNr0DQ7NJkiluBl0QNvsacfqz37Dp45zZnin
Bh1eQmAJxlrEcxEtrpiWXZsW6OD/7+84blq0jkOyZK26J3gQMzzSpOixihzTvyWB
K/6nFMfMQreMeE9NGIuBv5Lu9NJXuItkCvmNGlMQLeTP0iEMcMzpu/tcOcVRW+XA
7JPjM6R8dXPvA6dWKoaqUl/Jpfwh5+BDqCoYfyMYtoTgLwcdBNlQ4ZSfunNPe9U0
Bj6TZPchbuFzDD/LVG2swX7vFGLbIhf4kHmyfsldmzOTadVwMyEybPTgaR/M79N9
Xxdfra5+L08zlfhzmc3SHfxEmCnhNLRSBR+vN3D5S5HTb4PBbcyCogRl676fkmzK
eE9oWF9CqwA46NB4l5k7fXGmrvtMrIsIBKNVp1Ez0hqHcFYZzRKOngUBKq8M7ymn
+AlM3gUUXeV4ZCqyYScjwiEukumt3x7MZ3LYJCFh+d0hPgdYOBZ23KZNazRySzYN
XCnuukWF4tTTuDiPuhQCacC6cZRj49HlL+zPvgHdZKmS6UvGRvrhNAvGYrhu/hyw
wShFfaxbwHvDG9WacNDJfPjvCyv/M2GwnDX9d8EyyKMGFvbEUL/ZdS3AzVkWnwPX
x4Vi7wORijTpjDfMwS8Se/2fT/k9GH4ckpuhJ+J4jzcx+Dw3dMctm9UlVoDz8fee
HKAfkvZTvyF2ymc4T92rUhRZjzuMwyjLED0IHrUNSMa60g03hqOfeUzyfl0zZbmL
-----END RSA PRIVATE KEY-----
";
    /// The same key, `openssl pkcs8 -topk8 -nocrypt`: PKCS#8, as `x509.MarshalPKCS8PrivateKey` writes it.
    pub const RSA_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDFSZNyLY4dq0Mv
ZFI8WFKl4Tv1C5XfWvM5UvsipQDpaCP+mieFvoZqiF79C9ZLQatMVVHeCqe13X2p
wJDWNZIVOw5OvvHFgicv3jhkCZ2GcOSqE+iVr4LcUEI2v8dC7o4EnS1MNyu+jMS2
8b+TnldSXzERH4lRSxzEVN3pwdo6jhCqwEvKvjtzqAwZ1aI2IaPqWiSSiz9zzUgv
xZ00bQ2vjnf26ZyhVbVxEoIs6KT2hQKWwYOVZ8YdqAGPbI6AX6zTKzAHMdKYDYkp
zW8/ZF7lx/+YvdytjYPYkrjFPFkRjdvMg0s6dRY1I6G8iO/RfwVzzA2KLhd5bE6/
9dnfPT/XAgMBAAECggEABrLOqU1Hqn/in5d55/zzDW5ze932quc/zoif6Jdj9l4n
/rXa4AJ4i4xxdokHhSBH1ycnHka2rAjxrSj8d0bJXM7XrQUfA17obV/PrVcwPId/
vrs/UI8YKS/RF7fKOwkLfwzxI/R+7TuCqwLT8jNURq00ZsmZ1CNHPkPyvERDNcKx
Z6uJXkn5WlS7sSUeHw/sEfD4tnlLMZFiKeGaWHX2YKlk/na8ep/vA2v1e6Ir+8pH
Mz4aJtsgJHKx1HkQoS6mY0QakVuqpq9qggRbVe3SnQK2VugOiQ8oGtRHCWiiz4ba
UBeBfVkQzVRdBsREDF5R5qqw8SEA3CGOjABBuPGJqQKBgQD4rGwyQLZGHnIJ0EGH
1lEwaY7WhXN90hLOv/UB4WamMhxiKqmkIHOuvYLo6A9OM3XpMx7IqenTHVGYp6n+
cHrmeUDcEdIELeI61W2artL/uX/1/R4ag6IKU08Ww5m8lfjTSI1USTTOvZQduiU9
HlZ0LuEtEEjkhONM+vjFXVuAzwKBgQDLGZUT+r0B+OAapzX2poZw8wz/nTo7cdcw
wPgtGfbfTDtEKL2lx/Q55SFk5HqVcrTdWeYGpSqAZ82f5d+yQqLEjvjwXrsYchmH
MKEZMjEDurYPNl/9jaTa3yE/wOaszP9zl8ArpqfS6q9cr7uFEWqwVWWjp+bFzEcy
ytIy/bhCeQKBgQCCeGy4HQ3FUloA3hxTudWVMfz4fsIupJarlTlmSC3ESwxrUPj6
nPA1IUdbDc5h+EwIE4M2QzfkRUC3eFiPn9JLtBicnljzSmOk/K/p9YnNFDWYCbrO
rHvLMRSQ3AWAVatcp3dHXrVvNzZMNostOwqfIK2SKDYmd7aOgCsf2jCVLwKBgBl6
5icRh/DdZlAxtiVxkuBMvc67zPh0OckWDIyr+zrcd3r/mXtY8Jzq0Bu2RmLFd0dl
5ePjiMd/Pl7XGg9lKMJ8JWMSn2pbtjQtt6hPkbKkE/8olTZcNNh4sdUrwEThmxLH
cQaI6/kcFFAOg/oXy0jADfZQNDWQgUYwB9r51coRAoGASUpIqt2d0x9kJRyikf6/
t/NDJ0aXdDW3AcmmoDPwTDa3Lzik6pANnGRcwm1LfN6Zz9uX8Jvdog7eJygexfkN
g/QNH5RSQBCIJWvYsqEstxfRTo3eOXumx1+meJvay6N26Jlxuy3SyYd57/tD00+k
jNa1OjP3A5Wumq9JsJCmgoY=
-----END PRIVATE KEY-----
";
    /// The same key, `ssh-keygen -p -N ''`: OpenSSH.
    pub const RSA_OPENSSH: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABFwAAAAdzc2gtcn
NhAAAAAwEAAQAAAQEAxUmTci2OHatDL2RSPFhSpeE79QuV31rzOVL7IqUA6Wgj/ponhb6G
aohe/QvWS0GrTFVR3gqntd19qcCQ1jWSFTsOTr7xxYInL944ZAmdhnDkqhPola+C3FBCNr
/HQu6OBJ0tTDcrvozEtvG/k55XUl8xER+JUUscxFTd6cHaOo4QqsBLyr47c6gMGdWiNiGj
6lokkos/c81IL8WdNG0Nr4539umcoVW1cRKCLOik9oUClsGDlWfGHagBj2yOgF+s0yswBz
HSmA2JKc1vP2Re5cf/mL3crY2D2JK4xTxZEY3bzINLOnUWNSOhvIjv0X8Fc8wNii4XeWxO
v/XZ3z0/1wAAA7hIFVO4SBVTuAAAAAdzc2gtcnNhAAABAQDFSZNyLY4dq0MvZFI8WFKl4T
v1C5XfWvM5UvsipQDpaCP+mieFvoZqiF79C9ZLQatMVVHeCqe13X2pwJDWNZIVOw5OvvHF
gicv3jhkCZ2GcOSqE+iVr4LcUEI2v8dC7o4EnS1MNyu+jMS28b+TnldSXzERH4lRSxzEVN
3pwdo6jhCqwEvKvjtzqAwZ1aI2IaPqWiSSiz9zzUgvxZ00bQ2vjnf26ZyhVbVxEoIs6KT2
hQKWwYOVZ8YdqAGPbI6AX6zTKzAHMdKYDYkpzW8/ZF7lx/+YvdytjYPYkrjFPFkRjdvMg0
s6dRY1I6G8iO/RfwVzzA2KLhd5bE6/9dnfPT/XAAAAAwEAAQAAAQAGss6pTUeqf+Kfl3nn
/PMNbnN73faq5z/OiJ/ol2P2Xif+tdrgAniLjHF2iQeFIEfXJyceRrasCPGtKPx3Rslczt
etBR8DXuhtX8+tVzA8h3++uz9QjxgpL9EXt8o7CQt/DPEj9H7tO4KrAtPyM1RGrTRmyZnU
I0c+Q/K8REM1wrFnq4leSflaVLuxJR4fD+wR8Pi2eUsxkWIp4ZpYdfZgqWT+drx6n+8Da/
V7oiv7ykczPhom2yAkcrHUeRChLqZjRBqRW6qmr2qCBFtV7dKdArZW6A6JDyga1EcJaKLP
htpQF4F9WRDNVF0GxEQMXlHmqrDxIQDcIY6MAEG48YmpAAAAgElKSKrdndMfZCUcopH+v7
fzQydGl3Q1twHJpqAz8Ew2ty84pOqQDZxkXMJtS3zemc/bl/Cb3aIO3icoHsX5DYP0DR+U
UkAQiCVr2LKhLLcX0U6N3jl7psdfpnib2sujduiZcbst0smHee/7Q9NPpIzWtToz9wOVrp
qvSbCQpoKGAAAAgQD4rGwyQLZGHnIJ0EGH1lEwaY7WhXN90hLOv/UB4WamMhxiKqmkIHOu
vYLo6A9OM3XpMx7IqenTHVGYp6n+cHrmeUDcEdIELeI61W2artL/uX/1/R4ag6IKU08Ww5
m8lfjTSI1USTTOvZQduiU9HlZ0LuEtEEjkhONM+vjFXVuAzwAAAIEAyxmVE/q9AfjgGqc1
9qaGcPMM/506O3HXMMD4LRn230w7RCi9pcf0OeUhZOR6lXK03VnmBqUqgGfNn+XfskKixI
748F67GHIZhzChGTIxA7q2DzZf/Y2k2t8hP8DmrMz/c5fAK6an0uqvXK+7hRFqsFVlo6fm
xcxHMsrSMv24QnkAAAAAAQID
-----END OPENSSH PRIVATE KEY-----
";
    /// Its public key.
    pub const RSA_PUB: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDFSZNyLY4dq0MvZFI8WFKl4Tv1C5XfWvM5UvsipQDpaCP+mieFvoZqiF79C9ZLQatMVVHeCqe13X2pwJDWNZIVOw5OvvHFgicv3jhkCZ2GcOSqE+iVr4LcUEI2v8dC7o4EnS1MNyu+jMS28b+TnldSXzERH4lRSxzEVN3pwdo6jhCqwEvKvjtzqAwZ1aI2IaPqWiSSiz9zzUgvxZ00bQ2vjnf26ZyhVbVxEoIs6KT2hQKWwYOVZ8YdqAGPbI6AX6zTKzAHMdKYDYkpzW8/ZF7lx/+YvdytjYPYkrjFPFkRjdvMg0s6dRY1I6G8iO/RfwVzzA2KLhd5bE6/9dnfPT/X";
    /// `ssh-keygen -t ecdsa -b 256 -m PEM -N ''`: SEC1.
    pub const EC256_SEC1: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIBf8VMCUNEZkqyGw7UjgrWIwJVibPCDHOE7ZhnugXZqHoAoGCCqGSM49
AwEHoUQDQgAEcj16mraZk2HIs4H7uoKs4qYG6/BXa2moR8ifkjprYI79RTvdRWpO
d+KwlM+Z0B6avSVecHNyuqFciskGR9qltw==
-----END EC PRIVATE KEY-----
";
    /// The same key, `openssl ec -des3`: SEC1 with `DEK-Info: DES-EDE3-CBC`.
    pub const EC256_SEC1_DES3: &str = "-----BEGIN EC PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: DES-EDE3-CBC,31EDF69100451172

pBNMNeOE8n1XbgjpMci3n9S2rYCfAWIDFbAUHH/Jpo4EigxbX41Hxn9pqkccbBgc
pTsfzFyy1Jp3/jWgjKU+DANQXCzXADld95EqjxEjt0ZGisx2k/Y1naeaxPj8x/Rn
7qeXAMtZOLNN6hsBudGa7XHJPYe93EKOr0nwrbibV9c=
-----END EC PRIVATE KEY-----
";
    /// Its public key.
    pub const EC256_PUB: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBHI9epq2mZNhyLOB+7qCrOKmBuvwV2tpqEfIn5I6a2CO/UU73UVqTnfisJTPmdAemr0lXnBzcrqhXIrJBkfapbc=";
    /// `ssh-keygen -t ecdsa -b 384 -m PEM -N ''`: SEC1.
    pub const EC384_SEC1: &str = "-----BEGIN EC PRIVATE KEY-----
MIGkAgEBBDD375D2JaOZdcGxWSMAWPzC2psL0TJCTnJSam67+xKknRfK5v5hqzjF
rlQNxUCdRdSgBwYFK4EEACKhZANiAAR2hR4rLk3n6xul1X+3hKRxzALk6ybQre+7
n9EZBAnopdBBAmowWMSfNOpoZrXnVoF6ZcH5OIlKsRecLRHeyp7xCf0HPc1nHt7h
JUTrL67I34iQlRYKyi5qPsGT63IsSUA=
-----END EC PRIVATE KEY-----
";
    /// The same key, `openssl pkcs8 -topk8 -nocrypt`: PKCS#8, the shape of `flux create secret git`'s default key.
    pub const EC384_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDD375D2JaOZdcGxWSMA
WPzC2psL0TJCTnJSam67+xKknRfK5v5hqzjFrlQNxUCdRdShZANiAAR2hR4rLk3n
6xul1X+3hKRxzALk6ybQre+7n9EZBAnopdBBAmowWMSfNOpoZrXnVoF6ZcH5OIlK
sRecLRHeyp7xCf0HPc1nHt7hJUTrL67I34iQlRYKyi5qPsGT63IsSUA=
-----END PRIVATE KEY-----
";
    /// The same key, `ssh-keygen -p -N ''`: OpenSSH.
    pub const EC384_OPENSSH: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAiAAAABNlY2RzYS
1zaGEyLW5pc3RwMzg0AAAACG5pc3RwMzg0AAAAYQR2hR4rLk3n6xul1X+3hKRxzALk6ybQ
re+7n9EZBAnopdBBAmowWMSfNOpoZrXnVoF6ZcH5OIlKsRecLRHeyp7xCf0HPc1nHt7hJU
TrL67I34iQlRYKyi5qPsGT63IsSUAAAADQl30GjJd9BowAAAATZWNkc2Etc2hhMi1uaXN0
cDM4NAAAAAhuaXN0cDM4NAAAAGEEdoUeKy5N5+sbpdV/t4SkccwC5Osm0K3vu5/RGQQJ6K
XQQQJqMFjEnzTqaGa151aBemXB+TiJSrEXnC0R3sqe8Qn9Bz3NZx7e4SVE6y+uyN+IkJUW
Csouaj7Bk+tyLElAAAAAMQD375D2JaOZdcGxWSMAWPzC2psL0TJCTnJSam67+xKknRfK5v
5hqzjFrlQNxUCdRdQAAAAAAQIDBAUGBw==
-----END OPENSSH PRIVATE KEY-----
";
    /// Its public key.
    pub const EC384_PUB: &str = "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBHaFHisuTefrG6XVf7eEpHHMAuTrJtCt77uf0RkECeil0EECajBYxJ806mhmtedWgXplwfk4iUqxF5wtEd7KnvEJ/Qc9zWce3uElROsvrsjfiJCVFgrKLmo+wZPrcixJQA==";
    /// `ssh-keygen -t ecdsa -b 521 -m PEM -N ''`: SEC1.
    pub const EC521_SEC1: &str = "-----BEGIN EC PRIVATE KEY-----
MIHcAgEBBEIBAgcGFn7ZA4Nt0aVpIsxUDjpMBGp1T0kIsTM+JDqXm/45kSiW36ue
LmFK0yxi3aHrCYt2PGWXbJ9UPWg6l4KU9KigBwYFK4EEACOhgYkDgYYABABxCqg6
Sjf7saYsIgVrtzvuR4so0aDM5lvy1l+gUZpyE3TsIXmongkE/4zpGTjxuNtIgAfZ
VAZLvZlUF+MPquBXfgGa335Va5+Q040lLCML6yVM62oukMC/dFoLgbEtU1f726KF
jWYiiss2tsOHQqX0G3gLfg5nsHPdnBp4PdCMB/OIqQ==
-----END EC PRIVATE KEY-----
";
    /// The same key, `openssl ec -aes256`: SEC1 with `DEK-Info: AES-256-CBC`.
    pub const EC521_SEC1_AES256: &str = "-----BEGIN EC PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-256-CBC,D53C63F124CF1229DABC11BCA0AA0324

Ach2Ud8ww3Aia483RdG+YpKfDyf7T+Td+3BH7xNA9/G39WBZuG3yZYjf7K9tPmkZ
7TdPtFaPgPqBmrjFOT++SitYGBtjLTPt6LsW+9XuFXl69NyyRrjFVR+CvID1rDnl
hdz6C6KqV6vihBl932NQEMHx5Oa/7z6NeZo7LCQdDmFvxWoeDJu2n6cftnqBBbja
GHNfH61q0UeuhuJs6tkxOLdvVIezKb2DGVcodPYXLFK7B7uoljrIJEpHsX8hJd1X
u6P1cHqMryMnWLlvTguVBxpmbQ3yEbWHsW/mSYNVJu4=
-----END EC PRIVATE KEY-----
";
    /// Its public key.
    pub const EC521_PUB: &str = "ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBABxCqg6Sjf7saYsIgVrtzvuR4so0aDM5lvy1l+gUZpyE3TsIXmongkE/4zpGTjxuNtIgAfZVAZLvZlUF+MPquBXfgGa335Va5+Q040lLCML6yVM62oukMC/dFoLgbEtU1f726KFjWYiiss2tsOHQqX0G3gLfg5nsHPdnBp4PdCMB/OIqQ==";
    /// `ssh-keygen -t ed25519 -N '' -C flux@test`: OpenSSH.
    pub const ED25519_OPENSSH: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACCM+S7YzZMAGLEY1GjdyuMgz3qKRjjPEuKkTSBpkuEJagAAAJCSrzmRkq85
kQAAAAtzc2gtZWQyNTUxOQAAACCM+S7YzZMAGLEY1GjdyuMgz3qKRjjPEuKkTSBpkuEJag
AAAECPCpDTGbXCaX8c4OQ1Ir6y4izcEQ693YdFt8F7KTGzPIz5LtjNkwAYsRjUaN3K4yDP
eopGOM8S4qRNIGmS4QlqAAAACWZsdXhAdGVzdAECAwQ=
-----END OPENSSH PRIVATE KEY-----
";
    /// The same key, `ssh-keygen -p -N PASSPHRASE`: aes256-ctr, bcrypt, 16 rounds.
    pub const ED25519_OPENSSH_ENCRYPTED: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABDNTKv/oH
sGn68LBIBVw+jEAAAAEAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAIIz5LtjNkwAYsRjU
aN3K4yDPeopGOM8S4qRNIGmS4QlqAAAAkHOEIEadl9MiLIkd2/D2wBrYJn3H1657liANJz
1wetXBPksIyRJSnx80Cmk1XYwq0bA3gxxdk5HB8/YSZT6tNKZpCVyePNtt6ZoyDS1haQaC
pj3dPGJWqgI7ew6JcvjtmcDq1fzvwxPNDOWoCODl45oHzZx7737MTE3K6oh+gqVfMi+R7H
52IeIhS1Pa7nSsUQ==
-----END OPENSSH PRIVATE KEY-----
";
    /// Its public key.
    pub const ED25519_PUB: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIz5LtjNkwAYsRjUaN3K4yDPeopGOM8S4qRNIGmS4Qlq";
    /// `openssl genpkey -algorithm ed25519`: PKCS#8.
    pub const ED25519_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIHb/n++PjtviIej/q998f5m9mHlh0v6FETMXucDhT0UD
-----END PRIVATE KEY-----
";
    /// Its public key (RFC 8709 encoding of `openssl pkey -pubout`'s).
    pub const ED25519_PKCS8_PUB: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBJKiCR6KU9/i531IcO6zceoyEWv75ga6hewcQfpoRXv";
    /// `openssl genpkey -algorithm ed25519 -aes256 -pass pass:PASSPHRASE`: encrypted PKCS#8.
    pub const ED25519_PKCS8_ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----
MIGbMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAhKs3VgpNLNYwICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEAAjkyIY+b+6hOzTRKwxV+IEQIWe
JmLoNzw7/+HfovCCi8qYzGl+DW531JeW/W7gGZ3za0IAmeng/wJxo7HlM3KEMpf3
Xq9jKKXIlUGWVQiUK7M=
-----END ENCRYPTED PRIVATE KEY-----
";
}
