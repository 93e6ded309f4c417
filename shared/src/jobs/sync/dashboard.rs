//! The fleet dashboard: where every cell stands, computed at fleet scale and shown in
//! one GitHub issue ([`crate::rules::dashboard`]). Rebuilt by every sync-all (after its messages
//! are sent, or after it synced every cell without a queue) and by `{"action": "dashboard"}`;
//! never by a single cell's sync.
//!
//! What it reads, within the memory the syncs keep to: the base branch once, keeping the shared
//! part and the index only (every `clusters/<cell>/cell-metadata.yaml`: [`Keep::with_index`]);
//! every state the key pattern names (the sync-all listing), read from S3 with the streaming
//! reader a few at a time and checked against the contract, each turned into its row at once;
//! the open `cellbridge/*` pull requests, a hundred a GraphQL request, each with its head's
//! strict-substitution status, its place in the merge queue and its merge state; for a pending
//! cell with nothing open, its newest pull request (declined?), a hundred cells a GraphQL request,
//! every one read;
//! and, where EKS is reachable, each named cluster's bootstrap record, its Flux column
//! (`dashboard/flux.rs`). A row says what a person needs to know and never a value: a refusal's
//! reason is the contract's, which names keys only.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use serde::Serialize;
use tracing::Instrument;

use super::{SyncError, Syncer};
use crate::ports::github::{GithubError, GithubRepo, OpenPull};
use crate::ports::state::{S3Error, StateSource};
use crate::pure::decommission::LABEL_DECOMMISSION;
use crate::pure::events::sync::StateObject;
use crate::pure::fleet::{FleetRead, Keep};
use crate::pure::status::{
    self, AutoMergeWait, CellState, CellStatus, Classified, Depth, FleetCells, OnGithub, Summary,
};
use crate::rules::dashboard::{self, Written};
use crate::rules::pull_request::values_digest_of;
use crate::shell::error::{Class, Classify};
use crate::shell::metrics::{self, Metrics};
use crate::shell::pause::{self, Pause, SettingsError};

mod flux;

pub use self::flux::ClustersRead;

/// States read from S3 at once (each streamed, keeping only its outputs).
const READS: usize = 16;
/// What reading may leave of the deadline: the GitHub part and the write come after it.
const PUBLISH_MARGIN: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// Listing the states (as sync-all lists them).
    #[error("fleet dashboard: {0}")]
    States(#[from] SyncError),
    /// A state that could not be read for a reason a later run may not have (throttling, a
    /// download cut short): nothing is written rather than a row that says "failed" for nothing.
    #[error("fleet dashboard: {0} (retryable)")]
    Read(Box<S3Error>),
    #[error(
        "fleet dashboard: reading the states did not finish before the function's deadline ({read} of {total} read); nothing written (retryable)"
    )]
    Deadline { read: usize, total: usize },
    #[error("fleet dashboard: {0}")]
    Github(#[from] GithubError),
    /// `.cellbridge/settings.yaml` cannot be read: the fleet's to fix.
    #[error("fleet dashboard: {0}")]
    Settings(#[from] SettingsError),
    /// The base branch's `clusters/` cannot be listed.
    #[error("fleet dashboard: {0}")]
    Fleet(#[from] crate::pure::fleet::FleetError),
}

impl Classify for DashboardError {
    fn class(&self) -> Class {
        match self {
            DashboardError::States(e) => e.class(),
            DashboardError::Read(_) | DashboardError::Deadline { .. } => Class::Retryable,
            DashboardError::Github(e) => e.class(),
            DashboardError::Settings(_) | DashboardError::Fleet(_) => Class::Final,
        }
    }
}

/// The dashboard issue, as the answer names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IssueRef {
    pub number: u64,
    pub url: String,
}

/// What a run of the dashboard did: the answer's `"action"` (and, for a failure, its
/// `"class"`), and its metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DashboardAction {
    /// What was written to the issue.
    Created,
    Updated,
    Unchanged,
    /// A dry run: the body, nothing written.
    Planned,
    Paused,
    Failed(Class),
}

impl DashboardAction {
    /// Every action.
    pub const ALL: [DashboardAction; 8] = [
        DashboardAction::Created,
        DashboardAction::Updated,
        DashboardAction::Unchanged,
        DashboardAction::Planned,
        DashboardAction::Paused,
        DashboardAction::Failed(Class::Retryable),
        DashboardAction::Failed(Class::Final),
        DashboardAction::Failed(Class::InvalidInput),
    ];

