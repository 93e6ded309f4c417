//! The Lambda functions' process life: configuration checked at init, clients built at the
//! first invocation and kept for the life of the execution environment.
//!
//! Why not build the clients at init, as is usual: the AWS SDK's HTTPS client loads and parses
//! the system's root certificates when a client is made (4–5 ms on a Debian trust store, 1–2 ms
//! on a single bundle as on Lambda), longer than all the rest of the start together. Made at the
//! first invocation, that cost is paid once, by that invocation, and the init phase stays close
//! to a hello-world's (`make bench` shows both). A bad configuration variable still fails the
//! init phase, naming the variable.
//!
//! Each invocation goes through the one [`handler`] of every [`Job`] (`job.rs`: what a function
//! does item by item; `invocation.rs`: what an invocation runs with, and the handler: pause, the
//! item loop, metrics, the SQS batch answer and its backoff); [`respond`] makes its result
//! Lambda's answer. The mains compose the two.

use std::future::Future;
use std::time::Instant;

use lambda_runtime::Diagnostic;

use super::error::{Class, Classify};
use tokio::sync::OnceCell;

mod invocation;
mod job;

pub use invocation::{CHAIN, Invocation, Shell, handler};
pub use job::{After, Ctx, Failed, Fails, ItemOutcome, Job, Record, Work};

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

/// Whether a failure of this class is worth running again: only a retryable one. A final or
/// invalid-input failure fails the same way every time, so redelivering it only delays the
/// signal (the metric and the ERROR line) and, for SQS, fills the dead-letter queue hours later.
/// The one rule both functions follow, for SQS records ([`sqs_redeliver`]) and for direct
/// invocations ([`answer`]).
pub const fn redeliver(class: Class) -> bool {
    matches!(class, Class::Retryable)
}

/// One SQS record that failed: its message id, what it was about, what the failure means, and
/// why (an error message, never a secret).
#[derive(Debug, Clone)]
pub struct RecordFailure {
    pub message_id: String,
    pub about: About,
    pub class: Class,
    pub reason: String,
}

/// What a line about a record or an invocation concerns, as its `cell`, `cluster` or `scope`
/// field: operators find a cell's or a cluster's failures by those fields, so a line that
/// concerns neither says what it concerns instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct About {
    /// The cells (state-sync), comma-separated when a record named several.
    pub cell: Option<String>,
    pub cluster: Option<String>,
    /// `fleet`: every cell (the dashboard, the configuration, the fleet repo itself); `event`:
    /// an event that names no cell or cluster cellbridge could read.
    pub scope: Option<&'static str>,
}

impl About {
    pub fn cells<S: AsRef<str>>(cells: impl IntoIterator<Item = S>) -> Self {
        let mut names: Vec<String> = cells.into_iter().map(|c| c.as_ref().to_owned()).collect();
        names.sort();
        names.dedup();
        if names.is_empty() {
            return Self::event();
        }
        Self {
            cell: Some(names.join(", ")),
            ..Self::default()
        }
    }

    pub fn cluster(cluster: &str) -> Self {
        Self {
            cluster: Some(cluster.to_owned()),
            ..Self::default()
        }
    }

    pub fn fleet() -> Self {
        Self {
            scope: Some("fleet"),
            ..Self::default()
        }
    }

    pub fn event() -> Self {
        Self {
            scope: Some("event"),
            ..Self::default()
        }
    }

    /// What an answer names: the cells that failed (`cells[].cell` with an `error`) and its
    /// `cluster`; an answer naming neither failed before any cell's or cluster's work, for the
    /// whole fleet (configuration, the fleet repo) or, for an event cellbridge cannot read,
    /// for that event.
    fn of_answer(response: &serde_json::Value, class: Class) -> Self {
        let failed = response["cells"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c.get("error").is_some())
            .filter_map(|c| c["cell"].as_str());
        let mut about = Self::cells(failed);
        if let Some(cluster) = response["cluster"].as_str() {
            about = Self::cluster(cluster);
        }
        if about.cell.is_none() && about.cluster.is_none() && class != Class::InvalidInput {
            about = Self::fleet();
        }
        about
    }
}

/// The `batchItemFailures` of an SQS batch answer: the failed records a retry may fix. The
/// others are left out, so Lambda deletes them from the queue (with `ReportBatchItemFailures`,
/// the records not listed count as processed:
/// <https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html>); each is
/// logged at ERROR naming the record and the reason, next to its metric.
pub fn sqs_redeliver(function: &str, failed: impl IntoIterator<Item = RecordFailure>) -> Vec<String> {
    let mut ids = Vec::new();
    for f in failed {
        let (cell, cluster, scope) = (f.about.cell.as_deref(), f.about.cluster.as_deref(), f.about.scope);
        if redeliver(f.class) {
            tracing::warn!(function, cell, cluster, scope, message_id = %f.message_id, error = %f.reason, "SQS record failed; handed back for redelivery (after the function's backoff)");
            ids.push(f.message_id);
        } else {
            tracing::error!(function, cell, cluster, scope, message_id = %f.message_id, class = f.class.as_str(), error = %f.reason, "SQS record failed for good; not redelivered (deleted from the queue)");
        }
    }
    ids
}

