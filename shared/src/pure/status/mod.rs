//! The fleet's status, one row per cell (per state, when workspaces give a cell several): what
//! `cellbridge status` prints and what the GitHub dashboard issue shows. Pure: the caller reads
//! the states and the fleet (local files, or S3 and the base branch); the rule that makes a
//! state's row ([`state_row`], in `row.rs`) and the fleet's list of cells ([`FleetCells`]) are
//! here, written once for both, and `render.rs` renders the rows. Where the rows' clusters were
//! described (the dashboard), each row also carries its cluster's Flux record ([`Flux`],
//! `flux.rs`).
//!
//! A row never holds a value of `cell_metadata`: a refused state's reason is the contract's
//! error message, which names the key and never the value.

mod flux;
mod render;
mod row;

#[cfg(test)]
mod tests;

pub use flux::Flux;
pub use render::{RUNBOOK_URL, render_markdown, render_text, runbook_anchor_of_flux, runbook_anchor_of_state};
pub use row::{Classified, Depth, FleetCells, state_row};

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

use super::metadata::{self, CellMetadata, ContractError};
use super::plan::Outcome;
use super::tfstate::StateOutputs;

/// GitHub's limit on an issue body, in characters: the dashboard's markdown fits in it.
pub const BODY_LIMIT: usize = 65_536;

/// Where one cell (one of its states) stands against the fleet repo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum CellState {
    /// The fleet's `cell-metadata.yaml` already holds this state's map.
    InSync,
    /// The state differs from the fleet: a pull request would be opened or updated.
    Pending {
        /// The fleet has no directory for the cell yet.
        new_cell: bool,
        /// The strict substitution check (and the schema rule) pass on the planned change, as
        /// the command line computes it; `None` where the plan is not computed (the dashboard,
        /// which shows the status on the pull request's head instead: [`OnGithub::Open`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        check_ok: Option<bool>,
        /// How many keys of `cell_metadata` the change adds, removes or changes.
        keys_changed: usize,
    },
    /// The fleet already holds a newer serial of the same lineage.
    Stale,
    /// The contract is broken: the contract's message, naming keys, never values.
    Refused { reason: String },
    /// No outputs and no resources: the stack was destroyed (`terraform destroy`), and the fleet
    /// still has `clusters/<cell>/` (its decommission is proposed once EKS confirms the cluster is
    /// gone).
    Destroyed,
    /// A destroyed stack whose directory the fleet no longer has: the decommission was merged.
    Decommissioned,
    /// The state or the fleet could not be read.
    Failed { reason: String },
    /// The fleet has `clusters/<cell>/` but no state names the cell.
    StateMissing,
}

/// The kinds of [`CellState`], in the order the dashboard lists rows needing attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Failed,
    Refused,
    Destroyed,
    StateMissing,
    Pending,
    Stale,
    Decommissioned,
    InSync,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Failed,
        Kind::Refused,
        Kind::Destroyed,
        Kind::StateMissing,
        Kind::Pending,
        Kind::Stale,
        Kind::Decommissioned,
        Kind::InSync,
    ];

    /// The word shown in the `what` column.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Failed => "failed",
            Kind::Refused => "refused",
            Kind::Destroyed => "destroyed",
            Kind::StateMissing => "state missing",
            Kind::Pending => "pending",
            Kind::Stale => "stale",
            Kind::Decommissioned => "decommissioned",
            Kind::InSync => "in sync",
        }
    }
}

impl CellState {
    pub fn kind(&self) -> Kind {
        match self {
            CellState::InSync => Kind::InSync,
            CellState::Pending { .. } => Kind::Pending,
            CellState::Stale => Kind::Stale,
            CellState::Refused { .. } => Kind::Refused,
            CellState::Destroyed => Kind::Destroyed,
            CellState::Decommissioned => Kind::Decommissioned,
            CellState::Failed { .. } => Kind::Failed,
            CellState::StateMissing => Kind::StateMissing,
        }
    }

    /// What the row says about the state, without its source.
    pub fn detail(&self) -> String {
        match self {
            CellState::InSync => "the fleet holds this cell_metadata".into(),
            CellState::Pending {
                new_cell,
                check_ok,
                keys_changed,
            } => {
                let what = if *new_cell {
                    format!("new cell ({})", plural(*keys_changed, "key"))
                } else {
                    format!("{} changed", plural(*keys_changed, "key"))
                };
                match check_ok {
                    Some(true) => format!("{what}; strict check passes"),
                    Some(false) => format!("{what}; strict check fails"),
                    None => what,
                }
            }
            CellState::Stale => "the fleet holds a newer serial".into(),
            CellState::Refused { reason } | CellState::Failed { reason } => reason.clone(),
            CellState::Destroyed => {
                "no outputs and no resources: the stack was destroyed (`terraform destroy`); state-sync proposes removing clusters/<cell>/ once EKS confirms the cluster is gone".into()
            }
            CellState::Decommissioned => {
                "the stack was destroyed and the fleet no longer has clusters/<cell>/: decommissioned".into()
            }
            CellState::StateMissing => "clusters/<cell>/ is in the fleet but no state names the cell".into(),
        }
    }

