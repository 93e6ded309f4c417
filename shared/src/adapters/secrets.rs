//! Secrets Manager: JSON secrets fetched into [`Secret`] so no value reaches a log or an error.
//! Errors name the secret and the field, never what it holds.

use serde_json::Value;

use super::github::Credentials;
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

/// The GitHub credentials secret: `{"app_id", "installation_id", "private_key"}` for a GitHub
/// App, or `{"token"}`.
pub fn github_credentials(secret: &JsonSecret) -> Result<Credentials, SecretsError> {
    const APP: &str = "a GitHub App needs app_id, installation_id and private_key; or give a token";
    if secret.has("app_id") || secret.has("installation_id") || secret.has("private_key") {
        let app_id = secret.number("app_id", APP)?;
        let installation_id = secret.number("installation_id", APP)?;
        let private_key = secret.string("private_key", APP)?;
        if !private_key.expose().contains("PRIVATE KEY-----") {
            return Err(SecretsError::InvalidField {
                secret: secret.name().to_owned(),
                field: "private_key",
                reason: "is not a PEM private key",
            });
        }
        return Ok(Credentials::App {
            app_id,
            installation_id,
            private_key,
        });
    }
    let token = secret.string(
        "token",
        "give a GitHub App's app_id, installation_id and private_key, or a token",
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
                app_id,
                installation_id,
                ..
            } => assert_eq!((app_id, installation_id), (12, 34)),
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
}