    /// Its name in the answer.
    pub const fn as_str(self) -> &'static str {
        match self {
            DashboardAction::Created => "created",
            DashboardAction::Updated => "updated",
            DashboardAction::Unchanged => "unchanged",
            DashboardAction::Planned => "planned",
            DashboardAction::Paused => "paused",
            DashboardAction::Failed(_) => "failed",
        }
    }

    /// What its failure means (`None`: the run did not fail).
    pub const fn class(self) -> Option<Class> {
        match self {
            DashboardAction::Failed(class) => Some(class),
            _ => None,
        }
    }

    /// Its metric (docs/outcomes.md, "Metrics and alarms").
    pub const fn metric(self) -> metrics::Outcome {
        use metrics::Outcome;
        match self {
            DashboardAction::Created | DashboardAction::Updated => Outcome::Synced,
            DashboardAction::Unchanged => Outcome::Unchanged,
            DashboardAction::Planned => Outcome::Planned,
            DashboardAction::Paused => Outcome::Paused,
            DashboardAction::Failed(class) => Outcome::of_failure(class),
        }
    }
}

/// `"action"`, and a failure's `"class"` (`retryable`, `final`, `invalid_input`).
impl Serialize for DashboardAction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("action", self.as_str())?;
        if let DashboardAction::Failed(class) = self {
            m.serialize_entry("class", class)?;
        }
        m.end()
    }
}

/// An error written in words in the answer.
fn in_words<S: serde::Serializer>(e: &Option<DashboardError>, s: S) -> Result<S::Ok, S::Error> {
    match e {
        Some(e) => s.serialize_str(&e.to_string()),
        None => s.serialize_none(),
    }
}

/// One run of the dashboard: the answer's `"dashboard"` object.
#[derive(Debug, Serialize)]
pub struct DashboardRun {
    #[serde(flatten)]
    pub action: DashboardAction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue: Option<IssueRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub closed_duplicates: Vec<u64>,
    /// The counts the dashboard's first line shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// The clusters its Flux column described (none without EKS access).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClustersRead>,
    /// A dry run's body, as it would be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub markdown: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "in_words")]
    pub error: Option<DashboardError>,
}

impl DashboardRun {
    fn new(action: DashboardAction) -> Self {
        Self {
            action,
            issue: None,
            closed_duplicates: Vec::new(),
            summary: None,
            clusters: None,
            markdown: None,
            paused: None,
            error: None,
        }
    }

    fn paused(p: Pause) -> Self {
        Self {
            paused: Some(p),
            ..Self::new(DashboardAction::Paused)
        }
    }

    /// What its failure means (`None`: it did not fail).
    pub fn class(&self) -> Option<Class> {
        self.action.class()
    }

    /// Its error in words (empty when it did not fail).
    pub fn error_text(&self) -> String {
        self.error.as_ref().map(ToString::to_string).unwrap_or_default()
    }
}

/// One state's row, with what the rest of the run needs of the state beyond it.
struct StateRow {
    status: CellStatus,
    /// The state's lineage once it kept the contract (two lineages claiming one cell: refused).
    lineage: Option<String>,
    /// [`values_digest_of`] of the state's map, for a pending cell (were these values declined?).
    digest: Option<String>,
}

/// A state's row: `read` is what S3 gave for `obj`, `cells` and `fleet` the base branch (the
/// index kept), made by the rule the command line's `cellbridge status` shares
/// ([`status::state_row`]). `Ok(None)`: the object is gone since it was listed.
fn classify(
    obj: &StateObject,
    cell: &str,
    read: Result<crate::pure::tfstate::StateOutputs, S3Error>,
    cells: &FleetCells,
    fleet: &dyn FleetRead,
) -> Result<Option<StateRow>, DashboardError> {
    let read = match read {
        Ok(s) => Ok(s),
        Err(S3Error::NotFound { .. }) => return Ok(None),
        Err(e) if e.class() == Class::Retryable => return Err(DashboardError::Read(Box::new(e))),
        // Not a state, not JSON, access refused for this object: the row says which and why.
        Err(e) => Err(e.to_string()),
    };
    let Classified { status, meta } = status::state_row(
        &obj.key,
        cell,
        read,
        "CELLBRIDGE_STATE_KEY_PATTERN",
        fleet,
        cells,
        Depth::Outcome,
    );
    let digest = meta
        .as_ref()
        .filter(|_| matches!(status.state, CellState::Pending { .. }))
        .map(|m| values_digest_of(&m.data));
    Ok(Some(StateRow {
        status,
        lineage: meta.map(|m| m.lineage),
        digest,
    }))
}

