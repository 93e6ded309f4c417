//! Flux's Git credentials: the Secret `flux-system`, built from one Secrets Manager secret and
//! validated before anything is applied, so a broken key never leaves a half-installed Flux.
//!
//! Accepted shapes of the secret's JSON (Flux's own key names):
//! - SSH: `identity` (OpenSSH private key), `known_hosts`, optional `identity.pub`, optional
//!   `password` (the key's passphrase);
//! - HTTPS: `username`, `password`;
//! - GitHub App: `githubAppID`, `githubAppInstallationID`, `githubAppPrivateKey`, optional
//!   `githubAppBaseURL`.
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
}

impl Classify for GitSecretError {
    /// The secret's content is wrong: only a person changing it helps.
    fn class(&self) -> Class {
        Class::Final
    }
}

/// Which kind of credentials, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    Ssh,
    Https,
    GithubApp,
}

impl CredentialKind {
    fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Ssh => "SSH",
            CredentialKind::Https => "HTTPS",
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

fn field<'a>(
    obj: &'a serde_json::Map<String, Value>,
    secret: &str,
    name: &str,
) -> Result<Option<&'a str>, GitSecretError> {
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

/// Parses and validates the secret's JSON text against the URL Flux will sync from.
pub fn parse(secret: &str, text: &str, git_url: &str) -> Result<GitCredentials, GitSecretError> {
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
    let Value::Object(obj) = value else {
        return Err(GitSecretError::Malformed {
            secret: secret.into(),
            reason: "not a JSON object".into(),
        });
    };
    let ssh_url = git_url.starts_with("ssh://") || (!git_url.contains("://") && git_url.contains('@'));
    let creds = if field(&obj, secret, "identity")?.is_some() {
        ssh(&obj, secret)?
    } else if field(&obj, secret, "githubAppPrivateKey")?.is_some() || field(&obj, secret, "githubAppID")?.is_some() {
        github_app(&obj, secret)?
    } else if field(&obj, secret, "username")?.is_some() || field(&obj, secret, "password")?.is_some() {
        https(&obj, secret)?
    } else {
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort();
        return Err(GitSecretError::Malformed {
            secret: secret.into(),
            reason: format!(
                "no credentials found (keys present: {}); expected `identity` + `known_hosts`, `username` + `password`, or `githubAppID` + `githubAppInstallationID` + `githubAppPrivateKey`",
                if keys.is_empty() {
                    "none".to_owned()
                } else {
                    keys.join(", ")
                }
            ),
        });
    };
    match (creds.kind, ssh_url) {
        (CredentialKind::Ssh, false) => Err(GitSecretError::WrongScheme {
            secret: secret.into(),
            kind: creds.kind.as_str(),
            url: git_url.into(),
            hint: "set CELLBRIDGE_FLUX_GIT_URL to the ssh:// URL of the fleet repo",
        }),
        (CredentialKind::Https | CredentialKind::GithubApp, true) => Err(GitSecretError::WrongScheme {
            secret: secret.into(),
            kind: creds.kind.as_str(),
            url: git_url.into(),
            hint: "set CELLBRIDGE_FLUX_GIT_URL to the https:// URL of the fleet repo",
        }),
        _ => Ok(creds),
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

fn ssh(obj: &serde_json::Map<String, Value>, secret: &str) -> Result<GitCredentials, GitSecretError> {
    let bad = |field: &str, reason: String| GitSecretError::BadField {
        secret: secret.into(),
        field: field.into(),
        reason,
    };
    let identity = field(obj, secret, "identity")?.unwrap_or_default();
    // ssh-key's errors describe the encoding problem, never the key bytes.
    let key = ssh_key::PrivateKey::from_openssh(rewrap_openssh(identity).as_bytes())
        .map_err(|e| bad("identity", format!("not an OpenSSH private key ({e})")))?;
    let passphrase = field(obj, secret, "password")?;
    if key.is_encrypted() && passphrase.is_none() {
        return Err(bad(
            "identity",
            "the private key is encrypted and the secret has no `password`".into(),
        ));
    }
    let derived = key
        .public_key()
        .to_openssh()
        .map_err(|e| bad("identity", format!("cannot derive its public key ({e})")))?;
    let public = match field(obj, secret, "identity.pub")? {
        Some(p) => {
            let pk = ssh_key::PublicKey::from_openssh(p.trim())
                .map_err(|e| bad("identity.pub", format!("not an OpenSSH public key ({e})")))?;
            if pk.key_data() != key.public_key().key_data() {
                return Err(bad("identity.pub", "does not belong to `identity`".into()));
            }
            p.trim().to_owned()
        }
        None => derived,
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

/// ssh-key reads only OpenSSH's own 70-column wrapping, while Go's parser (Flux) takes any;
/// keys written by other tools (64 columns) are rewrapped before parsing.
fn rewrap_openssh(pem: &str) -> String {
    const BEGIN: &str = "-----BEGIN OPENSSH PRIVATE KEY-----";
    const END: &str = "-----END OPENSSH PRIVATE KEY-----";
    let t = pem.trim();
    let Some(body) = t.strip_prefix(BEGIN).and_then(|b| b.strip_suffix(END)) else {
        return t.to_owned();
    };
    let body: String = body.split_whitespace().collect();
    let mut out = String::with_capacity(t.len() + 16);
    out.push_str(BEGIN);
    out.push('\n');
    for chunk in body.as_bytes().chunks(70) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
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

fn https(obj: &serde_json::Map<String, Value>, secret: &str) -> Result<GitCredentials, GitSecretError> {
    let missing = |f: &str| GitSecretError::BadField {
        secret: secret.into(),
        field: f.into(),
        reason: "is missing".into(),
    };
    let username = field(obj, secret, "username")?.ok_or_else(|| missing("username"))?;
    let password = field(obj, secret, "password")?.ok_or_else(|| missing("password"))?;
    let mut data = BTreeMap::new();
    data.insert("username".to_owned(), username.to_owned());
    data.insert("password".to_owned(), password.to_owned());
    if let Some(ca) = field(obj, secret, "ca.crt")? {
        data.insert("ca.crt".to_owned(), ca.to_owned());
    }
    Ok(GitCredentials {
        kind: CredentialKind::Https,
        data,
    })
}

fn github_app(obj: &serde_json::Map<String, Value>, secret: &str) -> Result<GitCredentials, GitSecretError> {
    let bad = |field: &str, reason: &str| GitSecretError::BadField {
        secret: secret.into(),
        field: field.into(),
        reason: reason.into(),
    };
    let mut data = BTreeMap::new();
    for f in ["githubAppID", "githubAppInstallationID"] {
        // Numbers are accepted too: that is how people paste them into the console.
        let v = match obj.get(f) {
            Some(Value::Number(n)) => n.to_string(),
            _ => field(obj, secret, f)?.ok_or_else(|| bad(f, "is missing"))?.to_owned(),
        };
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(f, "is not a number"));
        }
        data.insert(f.to_owned(), v);
    }
    let pem = field(obj, secret, "githubAppPrivateKey")?.ok_or_else(|| bad("githubAppPrivateKey", "is missing"))?;
    let t = pem.trim();
    if !(t.starts_with("-----BEGIN RSA PRIVATE KEY-----") || t.starts_with("-----BEGIN PRIVATE KEY-----"))
        || !t.ends_with("-----")
    {
        return Err(bad("githubAppPrivateKey", "is not a PEM private key"));
    }
    data.insert("githubAppPrivateKey".to_owned(), format!("{t}\n"));
    if let Some(u) = field(obj, secret, "githubAppBaseURL")? {
        if !u.starts_with("https://") {
            return Err(bad("githubAppBaseURL", "is not an https:// URL"));
        }
        data.insert("githubAppBaseURL".to_owned(), u.to_owned());
    }
    Ok(GitCredentials {
        kind: CredentialKind::GithubApp,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTS: &str = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    #[test]
    fn https_credentials_become_secret_data() {
        let c = parse(
            "git",
            r#"{"username":"flux","password":"hunter2-very-secret"}"#,
            "https://github.com/o/fleet",
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
    }

    #[test]
    fn malformed_ssh_key_is_refused_without_echoing_it() {
        let text = format!(
            r#"{{"identity":"-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key-SECRETBYTES\n-----END OPENSSH PRIVATE KEY-----\n","known_hosts":"{HOSTS}"}}"#
        );
        let e = parse("flux-git", &text, "ssh://git@github.com/o/fleet").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("flux-git") && msg.contains("`identity`"), "{msg}");
        assert!(!msg.contains("SECRETBYTES"), "{msg}");
    }

    #[test]
    fn wrong_scheme_and_missing_fields_are_named() {
        let e = parse("s", r#"{"username":"u","password":"p"}"#, "ssh://git@github.com/o/f").unwrap_err();
        assert!(e.to_string().contains("https://"), "{e}");
        let e = parse("s", r#"{"username":"u"}"#, "https://x/y").unwrap_err();
        assert!(e.to_string().contains("`password`: is missing"), "{e}");
        let e = parse("s", r#"{"token":"abc"}"#, "https://x/y").unwrap_err();
        assert!(
            e.to_string().contains("keys present: token") && !e.to_string().contains("abc"),
            "{e}"
        );
        let e = parse("s", r#"{"password": "p@ss"#, "https://x/y").unwrap_err();
        assert!(
            e.to_string().contains("truncated") && !e.to_string().contains("p@ss"),
            "{e}"
        );
        let e = parse(
            "s",
            r#"{"githubAppID":"12","githubAppInstallationID":"x","githubAppPrivateKey":"k"}"#,
            "https://x/y",
        )
        .unwrap_err();
        assert!(e.to_string().contains("githubAppInstallationID"), "{e}");
    }

    #[test]
    fn rewrapping_is_total() {
        assert_eq!(
            rewrap_openssh("-----BEGIN OPENSSH PRIVATE KEY-----END OPENSSH PRIVATE KEY-----"),
            "-----BEGIN OPENSSH PRIVATE KEY-----END OPENSSH PRIVATE KEY-----"
        );
        let r = rewrap_openssh(&format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n{}\n-----END OPENSSH PRIVATE KEY-----",
            "a".repeat(64),
            "b".repeat(20)
        ));
        assert_eq!(r.lines().nth(1).unwrap().len(), 70);
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
