//! The Lambda functions' process life: configuration checked at init, clients built at the
//! first invocation and kept for the life of the execution environment.
//!
//! Why not build the clients at init, as is usual: the AWS SDK's HTTPS client loads and parses
//! the system's root certificates when a client is made (4–5 ms on a Debian trust store, 1–2 ms
//! on a single bundle as on Lambda), longer than all the rest of the start together. Made at the
//! first invocation, that cost is paid once, by that invocation, and the init phase stays close
//! to a hello-world's (`make bench` shows both). A bad configuration variable still fails the
//! init phase, naming the variable.

use std::future::Future;
use std::time::Instant;

use lambda_runtime::Diagnostic;

use crate::error::Class;
use tokio::sync::OnceCell;

/// A failed invocation as Lambda reports it: its `errorType` is the class's (see
/// [`Class::error_type`]); without this, it is the Rust type name of a boxed error.
pub fn failure(class: Class, message: impl std::fmt::Display) -> Diagnostic {
    Diagnostic {
        error_type: class.error_type().to_owned(),
        error_message: message.to_string(),
    }
}

/// The deadline of a Lambda invocation (milliseconds since the epoch) as an `Instant`, less a
/// margin to answer in.
pub fn deadline_from_epoch_ms(deadline_ms: u64) -> Instant {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let left = std::time::Duration::from_millis(deadline_ms.saturating_sub(now_ms))
        .saturating_sub(std::time::Duration::from_secs(1));
    Instant::now() + left
}

/// A handled invocation as Lambda gets it: the response, or, when a directly invoked run had
/// failures (`class`), an error of their class. An SQS batch always answers with its response:
/// the records to redeliver are in `batchItemFailures`.
pub fn answer(
    function: &str,
    response: serde_json::Value,
    class: Option<Class>,
) -> Result<serde_json::Value, Diagnostic> {
    match class {
        Some(class) if response.get("batchItemFailures").is_none() => {
            let note = if class == Class::Retryable { " (retryable)" } else { "" };
            Err(failure(class, format!("{function} failed{note}: {response}")))
        }
        _ => Ok(response),
    }
}

/// A service built from a checked configuration `C` on first use.
pub struct Deferred<C, S> {
    config: C,
    service: OnceCell<S>,
}

impl<C: Clone, S> Deferred<C, S> {
    pub fn new(config: C) -> Self {
        Self {
            config,
            service: OnceCell::new(),
        }
    }

    /// The service, built by `build` the first time (concurrent first callers wait for the one
    /// build).
    pub async fn get<F, Fut>(&self, build: F) -> &S
    where
        F: FnOnce(C) -> Fut,
        Fut: Future<Output = S>,
    {
        self.service
            .get_or_init(|| async {
                let started = Instant::now();
                let service = build(self.config.clone()).await;
                let setup_ms = started.elapsed().as_secs_f64() * 1000.0;
                tracing::info!(setup_ms, "clients ready");
                service
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_direct_run_is_an_error_of_its_class_and_an_sqs_batch_never_is() {
        let direct = serde_json::json!({"cells": [{"action": "failed"}]});
        let e = answer("state-sync", direct, Some(Class::Retryable)).unwrap_err();
        assert_eq!(e.error_type, "cellbridge.Retryable");
        assert!(
            e.error_message.starts_with("state-sync failed (retryable): "),
            "{}",
            e.error_message
        );
        let batch = serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m1"}]});
        assert_eq!(answer("state-sync", batch.clone(), Some(Class::Final)).unwrap(), batch);
        let ok = serde_json::json!({"outcome": "bootstrapped"});
        assert_eq!(answer("cluster-bootstrap", ok.clone(), None).unwrap(), ok);
    }

    #[test]
    fn a_failure_names_its_kind_for_lambda() {
        let d = failure(Class::InvalidInput, "event: not JSON");
        assert_eq!(d.error_type, "cellbridge.InvalidEvent");
        assert_eq!(d.error_message, "event: not JSON");
    }
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn the_service_is_built_once_from_the_configuration() {
        static BUILDS: AtomicUsize = AtomicUsize::new(0);
        let d = Deferred::new("acme/fleet".to_string());
        let build = |c: String| async move {
            BUILDS.fetch_add(1, Ordering::SeqCst);
            format!("service for {c}")
        };
        assert_eq!(
            BUILDS.load(Ordering::SeqCst),
            0,
            "nothing is built before the first use"
        );
        let (a, b) = tokio::join!(d.get(build), d.get(build));
        assert_eq!(a, "service for acme/fleet");
        assert_eq!(b, a);
        assert_eq!(d.get(build).await, a);
        assert_eq!(BUILDS.load(Ordering::SeqCst), 1);
    }
}
