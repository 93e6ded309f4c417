//! Every outcome as a CloudWatch metric, in the embedded metric format (EMF): one JSON line per
//! outcome in the function's log, from which CloudWatch Logs extracts the metric `Count`
//! (namespace `CELLBRIDGE_METRICS_NAMESPACE`, default `cellbridge`) with the dimensions
//! `Function` and `Outcome`. README, "Metrics and alarms".
//!
//! The shape follows the specification,
//! <https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>:
//! a root object with `_aws.Timestamp` (milliseconds since the epoch) and `_aws.CloudWatchMetrics`
//! (a list of directives: `Namespace`, `Dimensions` as a list of dimension sets, `Metrics` with
//! `Name` and `Unit`), and a root member for each dimension and metric named there. The root
//! node "MAY contain any other members": the cell (and, for cluster-bootstrap, the cluster) is
//! such a plain property — searchable with Logs Insights, never a dimension, so that a fleet of
//! many cells does not make a metric per cell. A record carries names and outcomes only, never
//! an error message or a value.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::config::{self, ConfigError};

/// The metric namespace when `CELLBRIDGE_METRICS_NAMESPACE` is unset.
pub const DEFAULT_NAMESPACE: &str = "cellbridge";
/// The one metric: how many times an outcome happened.
pub const METRIC: &str = "Count";

/// Where the records go: stdout in Lambda (the function's log), a list in tests.
pub trait Sink: Send + Sync {
    fn emit(&self, record: &Value);
}

/// The function's log: one line on stdout per record, written at once.
pub struct Stdout;

impl Sink for Stdout {
    fn emit(&self, record: &Value) {
        let mut line = record.to_string();
        line.push('\n');
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
    }
}

/// No metrics (the command line, whose stdout is its answer).
pub struct Discard;

impl Sink for Discard {
    fn emit(&self, _: &Value) {}
}

/// The records, kept (tests).
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<Value>>>);

impl Captured {
    pub fn records(&self) -> Vec<Value> {
        self.0.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// `(Outcome, cell)` of each record, in order.
    pub fn outcomes(&self) -> Vec<(String, Option<String>)> {
        // The sweep's heartbeat (`AccessSweeps`) is a metric of its own, with no outcome.
        self.records()
            .iter()
            .filter_map(|r| Some((r["Outcome"].as_str()?.to_owned(), r["cell"].as_str().map(str::to_owned))))
            .collect()
    }
}

impl Sink for Captured {
    fn emit(&self, record: &Value) {
        if let Ok(mut r) = self.0.lock() {
            r.push(record.clone());
        }
    }
}

/// Where and under which names a function's outcomes are counted.
pub struct Metrics<'a> {
    pub namespace: String,
    /// The `Function` dimension: the Lambda function's name (`AWS_LAMBDA_FUNCTION_NAME`, so two
    /// deployments in one account stay apart), else the function's kind.
    pub function: String,
    pub sink: &'a dyn Sink,
}

impl<'a> Metrics<'a> {
    /// The default namespace, `kind` as the function's name.
    pub fn new(kind: &str, sink: &'a dyn Sink) -> Self {
        Self {
            namespace: DEFAULT_NAMESPACE.into(),
            function: kind.into(),
            sink,
        }
    }

    /// For a Lambda function: the namespace from `CELLBRIDGE_METRICS_NAMESPACE`, the function's
    /// name from `AWS_LAMBDA_FUNCTION_NAME` (`kind` outside Lambda).
    pub fn from_env(kind: &str, sink: &'a dyn Sink) -> Result<Self, ConfigError> {
        Ok(Self {
            namespace: namespace_from_env()?,
            function: config::optional("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|| kind.into()),
            sink,
        })
    }

    /// Counts one outcome; `properties` are plain members (`cell`, `cluster`), never dimensions.
    pub fn count(&self, outcome: &str, properties: &[(&str, Option<&str>)]) {
        self.sink
            .emit(&record(&self.namespace, &self.function, outcome, properties, now_ms()));
    }
}

/// `CELLBRIDGE_METRICS_NAMESPACE`, checked: CloudWatch takes 1–255 characters and no namespace
/// starting with `AWS/`.
pub fn namespace_from_env() -> Result<String, ConfigError> {
    let Some(ns) = config::optional("CELLBRIDGE_METRICS_NAMESPACE") else {
        return Ok(DEFAULT_NAMESPACE.into());
    };
    let ok = ns.len() <= 255
        && !ns.starts_with("AWS/")
        && !ns.starts_with(':')
        && ns
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_/#:".contains(c) || c == ' ');
    if ok {
        Ok(ns)
    } else {
        Err(ConfigError::Invalid {
            name: "CELLBRIDGE_METRICS_NAMESPACE",
            value: ns,
            reason: "expected 1-255 of A-Z a-z 0-9 . - _ / # : and spaces, not starting with AWS/".into(),
        })
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One EMF record: `Count` = 1 for `(Function, Outcome)`, with `properties` as plain members
/// (absent ones left out).
pub fn record(
    namespace: &str,
    function: &str,
    outcome: &str,
    properties: &[(&str, Option<&str>)],
    timestamp_ms: u64,
) -> Value {
    let mut r = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Function", "Outcome"]],
                "Metrics": [{"Name": METRIC, "Unit": "Count"}],
            }],
        },
        "Function": function,
        "Outcome": outcome,
        METRIC: 1,
    });
    for (name, value) in properties {
        if let Some(v) = value {
            r[*name] = Value::String((*v).to_owned());
        }
    }
    r
}

