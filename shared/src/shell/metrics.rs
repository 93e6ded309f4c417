//! Every outcome as a CloudWatch metric, in the embedded metric format (EMF): one JSON line per
//! outcome in the function's log, from which CloudWatch Logs extracts the metric `Count`
//! (namespace `CELLBRIDGE_METRICS_NAMESPACE`, default `cellbridge`) with the dimensions
//! `Function` and `Outcome`. docs/outcomes.md, "Metrics and alarms".
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

use super::config::{self, ConfigError};
use super::error::Class;

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
#[derive(Clone)]
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
    pub fn count(&self, outcome: Outcome, properties: &[(&str, Option<&str>)]) {
        self.sink.emit(&record(
            &self.namespace,
            &self.function,
            outcome.as_str(),
            properties,
            now_ms(),
        ));
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

/// A bootstrap's final outcome, by outcome (`Function`, `Flux`): how a fleet's bootstraps end.
pub const FLUX_OUTCOMES: &str = "FluxOutcomes";
/// 1 for a bootstrap that ended in anything but `ready`, 0 for `ready` (`Function` only): what
/// the module's stuck-cluster alarm sums.
pub const FLUX_STUCK: &str = "FluxStuck";

/// One EMF record of a bootstrap's final outcome: two directives, so that the alarm's metric
/// has the `Function` dimension alone and the outcomes theirs.
pub fn flux_record(
    namespace: &str,
    function: &str,
    outcome: crate::pure::bootstrap::confirm::Outcome,
    properties: &[(&str, Option<&str>)],
    timestamp_ms: u64,
) -> Value {
    let stuck = u8::from(outcome != crate::pure::bootstrap::confirm::Outcome::Ready);
    let mut r = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [["Function", "Flux"]],
                    "Metrics": [{"Name": FLUX_OUTCOMES, "Unit": "Count"}],
                },
                {
                    "Namespace": namespace,
                    "Dimensions": [["Function"]],
                    "Metrics": [{"Name": FLUX_STUCK, "Unit": "Count"}],
                },
            ],
        },
        "Function": function,
        "Flux": outcome.as_str(),
        FLUX_OUTCOMES: 1,
        FLUX_STUCK: stuck,
    });
    for (name, value) in properties {
        if let Some(v) = value {
            r[*name] = Value::String((*v).to_owned());
        }
    }
    r
}

impl Metrics<'_> {
    /// A bootstrap's final outcome (see [`flux_record`]).
    pub fn flux(&self, outcome: crate::pure::bootstrap::confirm::Outcome, properties: &[(&str, Option<&str>)]) {
        self.sink.emit(&flux_record(
            &self.namespace,
            &self.function,
            outcome,
            properties,
            now_ms(),
        ));
    }

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

    /// The GitHub token's days left ([`token_record`]); no record for a token without expiry.
    pub fn github_token(&self, expires_at: Option<std::time::SystemTime>) {
        if let Some(at) = expires_at {
            let now = std::time::SystemTime::now();
            self.sink.emit(&token_record(
                &self.namespace,
                &self.function,
                days_left(at, now),
                now_ms(),
            ));
        }
    }
}

/// The gauge of the GitHub token's expiry: days until GitHub stops accepting it (negative once
/// it has), what the module's token-expiring alarm watches.
pub const GITHUB_TOKEN_DAYS_LEFT: &str = "GithubTokenDaysLeft";

/// Days from `now` to `at`, to a hundredth.
pub fn days_left(at: std::time::SystemTime, now: std::time::SystemTime) -> f64 {
    let secs = match at.duration_since(now) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    (secs / 86_400.0 * 100.0).round() / 100.0
}

/// One EMF record of the GitHub token's expiry, dimension `Function` only: `GithubTokenDaysLeft`
/// (CloudWatch has no unit for days: `None`).
pub fn token_record(namespace: &str, function: &str, days: f64, timestamp_ms: u64) -> Value {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Function"]],
                "Metrics": [{"Name": GITHUB_TOKEN_DAYS_LEFT, "Unit": "None"}],
            }],
        },
        "Function": function,
        GITHUB_TOKEN_DAYS_LEFT: days,
    })
}

/// The `Outcome` dimension: what one cell's, cluster's or dashboard's run came to
/// (docs/outcomes.md, "Outcomes" and "Metrics and alarms"). Each result type says which of these it is; the
/// module's alarms watch `refused` and `failed_final`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Synced,
    Unchanged,
    Refused,
    FailedFinal,
    Retried,
    Paused,
    Destroyed,
    Stale,
    Declined,
    Conflicted,
    Planned,
    Enqueued,
    Ignored,
}