    /// A destroyed stack's row (no outputs, no resources): destroyed while the fleet still has
    /// `clusters/<cell>/`, decommissioned once the decommission has removed it.
    pub fn destroyed(dir_in_fleet: bool) -> CellState {
        if dir_in_fleet {
            CellState::Destroyed
        } else {
            CellState::Decommissioned
        }
    }

    /// The row of a state that keeps the contract, from where its map stands against the fleet
    /// ([`super::plan::outcome_for`]): `keys_changed`, how many keys the change adds, removes or
    /// changes; `check_ok`, the planned change's strict check where it was run.
    pub fn planned(outcome: Outcome, new_cell: bool, keys_changed: usize, check_ok: Option<bool>) -> CellState {
        match outcome {
            Outcome::InSync => CellState::InSync,
            Outcome::Stale => CellState::Stale,
            Outcome::Change => CellState::Pending {
                new_cell,
                check_ok,
                keys_changed,
            },
        }
    }
}

/// A state's row as far as the contract decides it, before anything is planned: the cell's
/// metadata when the state keeps the contract, else the row's state. `cell` is the cell the
/// state's key names; `setting`, where the key pattern is set (named in the refusal);
/// `dir_in_fleet`, whether the fleet has `clusters/<cell>/`, asked for a destroyed stack only.
fn contract_row(
    cell: &str,
    state: &StateOutputs,
    setting: &str,
    dir_in_fleet: impl FnOnce() -> bool,
) -> Result<CellMetadata, CellState> {
    let refused = |reason: String| CellState::Refused { reason };
    if !metadata::is_dns1123_label(cell) {
        return Err(refused(format!(
            "the cell part {cell:?} of the key is not a DNS-1123 label"
        )));
    }
    let meta = match metadata::from_state(state) {
        Ok(m) => m,
        Err(ContractError::Destroyed) => return Err(CellState::destroyed(dir_in_fleet())),
        // The contract's message names the key, never the value.
        Err(e) => return Err(refused(e.to_string())),
    };
    if meta.cell != cell {
        return Err(refused(format!(
            "the key says cell `{cell}` ({setting}) but cell_metadata.cell_name is `{}`",
            meta.cell
        )));
    }
    Ok(meta)
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// What GitHub holds for a cell's branch (`cellbridge/<cell>`), as the dashboard reads it: the
/// command line reads no GitHub and leaves it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "pull_request", rename_all = "kebab-case")]
pub enum OnGithub {
    /// The cell's pull request is open.
    Open {
        number: u64,
        url: String,
        /// Whole days since it was opened.
        age_days: u64,
        /// A decommission pull request (label `decommission`): it removes `clusters/<cell>/`.
        decommission: bool,
        /// In the base branch's merge queue, as GitHub says (never the body's `queued=yes`,
        /// which a person can edit).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        queued: bool,
        /// The `cellbridge/strict-substitution` status of its head; read for pending cells only.
        #[serde(skip_serializing_if = "Option::is_none")]
        check: Option<HeadCheck>,
        /// Where it stands for merging, in words ("not computed yet" while GitHub computes it).
        #[serde(skip_serializing_if = "Option::is_none")]
        merge_state: Option<String>,
        /// Eligible, but neither queued nor auto-merging, and why (what cellbridge recorded in
        /// the body: shown to people, decided on by nobody).
        #[serde(skip_serializing_if = "Option::is_none")]
        auto_merge_waits: Option<AutoMergeWait>,
    },
    /// Nothing is open, and the cell's newest pull request, which proposed these very values,
    /// was closed by a person without merging: cellbridge leaves it closed.
    Declined { number: u64, url: String },
    /// No pull request is open for the cell.
    None,
}

/// Why an eligible pull request is neither queued nor auto-merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AutoMergeWait {
    /// Waiting for its turn under the cap on cellbridge's pull requests in flight.
    Turn,
    /// Not queued: the merge queue would wait for a check no merge group reports.
    Stall,
}

