//! Secrets in memory (feature `test-support`), with Secrets Manager's rules for what a read can
//! answer (<https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html>):
//! the current value; `ResourceNotFoundException` for a name it does not hold (final);
//! `InternalServiceError` or throttling (retryable), injected with [`MemSecrets::fail`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::ports::secrets::{SecretStore, SecretsError};
use crate::pure::redact::Secret;

#[derive(Default)]
struct Store {
    secrets: BTreeMap<String, String>,
    failing: usize,
    reads: Vec<String>,
}

#[derive(Default)]
pub struct MemSecrets {
    store: Mutex<Store>,
}

impl MemSecrets {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores a new current value (PutSecretValue).
    pub fn put(&self, name: &str, text: impl Into<String>) {
        self.lock().secrets.insert(name.to_owned(), text.into());
    }

    /// The next `times` reads fail as an `InternalServiceError` that outlived the SDK's retries.
    pub fn fail(&self, times: usize) {
        self.lock().failing = times;
    }

    /// The names read so far, in order.
    pub fn reads(&self) -> Vec<String> {
        self.lock().reads.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl SecretStore for MemSecrets {
    async fn secret_string(&self, name: &str) -> Result<Secret<String>, SecretsError> {
        let mut s = self.lock();
        s.reads.push(name.to_owned());
        if s.failing > 0 {
            s.failing -= 1;
            return Err(SecretsError::Fetch {
                secret: name.to_owned(),
                reason: "InternalServiceError: injected".into(),
                retryable: true,
            });
        }
        match s.secrets.get(name) {
            Some(text) => Ok(Secret::new(text.clone())),
            None => Err(SecretsError::Fetch {
                secret: name.to_owned(),
                reason: "ResourceNotFoundException: Secrets Manager can't find the specified secret.".into(),
                retryable: false,
            }),
        }
    }
}
