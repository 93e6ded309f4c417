//! `cellbridge status`: every cell of a local fleet checkout against a directory of states laid
//! out as the state bucket is (the key pattern), each row made by the rule the fleet dashboard
//! shares ([`cellbridge::pure::status::state_row`]), with the whole plan and its strict check.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cellbridge::jobs::sync::{DEFAULT_KEY_PATTERN, KeyPattern};
use cellbridge::pure::plan::PlanOptions;
use cellbridge::pure::status::{self, CellStatus, Depth, FleetCells};
use cellbridge::pure::template::FluxGit;
use cellbridge::pure::tfstate;

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
    Fleet(#[from] cellbridge::pure::fleet::FleetError),
}

pub fn status(args: &StatusArgs, json: bool) -> Result<ExitCode, StatusError> {
    let pattern = KeyPattern::parse(&args.key_pattern).map_err(|reason| StatusError::KeyPattern {
        pattern: args.key_pattern.clone(),
        reason,
    })?;
    let fleet = crate::local::open_fleet(&args.fleet)?;
    let cells = FleetCells::read(&fleet)?;
    let opts = PlanOptions {
        sync_source: FluxGit {
            url: None,
            branch: None,
            base_branch: cellbridge::rules::bootstrap::config::checkout_base_branch(&args.fleet),
        },
    };

    let mut rows = Vec::new();
    for key in state_keys(&args.states)? {
        let Some((cell, _workspace)) = pattern.cell_of(&key) else {
            continue;
        };
        let read = tfstate::read_state_file(&args.states.join(&key)).map_err(|e| e.to_string());
        let row = status::state_row(&key, &cell, read, "--key-pattern", &fleet, &cells, Depth::Plan(&opts));
        rows.push(row.status);
    }
    let missing = cells.state_missing(&rows);
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