/// The strict-substitution status on a pull request's head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum HeadCheck {
    Passes,
    /// Its description names the variables (never a value).
    Fails {
        description: String,
    },
    /// No status on this head yet (a person's push the next event will check).
    NotPosted,
    /// cellbridge's own `pending` "not verified": GitHub's merge state of the pull request could
    /// not be read, so nothing was judged. GitHub's failure, never a failing check.
    NotVerified {
        /// When that status was posted, in seconds since the Unix epoch.
        since: u64,
    },
}

fn days(n: u64) -> String {
    match n {
        0 => "opened today".into(),
        n => format!("open {}", plural(n as usize, "day")),
    }
}

/// One row: a cell, and the state it was computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellStatus {
    pub cell: String,
    #[serde(flatten)]
    pub state: CellState,
    /// The state file or S3 key; `None` for [`CellState::StateMissing`].
    pub source: Option<String>,
    /// The state's serial, when it could be read.
    pub serial: Option<u64>,
    /// The cell's pull request, where GitHub was read (the dashboard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub github: Option<OnGithub>,
    /// What the cell's cluster records of its bootstrap, where EKS was asked (the dashboard):
    /// `None` for a cell whose merged metadata names no cluster, a cluster EKS no longer knows,
    /// or rows no one asked EKS about (`cellbridge status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flux: Option<Flux>,
}

impl CellStatus {
    /// Whether a person should look: everything but in sync, stale and decommissioned (a
    /// destroyed cell the base never had whose pull request is still open needs a look too),
    /// and any row whose cluster's Flux is stuck or unknown.
    pub fn needs_attention(&self) -> bool {
        let state = match self.state {
            CellState::InSync | CellState::Stale => false,
            CellState::Decommissioned => matches!(self.github, Some(OnGithub::Open { .. })),
            _ => true,
        };
        state || self.flux.as_ref().is_some_and(Flux::needs_attention)
    }

    /// What the row says: the state's detail, with what GitHub holds for the cell when it was
    /// read, and why its cluster's Flux is stuck or unknown.
    pub fn detail(&self) -> String {
        let d = self.state_detail();
        match self.flux.as_ref().and_then(Flux::detail) {
            Some(flux) => format!("{d}; {flux}"),
            None => d,
        }
    }

    fn state_detail(&self) -> String {
        let d = self.state.detail();
        let Some(gh) = &self.github else { return d };
        match (&self.state, gh) {
            (
                CellState::Destroyed,
                OnGithub::Open {
                    number,
                    age_days,
                    decommission: true,
                    ..
                },
            ) => format!(
                "decommission pending (#{number}, {}): the stack was destroyed and its cluster found gone; merging the pull request removes clusters/{}/",
                days(*age_days),
                self.cell
            ),
            (CellState::Destroyed, other) => {
                let mut d = "the stack was destroyed (no outputs, no resources) and nothing is proposed: the cluster still exists or is not confirmed gone".to_owned();
                if let OnGithub::Open { number, .. } = other {
                    let _ = write!(d, "; pull request #{number} is still open");
                }
                d
            }
            (
                CellState::Pending { .. },
                OnGithub::Open {
                    number,
                    age_days,
                    decommission,
                    check,
                    queued,
                    merge_state,
                    auto_merge_waits,
                    ..
                },
            ) => {
                if *decommission {
                    return format!("{d}; decommission pull request #{number} still open");
                }
                let queued = match (queued, auto_merge_waits) {
                    (true, _) => ", queued in the merge queue",
                    (false, Some(AutoMergeWait::Turn)) => {
                        ", eligible and waiting for its turn (the cap on cellbridge's pull requests queued or auto-merging)"
                    }
                    (false, Some(AutoMergeWait::Stall)) => {
                        ", eligible but not queued: the merge queue would wait for cellbridge/strict-substitution, which no merge group reports (require `cellbridge fleet check` instead)"
                    }
                    (false, None) => "",
                };
                let check = match check {
                    Some(HeadCheck::Passes) => "strict check passes".to_owned(),
                    Some(HeadCheck::Fails { description }) => format!("strict check fails: {description}"),
                    Some(HeadCheck::NotPosted) => "strict check not posted on its head yet".to_owned(),
                    Some(HeadCheck::NotVerified { since }) => format!(
                        "GitHub failed: the merge state could not be read, since {}",
                        crate::pure::bootstrap::record::format_time(
                            std::time::UNIX_EPOCH + std::time::Duration::from_secs(*since)
                        )
                    ),
                    // The dashboard reads every pending head's status: only a caller reading none leaves it.
                    None => "its head's status not read".to_owned(),
                };
                let merge = merge_state
                    .as_deref()
                    .map(|m| format!("; merge state: {m}"))
                    .unwrap_or_default();
                format!(
                    "{d}; pull request #{number} {}{queued}; {check}{merge}",
                    days(*age_days)
                )
            }
            (CellState::Pending { .. }, OnGithub::Declined { number, .. }) => {
                format!("{d}; declined: #{number} was closed without merging these values")
            }
            (CellState::Pending { .. }, OnGithub::None) => format!("{d}; no pull request open yet"),
            (CellState::Decommissioned, OnGithub::Open { number, .. }) => format!(
                "the stack was destroyed before clusters/{}/ ever reached the base branch, and its pull request #{number} is still open: state-sync closes it once EKS confirms the cluster gone in the cell's account, or a person closes it",
                self.cell
            ),
            (_, OnGithub::Open { number, .. }) => format!("{d}; pull request #{number} is open"),
            _ => d,
        }
    }

