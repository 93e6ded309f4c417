//! What state-sync answers for one state (`cells[]`): its [`Action`], which says its metric and
//! its class, and, when it was not synced, why ([`CellError`]).

use serde::Serialize;
use serde::ser::SerializeStruct as _;
use serde_json::{Value, json};

use crate::ports::github::{GithubError, Published};
use crate::ports::state::S3Error;
use crate::pure::decommission::DecommissionError;
use crate::pure::events::sync::StateObject;
use crate::pure::metadata::ContractError;
use crate::pure::plan::{Plan, PlanError};
use crate::rules::report::Reported;
use crate::shell::error::{Class, Classify};
use crate::shell::lambda::{About, Failed, ItemOutcome};
use crate::shell::metrics::Outcome;
use crate::shell::pause::{Pause, SettingsError};
use crate::{
    ports::probe::ProbeError,
    rules::cells::{self},
};

/// Attempts for one state when another writer keeps winning the race for the cell's branch.
pub(super) const RACE_ATTEMPTS: u32 = 4;

/// What happened to one state: the answer's `"action"` (and `"retryable"`), the metric's
/// `Outcome`, and whether it failed and how (docs/outcomes.md, "Outcomes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Opened,
    Updated,
    Unchanged,
    Closed,
    InSync,
    Stale,
    Declined,
    Conflicted,
    Planned,
    Ignored,
    Paused,
    /// Sent to state-sync's queue by a fanned-out sync-all.
    Enqueued,
    /// A destroyed stack that proposes nothing (the result's `decommission` says why).
    Destroyed,
    DecommissionOpened,
    DecommissionUpdated,
    DecommissionUnchanged,
    /// The state was refused (the contract, the key, the plan, two states claiming one cell).
    Refused,
    /// Not synced: a later run may succeed (`retryable`) or not.
    Failed {
        retryable: bool,
    },
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 19] = [
        Action::Opened,
        Action::Updated,
        Action::Unchanged,
        Action::Closed,
        Action::InSync,
        Action::Stale,
        Action::Declined,
        Action::Conflicted,
        Action::Planned,
        Action::Ignored,
        Action::Paused,
        Action::Enqueued,
        Action::Destroyed,
        Action::DecommissionOpened,
        Action::DecommissionUpdated,
        Action::DecommissionUnchanged,
        Action::Refused,
        Action::Failed { retryable: true },
        Action::Failed { retryable: false },
    ];

    /// Its name in the answer and the log line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Opened => "opened",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
            Action::Closed => "closed",
            Action::InSync => "in-sync",
            Action::Stale => "stale",
            Action::Declined => "declined",
            Action::Conflicted => "conflicted",
            Action::Planned => "planned",
            Action::Ignored => "ignored",
            Action::Paused => "paused",
            Action::Enqueued => "enqueued",
            Action::Destroyed => "destroyed",
            Action::DecommissionOpened => "decommission-opened",
            Action::DecommissionUpdated => "decommission-updated",
            Action::DecommissionUnchanged => "decommission-unchanged",
            Action::Refused => "refused",
            Action::Failed { .. } => "failed",
        }
    }

    /// Its metric (docs/outcomes.md, "Metrics and alarms").
    pub const fn metric(self) -> Outcome {
        match self {
            Action::Opened
            | Action::Updated
            | Action::Closed
            | Action::DecommissionOpened
            | Action::DecommissionUpdated => Outcome::Synced,
            Action::Unchanged | Action::InSync | Action::DecommissionUnchanged => Outcome::Unchanged,
            Action::Stale => Outcome::Stale,
            Action::Declined => Outcome::Declined,
            Action::Conflicted => Outcome::Conflicted,
            Action::Planned => Outcome::Planned,
            Action::Ignored => Outcome::Ignored,
            Action::Paused => Outcome::Paused,
            Action::Enqueued => Outcome::Enqueued,
            Action::Destroyed => Outcome::Destroyed,
            Action::Refused => Outcome::Refused,
            Action::Failed { retryable: true } => Outcome::Retried,
            Action::Failed { retryable: false } => Outcome::FailedFinal,
        }
    }

    /// What its failure means; `None`: the state was not refused and did not fail.
    pub const fn class(self) -> Option<Class> {
        match self {
            Action::Failed { retryable: true } => Some(Class::Retryable),
            Action::Refused | Action::Failed { retryable: false } => Some(Class::Final),
            _ => None,
        }
    }
}

/// `"action"` and `"retryable"` (running again later may succeed: SQS redelivers the record).
impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Action", 2)?;
        st.serialize_field("action", self.as_str())?;
        st.serialize_field("retryable", &matches!(self, Action::Failed { retryable: true }))?;
        st.end()
    }
}