/// Two states of different lineages naming one cell (workspaces mapped to the same cell): each
/// is refused, naming the others, as the sync refuses them.
fn refuse_claims(rows: &mut [StateRow]) {
    let mut by_cell: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.lineage.is_some() {
            by_cell.entry(r.status.cell.clone()).or_default().push(i);
        }
    }
    for (cell, idx) in by_cell {
        let lineages: BTreeSet<&str> = idx.iter().filter_map(|i| rows[*i].lineage.as_deref()).collect();
        if lineages.len() < 2 {
            continue;
        }
        let keys: Vec<String> = idx.iter().filter_map(|i| rows[*i].status.source.clone()).collect();
        for i in idx {
            rows[i].status.state = CellState::Refused {
                reason: format!(
                    "two states of different lineages claim cell `{cell}`: {}; map each workspace to its own cell with {{workspace}} in CELLBRIDGE_STATE_KEY_PATTERN",
                    keys.join(", ")
                ),
            };
            rows[i].digest = None;
        }
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn on_github(pull: &OpenPull, now: u64) -> OnGithub {
    OnGithub::Open {
        number: pull.number,
        url: pull.url.clone(),
        age_days: now.saturating_sub(pull.created_at) / 86_400,
        decommission: pull.labels.iter().any(|l| l == LABEL_DECOMMISSION),
        queued: pull.queued,
        check: None,
        merge_state: Some(pull.merge_state.in_words().to_owned()),
        // What the last run recorded, while GitHub holds it neither queued nor auto-merging.
        auto_merge_waits: match crate::pure::record::field(&pull.body, crate::rules::automerge::WAIT_FIELD).as_deref() {
            _ if pull.queued || pull.auto_merge => None,
            Some("turn") => Some(AutoMergeWait::Turn),
            Some("stall") => Some(AutoMergeWait::Stall),
            _ => None,
        },
    }
}

impl<S: StateSource, G: GithubRepo> Syncer<S, G> {
    /// Rebuilds the dashboard: computes every row, then writes the issue when what it shows
    /// changed (`dry_run`: returns the body, writes nothing). Paused by `switch`
    /// (`CELLBRIDGE_PAUSED`, checked before anything is read) or `.cellbridge/settings.yaml`:
    /// nothing is written. One metric record for the run. Never fails the invocation itself:
    /// the caller decides what a failure means ([`DashboardRun::class`]).
    pub async fn dashboard(
        &self,
        dry_run: bool,
        deadline: Instant,
        switch: Option<&Pause>,
        metrics: &Metrics<'_>,
    ) -> DashboardRun {
        // The dashboard is the whole fleet's: every line of its run (GitHub's retries too)
        // says so, for operators who look for a cell's lines by its name.
        async move {
            let run = match switch {
                Some(p) => DashboardRun::paused(p.clone()),
                // Boxed: the run's future is large, and the handler's would grow past the
                // compiler's depth for layouts with it inline.
                None => match self.build_boxed(dry_run, deadline).await {
                    Ok(run) => run,
                    Err(e) => {
                        let class = e.class();
                        tracing::error!(class = class.as_str(), error = %e, "the fleet dashboard was not rebuilt");
                        DashboardRun {
                            error: Some(e),
                            ..DashboardRun::new(DashboardAction::Failed(class))
                        }
                    }
                },
            };
            if let Some(p) = &run.paused {
                tracing::warn!(paused = %p.describe(), "the fleet dashboard is not rebuilt: cellbridge is paused");
            }
            metrics.count(run.action.metric(), &[("dashboard", Some(dashboard::LABEL_DASHBOARD))]);
            run
        }
        .instrument(tracing::info_span!("dashboard", scope = "fleet"))
        .await
    }

    fn build_boxed(
        &self,
        dry_run: bool,
        deadline: Instant,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<DashboardRun, DashboardError>> + Send + '_>> {
        Box::pin(self.build_dashboard(dry_run, deadline))
    }

    async fn build_dashboard(&self, dry_run: bool, deadline: Instant) -> Result<DashboardRun, DashboardError> {
        // The shared part and every cell's cell-metadata.yaml: 1-2 KB a cell.
        let snapshot = self
            .fleet
            .read_base(&Keep::cells(Vec::<String>::new()).with_index(), deadline)
            .await?;
        match pause::from_fleet(&snapshot.fleet) {
            Ok(None) => {}
            Ok(Some(p)) => return Ok(DashboardRun::paused(p)),
            Err(e) => return Err(DashboardError::Settings(e)),
        }
        let cells = FleetCells::read(&snapshot.fleet)?;
        let objects = self.all_states(deadline).await?;
        let total = objects.len();
        let reading_until = deadline.checked_sub(PUBLISH_MARGIN).unwrap_or(deadline);
        let (fleet, cells_ref) = (&snapshot.fleet, &cells);
        let reads = objects.into_iter().filter_map(|obj| {
            let (cell, _) = self.config.key_pattern.cell_of(&obj.key)?;
            Some(async move {
                let left = reading_until.saturating_duration_since(Instant::now());
                let read = tokio::time::timeout(left, self.states.read_latest(&obj.bucket, &obj.key))
                    .await
                    .map_err(|_| ())?
                    .map(|(state, _)| state);
                Ok::<_, ()>(classify(&obj, &cell, read, cells_ref, fleet))
            })
        });
        let mut read = 0;
        let mut rows: Vec<StateRow> = Vec::new();
        let mut stream = futures::stream::iter(reads).buffer_unordered(READS);
        while let Some(next) = stream.next().await {
            match next {
                Err(()) => return Err(DashboardError::Deadline { read, total }),
                Ok(row) => {
                    read += 1;
                    rows.extend(row?);
                }
            }
        }
        drop(stream);
        refuse_claims(&mut rows);
        let missing = cells.state_missing(rows.iter().map(|r| &r.status));
        rows.extend(missing.into_iter().map(|status| StateRow {
            status,
            lineage: None,
            digest: None,
        }));
        self.read_github(&mut rows, deadline).await?;
        let mut rows: Vec<CellStatus> = rows.into_iter().map(|r| r.status).collect();
        let clusters = self.read_flux(&snapshot.fleet, &mut rows, reading_until).await;
        let body = render(
            &snapshot.base_branch,
            &self.config.state_bucket,
            &self.config.key_pattern.to_string(),
            &rows,
            token_line(self.fleet.token_expires_at(), SystemTime::now()).as_deref(),
        );
        let summary = status::summary(&rows);
        if dry_run {
            return Ok(DashboardRun {
                summary: Some(summary),
                clusters,
                markdown: Some(body),
                ..DashboardRun::new(DashboardAction::Planned)
            });
        }
        self.fleet.check_write_access(deadline).await?;
        let published = dashboard::publish(&self.fleet, &snapshot.base_branch, &body, deadline).await?;
        let action = match published.written {
            Written::Created => DashboardAction::Created,
            Written::Updated => DashboardAction::Updated,
            Written::Unchanged => DashboardAction::Unchanged,
        };
        tracing::info!(
            action = action.as_str(),
            issue = published.number,
            cells = summary.cells,
            needs_attention = summary.needs_attention,
            clusters_described = clusters.map_or(0, |c| c.described),
            flux_stuck = summary.flux_stuck,
            "fleet dashboard"
        );
        Ok(DashboardRun {
            issue: Some(IssueRef {
                number: published.number,
                url: published.url,
            }),
            closed_duplicates: published.closed_duplicates,
            summary: Some(summary),
            clusters,
            ..DashboardRun::new(action)
        })
    }

    /// What GitHub holds for each row: its open pull request (one listing for the fleet, with
    /// its head's status), and for a pending cell with nothing open whether its values were
    /// declined.
    async fn read_github(&self, rows: &mut [StateRow], deadline: Instant) -> Result<(), DashboardError> {
        let pulls = dashboard::open_cell_pulls(&self.fleet, deadline).await?;
        let now = now_secs();
        let mut newest: Vec<(String, String)> = Vec::new();
        let mut at: BTreeMap<String, usize> = BTreeMap::new();
        for (i, r) in rows.iter_mut().enumerate() {
            let pull = pulls.get(&r.status.cell);
            let mut gh = pull.map_or(OnGithub::None, |p| on_github(p, now));
            if matches!(r.status.state, CellState::Pending { .. }) {
                match (pull, &r.digest, &mut gh) {
                    (
                        Some(p),
                        _,
                        OnGithub::Open {
                            decommission: false,
                            check,
                            ..
                        },
                    ) => {
                        *check = Some(dashboard::head_check(p));
                    }
                    (None, Some(d), _) => {
                        at.insert(r.status.cell.clone(), i);
                        newest.push((r.status.cell.clone(), d.clone()));
                    }
                    _ => {}
                }
            }
            r.status.github = Some(gh);
        }
        for (cell, (number, url)) in dashboard::declined_pulls(&self.fleet, &newest, deadline).await? {
            if let Some(&i) = at.get(&cell) {
                rows[i].status.github = Some(OnGithub::Declined { number, url });
            }
        }
        Ok(())
    }
}

/// The issue's body: a heading and what it is made of, the GitHub token's expiry when it has one,
/// the dashboard's markdown ([`status::render_markdown`]) within GitHub's limit, and the marker
/// last.
fn render(base_branch: &str, bucket: &str, key_pattern: &str, rows: &[CellStatus], token: Option<&str>) -> String {
    let mut header = format!(
        "## Fleet dashboard\n\nEvery Terraform state of `s3://{bucket}` that `{key_pattern}` names, checked against the contract and compared with `clusters/*/cell-metadata.yaml` on `{base_branch}`, with the open `cellbridge/*` pull requests. Rebuilt by every sync-all and by `{{\"action\": \"dashboard\"}}` (a single cell's sync leaves it alone); written by cellbridge, so edits here are overwritten.\n\n"
    );
    if let Some(line) = token {
        header.push_str(line);
        header.push_str("\n\n");
    }
    let footer = format!("\n{}\n", dashboard::marker(base_branch));
    let limit = status::BODY_LIMIT.saturating_sub(header.len() + footer.len());
    format!("{header}{}{footer}", status::render_markdown(rows, limit))
}

/// Within this many days of its expiry the dashboard warns of the token (the module's
/// `github-token-expiring` alarm fires then too).
pub const TOKEN_WARNING_DAYS: f64 = 14.0;

/// The dashboard's line on the GitHub token's expiry: its date (the body stays the same from one
/// run to the next), and within [`TOKEN_WARNING_DAYS`] a warning with the days left. `None` for a
/// token without expiry or a GitHub App's.
pub fn token_line(expires_at: Option<SystemTime>, now: SystemTime) -> Option<String> {
    let at = expires_at?;
    let date = crate::ports::cluster::access::format_rfc3339(at);
    let days = metrics::days_left(at, now);
    Some(if days <= TOKEN_WARNING_DAYS {
        let when = if at <= now {
            "has expired".to_owned()
        } else {
            format!("expires in {} days", days.floor() as i64)
        };
        format!(
            "> [!WARNING]\n> The GitHub token cellbridge uses {when} ({date}): put a new one in the secret `CELLBRIDGE_GITHUB_SECRET` names before then, or every sync fails."
        )
    } else {
        format!("GitHub token: expires {date}.")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_fits_githubs_limit_with_its_heading_and_marker() {
        let rows: Vec<CellStatus> = (0..6000)
            .map(|i| CellStatus {
                cell: format!("cell-{i:05}-eu-west-1"),
                state: CellState::Failed {
                    reason: "s3://b/k: not JSON at byte 1".repeat(5),
                },
                source: Some(format!("cells/cell-{i:05}-eu-west-1/terraform.tfstate")),
                serial: Some(4),
                github: Some(OnGithub::None),
                flux: None,
            })
            .collect();
        let body = render("main", "acme-tfstate", "cells/{cell}/terraform.tfstate", &rows, None);
        assert!(body.chars().count() <= status::BODY_LIMIT, "{}", body.len());
        assert!(body.ends_with("\n<!-- cellbridge:dashboard=main -->\n"));
        assert!(body.contains("more cells needing attention not shown"));
        assert!(body.starts_with("## Fleet dashboard\n"));
    }

    #[test]
    fn the_token_line_gives_the_date_and_warns_within_two_weeks() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(token_line(None, now), None);
        let far = token_line(Some(now + Duration::from_secs(30 * 86_400)), now).unwrap();
        assert_eq!(far, "GitHub token: expires 2027-02-14T08:00:00Z.");
        let near = token_line(Some(now + Duration::from_secs(5 * 86_400 + 3600)), now).unwrap();
        assert!(
            near.starts_with("> [!WARNING]") && near.contains("expires in 5 days"),
            "{near}"
        );
        let gone = token_line(Some(now - Duration::from_secs(60)), now).unwrap();
        assert!(gone.contains("has expired"), "{gone}");
    }
}