/// The gauge of the temporary access entries: the oldest one cellbridge still has, in seconds.
pub const OLDEST_TEMPORARY_ACCESS: &str = "OldestTemporaryAccessSeconds";
/// One per finished sweep (whatever it found): the heartbeat the module's alarm misses.
pub const ACCESS_SWEEPS: &str = "AccessSweeps";

/// One EMF record of the sweep, dimension `Function` only: `AccessSweeps` = 1 and
/// `OldestTemporaryAccessSeconds` = the oldest remaining temporary entry's age (0 when none),
/// `properties` as plain members.
pub fn sweep_record(
    namespace: &str,
    function: &str,
    oldest_secs: u64,
    properties: &[(&str, Option<&str>)],
    timestamp_ms: u64,
) -> Value {
    let mut r = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Function"]],
                "Metrics": [
                    {"Name": ACCESS_SWEEPS, "Unit": "Count"},
                    {"Name": OLDEST_TEMPORARY_ACCESS, "Unit": "Seconds"},
                ],
            }],
        },
        "Function": function,
        ACCESS_SWEEPS: 1,
        OLDEST_TEMPORARY_ACCESS: oldest_secs,
    });
    for (name, value) in properties {
        if let Some(v) = value {
            r[*name] = Value::String((*v).to_owned());
        }
    }
    r
}

impl Metrics<'_> {
    /// A sweep's record (see [`sweep_record`]).
    pub fn sweep(&self, oldest_secs: u64, properties: &[(&str, Option<&str>)]) {
        self.sink.emit(&sweep_record(
            &self.namespace,
            &self.function,
            oldest_secs,
            properties,
            now_ms(),
        ));
    }
}

/// The metric outcome of a state-sync cell result (`action`, and whether a failure is
/// retryable): README, "Outcomes" and "Metrics and alarms".
pub fn sync_outcome(action: &str, retryable: bool) -> &'static str {
    match action {
        "opened" | "updated" | "closed" | "decommission-opened" | "decommission-updated" => "synced",
        "unchanged" | "in-sync" | "decommission-unchanged" => "unchanged",
        "destroyed" => "destroyed",
        "refused" => "refused",
        "failed" if retryable => "retried",
        "failed" => "failed_final",
        "paused" => "paused",
        "stale" => "stale",
        "declined" => "declined",
        "conflicted" => "conflicted",
        "planned" => "planned",
        "ignored" => "ignored",
        "enqueued" => "enqueued",
        _ => "other",
    }
}

/// The metric outcome of a cluster-bootstrap report's `outcome`.
pub fn bootstrap_outcome(outcome: &str) -> &'static str {
    match outcome {
        "bootstrapped" => "synced",
        "already_bootstrapped" => "unchanged",
        "planned" => "planned",
        "not_a_cell" => "ignored",
        "cluster_not_ready" => "retried",
        "paused" => "paused",
        _ => "other",
    }
}

/// The metric outcome of a failure of this class: retried (SQS redelivers it, or Lambda retries
/// the asynchronous invocation), refused (the input cannot be used), failed for good.
pub fn failure_outcome(class: crate::error::Class) -> &'static str {
    match class {
        crate::error::Class::Retryable => "retried",
        crate::error::Class::InvalidInput => "refused",
        crate::error::Class::Final => "failed_final",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_emf_document_with_the_cell_as_a_property() {
        let r = record(
            "cellbridge",
            "state-sync",
            "synced",
            &[("cell", Some("eu-c1")), ("cluster", None)],
            1_700_000_000_000,
        );
        assert_eq!(
            r,
            json!({
                "_aws": {"Timestamp": 1_700_000_000_000u64, "CloudWatchMetrics": [{
                    "Namespace": "cellbridge",
                    "Dimensions": [["Function", "Outcome"]],
                    "Metrics": [{"Name": "Count", "Unit": "Count"}],
                }]},
                "Function": "state-sync", "Outcome": "synced", "Count": 1, "cell": "eu-c1",
            })
        );
        // Every dimension and metric the directive names is a root member (the spec's "target
        // members"); the cell is in no dimension set.
        let directive = &r["_aws"]["CloudWatchMetrics"][0];
        for set in directive["Dimensions"].as_array().unwrap() {
            for d in set.as_array().unwrap() {
                assert!(r.get(d.as_str().unwrap()).is_some(), "{d}");
                assert_ne!(d, "cell");
            }
        }
        assert!(r.get(directive["Metrics"][0]["Name"].as_str().unwrap()).is_some());
        assert!(!r.to_string().contains('\n'), "one line");
    }

    #[test]
    fn many_cells_make_one_metric_per_outcome() {
        let captured = Captured::default();
        let m = Metrics::new("state-sync", &captured);
        for i in 0..50 {
            m.count("synced", &[("cell", Some(&format!("c{i}")))]);
        }
        let metrics: std::collections::BTreeSet<String> = captured
            .records()
            .iter()
            .map(|r| {
                let dims = &r["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0];
                dims.as_array()
                    .unwrap()
                    .iter()
                    .map(|d| format!("{}={}", d.as_str().unwrap(), r[d.as_str().unwrap()]))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        assert_eq!(metrics.len(), 1, "{metrics:?}");
        assert_eq!(captured.outcomes()[7], ("synced".into(), Some("c7".into())));
    }

    #[test]
    fn every_action_has_its_outcome() {
        assert_eq!(sync_outcome("opened", false), "synced");
        assert_eq!(sync_outcome("in-sync", false), "unchanged");
        assert_eq!(sync_outcome("failed", true), "retried");
        assert_eq!(sync_outcome("failed", false), "failed_final");
        assert_eq!(sync_outcome("refused", false), "refused");
        assert_eq!(sync_outcome("paused", false), "paused");
    }
}
