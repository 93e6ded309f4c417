//! The change plan: from a validated state and a snapshot of the fleet repo to the files a pull
//! request writes, what changed, and how it reads to a reviewer. Pure: no I/O but the
//! `FleetRead` snapshot it is handed.
//!
//! Where each part lives: this module computes the plan ([`plan`]) and what is decided from it
//! (the commit status, the diff); `body.rs` writes its pull request's title and body.

mod body;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::check::{self, CheckReport};
use super::configmap::{self, ConfigMapError, Existing};
use super::fleet::{FileMode, FileWrite, FleetError, FleetRead, Overlay};
use super::markdown;
use super::metadata::CellMetadata;
use super::template::{self, FluxGit, TemplateError};

use body::{body, title};

pub const LABEL_CELLBRIDGE: &str = "cellbridge";
pub const LABEL_NEW_CELL: &str = "new-cell";
pub const LABEL_SCHEMA_CHANGE: &str = "schema-change";
/// The commit status context that branch protection can require.
pub const STATUS_CONTEXT: &str = "cellbridge/strict-substitution";

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cell {cell}: {source}")]
    Fleet {
        cell: String,
        #[source]
        source: FleetError,
    },
    #[error("cell {cell}: {source}")]
    ConfigMap {
        cell: String,
        #[source]
        source: ConfigMapError,
    },
    #[error("cell {cell}: {source}")]
    Template {
        cell: String,
        #[source]
        source: TemplateError,
    },
}

/// Where the state came from, shown in the pull request so a reviewer can trace it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StateRef {
    /// `None` for a local file.
    pub bucket: Option<String>,
    /// The object key, or the local path.
    pub key: String,
    pub version_id: Option<String>,
}

impl std::fmt::Display for StateRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.bucket {
            Some(b) => write!(f, "s3://{b}/{}", self.key)?,
            None => write!(f, "{}", self.key)?,
        }
        if let Some(v) = &self.version_id {
            write!(f, " (version {v})")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// What a new cell's gotk-sync.yaml (or FluxInstance) gets besides the template's own: the
    /// configured URL and branch, and the base branch where neither the configuration nor the
    /// template names one.
    pub sync_source: FluxGit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The fleet repo already holds this map: nothing to propose (and a stale pull request closes).
    InSync,
    /// The fleet repo holds a newer serial of the same lineage: this event is old news.
    Stale,
    /// Files change.
    Change,
}

