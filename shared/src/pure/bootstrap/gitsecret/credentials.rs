//! Each kind of credentials the Flux Git secret can hold, read field by field as Flux reads
//! them: which fields it needs, what each must look like, and the Secret data it becomes.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{CredentialKind, GitCredentials, GitSecretError, Object, keys};

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

pub(super) fn present(obj: &Object, name: &str) -> bool {
    obj.get(name).is_some_and(|v| !v.is_null())
}

pub(super) fn ssh(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
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

pub(super) fn validate_known_hosts(text: &str) -> Result<(), (usize, String)> {
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

pub(super) fn https(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
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

pub(super) fn bearer_token(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
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

pub(super) fn github_app(obj: &Object, secret: &str) -> Result<GitCredentials, GitSecretError> {
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