/// Why a state was not synced: a refusal or a failure, or why it was ignored. Each says whether
/// a later run may succeed, whether the state itself is refused, and whether the cell's team is
/// told on GitHub.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error("the key does not match CELLBRIDGE_STATE_KEY_PATTERN")]
    KeyNotMatched,
    /// Deleted since its event was sent.
    #[error("the state object no longer exists")]
    Gone,
    /// A state a person named (the manual payload, the console) is not there.
    #[error("no state at s3://{bucket}/{key}: check the cell name or CELLBRIDGE_STATE_KEY_PATTERN")]
    NoState { bucket: String, key: String },
    #[error("s3://{bucket}/{key}: {why}")]
    NotThere {
        bucket: String,
        key: String,
        why: Box<CellError>,
    },
    #[error("s3://{bucket}/{key}: the cell part {cell:?} of the key is not a DNS-1123 label")]
    KeyCell { bucket: String, key: String, cell: String },
    #[error("the function's deadline came before this state was synced")]
    Deadline,
    /// GitHub's pacing leaves no room for the state's writes before the deadline.
    #[error(transparent)]
    NoRoom(GithubError),
    #[error("lost the race {RACE_ATTEMPTS} times: {0}")]
    Raced(Redo),
    #[error(transparent)]
    Github(GithubError),
    #[error("s3://{bucket}/{key}: reading the state did not finish before the function's deadline")]
    ReadTimeout { bucket: String, key: String },
    #[error(transparent)]
    State(S3Error),
    /// The contract's message names the key, never the value.
    #[error("{origin}: {source}")]
    Contract {
        origin: String,
        #[source]
        source: ContractError,
    },
    #[error(
        "{origin}: the key says cell `{key_cell}` (CELLBRIDGE_STATE_KEY_PATTERN) but cell_metadata.cell_name is `{meta_cell}`"
    )]
    KeyMismatch {
        origin: String,
        key_cell: String,
        meta_cell: String,
    },
    #[error(transparent)]
    Plan(PlanError),
    /// `.cellbridge/settings.yaml` cannot be read: the fleet's, not the cell's.
    #[error(transparent)]
    Settings(SettingsError),
    #[error(
        "two states claim cell {cell}: {key} and {other_key} (pull request #{number}); map each workspace to its own cell with {{workspace}} in CELLBRIDGE_STATE_KEY_PATTERN"
    )]
    Claimed {
        cell: String,
        key: String,
        other_key: String,
        number: u64,
    },
    #[error(transparent)]
    Decommission(DecommissionError),
    #[error("cell {cell}: {source}")]
    Cell {
        cell: String,
        #[source]
        source: cells::CellError,
    },
    /// The configuration and the cell's metadata disagree on the role that reaches its account.
    #[error(transparent)]
    Role { source: cells::RoleError },
    #[error("cell {cell}: {what}: no answer before the function's deadline")]
    NoAnswer { cell: String, what: String },
    #[error("cell {cell}: {source}")]
    Probe {
        cell: String,
        #[source]
        source: ProbeError,
    },
    #[error(
        "cell {cell}: the stack was destroyed and EKS cluster {cluster} in {region} is still DELETING: it is asked again once EKS no longer knows it"
    )]
    Deleting {
        cell: String,
        cluster: String,
        region: String,
    },
}

impl CellError {
    /// The same state may sync later.
    pub fn retryable(&self) -> bool {
        match self {
            CellError::Deadline
            | CellError::NoRoom(_)
            | CellError::Raced(_)
            | CellError::ReadTimeout { .. }
            | CellError::NoAnswer { .. }
            | CellError::Deleting { .. } => true,
            CellError::Github(e) => e.retryable(),
            CellError::State(e) => e.retryable(),
            CellError::Probe { source, .. } => source.retryable(),
            _ => false,
        }
    }

    /// The state itself is refused (answered `refused`): the contract, the key, the plan.
    pub fn refused(&self) -> bool {
        match self {
            CellError::KeyCell { .. }
            | CellError::Contract { .. }
            | CellError::KeyMismatch { .. }
            | CellError::Plan(_)
            | CellError::Claimed { .. } => true,
            // A state that is no state is refused; S3 refusing access is a failure of the
            // deployment, not of the state.
            CellError::State(e) => matches!(e, S3Error::State(_)) && !e.retryable(),
            _ => false,
        }
    }

