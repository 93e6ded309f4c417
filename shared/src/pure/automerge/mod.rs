//! Auto-merge, opted into in Git: which cells' value-only changes may merge without a person,
//! and whether a given plan is such a change. Pure: no I/O but the `FleetRead` snapshot it is
//! handed, no GitHub call (GitHub's auto-merge is made to agree with the verdict in
//! `github::auto_merge`).
//!
//! People opt cells in with one file of the fleet repo, read from the base branch only, so that a
//! pull request cannot opt itself in:
//!
//! ```yaml
//! # .cellbridge/auto-merge.yaml
//! cells:
//!   - prod-eu-west-1      # one cell, by name
//!   - staging-*           # a glob: `*` any run of characters, `?` exactly one
//! ```
//!
//! A pattern matches the whole cell name. No file (or an empty one, or `cells: []`): nobody is
//! opted in. A file people got wrong (an unknown key, `cells` not a list, an empty pattern, a
//! `/`, a character no cell name can hold) is an error naming the file and the entry, rather than
//! silently opting nobody (or somebody) in.
//!
//! A plan is [eligible](eligibility) only when every rule holds: the cell is opted in, it is not a
//! new cell, the only file that changes is `clusters/<cell>/cell-metadata.yaml`, no key is added
//! or removed, and the strict check passed (which includes the schema rule). A decommission is
//! never eligible ([`decommission_eligibility`]). The rules are meant to be applied again to the
//! plan of every new head of the branch ([`super::plan::Plan::rechecked`]).
//!
//! Where each part lives: this module reads the opt-in file; `rules.rs` holds the rules a plan
//! must meet and the paragraph that explains the verdict.

mod rules;

#[cfg(test)]
mod tests;

pub use rules::{Eligibility, decommission_eligibility, eligibility};

use serde::{Deserialize, Serialize};

use super::fleet::FleetRead;
use crate::shell::error::{Class, Classify};

/// The opt-in file, from the fleet repo's root (beside `settings.yaml` and
/// `in-cluster-sources.yaml`).
pub const AUTO_MERGE_FILE: &str = ".cellbridge/auto-merge.yaml";

/// `.cellbridge/auto-merge.yaml` cannot be used: every variant names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutoMergeError {
    /// The base branch could not be read at the file.
    #[error("{AUTO_MERGE_FILE} in the fleet repo: {reason}")]
    Read { reason: String },
    /// Not the file's schema (an unknown key, `cells` not a list of strings, not YAML).
    #[error(
        "{AUTO_MERGE_FILE} in the fleet repo: not valid (expected `cells:` and a list of cell names or globs): {reason}"
    )]
    Invalid { reason: String },
    /// One entry of `cells` is not a pattern that can match a cell name.
    #[error("{AUTO_MERGE_FILE} in the fleet repo: cells[{index}] {pattern:?}: {reason}")]
    Entry {
        index: usize,
        pattern: String,
        reason: String,
    },
}

/// A broken fleet file is the fleet's to fix: the same run fails again until someone does.
impl Classify for AutoMergeError {
    fn class(&self) -> Class {
        Class::Final
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    cells: Option<Vec<String>>,
    /// How GitHub merges an eligible pull request: `merge` (the default), `squash` or `rebase`,
    /// as the repository allows them.
    #[serde(default)]
    merge_method: Option<MergeMethod>,
}

/// How a pull request is merged (GraphQL `PullRequestMergeMethod`, REST `merge_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    /// A merge commit (GitHub's default for both APIs).
    #[default]
    Merge,
    Squash,
    Rebase,
}

impl MergeMethod {
    /// As GraphQL's `PullRequestMergeMethod` names it.
    pub fn graphql(self) -> &'static str {
        match self {
            MergeMethod::Merge => "MERGE",
            MergeMethod::Squash => "SQUASH",
            MergeMethod::Rebase => "REBASE",
        }
    }

    /// As REST's `merge_method` names it.
    pub fn rest(self) -> &'static str {
        match self {
            MergeMethod::Merge => "merge",
            MergeMethod::Squash => "squash",
            MergeMethod::Rebase => "rebase",
        }
    }
}

/// The cells opted into auto-merge, as patterns in the file's order; empty: nobody.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OptIn {
    patterns: Vec<String>,
    merge_method: MergeMethod,
}

impl OptIn {
    /// How an eligible pull request is merged (`merge_method`, default `merge`).
    pub fn merge_method(&self) -> MergeMethod {
        self.merge_method
    }

    /// The patterns as the file lists them.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether nobody is opted in.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The first pattern (in the file's order) that matches the whole of `cell`, if any.
    pub fn covers(&self, cell: &str) -> Option<&str> {
        self.patterns.iter().map(String::as_str).find(|p| glob_match(p, cell))
    }
}

/// The opt-in file from `fleet`, which must be the base branch as read (never a pull request's
/// branch: a change cannot opt itself in). No file or an empty one: nobody is opted in.
pub fn from_fleet(fleet: &dyn FleetRead) -> Result<OptIn, AutoMergeError> {
    let text = fleet
        .read_text(AUTO_MERGE_FILE)
        .map_err(|e| AutoMergeError::Read { reason: e.to_string() })?;
    match text {
        None => Ok(OptIn::default()),
        Some(t) => parse(&t),
    }
}

fn parse(text: &str) -> Result<OptIn, AutoMergeError> {
    if text.trim().is_empty() {
        return Ok(OptIn::default());
    }
    let file: File = serde_saphyr::from_str(text).map_err(|e| AutoMergeError::Invalid { reason: e.to_string() })?;
    let patterns = file.cells.unwrap_or_default();
    let merge_method = file.merge_method.unwrap_or_default();
    for (index, pattern) in patterns.iter().enumerate() {
        if let Err(reason) = check_pattern(pattern) {
            return Err(AutoMergeError::Entry {
                index,
                pattern: pattern.clone(),
                reason,
            });
        }
    }
    Ok(OptIn { patterns, merge_method })
}

/// A pattern can match a cell name: not empty, no `/` (cells are names, not paths), and only
/// what a cell name (a DNS-1123 label) holds besides the two wildcards, so that a pattern never
/// silently matches nothing (`Prod-*`, `[ab]-*`, ` prod`).
fn check_pattern(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("the pattern is empty".to_owned());
    }
    if p.contains('/') {
        return Err("a pattern names cells, not paths: `/` is not allowed".to_owned());
    }
    if let Some(c) = p
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '*' | '?')))
    {
        return Err(format!(
            "{c:?} is in no cell name (a DNS-1123 label: lowercase letters, digits and `-`); `*` and `?` are the only wildcards"
        ));
    }
    Ok(())
}

/// `*` matches any run of characters (none included), `?` exactly one; everything else itself.
/// The whole of `name` must match.
fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // The last `*` seen and the position in `name` it is tried from: where to back up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            // Let the last `*` take one more character and try again after it.
            star = Some((sp, sn + 1));
            pi = sp + 1;
            ni = sn + 1;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}
