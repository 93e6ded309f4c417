//! `plan`, `sync` and `check` against a local fleet directory and a local state file.

use std::path::PathBuf;
use std::process::ExitCode;

use cellbridge::pure::fleet::{FileWrite, FleetError, FleetRead, LocalFleet};
use cellbridge::pure::plan::{self, Outcome, Plan, PlanOptions, StateRef};
use cellbridge::pure::template::{self, FluxGit};
use cellbridge::pure::{check, metadata, tfstate};

use crate::git;

#[derive(clap::Args)]
pub struct StateArgs {
    /// A Terraform state file (format version 4).
    #[arg(long)]
    state: PathBuf,
    /// The fleet repository's root directory.
    #[arg(long, default_value = ".")]
    fleet: PathBuf,
    /// Flux's Git URL for a new cell's gotk-sync.yaml (default: the template's).
    #[arg(long, env = "CELLBRIDGE_FLUX_GIT_URL")]
    flux_git_url: Option<String>,
    /// The branch Flux follows in a new cell's gotk-sync.yaml (default: the template's
    /// `ref.branch`, else the checkout's base branch: CELLBRIDGE_BASE_BRANCH, else origin's HEAD).
    #[arg(long, env = "CELLBRIDGE_FLUX_GIT_BRANCH", value_parser = branch_name)]
    flux_branch: Option<String>,
    /// The cell, for a state that names none (what `terraform destroy` leaves); a state that
    /// names its cell must name this one.
    #[arg(long)]
    cell: Option<String>,
}

fn branch_name(s: &str) -> Result<String, String> {
    template::check_branch(s).map(|()| s.to_owned())
}