    /// A final failure the cell's team can act on, told on GitHub ([`crate::rules::report`]):
    /// not GitHub access itself, nor S3 refusing access, nor what the operators must fix.
    pub fn reported(&self) -> bool {
        match self {
            CellError::Contract { .. }
            | CellError::KeyMismatch { .. }
            | CellError::Plan(_)
            | CellError::Claimed { .. }
            | CellError::Decommission(_)
            | CellError::Cell { .. } => true,
            CellError::State(e) => matches!(e, S3Error::State(_)) && !e.retryable(),
            // "Refused" is the state's own fault: GitHub failing (an answer it gave up on, one
            // cellbridge cannot read, a field refused) is GitHub's, told in the log, the metrics
            // and the dashboard, never as a refused state. What a person must do on the fleet
            // repo (someone else's commit on the branch, a rule refusing cellbridge's writes) is
            // told on the pull request or in the cell's issue.
            CellError::Github(e) => matches!(
                e,
                GithubError::Foreign { .. } | GithubError::Refused { .. } | GithubError::Unsignable { .. }
            ),
            _ => false,
        }
    }
}

/// Why an attempt is redone on a fresh read of the base branch.
#[derive(Debug)]
pub enum Redo {
    /// Another writer moved the cell's branch or opened its pull request meanwhile.
    Conflict { what: String, detail: String },
    /// The plan read cell directories the base was read without.
    ReadPast(Vec<String>),
}

impl std::fmt::Display for Redo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Redo::Conflict { what, detail } => write!(f, "{what}: {detail}"),
            Redo::ReadPast(cells) => write!(
                f,
                "the plan reads the directories of cells {} too; reading the base again keeping them",
                cells.join(", ")
            ),
        }
    }
}

/// An error written in words in the answer.
fn in_words<T: std::fmt::Display, S: serde::Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(e) => s.serialize_str(&e.to_string()),
        None => s.serialize_none(),
    }
}

/// The answer for one state object.
#[derive(Debug, Serialize)]
pub struct CellResult {
    pub cell: Option<String>,
    pub bucket: String,
    pub key: String,
    #[serde(flatten)]
    pub action: Action,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<Value>,
    /// Why it was not synced (or ignored).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "in_words")]
    pub error: Option<CellError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Value>,
    pub attempts: u32,
    /// `paused`: what paused it (`CELLBRIDGE_PAUSED` or `.cellbridge/settings.yaml`) and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// A refused state or a final publishing failure, told on GitHub: the cell's pull request
    /// or its `cellbridge-refused` issue ([`crate::rules::report`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<Reported>,
    /// Why the report could not be written (the failure itself stands).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "in_words")]
    pub report_error: Option<GithubError>,
    /// The `cellbridge-refused` issues this good state closed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resolved_issues: Vec<u64>,
    /// A destroyed stack's state: the cell's cluster as EKS answered, and what was proposed or
    /// why nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decommission: Option<Value>,
    /// This good state found no open pull request: its cell's refused issue is to be closed.
    #[serde(skip)]
    pub(super) resolve_issue: bool,
    /// Whether the metadata pull request's head may merge without a person, why, and what was
    /// done about GitHub's auto-merge ([`crate::rules::automerge`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_merge: Option<crate::rules::automerge::AutoMergeReport>,
}

impl CellResult {
    pub(super) fn new(obj: &StateObject, cell: Option<String>, action: Action) -> Self {
        Self {
            cell,
            bucket: obj.bucket.clone(),
            key: obj.key.clone(),
            action,
            version_id: None,
            serial: None,
            pull_request: None,
            error: None,
            plan: None,
            attempts: 0,
            paused: None,
            reported: None,
            report_error: None,
            resolved_issues: Vec::new(),
            decommission: None,
            auto_merge: None,
            resolve_issue: false,
        }
    }

    /// The state object as reports name it.
    pub(super) fn source(&self) -> String {
        match &self.version_id {
            Some(v) => format!("s3://{}/{} (version {v})", self.bucket, self.key),
            None => format!("s3://{}/{}", self.bucket, self.key),
        }
    }

    /// Refused or failed.
    pub fn failed(&self) -> bool {
        self.action.class().is_some()
    }

    /// Not synced because of `error`: refused or failed, as the error says.
    pub(super) fn fail(&mut self, error: CellError) {
        self.action = if error.refused() {
            Action::Refused
        } else {
            Action::Failed {
                retryable: error.retryable(),
            }
        };
        self.error = Some(error);
    }

    /// Ignored, saying why.
    pub(super) fn ignore(&mut self, why: CellError) {
        self.action = Action::Ignored;
        self.error = Some(why);
    }

