//! `cellbridge status`: every cell of a local fleet checkout against a directory of states laid
//! out as the state bucket is (the key pattern), in the dashboard's model
//! ([`cellbridge::status`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cellbridge::fleet::{EntryKind, FleetRead, LocalFleet};
use cellbridge::metadata::{self, ContractError};
use cellbridge::plan::{self, Outcome, PlanOptions, StateRef};
use cellbridge::status::{self, CellState, CellStatus};
use cellbridge::sync::{DEFAULT_KEY_PATTERN, KeyPattern};
use cellbridge::template::FluxGit;
use cellbridge::tfstate;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The fleet repository's root directory.
    #[arg(long, default_value = ".")]
    fleet: PathBuf,
    /// A directory of states laid out as the state bucket is: each file's path below it is its
    /// key (`cells/<cell>/terraform.tfstate` by default).
    #[arg(long)]
    states: PathBuf,
    /// Print JSON: {"summary": ..., "cells": [...]} (as `--output json`).
    #[arg(long)]
    json: bool,
    /// Which keys are cells' states, and which cell (as state-sync's setting).
    #[arg(long, env = "CELLBRIDGE_STATE_KEY_PATTERN", default_value = DEFAULT_KEY_PATTERN)]
    key_pattern: String,
}

impl StatusArgs {
    pub fn json(&self) -> bool {
        self.json
    }
}

/// A failure of the command itself (exit code 2); a cell's own trouble is a row.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("--key-pattern {pattern:?}: {reason}")]
    KeyPattern { pattern: String, reason: String },
    #[error("states directory {path}: {source}")]
    States {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Fleet(#[from] cellbridge::fleet::FleetError),
}

pub fn status(args: &StatusArgs, json: bool) -> Result<ExitCode, StatusError> {
    let pattern = KeyPattern::parse(&args.key_pattern).map_err(|reason| StatusError::KeyPattern {
        pattern: args.key_pattern.clone(),
        reason,
    })?;
    let fleet = crate::local::open_fleet(&args.fleet)?;
    let fleet_cells = fleet_cells(&fleet)?;
    let opts = PlanOptions {
        sync_source: FluxGit {
            url: None,
            branch: None,
            base_branch: cellbridge::bootstrap::config::checkout_base_branch(&args.fleet),
        },
    };

    let mut rows = Vec::new();
    for key in state_keys(&args.states)? {
        let Some((cell, _workspace)) = pattern.cell_of(&key) else {
            continue;
        };
        rows.push(row(&args.states.join(&key), key, cell, &fleet, &opts));
    }
    let named: BTreeSet<&str> = rows.iter().map(|r| r.cell.as_str()).collect();
    let missing: Vec<CellStatus> = fleet_cells
        .iter()
        .filter(|c| !named.contains(c.as_str()))
        .map(|c| CellStatus {
            cell: c.clone(),
            state: CellState::StateMissing,
            source: None,
            serial: None,
            github: None,
        })
        .collect();
    rows.extend(missing);
    rows.sort_by(|a, b| (&a.cell, &a.source).cmp(&(&b.cell, &b.source)));

    if json {
        let v = serde_json::json!({ "summary": status::summary(&rows), "cells": rows });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        print!("{}", status::render_text(&rows));
    }
    Ok(if rows.iter().any(CellStatus::needs_attention) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The directories under `clusters/`, but the template and any other `_` directory.
fn fleet_cells(fleet: &LocalFleet) -> Result<Vec<String>, StatusError> {
    Ok(fleet
        .list("clusters")?
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Dir && !e.name.starts_with('_'))
        .map(|e| e.name)
        .collect())
}

/// Every file below `dir` as a `/`-separated path relative to it (its key), sorted; symlinks
/// to files count, symlinks to directories are not followed.
fn state_keys(dir: &Path) -> Result<Vec<String>, StatusError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| StatusError::States { path, source }
    };
    let mut keys = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&path).map_err(io(&path))? {
            let entry = entry.map_err(io(&path))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue; // not UTF-8: no S3 key either
            };
            let key = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let kind = entry.file_type().map_err(io(&entry.path()))?;
            if kind.is_dir() {
                stack.push((entry.path(), key));
            } else if kind.is_file() || (kind.is_symlink() && entry.path().is_file()) {
                keys.push(key);
            }
        }
    }
    keys.sort();
    Ok(keys)
}

/// One state's row: read, the contract, the plan against the fleet, as `cellbridge plan` does.
fn row(path: &Path, key: String, cell: String, fleet: &LocalFleet, opts: &PlanOptions) -> CellStatus {
    let mut out = CellStatus {
        cell,
        state: CellState::InSync,
        source: Some(key.clone()),
        serial: None,
        github: None,
    };
    let state = match tfstate::read_state_file(path) {
        Ok(s) => s,
        Err(e) => {
            out.state = CellState::Failed { reason: e.to_string() };
            return out;
        }
    };
    out.serial = Some(state.serial);
    let meta = match metadata::from_state(&state) {
        Ok(m) => m,
        Err(ContractError::Destroyed) => {
            out.state = match fleet.is_dir(&format!("clusters/{}", out.cell)) {
                Ok(false) => CellState::Decommissioned,
                _ => CellState::Destroyed,
            };
            return out;
        }
        // The contract's message names the key, never the value.
        Err(e) => {
            out.state = CellState::Refused { reason: e.to_string() };
            return out;
        }
    };
    if meta.cell != out.cell {
        out.state = CellState::Refused {
            reason: format!(
                "the key says cell `{}` (--key-pattern) but cell_metadata.cell_name is `{}`",
                out.cell, meta.cell
            ),
        };
        return out;
    }
    let source = StateRef {
        bucket: None,
        key,
        version_id: None,
    };
    out.state = match plan::plan(&meta, source, fleet, opts) {
        Err(e) => CellState::Failed { reason: e.to_string() },
        Ok(p) => match p.outcome {
            Outcome::InSync => CellState::InSync,
            Outcome::Stale => CellState::Stale,
            Outcome::Change => CellState::Pending {
                new_cell: p.new_cell,
                check_ok: Some(p.status_ok()),
                keys_changed: p.key_changes.len(),
            },
        },
    };
    out
}