/// Any failure of the local commands: printed on one line, exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    State(#[from] tfstate::StateError),
    #[error("{file}: {source}")]
    Contract {
        file: String,
        #[source]
        source: metadata::ContractError,
    },
    #[error(transparent)]
    Fleet(#[from] cellbridge::pure::fleet::FleetError),
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    #[error(transparent)]
    Check(#[from] check::CheckError),
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error(
        "{file}: the state has no outputs and no resources (its stack was destroyed), so it names no cell: give --cell NAME to see the cell's decommission plan"
    )]
    DestroyedWithoutCell { file: String },
    #[error("{file}: cell_metadata.cell_name is `{state}` but --cell says `{given}`")]
    OtherCell { file: String, state: String, given: String },
    #[error(transparent)]
    Decommission(#[from] cellbridge::pure::decommission::DecommissionError),
    #[error("{path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The fleet checkout `--fleet` names: the directory that holds `clusters/`. Any other
/// directory is said to be one, rather than failing later on what it lacks (the template's Git
/// URL, a cell's files).
pub fn open_fleet(dir: &std::path::Path) -> Result<LocalFleet, FleetError> {
    let fleet = LocalFleet::open(dir)?;
    tracing::info!(fleet = %dir.display(), "reading the fleet checkout");
    if !fleet.is_dir("clusters")? {
        return Err(FleetError::Repo {
            root: dir.display().to_string(),
            reason: "no clusters/ directory here: --fleet names the fleet repository's root (the directory that holds clusters/)"
                .into(),
        });
    }
    Ok(fleet)
}

pub fn plan(args: &StateArgs, json: bool, apply: bool) -> Result<ExitCode, CliError> {
    let state = tfstate::read_state_file(&args.state)?;
    let file = args.state.display().to_string();
    tracing::info!(state = %file, serial = state.serial, lineage = %state.lineage, "state read");
    let meta = match metadata::from_state(&state) {
        Ok(m) => m,
        Err(metadata::ContractError::Destroyed) => return decommission(args, &state, json),
        Err(source) => return Err(CliError::Contract { file, source }),
    };
    if let Some(given) = args.cell.as_ref().filter(|c| **c != meta.cell) {
        return Err(CliError::OtherCell {
            file,
            state: meta.cell.clone(),
            given: given.clone(),
        });
    }
    let fleet = open_fleet(&args.fleet)?;
    let opts = PlanOptions {
        sync_source: FluxGit {
            url: args.flux_git_url.clone(),
            branch: args.flux_branch.clone(),
            base_branch: cellbridge::rules::bootstrap::config::checkout_base_branch(&args.fleet),
        },
    };
    let source = StateRef {
        bucket: None,
        key: args.state.display().to_string(),
        version_id: None,
    };
    let plan = plan::plan(&meta, source, &fleet, &opts)?;
    tracing::info!(cell = %plan.cell, outcome = plan.outcome.as_str(), files = plan.files.len(), layers = plan.check.layers.len(), check_passed = plan.status_ok(), "planned");

    let applied = if apply && plan.outcome == Outcome::Change {
        Some(write(&args.fleet, &plan)?)
    } else {
        None
    };
    if json {
        let mut v = serde_json::to_value(&plan).expect("plan serializes");
        v["status_ok"] = plan.status_ok().into();
        v["status_description"] = plan.status_description().into();
        if let Some(a) = &applied {
            v["applied"] = serde_json::to_value(a).expect("serializes");
        }
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        print_plan(&plan, applied.as_ref());
    }
    Ok(if plan.outcome == Outcome::Change && !plan.status_ok() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A destroyed state: the decommission state-sync would propose once EKS confirms the cluster is
/// gone. Nothing is written, even by `sync`: removing a cell's directory is a person's merge.
fn decommission(args: &StateArgs, state: &tfstate::StateOutputs, json: bool) -> Result<ExitCode, CliError> {
    let file = args.state.display().to_string();
    let cell = args
        .cell
        .clone()
        .ok_or_else(|| CliError::DestroyedWithoutCell { file: file.clone() })?;
    let fleet = open_fleet(&args.fleet)?;
    let source = StateRef {
        bucket: None,
        key: file,
        version_id: None,
    };
    let d = cellbridge::pure::decommission::plan(
        &cell,
        state.serial,
        &state.lineage,
        source,
        &fleet,
        &cellbridge::pure::decommission::ClusterCheck::NotAsked,
    )?;
    if json {
        let v = serde_json::json!({"cell": cell, "outcome": "decommission", "decommission": d});
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return Ok(ExitCode::SUCCESS);
    }
    match d {
        None => println!(
            "cell {cell}: its stack was destroyed (the state has no outputs and no resources) and the fleet repo has no clusters/{cell}/: nothing to remove."
        ),
        Some(d) => {
            println!("cell {cell}: its stack was destroyed. Decommission plan (nothing written):");
            println!("Pull request on branch {} — {}", d.branch, d.title);
            println!("Labels: {}", d.labels.join(", "));
            println!("\n{}", d.body);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_plan(p: &Plan, applied: Option<&Applied>) {
    match p.outcome {
        Outcome::InSync => {
            println!(
                "cell {} is in sync: the fleet repo already holds this cell_metadata (state serial {}). No pull request.",
                p.cell, p.serial
            );
            return;
        }
        Outcome::Stale => {
            println!(
                "cell {}: the fleet repo already holds serial {} of lineage {}; this state (serial {}) is older. Nothing to do.",
                p.cell,
                p.base_serial.unwrap_or_default(),
                p.lineage,
                p.serial
            );
            return;
        }
        Outcome::Change => {}
    }
    println!("Pull request on branch {} — {}", p.branch, p.title);
    println!("Labels: {}", p.labels.join(", "));
    println!(
        "Status {}: {} — {}",
        plan::STATUS_CONTEXT,
        if p.status_ok() { "success" } else { "failure" },
        p.status_description()
    );
    println!("\n{}", p.body);
    println!("{}", p.unified_diff());
    match applied {
        Some(Applied::Commit { branch, commit }) => println!(
            "Committed {} file(s) to branch {branch} ({commit}); the checked-out branch is untouched.",
            p.files.len()
        ),
        Some(Applied::Files { count }) => println!("Wrote {count} file(s) into the fleet directory."),
        None => {}
    }
}

#[derive(Debug, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Applied {
    Commit { branch: String, commit: String },
    Files { count: usize },
}

fn write(root: &std::path::Path, p: &Plan) -> Result<Applied, CliError> {
    let files: Vec<FileWrite> = p.files.iter().map(|f| f.write()).collect();
    // In a repository (the fleet at its top or in a sub-directory), a commit on the cell's
    // branch; the working tree is never edited.
    if let Some((top, prefix)) = git::repo_of(root) {
        let files: Vec<FileWrite> = files
            .into_iter()
            .map(|f| FileWrite {
                path: format!("{prefix}{}", f.path),
                ..f
            })
            .collect();
        let commit = git::commit_files(
            &top,
            &p.branch,
            &files,
            &format!("{}\n\n{}", p.title, commit_trailer(p)),
        )?;
        return Ok(Applied::Commit {
            branch: p.branch.clone(),
            commit,
        });
    }
    // Write everything to temporary names first so a failure leaves no half-written cell.
    // Each with the template's mode: an executable stays one, a symlink is made as one.
    let mut staged = Vec::new();
    for f in &files {
        let target = root.join(&f.path);
        let tmp = target.with_extension("cellbridge-tmp");
        let io = |source| CliError::Write {
            path: f.path.clone(),
            source,
        };
        f.write_at(&tmp).map_err(io)?;
        staged.push((tmp, target, &f.path));
    }
    for (tmp, target, path) in &staged {
        std::fs::rename(tmp, target).map_err(|source| CliError::Write {
            path: (*path).clone(),
            source,
        })?;
    }
    Ok(Applied::Files { count: files.len() })
}

fn commit_trailer(p: &Plan) -> String {
    format!(
        "State {}.\n\n{} {}\nCellbridge-Lineage: {}",
        p.source,
        git::TRAILER,
        p.serial,
        p.lineage
    )
}

pub fn check(fleet: &std::path::Path, cell: Option<&str>, json: bool) -> Result<ExitCode, CliError> {
    let fleet = open_fleet(fleet)?;
    let reports = check::check_fleet(&fleet, cell)?;
    for r in &reports {
        tracing::info!(cell = %r.cell, layers = r.layers.len(), findings = r.findings.len(), "checked");
    }
    let passed = reports.iter().all(|r| r.passed());
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "passed": passed, "cells": reports })).expect("json")
        );
    } else {
        // Once per run, not once per cell: on a fleet whose files name no release, the same
        // sentence would otherwise open every cell's lines.
        let unknown: Vec<&str> = reports
            .iter()
            .filter(|r| r.flux.notice.is_some())
            .map(|r| r.cell.as_str())
            .collect();
        match unknown.as_slice() {
            [] => {}
            [_] => println!(
                "notice: {}",
                reports
                    .iter()
                    .find_map(|r| r.flux.notice.as_deref())
                    .unwrap_or_default()
            ),
            cells => println!(
                "notice: {} cells ({}) name no kustomize-controller release the check knows: the newest rules apply; set it in {}",
                cells.len(),
                cells.join(", "),
                check::FLEET_SETTING
            ),
        }
        for r in &reports {
            let files: usize = r.layers.iter().map(|l| l.files).sum();
            if r.passed() {
                println!("ok    {}: {} layer(s), {files} file(s)", r.cell, r.layers.len());
            } else {
                println!("FAIL  {}: {} finding(s)", r.cell, r.findings.len());
                for f in &r.findings {
                    println!("      {}:{}: {} (layer {})", f.file, f.line, f.message, f.layer);
                }
            }
            for w in &r.warnings {
                if w.layer.is_empty() {
                    println!("      warning {}:{}: {}", w.file, w.line, w.message);
                } else {
                    println!("      warning {}:{}: {} (layer {})", w.file, w.line, w.message, w.layer);
                }
            }
            for u in &r.unverified {
                println!(
                    "      unverified {}:{}: `{}` (layer {}) only {} could supply; declare its keys in {}",
                    u.file,
                    u.line,
                    u.variable,
                    u.layer,
                    u.sources.join(" or "),
                    check::IN_CLUSTER_SOURCES
                );
            }
            if !r.unused_keys.is_empty() {
                println!("      keys no manifest uses: {}", r.unused_keys.join(", "));
            }
        }
        if reports.is_empty() {
            println!("no cells found under clusters/");
        }
    }
    Ok(if passed { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
