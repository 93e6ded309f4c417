//! Secrets Manager: JSON secrets fetched into [`Secret`] so no value reaches a log or an error.
//! Errors name the secret and the field, never what it holds.

use serde_json::Value;

use super::github::{Credentials, Issuer};
use crate::ports::secrets::{SecretStore, SecretsError};
use crate::pure::redact::Secret;

/// A parsed JSON secret; only [`Secret`] values come out of it.
pub struct JsonSecret {
    name: String,
    fields: Secret<serde_json::Map<String, Value>>,
}

impl std::fmt::Debug for JsonSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSecret")
            .field("name", &self.name)
            .field("fields", &"[redacted]")
            .finish()
    }
}

impl JsonSecret {
    /// Parses the secret's text; the error never quotes it (a JSON error would).
    pub fn parse(name: &str, text: &str) -> Result<Self, SecretsError> {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(Self {
                name: name.to_owned(),
                fields: Secret::new(m),
            }),
            _ => Err(SecretsError::NotJson {
                secret: name.to_owned(),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn has(&self, field: &str) -> bool {
        self.fields.expose().get(field).is_some_and(|v| !v.is_null())
    }

    /// A string field (numbers are accepted and rendered, since app ids are often numbers).
    pub fn string(&self, field: &'static str, hint: &'static str) -> Result<Secret<String>, SecretsError> {
        match self.fields.expose().get(field) {
            None | Some(Value::Null) => Err(SecretsError::MissingField {
                secret: self.name.clone(),
                field,
                hint,
            }),
            Some(Value::String(s)) if s.trim().is_empty() => Err(SecretsError::InvalidField {
                secret: self.name.clone(),
                field,
                reason: "is empty",
            }),
            Some(Value::String(s)) => Ok(Secret::new(s.clone())),
            Some(Value::Number(n)) => Ok(Secret::new(n.to_string())),
            Some(_) => Err(SecretsError::InvalidField {
                secret: self.name.clone(),
                field,
                reason: "must be a string",
            }),
        }
    }

    /// A whole-number field (`app_id`, `installation_id`), as a number or a numeric string.
    pub fn number(&self, field: &'static str, hint: &'static str) -> Result<u64, SecretsError> {
        let s = self.string(field, hint)?;
        s.expose().trim().parse().map_err(|_| SecretsError::InvalidField {
            secret: self.name.clone(),
            field,
            reason: "must be a whole number",
        })
    }
}

/// The GitHub credentials secret: `{"client_id" | "app_id", "installation_id", "private_key"}`
/// for a GitHub App (the client ID is what GitHub recommends as the JWT's issuer), or
/// `{"token"}`. A mix of the two, or both App identifiers, is refused naming the field.
pub fn github_credentials(secret: &JsonSecret) -> Result<Credentials, SecretsError> {
    const APP: &str = "a GitHub App needs client_id (or app_id), installation_id and private_key; or give a token";
    let invalid = |field: &'static str, reason: &'static str| SecretsError::InvalidField {
        secret: secret.name().to_owned(),
        field,
        reason,
    };
    let app_fields = ["client_id", "app_id", "installation_id", "private_key"];
    if app_fields.iter().any(|f| secret.has(f)) {
        if secret.has("token") {
            return Err(invalid(
                "token",
                "is given with a GitHub App's fields: give either the App's client_id (or app_id), installation_id and private_key, or a token",
            ));
        }
        let issuer = match (secret.has("client_id"), secret.has("app_id")) {
            (true, true) => {
                return Err(invalid(
                    "app_id",
                    "is given with client_id: give one of them (the client ID is recommended)",
                ));
            }
            (true, false) => {
                let id = secret.string("client_id", APP)?;
                // Client IDs are GitHub's opaque strings (`Iv23li...`); a number here is an App ID
                // in the wrong field.
                let id = id.expose().trim();
                if id.chars().all(|c| c.is_ascii_digit()) || id.chars().any(|c| !c.is_ascii_alphanumeric()) {
                    return Err(invalid(
                        "client_id",
                        "is not a GitHub App client ID (letters and digits, like Iv23li...; a number is an app_id)",
                    ));
                }
                Issuer::ClientId(id.to_owned())
            }
            (false, _) => Issuer::AppId(secret.number("app_id", APP)?),
        };
        let installation_id = secret.number("installation_id", APP)?;
        let private_key = secret.string("private_key", APP)?;
        if !private_key.expose().contains("PRIVATE KEY-----") {
            return Err(invalid("private_key", "is not a PEM private key"));
        }
        return Ok(Credentials::App {
            issuer,
            installation_id,
            private_key,
        });
    }
    let token = secret.string(
        "token",
        "give a GitHub App's client_id (or app_id), installation_id and private_key, or a token",
    )?;
    Ok(Credentials::Token(token))
}

impl SecretStore for aws_sdk_secretsmanager::Client {
    async fn secret_string(&self, name: &str) -> Result<Secret<String>, SecretsError> {
        use aws_sdk_secretsmanager::error::ProvideErrorMetadata;
        let out = self.get_secret_value().secret_id(name).send().await.map_err(|e| {
            let code = e.code().unwrap_or("");
            // GetSecretValue's errors (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html):
            // these are refusals a retry will not change; throttling, InternalServiceError and
            // no answer at all may.
            let retryable = !matches!(
                code,
                "ResourceNotFoundException"
                    | "AccessDeniedException"
                    | "InvalidParameterException"
                    | "InvalidRequestException"
                    | "DecryptionFailure"
            );
            let reason = if code.is_empty() {
                crate::pure::redact::chain(&e)
            } else {
                format!("{code}: {}", e.message().unwrap_or(""))
            };
            SecretsError::Fetch {
                secret: name.to_owned(),
                reason,
                retryable,
            }
        })?;
        out.secret_string()
            .map(|s| Secret::new(s.to_owned()))
            .ok_or_else(|| SecretsError::NotString {
                secret: name.to_owned(),
            })
    }
}

/// Reads a JSON secret's current value.
pub async fn fetch_json(store: &impl SecretStore, name: &str) -> Result<JsonSecret, SecretsError> {
    let text = store.secret_string(name).await?;
    JsonSecret::parse(name, text.expose())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n";

    #[test]
    fn app_and_token_credentials() {
        let s = JsonSecret::parse(
            "gh",
            &serde_json::json!({"app_id": 12, "installation_id": "34", "private_key": KEY}).to_string(),
        )
        .unwrap();
        match github_credentials(&s).unwrap() {
            Credentials::App {
                issuer,
                installation_id,
                ..
            } => assert_eq!((issuer, installation_id), (Issuer::AppId(12), 34)),
            other => panic!("{other:?}"),
        }
        let s = JsonSecret::parse(
            "gh",
            &serde_json::json!({"client_id": "Iv23liAbC123", "installation_id": 34, "private_key": KEY}).to_string(),
        )
        .unwrap();
        match github_credentials(&s).unwrap() {
            Credentials::App { issuer, .. } => assert_eq!(issuer, Issuer::ClientId("Iv23liAbC123".into())),
            other => panic!("{other:?}"),
        }
        let s = JsonSecret::parse("gh", r#"{"token":"ghp_s3cr3t"}"#).unwrap();
        assert!(matches!(github_credentials(&s).unwrap(), Credentials::Token(_)));
    }

    #[test]
    fn errors_name_secret_and_field_never_the_value() {
        let s = JsonSecret::parse(
            "cellbridge/github",
            r#"{"app_id": 12, "private_key": "ghp_hunter2_PRIVATE KEY-----"}"#,
        )
        .unwrap();
        let e = github_credentials(&s).unwrap_err().to_string();
        assert!(e.contains("cellbridge/github") && e.contains("installation_id"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let e = JsonSecret::parse("cellbridge/github", "ghp_hunter2 not json")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let s = JsonSecret::parse("x", r#"{"token": "hunter2"}"#).unwrap();
        assert!(!format!("{s:?} {:?}", github_credentials(&s).unwrap()).contains("hunter2"));
        let e = github_credentials(&JsonSecret::parse("x", "{}").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `token`"), "{e}");
    }

    #[test]
    fn bad_combinations_name_the_field_never_the_key() {
        let err = |v: serde_json::Value| {
            github_credentials(&JsonSecret::parse("cellbridge/github", &v.to_string()).unwrap())
                .unwrap_err()
                .to_string()
        };
        let both =
            err(serde_json::json!({"client_id": "Iv23liX", "app_id": 1, "installation_id": 2, "private_key": KEY}));
        assert!(both.contains("`app_id`") && both.contains("client_id"), "{both}");
        let mixed = err(
            serde_json::json!({"token": "ghp_hunter2", "client_id": "Iv23liX", "installation_id": 2, "private_key": KEY}),
        );
        assert!(mixed.contains("`token`"), "{mixed}");
        let numeric = err(serde_json::json!({"client_id": "4242", "installation_id": 2, "private_key": KEY}));
        assert!(
            numeric.contains("`client_id`") && numeric.contains("app_id"),
            "{numeric}"
        );
        let neither = err(serde_json::json!({"installation_id": 2, "private_key": KEY}));
        assert!(
            neither.contains("`app_id`") && neither.contains("client_id"),
            "{neither}"
        );
        for e in [both, mixed, numeric, neither] {
            assert!(!e.contains("MIIBOgIBAAJBAKj34") && !e.contains("hunter2"), "{e}");
        }
    }
}
