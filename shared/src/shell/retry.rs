//! One way to retry, for every call cellbridge retries itself (GitHub requests, Kubernetes
//! applies): exponential backoff (`backon`), a server's `Retry-After` honoured, no wait that
//! would end past the invocation's deadline, and, when it gives up, why.
//!
//! The clients' own retries are off (octocrab's, kube's): they would sleep for whatever a server
//! asks, however long, while a Lambda has a deadline.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};

/// How long to wait between tries and how often to try.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub first: Duration,
    pub max: Duration,
    /// Tries in all, the first included; uncounted retries ([`Again::Uncounted`]) aside.
    pub attempts: u32,
    /// Random extra wait, up to the wait itself, so that many clients do not retry in step.
    pub jitter: bool,
    /// No wait may end closer than the margin to the deadline.
    pub deadline: Option<(Instant, Duration)>,
}

/// What a failed try means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// Retrying cannot help.
    No,
    /// Worth another try after the backoff.
    Yes,
    /// Worth another try after what the server asked for (`Retry-After`).
    After(Duration),
    /// Worth another try that does not count against the attempts (a grant still on its way).
    Uncounted,
}

/// Why the retries stopped.
#[derive(Debug)]
pub enum GaveUp<E> {
    /// The error was final.
    Final(E),
    /// Every attempt failed; the count of tries.
    Attempts(E, u32),
    /// The next wait (given) would have ended past the deadline.
    Deadline(E, Duration),
}

impl<E> GaveUp<E> {
    pub fn into_error(self) -> E {
        match self {
            GaveUp::Final(e) | GaveUp::Attempts(e, _) | GaveUp::Deadline(e, _) => e,
        }
    }
}

enum Stop {
    Final,
    Attempts(u32),
    Deadline(Duration),
}

/// Runs `call` until it succeeds or `judge` (or the policy) says to stop; `notify` hears of
/// every retry with the count of tries so far and the wait before the next.
pub async fn retry<T, E, F, Fut>(
    policy: &Policy,
    call: F,
    mut judge: impl FnMut(&E) -> Again,
    mut notify: impl FnMut(&E, u32, Duration),
) -> Result<T, GaveUp<E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut backoff = ExponentialBuilder::default()
        .with_min_delay(policy.first)
        .with_max_delay(policy.max)
        .without_max_times();
    if policy.jitter {
        backoff = backoff.with_jitter();
    }
    let tries = AtomicU32::new(1);
    let last = Mutex::new(Again::No);
    let stop = Mutex::new(Stop::Final);
    let set = |m: &Mutex<Stop>, s: Stop| *m.lock().unwrap_or_else(|p| p.into_inner()) = s;
    let result = call
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(|e| {
            let again = judge(e);
            *last.lock().unwrap_or_else(|p| p.into_inner()) = again;
            match again {
                Again::No => false,
                Again::Uncounted => true,
                Again::Yes | Again::After(_) => {
                    let n = tries.load(Ordering::Relaxed);
                    if n >= policy.attempts {
                        set(&stop, Stop::Attempts(n));
                        false
                    } else {
                        true
                    }
                }
            }
        })
        .adjust(|_, next| {
            let again = *last.lock().unwrap_or_else(|p| p.into_inner());
            let wait = match again {
                Again::After(d) => d,
                _ => next?,
            };
            if let Some((deadline, margin)) = policy.deadline
                && Instant::now() + wait + margin >= deadline
            {
                set(&stop, Stop::Deadline(wait));
                return None;
            }
            Some(wait)
        })
        .notify(|e, wait| {
            let counted = *last.lock().unwrap_or_else(|p| p.into_inner()) != Again::Uncounted;
            let n = if counted {
                tries.fetch_add(1, Ordering::Relaxed)
            } else {
                tries.load(Ordering::Relaxed)
            };
            notify(e, n, wait)
        })
        .await;
    result.map_err(|e| match stop.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Stop::Final => GaveUp::Final(e),
        Stop::Attempts(n) => GaveUp::Attempts(e, n),
        Stop::Deadline(d) => GaveUp::Deadline(e, d),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(attempts: u32) -> Policy {
        Policy {
            first: Duration::from_millis(1),
            max: Duration::from_millis(4),
            attempts,
            jitter: false,
            deadline: None,
        }
    }

    #[tokio::test]
    async fn retries_until_success_within_the_attempts() {
        let calls = AtomicU32::new(0);
        let r: Result<u32, GaveUp<&str>> = retry(
            &policy(3),
            || async {
                let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
                if n < 3 { Err("503") } else { Ok(n) }
            },
            |_| Again::Yes,
            |_, _, _| {},
        )
        .await;
        assert_eq!(r.unwrap(), 3);
    }

    #[tokio::test]
    async fn gives_up_after_the_attempts_and_says_so() {
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = retry(
            &policy(4),
            || async {
                calls.fetch_add(1, Ordering::Relaxed);
                Err("503")
            },
            |_| Again::Yes,
            |_, _, _| {},
        )
        .await;
        assert!(matches!(r, Err(GaveUp::Attempts("503", 4))), "{r:?}");
        assert_eq!(calls.load(Ordering::Relaxed), 4);
    }

    #[tokio::test]
    async fn a_final_error_is_not_retried() {
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = retry(
            &policy(5),
            || async {
                calls.fetch_add(1, Ordering::Relaxed);
                Err("403")
            },
            |_| Again::No,
            |_, _, _| {},
        )
        .await;
        assert!(matches!(r, Err(GaveUp::Final("403"))));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn retry_after_is_honoured_unless_it_passes_the_deadline() {
        let deadline = Instant::now() + Duration::from_millis(200);
        let mut p = policy(5);
        p.deadline = Some((deadline, Duration::from_millis(50)));
        let waits = Mutex::new(Vec::new());
        let r: Result<(), _> = retry(
            &p,
            || async { Err("429") },
            |_| Again::After(Duration::from_millis(60)),
            |_, _, wait| waits.lock().unwrap().push(wait),
        )
        .await;
        assert!(
            matches!(r, Err(GaveUp::Deadline("429", w)) if w == Duration::from_millis(60)),
            "{r:?}"
        );
        let waits = waits.into_inner().unwrap();
        assert!(
            !waits.is_empty() && waits.iter().all(|w| *w == Duration::from_millis(60)),
            "{waits:?}"
        );
        assert!(Instant::now() < deadline, "stopped before the deadline");
    }

    #[tokio::test]
    async fn uncounted_retries_do_not_use_up_the_attempts() {
        let calls = AtomicU32::new(0);
        let r: Result<u32, GaveUp<&str>> = retry(
            &policy(2),
            || async {
                let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
                if n < 5 { Err("401") } else { Ok(n) }
            },
            |_| Again::Uncounted,
            |_, _, _| {},
        )
        .await;
        assert_eq!(r.unwrap(), 5);
    }
}
