//! One state's row, the rule `cellbridge status` and the fleet dashboard share: the caller reads
//! the state (a local file, an S3 object) and the fleet (a checkout, the base branch) its own way
//! and hands both here.

use std::collections::{BTreeMap, BTreeSet};

use super::{CellState, CellStatus, contract_row};
use crate::pure::configmap;
use crate::pure::fleet::{EntryKind, FleetError, FleetRead};
use crate::pure::metadata::CellMetadata;
use crate::pure::plan::{self, PlanOptions, StateRef};
use crate::pure::tfstate::StateOutputs;

/// The cells of a fleet: every entry of `clusters/` but its files and its `_` directories (the
/// template, shared parts), and what each is (a directory, or a symlink Flux leaves out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetCells(BTreeMap<String, EntryKind>);

impl FleetCells {
    /// Lists `clusters/` once.
    pub fn read(fleet: &dyn FleetRead) -> Result<FleetCells, FleetError> {
        Ok(FleetCells(
            fleet
                .list("clusters")?
                .unwrap_or_default()
                .into_iter()
                .filter(|e| !e.name.starts_with('_') && e.kind != EntryKind::File)
                .map(|e| (e.name, e.kind))
                .collect(),
        ))
    }

    /// What `clusters/<cell>` is, when it is a cell.
    pub fn get(&self, cell: &str) -> Option<EntryKind> {
        self.0.get(cell).copied()
    }

    /// The cell names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// A [`CellState::StateMissing`] row for every cell no row of `rows` names.
    pub fn state_missing<'a>(&self, rows: impl IntoIterator<Item = &'a CellStatus>) -> Vec<CellStatus> {
        let named: BTreeSet<&str> = rows.into_iter().map(|r| r.cell.as_str()).collect();
        self.names()
            .filter(|c| !named.contains(c))
            .map(|cell| CellStatus {
                cell: cell.to_owned(),
                state: CellState::StateMissing,
                source: None,
                serial: None,
                github: None,
                flux: None,
            })
            .collect()
    }
}

/// A state's row, and the state's metadata when it kept the contract (its lineage and values,
/// for what a caller decides beyond the row).
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub status: CellStatus,
    pub meta: Option<CellMetadata>,
}

/// How far a row compares a state with the fleet.
#[derive(Debug, Clone, Copy)]
pub enum Depth<'a> {
    /// The map against the fleet's `cell-metadata.yaml` only ([`plan::outcome_for`]): reads
    /// that file alone, so a fleet read keeping only the index will do; `check_ok` is `None`.
    Outcome,
    /// The whole plan with these options, the strict check included (`check_ok: Some(..)`).
    Plan(&'a PlanOptions),
}

/// The row of the state at `key` (a local path or an S3 key), whose key names `cell`.
///
/// `read` is the state, or why it could not be read (a row's reason: the caller decides first
/// which read errors are no row at all, or fail the run). `setting` is where the key pattern is
/// set, named when the state's `cell_name` is another cell. `fleet` and `cells` are the fleet
/// (`cells` read from it once: [`FleetCells::read`]).
///
/// In order: an unreadable state fails; the contract decides a non-DNS-1123 cell part, a
/// destroyed stack (destroyed while `clusters/<cell>` is there, directory or symlink, else
/// decommissioned), a broken contract and another cell's state; a symlinked `clusters/<cell>`
/// fails (Flux leaves it out of its artifact); then the map against the fleet, at `depth`.
pub fn state_row(
    key: &str,
    cell: &str,
    read: Result<StateOutputs, String>,
    setting: &str,
    fleet: &dyn FleetRead,
    cells: &FleetCells,
    depth: Depth<'_>,
) -> Classified {
    let mut out = Classified {
        status: CellStatus {
            cell: cell.to_owned(),
            state: CellState::InSync,
            source: Some(key.to_owned()),
            serial: None,
            github: None,
            flux: None,
        },
        meta: None,
    };
    let state = match read {
        Ok(s) => s,
        Err(reason) => {
            out.status.state = CellState::Failed { reason };
            return out;
        }
    };
    out.status.serial = Some(state.serial);
    let meta = match contract_row(cell, &state, setting, || cells.get(cell).is_some()) {
        Ok(m) => m,
        Err(state) => {
            out.status.state = state;
            return out;
        }
    };
    drop(state);
    out.status.state = match cells.get(cell) {
        Some(EntryKind::Symlink) => CellState::Failed {
            reason: symlinked(fleet, cell),
        },
        kind => compare(key, &meta, fleet, kind == Some(EntryKind::Dir), depth),
    };
    out.meta = Some(meta);
    out
}

/// Why a symlinked `clusters/<cell>` fails, naming its target where it can be read.
fn symlinked(fleet: &dyn FleetRead, cell: &str) -> String {
    match fleet.symlink_on(&format!("clusters/{cell}")) {
        Ok(Some(link)) => FleetError::Symlink {
            path: link.path,
            target: link.target,
        }
        .to_string(),
        Ok(None) => format!(
            "fleet path clusters/{cell} is a symlink: Flux leaves symlinks out of its source artifact, so nothing is there for it"
        ),
        Err(e) => e.to_string(),
    }
}

/// Where a contract-keeping state stands against the fleet; `in_fleet`, whether the fleet has
/// the cell's directory.
fn compare(key: &str, meta: &CellMetadata, fleet: &dyn FleetRead, in_fleet: bool, depth: Depth<'_>) -> CellState {
    match depth {
        Depth::Plan(opts) => {
            let source = StateRef {
                bucket: None,
                key: key.to_owned(),
                version_id: None,
            };
            match plan::plan(meta, source, fleet, opts) {
                Err(e) => CellState::Failed { reason: e.to_string() },
                Ok(p) => CellState::planned(p.outcome, p.new_cell, p.key_changes.len(), Some(p.status_ok())),
            }
        }
        Depth::Outcome => {
            let cm_path = configmap::path_for(&meta.cell);
            let existing = if in_fleet {
                fleet.read_text(&cm_path).map_err(|e| e.to_string()).and_then(|text| {
                    text.as_deref()
                        .map(|t| configmap::parse(t, &cm_path))
                        .transpose()
                        .map_err(|e| e.to_string())
                })
            } else {
                Ok(None)
            };
            match existing {
                Err(reason) => CellState::Failed { reason },
                Ok(existing) => {
                    let old = existing.as_ref().map(|e| e.data.clone()).unwrap_or_default();
                    CellState::planned(
                        plan::outcome_for(existing.as_ref(), meta, !in_fleet),
                        !in_fleet,
                        plan::diff_keys(&old, &meta.data).len(),
                        None,
                    )
                }
            }
        }
    }
}
