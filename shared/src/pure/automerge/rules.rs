//! Whether a plan may merge without a person: every rule it must meet, and the paragraph its pull
//! request carries about the verdict.

use std::fmt::Write as _;

use serde::Serialize;

use super::{AUTO_MERGE_FILE, OptIn};
use crate::pure::configmap;
use crate::pure::markdown::{code, code_list};
use crate::pure::plan::{Outcome, Plan};

/// Whether a pull request may merge without a person, and why (or why not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Eligibility {
    pub eligible: bool,
    /// One sentence per rule that failed; empty exactly when eligible. Names keys, files and
    /// patterns, never a metadata value.
    pub reasons: Vec<String>,
    /// The pattern of [`AUTO_MERGE_FILE`] that opts the cell in, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opted_in_by: Option<String>,
}

impl Eligibility {
    /// The markdown paragraph a pull request body carries: why the change was or was not
    /// eligible for auto-merge. Never a metadata value: only the cell, patterns, paths and key
    /// names.
    pub fn describe(&self) -> String {
        let mut b = String::new();
        if self.eligible {
            let by = self
                .opted_in_by
                .as_deref()
                .map(|p| format!(" by {}", code(p)))
                .unwrap_or_default();
            let _ = writeln!(
                b,
                "**Auto-merge: eligible.** The cell is opted in{by} in `{AUTO_MERGE_FILE}` (read from the base branch), and this is a value-only change: only `cell-metadata.yaml` changes, no key is added or removed, it is not a new cell, and the strict check passed. Auto-merge bypasses nothing: branch protection, required reviews and required checks still decide when it merges."
            );
        } else {
            let _ = writeln!(
                b,
                "**Auto-merge: not eligible.** A person reviews and merges this pull request:\n"
            );
            for r in &self.reasons {
                let _ = writeln!(b, "- {r}");
            }
            if let Some(p) = &self.opted_in_by {
                let _ = writeln!(
                    b,
                    "\nThe cell is opted in by {} in `{AUTO_MERGE_FILE}`, but only value-only changes merge without a person.",
                    code(p)
                );
            }
        }
        b
    }
}

/// Whether `plan` may merge without a person under `opt_in` (the base branch's
/// [`AUTO_MERGE_FILE`]): eligible only when every rule holds; each rule that fails adds its
/// reason.
pub fn eligibility(plan: &Plan, opt_in: &OptIn) -> Eligibility {
    let cell = plan.cell.as_str();
    let metadata_file = configmap::path_for(cell);
    let mut reasons = Vec::new();

    let opted_in_by = opt_in.covers(cell).map(str::to_owned);
    if opted_in_by.is_none() {
        reasons.push(if opt_in.is_empty() {
            format!("`{AUTO_MERGE_FILE}` on the base branch opts no cell in.")
        } else {
            format!(
                "Cell {} is not opted in: no pattern of `{AUTO_MERGE_FILE}` on the base branch matches it.",
                code(cell)
            )
        });
    }

    match plan.outcome {
        Outcome::Change => {}
        Outcome::InSync => {
            reasons.push("Nothing changes: the fleet repo already holds these values.".to_owned());
        }
        Outcome::Stale => {
            reasons.push("Nothing changes: the fleet repo already holds a newer state serial.".to_owned());
        }
    }

    if plan.new_cell {
        reasons.push(format!(
            "This is a new cell: adding `clusters/{cell}/` always needs a person."
        ));
    }

    let others: Vec<&str> = plan
        .files
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| *p != metadata_file)
        .collect();
    if !others.is_empty() {
        const SHOWN: usize = 5;
        let mut list = others
            .iter()
            .take(SHOWN)
            .map(|p| code(p))
            .collect::<Vec<_>>()
            .join(", ");
        if others.len() > SHOWN {
            let _ = write!(list, " and {} more", others.len() - SHOWN);
        }
        reasons.push(format!("Files other than {} change: {list}.", code(&metadata_file)));
    }

    if plan.key_set_changed {
        let (added, removed) = plan.added_and_removed_keys();
        reasons.push(format!(
            "The key set changes (added: {}; removed: {}): a schema change needs a person.",
            code_list(&added),
            code_list(&removed)
        ));
    }

    if !plan.status_ok() {
        reasons.push(check_reason(plan));
    }

    Eligibility {
        eligible: reasons.is_empty(),
        reasons,
        opted_in_by,
    }
}

/// Why the commit status fails, in key and variable names only (never a finding's text, which
/// could quote a manifest, nor the check's error).
fn check_reason(plan: &Plan) -> String {
    let status = crate::pure::plan::STATUS_CONTEXT;
    if plan.check_error.is_some() {
        return format!("The strict substitution check could not run (`{status}` failed).");
    }
    if !plan.check.passed() {
        let vars = plan.check.unset_variables();
        let n = plan.check.findings.len();
        let unset = if vars.is_empty() {
            String::new()
        } else {
            format!(" (unset: {})", code_list(&vars))
        };
        return format!(
            "The strict substitution check failed: {n} finding{}{unset} (`{status}` failed).",
            if n == 1 { "" } else { "s" }
        );
    }
    format!("The key set changed without a new `schema` number (`{status}` failed).")
}

/// Never eligible: removing a destroyed cell's directory is always a person's decision.
pub fn decommission_eligibility() -> Eligibility {
    Eligibility {
        eligible: false,
        reasons: vec!["This is a decommission: removing a cell's directory is never merged automatically.".to_owned()],
        opted_in_by: None,
    }
}