/// A handled invocation as Lambda gets it. An SQS batch always answers with its response: the
/// records to redeliver are in `batchItemFailures` ([`sqs_redeliver`]). A direct invocation
/// (console, `aws lambda invoke`, EventBridge Scheduler's asynchronous invocation) whose
/// failures are all retryable is a Lambda error (`cellbridge.Retryable`), so the asynchronous
/// invocation's retries run it again. A final or invalid-input failure is answered as a handled
/// result, the response with `"class"` (and `"error"`): Lambda retries any returned error of an
/// asynchronous invocation
/// (<https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html>), and
/// that run would fail the same way.
pub fn answer(
    function: &str,
    mut response: serde_json::Value,
    class: Option<Class>,
) -> Result<serde_json::Value, Diagnostic> {
    match class {
        Some(class) if response.get("batchItemFailures").is_none() => {
            if redeliver(class) {
                return Err(failure(class, format!("{function} failed (retryable): {response}")));
            }
            let about = About::of_answer(&response, class);
            tracing::error!(
                function,
                cell = about.cell.as_deref(),
                cluster = about.cluster.as_deref(),
                scope = about.scope,
                class = class.as_str(),
                "{function} failed for good; answered as handled, not retried"
            );
            if let Some(o) = response.as_object_mut() {
                o.entry("error")
                    .or_insert_with(|| serde_json::Value::String(format!("{function} failed ({})", class.as_str())));
                o.insert("class".into(), class.as_str().into());
                Ok(response)
            } else {
                Ok(
                    serde_json::json!({"error": format!("{function} failed ({})", class.as_str()), "class": class.as_str(), "result": response}),
                )
            }
        }
        _ => Ok(response),
    }
}

/// A run that failed before it had a response (an event it cannot read, a fleet repo it cannot
/// list): [`answer`] with `{"error": message}`.
pub fn answer_error(
    function: &str,
    class: Class,
    message: impl std::fmt::Display,
) -> Result<serde_json::Value, Diagnostic> {
    answer(
        function,
        serde_json::json!({ "error": message.to_string() }),
        Some(class),
    )
}

/// The Lambda's answer for a [`handler`]'s result: [`answer`] for a handled invocation,
/// [`answer_error`] for one that failed before its items.
pub fn respond<E: std::fmt::Display + Classify>(
    function: &str,
    handled: Result<Invocation, E>,
) -> Result<serde_json::Value, Diagnostic> {
    match handled {
        Ok(inv) => answer(function, inv.response, inv.class),
        Err(e) => answer_error(function, e.class(), e),
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
    fn a_failed_direct_run_is_an_error_only_when_retryable_and_an_sqs_batch_never_is() {
        let direct = serde_json::json!({"cells": [{"action": "failed"}]});
        let e = answer("state-sync", direct.clone(), Some(Class::Retryable)).unwrap_err();
        assert_eq!(e.error_type, "cellbridge.Retryable");
        assert!(
            e.error_message.starts_with("state-sync failed (retryable): "),
            "{}",
            e.error_message
        );
        // Final and invalid input: handled, saying so, so that no asynchronous retry runs it again.
        let ok = answer("state-sync", direct, Some(Class::Final)).unwrap();
        assert_eq!(ok["class"], "final");
        assert_eq!(ok["error"], "state-sync failed (final)");
        assert_eq!(ok["cells"][0]["action"], "failed");
        let ok = answer(
            "cluster-bootstrap",
            serde_json::json!({"error": "no cell"}),
            Some(Class::Final),
        )
        .unwrap();
        assert_eq!(ok, serde_json::json!({"error": "no cell", "class": "final"}));
        let ok = answer_error("cluster-bootstrap", Class::InvalidInput, "event: not JSON").unwrap();
        assert_eq!(
            ok,
            serde_json::json!({"error": "event: not JSON", "class": "invalid_input"})
        );
        let e = answer_error("cluster-bootstrap", Class::Retryable, "GitHub: 502").unwrap_err();
        assert_eq!(e.error_type, "cellbridge.Retryable");
        assert!(e.error_message.contains("GitHub: 502"), "{}", e.error_message);

        let batch = serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m1"}]});
        assert_eq!(answer("state-sync", batch.clone(), Some(Class::Final)).unwrap(), batch);
        assert_eq!(
            answer("state-sync", batch.clone(), Some(Class::Retryable)).unwrap(),
            batch
        );
        let ok = serde_json::json!({"outcome": "bootstrapped"});
        assert_eq!(answer("cluster-bootstrap", ok.clone(), None).unwrap(), ok);
    }

    #[test]
    fn only_retryable_records_go_back_to_the_queue() {
        let f = |id: &str, class| RecordFailure {
            message_id: id.into(),
            about: About::cluster("eks-1"),
            class,
            reason: format!("{id} failed"),
        };
        let ids = sqs_redeliver(
            "cluster-bootstrap",
            [
                f("m1", Class::Final),
                f("m2", Class::Retryable),
                f("m3", Class::InvalidInput),
                f("m4", Class::Retryable),
            ],
        );
        assert_eq!(ids, ["m2", "m4"]);
        assert!(redeliver(Class::Retryable));
        assert!(!redeliver(Class::Final) && !redeliver(Class::InvalidInput));
    }

    #[test]
    fn a_failed_answers_line_names_what_failed_or_says_it_was_the_fleet_or_the_event() {
        let cells = serde_json::json!({"cells": [
            {"cell": "eu-b2", "action": "failed", "error": "GitHub: 502"},
            {"cell": "eu-a1", "action": "opened"},
            {"cell": "eu-b1", "action": "refused", "error": "a secret"},
        ]});
        assert_eq!(
            About::of_answer(&cells, Class::Final).cell.as_deref(),
            Some("eu-b1, eu-b2")
        );
        let cluster = serde_json::json!({"cluster": "eks-1", "error": "no cell"});
        assert_eq!(About::of_answer(&cluster, Class::Final), About::cluster("eks-1"));
        let before = serde_json::json!({"error": "the fleet repo: HTTP 502"});
        assert_eq!(About::of_answer(&before, Class::Retryable), About::fleet());
        assert_eq!(About::of_answer(&before, Class::InvalidInput), About::event());
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
