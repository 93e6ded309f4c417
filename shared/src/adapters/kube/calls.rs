//! One Kubernetes call with retries ([`crate::shell::retry`]), and what its failures mean.

use std::future::Future;
use std::time::Duration;

use super::{ApplyError, Session};
use crate::shell::retry::{Again, Policy};

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
            reason: transport(&e),
        },
        other => ApplyError::Transport {
            operation,
            target: target.into(),
            reason: other.to_string(),
        },
    }
}

fn judge_answer(e: &kube::Error, session: &Session) -> Again {
    match classify(e) {
        Verdict::Retry => Again::Yes,
        Verdict::AuthPending if session.in_auth_grace() => Again::Uncounted,
        Verdict::AuthPending | Verdict::Fail => Again::No,
    }
}

/// A connection that did not complete (TCP, or TLS) within the connect timeout.
pub(super) fn is_connect_timeout(e: &kube::Error) -> bool {
    if !matches!(e, kube::Error::Service(_) | kube::Error::HyperError(_)) {
        return false;
    }
    if !e.to_string().contains("(Connect)") && !crate::pure::redact::chain(e).contains("(Connect)") {
        return false;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if s.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        src = s.source();
    }
    false
}

/// Retries `f` on transient errors with exponential backoff ([`crate::shell::retry`]), at most
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
    let never_answered = || !session.answered.load(std::sync::atomic::Ordering::Relaxed);
    let judge = |e: &kube::Error| {
        if matches!(e, kube::Error::Api(_)) {
            // Any answer, even an error status, is the API server answering.
            session.answered.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // An API server that never answered and now lets the connection time out will not
        // answer the next attempt either: one bounded wait, then a final error.
        if is_connect_timeout(e) && never_answered() {
            return Again::No;
        }
        judge_answer(e, session)
    };
    let notify = |e: &kube::Error, attempt: u32, _wait: Duration| match classify(e) {
        Verdict::AuthPending => {
            auth_waits += 1;
            tracing::info!(%target, waits = auth_waits, "access not effective yet, waiting for the access entry");
        }
        // The server's message is left out: for a Secret it may quote the data.
        _ => tracing::warn!(%target, attempt = attempt + 1, error = %brief(e), "retrying"),
    };
    let out = crate::shell::retry::retry(&policy, f, judge, notify).await;
    match out {
        Ok(v) => {
            session.answered.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(v)
        }
        Err(gave_up) => {
            let e = gave_up.into_error();
            if is_connect_timeout(&e) && never_answered() {
                return Err(ApplyError::Unreachable {
                    endpoint: session.endpoint.clone(),
                    waited_ms: super::session::connect_timeout(tuning).as_millis() as u64,
                    reason: crate::pure::redact::chain(&e),
                });
            }
            Err(to_error(operation, target, e, quiet))
        }
    }
}

/// A Kubernetes error without the server's message.
pub(super) fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("HTTP {} {}", s.code, s.reason),
        other => transport(other),
    }
}

/// A request the API server never answered, in words: kube's own names for it (`ServiceError`,
/// `HyperError`) say nothing to an operator.
fn transport(e: &kube::Error) -> String {
    match e {
        kube::Error::Service(inner) => format!(
            "no answer from the API server: {}",
            crate::pure::redact::chain(inner.as_ref())
        ),
        kube::Error::HyperError(inner) => format!(
            "the connection to the API server failed: {}",
            crate::pure::redact::chain(inner)
        ),
        other => crate::pure::redact::chain(other),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::{Applier, ApplyError, ClusterAuth, Session, Tuning};
    use crate::ports::cluster::KubeApi;
    use crate::pure::bootstrap::plan::KubeRef;
    use crate::shell::error::{Class, Classify};

    /// The black hole: a port that takes the TCP connection (the kernel's backlog) and never
    /// says a word, so TLS never completes, as a private endpoint seen from elsewhere or a
    /// security group that drops. (A non-routable address such as 10.255.255.1 is no black
    /// hole where outgoing connections are intercepted by a proxy, as in CI sandboxes; this
    /// one is, everywhere: kube's connect timeout wraps the TLS connector.)
    #[tokio::test]
    async fn an_endpoint_that_never_answers_fails_once_finally_within_the_connect_timeout() {
        let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}", hole.local_addr().unwrap());
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("config");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        let tuning = Tuning {
            request_timeout: Duration::from_millis(300),
            attempts: 6,
            backoff: Duration::from_millis(200),
            ..Tuning::default()
        };
        let session = Session::connect(ClusterAuth::Kubeconfig(kubeconfig), tuning, false)
            .await
            .unwrap();
        let mut applier = Applier::new(session);
        let target = KubeRef {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: "flux-system".into(),
        };
        let start = Instant::now();
        let err = applier.exists(&target, "namespaces").await.unwrap_err();
        let took = start.elapsed();
        // One attempt: six would take 6 x 300 ms plus backoff.
        assert!(took < Duration::from_millis(1500), "took {took:?}");
        assert!(matches!(err, ApplyError::Unreachable { .. }), "{err:?}");
        assert_eq!(err.class(), Class::Final);
        let text = err.to_string();
        assert!(
            text.contains(&url) && text.contains("from where cellbridge runs"),
            "{text}"
        );
        assert!(text.contains("300 ms"), "{text}");
        drop(hole);
    }

    #[test]
    fn a_request_never_answered_is_said_in_words_not_kubes_variant_names() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let e = kube::Error::Service(Box::new(refused));
        let said = super::brief(&e);
        assert_eq!(said, "no answer from the API server: connection refused");
        assert!(!said.contains("ServiceError"), "{said}");
    }
}