impl Outcome {
    /// The outcome as the plan's JSON names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::InSync => "in-sync",
            Outcome::Stale => "stale",
            Outcome::Change => "change",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyChange {
    pub key: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileChange {
    pub path: String,
    /// `None` when the file is new.
    pub old: Option<String>,
    /// The content; a symlink's target for [`FileMode::Symlink`].
    pub new: String,
    /// As the template has it for a new cell's files; absent (a regular file) otherwise.
    #[serde(default, skip_serializing_if = "FileMode::is_regular")]
    pub mode: FileMode,
}

impl FileChange {
    /// The file as a commit writes it.
    pub fn write(&self) -> FileWrite {
        FileWrite {
            path: self.path.clone(),
            mode: self.mode,
            content: self.new.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    pub cell: String,
    pub outcome: Outcome,
    pub new_cell: bool,
    pub files: Vec<FileChange>,
    pub key_changes: Vec<KeyChange>,
    pub key_set_changed: bool,
    pub schema_old: Option<String>,
    pub schema_new: u64,
    /// The key set changed but `schema` did not go up: the contract says it must.
    pub schema_violation: bool,
    pub check: CheckReport,
    /// A fleet repo the check could not read (a kustomization leaving the repo, bad YAML...).
    pub check_error: Option<String>,
    pub serial: u64,
    pub lineage: String,
    /// What the fleet repo's base branch records today.
    pub base_serial: Option<u64>,
    pub base_lineage: Option<String>,
    pub source: StateRef,
    pub branch: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    /// The metadata the plan writes: what the check substitutes.
    pub data: BTreeMap<String, String>,
}

impl Plan {
    /// The keys the state adds to the fleet's map, and those it removes.
    pub fn added_and_removed_keys(&self) -> (Vec<&str>, Vec<&str>) {
        let keys = |pick: fn(&KeyChange) -> bool| -> Vec<&str> {
            self.key_changes
                .iter()
                .filter(|k| pick(k))
                .map(|k| k.key.as_str())
                .collect()
        };
        (keys(|k| k.old.is_none()), keys(|k| k.new.is_none()))
    }

    /// The same plan, its check run on `fleet` instead: the branch as people left it (their
    /// changes to the layers included), merged with the base.
    pub fn rechecked(&self, fleet: &dyn FleetRead) -> Plan {
        let (check, check_error) = run_check(fleet, &self.cell, &self.data);
        Plan {
            check,
            check_error,
            ..self.clone()
        }
    }

    /// The commit status: success only when every layer passes and the schema rule holds.
    pub fn status_ok(&self) -> bool {
        self.check.passed() && self.check_error.is_none() && !self.schema_violation
    }

    /// One line for the commit status, within GitHub's limit
    /// ([`STATUS_DESCRIPTION_MAX`](crate::pure::plan::STATUS_DESCRIPTION_MAX)).
    pub fn status_description(&self) -> String {
        let mut d = if let Some(e) = &self.check_error {
            format!("check failed: {e}")
        } else if !self.check.passed() {
            let vars = self.check.unset_variables();
            // Every finding but an unset variable: point at the first one.
            let other = self.check.findings.iter().find(|f| f.kind != check::FindingKind::Unset);
            match (vars.is_empty(), other) {
                (false, None) => format!("unset: {}", vars.join(", ")),
                (false, Some(f)) => format!("unset: {}; {}:{}: {}", vars.join(", "), f.file, f.line, f.message),
                (true, Some(f)) => format!("{}:{}: {}", f.file, f.line, f.message),
                (true, None) => "strict substitution failed".to_owned(),
            }
        } else if self.schema_violation {
            "key set changed without a schema bump".to_owned()
        } else if !self.check.unverified.is_empty() {
            format!(
                "{} layers pass strict substitution; {} reference(s) unverified (in-cluster sources)",
                self.check.layers.len(),
                self.check.unverified.len()
            )
        } else {
            format!("{} layers pass strict substitution", self.check.layers.len())
        };
        // The schema rule first: a long finding (a symlink, a path) is what the cut may shorten,
        // never the one sentence that says a person must look at the key set.
        if self.schema_violation && !d.contains("schema") {
            d = format!("key set changed without a schema bump; {d}");
        }
        markdown::cut(&d, crate::pure::plan::STATUS_DESCRIPTION_MAX)
    }

    /// Every file as a unified diff against the fleet repo, `a/` and `b/` prefixed like git; an
    /// executable or a symlink says so in git's words first (`new file mode 100755`, `120000`
    /// whose one line is the link's target).
    pub fn unified_diff(&self) -> String {
        let mut out = String::new();
        for f in &self.files {
            if !f.mode.is_regular() {
                let _ = writeln!(
                    out,
                    "{} {}",
                    if f.old.is_some() { "new mode" } else { "new file mode" },
                    f.mode.git_mode()
                );
            }
            let old = f.old.as_deref().unwrap_or("");
            let diff = similar::TextDiff::from_lines(old, &f.new);
            let from = if f.old.is_some() {
                format!("a/{}", f.path)
            } else {
                "/dev/null".to_owned()
            };
            out.push_str(
                &diff
                    .unified_diff()
                    .context_radius(3)
                    .header(&from, &format!("b/{}", f.path))
                    .to_string(),
            );
        }
        out
    }
}
/// The branch cellbridge owns for a cell.
pub fn branch_for(cell: &str) -> String {
    format!("cellbridge/{cell}")
}

/// Plans the change that brings `fleet` to `meta`.
pub fn plan(
    meta: &CellMetadata,
    source: StateRef,
    fleet: &dyn FleetRead,
    opts: &PlanOptions,
) -> Result<Plan, PlanError> {
    let cell = meta.cell.as_str();
    let fleet_err = |source| PlanError::Fleet {
        cell: cell.to_owned(),
        source,
    };
    let cm_path = configmap::path_for(cell);
    let cell_dir = format!("clusters/{cell}");
    // Flux has nothing at a symlinked cell directory, and writing a new cell below the link
    // would replace it: a person decides.
    if let Some(link) = fleet.symlink_on(&cell_dir).map_err(fleet_err)? {
        return Err(fleet_err(FleetError::Symlink {
            path: link.path,
            target: link.target,
        }));
    }
    let new_cell = !fleet.is_dir(&cell_dir).map_err(fleet_err)?;
    let existing_text = fleet.read_text(&cm_path).map_err(fleet_err)?;
    let existing: Option<Existing> = existing_text
        .as_deref()
        .map(|t| configmap::parse(t, &cm_path))
        .transpose()
        .map_err(|source| PlanError::ConfigMap {
            cell: cell.to_owned(),
            source,
        })?;

    let old_data = existing.as_ref().map(|e| e.data.clone()).unwrap_or_default();
    let key_changes = diff_keys(&old_data, &meta.data);
    let key_set_changed =
        existing.is_some() && old_data.keys().collect::<BTreeSet<_>>() != meta.data.keys().collect::<BTreeSet<_>>();
    let schema_old = existing.as_ref().and_then(|e| e.schema().map(str::to_owned));
    let schema_bumped = match schema_old.as_deref().map(str::parse::<u64>) {
        Some(Ok(old)) => meta.schema > old,
        _ => true,
    };
    let schema_violation = key_set_changed && !schema_bumped;

    let outcome = outcome_for(existing.as_ref(), meta, new_cell);

    let mut files = Vec::new();
    if outcome == Outcome::Change {
        if new_cell {
            let src = template::cell_sync(fleet, &opts.sync_source).map_err(|source| PlanError::Template {
                cell: cell.to_owned(),
                source,
            })?;
            for f in template::new_cell_files(fleet, cell, &src).map_err(|source| PlanError::Template {
                cell: cell.to_owned(),
                source,
            })? {
                files.push(FileChange {
                    path: f.path,
                    old: None,
                    new: f.content,
                    mode: f.mode,
                });
            }
        }
        files.retain(|f| f.path != cm_path);
        files.push(FileChange {
            path: cm_path.clone(),
            old: existing_text.clone(),
            new: configmap::render(meta),
            mode: FileMode::Regular,
        });
        files.sort_by(|a, b| a.path.cmp(&b.path));
    }

    // The check runs on what the branch would hold, so a new cell's layers are checked too
    // (its symlinks as symlinks: Flux leaves them out).
    let proposed = Overlay::with_modes(
        fleet,
        files
            .iter()
            .map(|f| (f.path.clone(), f.mode, f.new.clone().into_bytes())),
    );
    let (check, check_error) = run_check(&proposed, cell, &meta.data);

    let mut labels = vec![LABEL_CELLBRIDGE.to_owned()];
    if new_cell {
        labels.push(LABEL_NEW_CELL.to_owned());
    }
    if key_set_changed {
        labels.push(LABEL_SCHEMA_CHANGE.to_owned());
    }
    let mut plan = Plan {
        cell: cell.to_owned(),
        outcome,
        new_cell,
        files,
        key_changes,
        key_set_changed,
        schema_old,
        schema_new: meta.schema,
        schema_violation,
        check,
        check_error,
        serial: meta.serial,
        lineage: meta.lineage.clone(),
        base_serial: existing.as_ref().and_then(|e| e.serial),
        base_lineage: existing.as_ref().and_then(|e| e.lineage.clone()),
        source,
        branch: branch_for(cell),
        title: String::new(),
        body: String::new(),
        labels,
        data: meta.data.clone(),
    };
    plan.title = title(&plan);
    plan.body = body(&plan, meta);
    Ok(plan)
}

/// The strict check of `cell` on `fleet`; a fleet it cannot read is the error beside an empty report.
fn run_check(fleet: &dyn FleetRead, cell: &str, data: &BTreeMap<String, String>) -> (CheckReport, Option<String>) {
    match check::check_cell(fleet, cell, data) {
        Ok(r) => (r, None),
        Err(e) => (
            CheckReport {
                cell: cell.to_owned(),
                ..Default::default()
            },
            Some(e.to_string()),
        ),
    }
}

/// Where a state stands against what the fleet holds for its cell: `existing`, the cell's
/// `cell-metadata.yaml`; `new_cell`, no `clusters/<cell>/` yet. The rule the plan and the fleet
/// dashboard share: the map decides, whatever the serial, unless the fleet holds a newer serial
/// of the same lineage.
pub fn outcome_for(existing: Option<&Existing>, meta: &CellMetadata, new_cell: bool) -> Outcome {
    if !new_cell && existing.is_some_and(|e| e.data == meta.data) {
        Outcome::InSync
    } else if existing.is_some_and(|e| {
        e.lineage.as_deref() == Some(meta.lineage.as_str()) && e.serial.is_some_and(|s| s > meta.serial)
    }) {
        Outcome::Stale
    } else {
        Outcome::Change
    }
}

/// The keys whose value differs between `old` and `new` (added, removed or changed), by key.
pub fn diff_keys(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Vec<KeyChange> {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (o, n) = (old.get(k), new.get(k));
            (o != n).then(|| KeyChange {
                key: k.clone(),
                old: o.cloned(),
                new: n.cloned(),
            })
        })
        .collect()
}

/// Reads back the serial and lineage recorded in a pull request body written by [`plan`].
pub fn recorded_serial(body: &str) -> Option<(u64, String)> {
    super::record::Record::read(body).serial()
}

/// The longest commit status description GitHub takes, in characters: "The maximum description
/// length is 140 characters" ("Create a commit status",
/// <https://docs.github.com/rest/commits/statuses#create-a-commit-status>); a longer one is
/// refused with 422. Every status cellbridge posts, and the GitHub double's check, use this one
/// number.
pub const STATUS_DESCRIPTION_MAX: usize = 140;
