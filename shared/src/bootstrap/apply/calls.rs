//! One Kubernetes call with retries ([`crate::retry`]), and what its failures mean.

use std::future::Future;
use std::time::Duration;

use super::{ApplyError, Session};
use crate::retry::{Again, Policy};

pub(super) enum Verdict {
    Retry,
    AuthPending,
    Fail,
}

pub(super) fn classify(e: &kube::Error) -> Verdict {
    match e {
        kube::Error::Api(s) => match s.code {
            409 if s.reason != "AlreadyExists" => Verdict::Retry,
            429 | 500 | 502 | 503 | 504 => Verdict::Retry,
            401 | 403 => Verdict::AuthPending,
            _ => Verdict::Fail,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => Verdict::Retry,
        _ => Verdict::Fail,
    }
}

pub(super) fn to_error(operation: &'static str, target: &str, e: kube::Error, quiet: bool) -> ApplyError {
    match e {
        kube::Error::Api(s) => ApplyError::Api {
            operation,
            target: target.into(),
            code: s.code,
            reason: s.reason.clone(),
            // The server's words about a Secret are not repeated: it may quote the data.
            message: if quiet {
                "(message withheld for a Secret)".into()
            } else {
                s.message.clone()
            },
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => ApplyError::Transport {
            operation,
            target: target.into(),
            reason: crate::redact::chain(&e),
        },
        other => ApplyError::Transport {
            operation,
            target: target.into(),
            reason: other.to_string(),
        },
    }
}

/// Retries `f` on transient errors with exponential backoff ([`crate::retry`]), at most
/// `tuning.attempts` tries; a 401/403 while the new access entry propagates is waited out
/// without counting, for as long as the session's grace lasts.
pub(super) async fn retry<T, F, Fut>(
    session: &Session,
    operation: &'static str,
    target: &str,
    quiet: bool,
    f: F,
) -> Result<T, ApplyError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let tuning = &session.tuning;
    let policy = Policy {
        first: tuning.backoff,
        max: tuning.max_backoff,
        attempts: tuning.attempts,
        jitter: false,
        deadline: None,
    };
    let mut auth_waits = 0u32;
    let judge = |e: &kube::Error| match classify(e) {
        Verdict::Retry => Again::Yes,
        Verdict::AuthPending if session.in_auth_grace() => Again::Uncounted,
        Verdict::AuthPending | Verdict::Fail => Again::No,
    };
    let notify = |e: &kube::Error, attempt: u32, _wait: Duration| match classify(e) {
        Verdict::AuthPending => {
            auth_waits += 1;
            tracing::info!(%target, waits = auth_waits, "access not effective yet, waiting for the access entry");
        }
        // The server's message is left out: for a Secret it may quote the data.
        _ => tracing::warn!(%target, attempt = attempt + 1, error = %brief(e), "retrying"),
    };
    crate::retry::retry(&policy, f, judge, notify)
        .await
        .map_err(|gave_up| to_error(operation, target, gave_up.into_error(), quiet))
}

/// A Kubernetes error without the server's message.
pub(super) fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("HTTP {} {}", s.code, s.reason),
        other => crate::redact::chain(other),
    }
}
