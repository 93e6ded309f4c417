//! Where secrets are read from: Secrets Manager in [`crate::adapters::secrets`], in memory with
//! the `test-support` feature. A value is a [`Secret`] from the moment it is read, so it never
//! reaches a log or an error.

use std::future::Future;

use crate::pure::redact::Secret;
use crate::shell::error::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("secret {secret}: cannot read it from Secrets Manager: {reason}")]
    Fetch {
        secret: String,
        reason: String,
        retryable: bool,
    },
    #[error("secret {secret}: has no SecretString (binary secrets are not supported)")]
    NotString { secret: String },
    #[error("secret {secret}: is not a JSON object")]
    NotJson { secret: String },
    #[error("secret {secret}: missing field `{field}` ({hint})")]
    MissingField {
        secret: String,
        field: &'static str,
        hint: &'static str,
    },
    #[error("secret {secret}: field `{field}` {reason}")]
    InvalidField {
        secret: String,
        field: &'static str,
        reason: &'static str,
    },
}

impl Classify for SecretsError {
    fn class(&self) -> Class {
        match self {
            SecretsError::Fetch { retryable: true, .. } => Class::Retryable,
            _ => Class::Final,
        }
    }
}

/// Where secrets are read from: Secrets Manager, or the in-memory store of the `test-support`
/// feature (`doubles::secrets::MemSecrets`).
pub trait SecretStore: Send + Sync {
    /// The secret's current `SecretString` (`name` may be a name or an ARN).
    fn secret_string(&self, name: &str) -> impl Future<Output = Result<Secret<String>, SecretsError>> + Send;
}