    /// The detail with the state's source and serial.
    pub(super) fn detail_with_source(&self) -> String {
        let mut d = self.detail();
        match (&self.source, self.serial) {
            (Some(s), Some(n)) => {
                let _ = write!(d, " (state {s}, serial {n})");
            }
            (Some(s), None) => {
                let _ = write!(d, " (state {s})");
            }
            _ => {}
        }
        d
    }
}

/// Counts per kind. `cells` counts distinct cells, `rows` the rows (a cell whose workspaces
/// have several states has one row per state); the other counts are rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub cells: usize,
    pub rows: usize,
    pub needs_attention: usize,
    pub in_sync: usize,
    pub pending: usize,
    pub stale: usize,
    pub decommissioned: usize,
    pub refused: usize,
    pub destroyed: usize,
    pub failed: usize,
    pub state_missing: usize,
    /// Clusters whose bootstrap ended other than `ready` (their cells', counted once), where
    /// EKS was asked (the dashboard).
    #[serde(skip_serializing_if = "is_zero")]
    pub flux_stuck: usize,
    /// Clusters whose Flux record could not be read.
    #[serde(skip_serializing_if = "is_zero")]
    pub flux_unknown: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Failed => self.failed,
            Kind::Refused => self.refused,
            Kind::Destroyed => self.destroyed,
            Kind::StateMissing => self.state_missing,
            Kind::Pending => self.pending,
            Kind::Stale => self.stale,
            Kind::Decommissioned => self.decommissioned,
            Kind::InSync => self.in_sync,
        }
    }

    /// `7 cells: 1 failed, 1 refused, 3 in sync` (kinds with no row left out).
    pub fn line(&self) -> String {
        let mut s = plural(self.cells, "cell");
        if self.rows != self.cells {
            let _ = write!(s, " ({} rows)", self.rows);
        }
        let parts: Vec<String> = Kind::ALL
            .iter()
            .filter(|k| self.count(**k) > 0)
            .map(|k| format!("{} {}", self.count(*k), k.label()))
            .collect();
        if !parts.is_empty() {
            let _ = write!(s, ": {}", parts.join(", "));
        }
        match self.needs_attention {
            1 => s.push_str("; 1 needs attention"),
            n => {
                let _ = write!(s, "; {n} need attention");
            }
        }
        match self.flux_stuck {
            0 => {}
            1 => s.push_str("; 1 cluster stuck"),
            n => {
                let _ = write!(s, "; {n} clusters stuck");
            }
        }
        s
    }
}

/// The counts per kind of `rows`.
pub fn summary(rows: &[CellStatus]) -> Summary {
    let mut s = Summary {
        cells: rows.iter().map(|r| r.cell.as_str()).collect::<BTreeSet<_>>().len(),
        rows: rows.len(),
        needs_attention: rows.iter().filter(|r| r.needs_attention()).count(),
        ..Summary::default()
    };
    let cells_whose = |f: fn(&Flux) -> bool| {
        rows.iter()
            .filter(|r| r.flux.as_ref().is_some_and(f))
            .map(|r| r.cell.as_str())
            .collect::<BTreeSet<_>>()
            .len()
    };
    s.flux_stuck = cells_whose(Flux::stuck);
    s.flux_unknown = cells_whose(|f| matches!(f, Flux::Unknown { .. }));
    for r in rows {
        let n = match r.state.kind() {
            Kind::Failed => &mut s.failed,
            Kind::Refused => &mut s.refused,
            Kind::Destroyed => &mut s.destroyed,
            Kind::StateMissing => &mut s.state_missing,
            Kind::Pending => &mut s.pending,
            Kind::Stale => &mut s.stale,
            Kind::Decommissioned => &mut s.decommissioned,
            Kind::InSync => &mut s.in_sync,
        };
        *n += 1;
    }
    s
}