    /// A state a person named that is not there to sync (what an event's delivery ignores): a
    /// final failure that says what to check.
    pub(super) fn not_there(&mut self) {
        let (bucket, key) = (self.bucket.clone(), self.key.clone());
        let error = match self.error.take() {
            Some(CellError::Gone) | None => CellError::NoState { bucket, key },
            Some(why) => CellError::NotThere {
                bucket,
                key,
                why: Box::new(why),
            },
        };
        let text = error.to_string();
        tracing::error!(bucket = %self.bucket, key = %self.key, error = text.as_str(), "the state named is not there");
        self.action = Action::Failed { retryable: false };
        self.error = Some(error);
    }

    /// A dry run's answer: the plan itself.
    pub(super) fn planned(&mut self, plan: &Plan) {
        self.action = Action::Planned;
        self.plan = Some(json!({
            "outcome": plan.outcome, "title": plan.title, "body": plan.body, "labels": plan.labels,
            "files": plan.files.iter().map(|f| &f.path).collect::<Vec<_>>(), "diff": plan.unified_diff(),
            "status": if plan.status_ok() { "success" } else { "failure" }, "status_description": plan.status_description(),
        }));
    }

    /// What converging the pull request did.
    pub(super) fn published(&mut self, plan: &Plan, published: &Published) {
        let pr = |number: u64, url: &str| Some(json!({"number": number, "url": url}));
        let (action, pull) = match published {
            Published::Opened { number, url, .. } => (Action::Opened, pr(*number, url)),
            Published::Updated { number, url, .. } => (Action::Updated, pr(*number, url)),
            Published::Unchanged { number, url } => (Action::Unchanged, pr(*number, url)),
            Published::Closed { number, url } => (Action::Closed, pr(*number, url)),
            Published::InSync => (Action::InSync, None),
            Published::Stale { number, url, .. } => (Action::Stale, number.map(|n| json!({"number": n, "url": url}))),
            Published::Declined { number, url } => (Action::Declined, pr(*number, url)),
            Published::Conflicted { number, url } => (Action::Conflicted, pr(*number, url)),
            Published::Claimed { number, url, other_key } => {
                self.pull_request = pr(*number, url);
                self.fail(CellError::Claimed {
                    cell: self.cell.clone().unwrap_or_default(),
                    key: self.key.clone(),
                    other_key: other_key.clone(),
                    number: *number,
                });
                return;
            }
        };
        self.action = action;
        self.pull_request = pull;
        if !plan.status_ok()
            && matches!(
                published,
                Published::Opened { .. } | Published::Updated { .. } | Published::Unchanged { .. }
            )
        {
            self.plan = Some(json!({"status": "failure", "status_description": plan.status_description()}));
        }
    }

    pub(super) fn log(&self) {
        let cell = self.cell.as_deref().unwrap_or("");
        let action = self.action.as_str();
        let retryable = matches!(self.action, Action::Failed { retryable: true });
        let error = self.error.as_ref().map(ToString::to_string).unwrap_or_default();
        if let Some(p) = &self.paused {
            tracing::warn!(cell, key = %self.key, paused = %p.describe(), "state not synced: cellbridge is paused")
        } else if self.failed() {
            tracing::error!(cell, key = %self.key, action = %action, retryable, error = error.as_str(), "state not synced")
        } else {
            // Fields a Logs Insights query filters on, never a debug dump: the pull request by
            // its number and address.
            let number = self.pull_request.as_ref().and_then(|p| p["number"].as_u64());
            let url = self.pull_request.as_ref().and_then(|p| p["url"].as_str()).unwrap_or("");
            let message = match self.action {
                Action::Ignored => "state ignored",
                Action::Planned => "state planned (dry run): nothing written",
                Action::Destroyed => "stack destroyed: nothing proposed",
                _ => "state synced",
            };
            tracing::info!(cell, key = %self.key, action = %action, serial = self.serial, pull_request = number, pull_request_url = url, reason = error.as_str(), "{message}")
        }
    }
}

impl ItemOutcome for CellResult {
    fn metric(&self) -> Outcome {
        self.action.metric()
    }

    fn properties(&self) -> Vec<(&'static str, Option<&str>)> {
        vec![("cell", self.cell.as_deref())]
    }

    fn failure(&self) -> Option<Failed> {
        let class = self.action.class()?;
        let reason = match &self.error {
            Some(e) => format!("{}: {e}", self.key),
            None => format!("{}: {}", self.key, self.action.as_str()),
        };
        Some(Failed {
            class,
            reason,
            about: About::cells(self.cell.iter()),
        })
    }
}