impl Outcome {
    /// Every outcome, in the order docs/outcomes.md lists them.
    pub const ALL: [Outcome; 13] = [
        Outcome::Synced,
        Outcome::Unchanged,
        Outcome::Refused,
        Outcome::FailedFinal,
        Outcome::Retried,
        Outcome::Paused,
        Outcome::Destroyed,
        Outcome::Stale,
        Outcome::Declined,
        Outcome::Conflicted,
        Outcome::Planned,
        Outcome::Enqueued,
        Outcome::Ignored,
    ];

    /// Its value in the `Outcome` dimension.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Synced => "synced",
            Outcome::Unchanged => "unchanged",
            Outcome::Refused => "refused",
            Outcome::FailedFinal => "failed_final",
            Outcome::Retried => "retried",
            Outcome::Paused => "paused",
            Outcome::Destroyed => "destroyed",
            Outcome::Stale => "stale",
            Outcome::Declined => "declined",
            Outcome::Conflicted => "conflicted",
            Outcome::Planned => "planned",
            Outcome::Enqueued => "enqueued",
            Outcome::Ignored => "ignored",
        }
    }

    /// A failure of this class: retried (SQS redelivers it, or Lambda retries the asynchronous
    /// invocation), refused (the input cannot be used), failed for good.
    pub const fn of_failure(class: Class) -> Self {
        match class {
            Class::Retryable => Outcome::Retried,
            Class::InvalidInput => Outcome::Refused,
            Class::Final => Outcome::FailedFinal,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page that documents every outcome, read by the tests below and the runbook's.
    const OUTCOMES_PAGE: &str = include_str!("../../../docs/outcomes.md");

    #[test]
    fn the_token_record_is_days_left_for_the_function_and_none_without_expiry() {
        use std::time::{Duration, SystemTime};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(days_left(now + Duration::from_secs(13 * 86_400 + 43_200), now), 13.5);
        assert_eq!(days_left(now - Duration::from_secs(86_400), now), -1.0);
        let r = token_record("cellbridge", "state-sync", 13.5, 7);
        assert_eq!(r["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
        assert_eq!(
            r["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
            GITHUB_TOKEN_DAYS_LEFT
        );
        assert_eq!(
            (r["Function"].as_str(), r[GITHUB_TOKEN_DAYS_LEFT].as_f64()),
            (Some("state-sync"), Some(13.5))
        );
        let captured = Captured::default();
        Metrics::new("state-sync", &captured).github_token(None);
        assert!(captured.records().is_empty(), "no datapoint without an expiry");
    }

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
            m.count(Outcome::Synced, &[("cell", Some(&format!("c{i}")))]);
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

    /// docs/outcomes.md's Outcomes section up to "Metrics and alarms": its table's rows, each as
    /// its outcome column (lower case) and its metric column.
    fn documented_rows() -> Vec<(String, String)> {
        let page = OUTCOMES_PAGE;
        let start = page.find("## Outcomes").expect("an Outcomes section");
        let end = start + page[start..].find("## Metrics and alarms").expect("its metrics");
        page[start..end]
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| outcome"))
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
                (cells[0].trim().to_lowercase(), cells[cells.len() - 1].trim().to_owned())
            })
            .collect()
    }

    /// The names a metric column lists for `metric`: "`synced` (opened, updated; bootstrapped)".
    fn listed(column: &str, metric: Outcome) -> Option<Vec<String>> {
        let at = column.find(&format!("`{metric}`"))?;
        let rest = column[at..]
            .split_once('`')
            .map(|(_, r)| r.split_once('`').map_or("", |(_, r)| r))?;
        let inner = rest.strip_prefix(" (")?.split(')').next()?;
        Some(inner.split([',', ';']).map(|s| s.trim().to_owned()).collect())
    }

    /// Where docs/outcomes.md says a result is counted: its outcome's row (a failure's class row);
    /// among the results done, listed under its metric when the metric stands for several.
    fn assert_counted_as_documented(rows: &[(String, String)], row: &str, name: &str, metric: Outcome) {
        let (_, column) = rows
            .iter()
            .find(|(outcome, _)| outcome.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row:?} in docs/outcomes.md"));
        assert!(
            column.contains(&format!("`{metric}`")),
            "{name}: `{metric}` is not in row {row:?}"
        );
        if row == "done"
            && let Some(list) = listed(column, metric)
        {
            assert!(
                list.iter().any(|l| l == name) || name == metric.as_str(),
                "{name}: not listed under `{metric}` in row {row:?}: {list:?}"
            );
        }
    }

    #[test]
    fn every_result_is_named_and_counted_as_the_outcomes_table_says() {
        use crate::jobs::sync::{Action, DashboardAction};
        use crate::rules::bootstrap::report::BootstrapOutcome;
        let rows = documented_rows();

        // state-sync: each cell's `action` and its metric.
        let actions: Vec<(String, String, Outcome)> = Action::ALL
            .iter()
            .map(|a| {
                let v = serde_json::to_value(a).unwrap();
                (
                    v["action"].as_str().unwrap().to_owned(),
                    v["retryable"].to_string(),
                    a.metric(),
                )
            })
            .collect();
        let pinned: Vec<(String, String, Outcome)> = [
            ("opened", false, Outcome::Synced),
            ("updated", false, Outcome::Synced),
            ("unchanged", false, Outcome::Unchanged),
            ("closed", false, Outcome::Synced),
            ("in-sync", false, Outcome::Unchanged),
            ("stale", false, Outcome::Stale),
            ("declined", false, Outcome::Declined),
            ("conflicted", false, Outcome::Conflicted),
            ("planned", false, Outcome::Planned),
            ("ignored", false, Outcome::Ignored),
            ("paused", false, Outcome::Paused),
            ("enqueued", false, Outcome::Enqueued),
            ("destroyed", false, Outcome::Destroyed),
            ("decommission-opened", false, Outcome::Synced),
            ("decommission-updated", false, Outcome::Synced),
            ("decommission-unchanged", false, Outcome::Unchanged),
            ("refused", false, Outcome::Refused),
            ("failed", true, Outcome::Retried),
            ("failed", false, Outcome::FailedFinal),
        ]
        .into_iter()
        .map(|(a, r, m)| (a.to_owned(), r.to_string(), m))
        .collect();
        assert_eq!(actions, pinned);
        for a in Action::ALL {
            let row = match (a, a.class()) {
                (Action::Paused, _) => "paused",
                (_, None) => "done",
                (_, Some(Class::Retryable)) => "retryable",
                (_, Some(_)) => "final failure",
            };
            assert_counted_as_documented(&rows, row, a.as_str(), a.metric());
        }

        // cluster-bootstrap: each report's `outcome` and its metric (a cluster still CREATING is
        // answered as a retryable failure).
        let outcomes: Vec<(String, Outcome)> = [
            BootstrapOutcome::Bootstrapped,
            BootstrapOutcome::AlreadyBootstrapped,
            BootstrapOutcome::Planned,
            BootstrapOutcome::NotACell,
            BootstrapOutcome::ClusterNotReady,
        ]
        .into_iter()
        .map(|o| {
            (
                serde_json::to_value(o).unwrap().as_str().unwrap().to_owned(),
                o.metric(),
            )
        })
        .collect();
        assert_eq!(
            outcomes,
            [
                ("bootstrapped".to_owned(), Outcome::Synced),
                ("already_bootstrapped".to_owned(), Outcome::Unchanged),
                ("planned".to_owned(), Outcome::Planned),
                ("not_a_cell".to_owned(), Outcome::Ignored),
                ("cluster_not_ready".to_owned(), Outcome::Retried),
            ]
        );
        assert_counted_as_documented(&rows, "done", "bootstrapped", Outcome::Synced);
        assert_counted_as_documented(&rows, "done", "already bootstrapped", Outcome::Unchanged);
        assert_counted_as_documented(&rows, "done", "planned", Outcome::Planned);
        assert_counted_as_documented(&rows, "done", "a cluster of no cell", Outcome::Ignored);
        assert_counted_as_documented(&rows, "retryable", "retried", Outcome::Retried);

        // The fleet dashboard: its run's `action` (and a failure's `class`) and its metric.
        let runs: Vec<(Value, Outcome)> = DashboardAction::ALL
            .iter()
            .map(|a| (serde_json::to_value(a).unwrap(), a.metric()))
            .collect();
        assert_eq!(
            runs,
            [
                (json!({"action": "created"}), Outcome::Synced),
                (json!({"action": "updated"}), Outcome::Synced),
                (json!({"action": "unchanged"}), Outcome::Unchanged),
                (json!({"action": "planned"}), Outcome::Planned),
                (json!({"action": "paused"}), Outcome::Paused),
                (json!({"action": "failed", "class": "retryable"}), Outcome::Retried),
                (json!({"action": "failed", "class": "final"}), Outcome::FailedFinal),
                (json!({"action": "failed", "class": "invalid_input"}), Outcome::Refused),
            ]
        );
        let (_, dashboard) = rows.iter().find(|(o, _)| o.starts_with("the fleet dashboard")).unwrap();
        for a in DashboardAction::ALL
            .into_iter()
            .filter(|a| a.class() != Some(Class::InvalidInput))
        {
            assert!(dashboard.contains(&format!("`{}`", a.metric())), "{a:?}");
        }
        assert_eq!(listed(dashboard, Outcome::Synced).unwrap(), ["created", "updated"]);

        // The `Outcome` dimension's values, as "Metrics and alarms" lists them.
        let page = OUTCOMES_PAGE;
        let line_start = page.find("dimensions `Function`").expect("the dimensions");
        let list = &page[line_start..line_start + page[line_start..].find(";\n").unwrap()];
        let named: Vec<&str> = list.split('`').skip(11).step_by(2).collect();
        assert_eq!(named, Outcome::ALL.map(Outcome::as_str));
    }
}
