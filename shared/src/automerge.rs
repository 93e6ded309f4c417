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
//! plan of every new head of the branch ([`crate::plan::Plan::rechecked`]).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::configmap;
use crate::error::{Class, Classify};
use crate::fleet::FleetRead;
use crate::plan::{Outcome, Plan};

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
            keys_or_none(&added),
            keys_or_none(&removed)
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
    let status = crate::plan::STATUS_CONTEXT;
    if plan.check_error.is_some() {
        return format!("The strict substitution check could not run (`{status}` failed).");
    }
    if !plan.check.passed() {
        let vars = plan.check.unset_variables();
        let n = plan.check.findings.len();
        let unset = if vars.is_empty() {
            String::new()
        } else {
            format!(" (unset: {})", keys_or_none(&vars))
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

fn keys_or_none(keys: &[&str]) -> String {
    if keys.is_empty() {
        "none".to_owned()
    } else {
        keys.iter().map(|k| code(k)).collect::<Vec<_>>().join(", ")
    }
}

/// Inline code that a backtick in the text cannot break out of.
fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Finding;
    use crate::fleet::{FileMode, MemFleet};
    use crate::plan::fixtures::{fleet_with, meta};
    use crate::plan::{FileChange, PlanOptions, StateRef, plan};

    fn opt_in(yaml: &str) -> OptIn {
        let mut f = MemFleet::new();
        f.insert(AUTO_MERGE_FILE, yaml);
        from_fleet(&f).unwrap()
    }

    fn error(yaml: &str) -> String {
        let mut f = MemFleet::new();
        f.insert(AUTO_MERGE_FILE, yaml);
        from_fleet(&f).unwrap_err().to_string()
    }

    #[test]
    fn no_file_or_an_empty_one_opts_nobody_in() {
        let f = MemFleet::new();
        assert!(from_fleet(&f).unwrap().is_empty());
        assert!(opt_in("").is_empty());
        assert!(opt_in("# nobody yet\n").is_empty());
        assert!(opt_in("cells: []\n").is_empty());
        assert!(opt_in("cells:\n").is_empty());
        assert_eq!(opt_in("cells: []\n").covers("c1"), None);
    }

    #[test]
    fn reads_names_and_globs_in_order() {
        let o = opt_in("cells:\n  - prod-eu-west-1\n  - staging-*\n  - dev-?\n  - '*'\n");
        assert_eq!(o.patterns(), ["prod-eu-west-1", "staging-*", "dev-?", "*"]);
        assert_eq!(o.covers("prod-eu-west-1"), Some("prod-eu-west-1"));
        assert_eq!(o.covers("staging-us-east-1"), Some("staging-*"));
        assert_eq!(o.covers("dev-1"), Some("dev-?"));
        // The first pattern in the file's order wins.
        assert_eq!(o.covers("prod-us-east-1"), Some("*"));
        assert_eq!(o.merge_method(), MergeMethod::Merge);
        assert_eq!(
            opt_in("cells: [a1]\nmerge_method: squash\n").merge_method(),
            MergeMethod::Squash
        );
        let flow = opt_in("cells: [a1, b-*]\n");
        assert_eq!(flow.covers("b-2"), Some("b-*"));
        assert_eq!(flow.covers("a12"), None);
    }

    #[test]
    fn globs_match_the_whole_name() {
        let m = glob_match;
        assert!(m("prod-eu-west-1", "prod-eu-west-1"));
        assert!(!m("prod", "prod-eu-west-1"));
        assert!(!m("eu", "prod-eu-west-1"));
        assert!(m("prod-*", "prod-eu-west-1"));
        assert!(m("prod-*", "prod-"));
        assert!(!m("prod-*", "prod"));
        assert!(!m("prod-*", "staging-prod-1"));
        assert!(m("*-west-?", "prod-eu-west-1"));
        assert!(!m("*-west-?", "prod-eu-west-12"));
        assert!(m("*eu*", "prod-eu-west-1"));
        assert!(m("*-*-*-*", "prod-eu-west-1"));
        assert!(!m("*-*-*-*-*", "prod-eu-west-1"));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(!m("a*b*c", "aXbYbZ"));
        assert!(m("???", "abc"));
        assert!(!m("???", "ab"));
        assert!(!m("???", "abcd"));
        assert!(m("*", "anything"));
        assert!(m("**", "x"));
        assert!(!m("?", ""));
    }

    #[test]
    fn a_wrong_file_is_an_error_naming_the_file_and_the_entry() {
        let e = error("cell:\n  - prod-*\n");
        assert!(
            e.starts_with(".cellbridge/auto-merge.yaml in the fleet repo: not valid"),
            "{e}"
        );
        assert!(e.contains("cell"), "{e}");

        let e = error("cells: [a]\nmerge_method: fast-forward\n");
        assert!(
            e.starts_with(".cellbridge/auto-merge.yaml in the fleet repo: not valid"),
            "{e}"
        );

        let e = error("cells: prod-*\n");
        assert!(
            e.starts_with(".cellbridge/auto-merge.yaml in the fleet repo: not valid"),
            "{e}"
        );

        let e = error("cells:\n  - prod-*\n  - [a, b]\n");
        assert!(
            e.starts_with(".cellbridge/auto-merge.yaml in the fleet repo: not valid"),
            "{e}"
        );

        let e = error("- prod-*\n");
        assert!(
            e.starts_with(".cellbridge/auto-merge.yaml in the fleet repo: not valid"),
            "{e}"
        );

        let e = error("cells:\n  - prod-*\n  - ''\n");
        assert_eq!(
            e,
            ".cellbridge/auto-merge.yaml in the fleet repo: cells[1] \"\": the pattern is empty"
        );

        let e = error("cells:\n  - clusters/prod-*\n");
        assert!(
            e.starts_with(".cellbridge/auto-merge.yaml in the fleet repo: cells[0] \"clusters/prod-*\": "),
            "{e}"
        );
        assert!(e.contains("`/`"), "{e}");

        for bad in ["Prod-*", "[ab]-1", " prod", "prod_1"] {
            let e = error(&format!("cells:\n  - ok\n  - {bad:?}\n"));
            assert!(
                e.starts_with(&format!(
                    ".cellbridge/auto-merge.yaml in the fleet repo: cells[1] {bad:?}: "
                )),
                "{e}"
            );
            assert!(e.contains("DNS-1123"), "{e}");
        }
    }

    #[test]
    fn an_unreadable_file_names_the_file() {
        let mut f = MemFleet::new();
        f.insert(AUTO_MERGE_FILE, vec![0xff_u8, 0xfe]);
        let e = from_fleet(&f).unwrap_err();
        assert!(matches!(e, AutoMergeError::Read { .. }));
        assert!(e.to_string().starts_with(AUTO_MERGE_FILE), "{e}");
        assert_eq!(e.class(), Class::Final);
    }

    // Plans, from the real planner over an in-memory fleet (as plan.rs's own tests build them).

    /// `prod-c1` moving from `vpc-old` to the values of `data`.
    fn plan_of(data: &[(&str, &str)]) -> Plan {
        let base = meta("prod-c1", 4, &[("vpc_id", "vpc-old")]);
        plan(
            &meta("prod-c1", 5, data),
            StateRef::default(),
            &fleet_with(Some(&base)),
            &PlanOptions::default(),
        )
        .unwrap()
    }

    fn prod() -> OptIn {
        opt_in("cells:\n  - staging-*\n  - prod-*\n")
    }

    fn assert_no_values(e: &Eligibility) {
        let d = e.describe();
        for v in ["vpc-old", "vpc-new", "q-1"] {
            assert!(!d.contains(v), "a value in {d}");
        }
    }

    #[test]
    fn a_value_only_change_in_an_opted_in_cell_is_eligible() {
        let p = plan_of(&[("vpc_id", "vpc-new")]);
        assert!(p.status_ok() && !p.new_cell && !p.key_set_changed);
        let e = eligibility(&p, &prod());
        assert_eq!(
            e,
            Eligibility {
                eligible: true,
                reasons: vec![],
                opted_in_by: Some("prod-*".into()),
            }
        );
        let d = e.describe();
        assert!(
            d.starts_with(
                "**Auto-merge: eligible.** The cell is opted in by `prod-*` in `.cellbridge/auto-merge.yaml`"
            ),
            "{d}"
        );
        assert!(d.contains("branch protection"), "{d}");
        assert_no_values(&e);
    }

    #[test]
    fn a_cell_not_opted_in_is_not_eligible() {
        let p = plan_of(&[("vpc_id", "vpc-new")]);
        let e = eligibility(&p, &opt_in("cells: [staging-*]\n"));
        assert!(!e.eligible);
        assert_eq!(
            e.reasons,
            [
                "Cell `prod-c1` is not opted in: no pattern of `.cellbridge/auto-merge.yaml` on the base branch matches it."
            ]
        );
        assert_eq!(e.opted_in_by, None);
        let nobody = eligibility(&p, &OptIn::default());
        assert_eq!(
            nobody.reasons,
            ["`.cellbridge/auto-merge.yaml` on the base branch opts no cell in."]
        );
        let d = e.describe();
        assert!(d.starts_with("**Auto-merge: not eligible.** A person reviews and merges this pull request:\n\n- Cell `prod-c1` is not opted in"), "{d}");
        assert_no_values(&e);
    }

    #[test]
    fn a_key_added_is_not_eligible() {
        let p = plan_of(&[("vpc_id", "vpc-new"), ("queue", "q-1"), ("schema", "2")]);
        assert!(p.key_set_changed && !p.schema_violation && p.status_ok());
        let e = eligibility(&p, &prod());
        assert!(!e.eligible);
        assert_eq!(
            e.reasons,
            ["The key set changes (added: `queue`; removed: none): a schema change needs a person."]
        );
        let d = e.describe();
        assert!(d.contains("The cell is opted in by `prod-*`"), "{d}");
        assert_no_values(&e);

        // Without the schema bump the status fails too, and says why.
        let p = plan_of(&[("vpc_id", "vpc-new"), ("queue", "q-1")]);
        assert!(p.schema_violation);
        let e = eligibility(&p, &prod());
        assert_eq!(e.reasons.len(), 2, "{:?}", e.reasons);
        assert!(
            e.reasons[1].contains("without a new `schema` number"),
            "{:?}",
            e.reasons
        );
        assert_no_values(&e);
    }

    #[test]
    fn a_key_removed_is_not_eligible() {
        let p = plan_of(&[("subnet", "s-1"), ("schema", "2")]);
        let e = eligibility(&p, &prod());
        assert!(!e.eligible);
        assert_eq!(
            e.reasons,
            ["The key set changes (added: `subnet`; removed: `vpc_id`): a schema change needs a person."]
        );
    }

    #[test]
    fn a_new_cell_is_not_eligible() {
        let p = plan(
            &meta("prod-c2", 1, &[("vpc_id", "vpc-new")]),
            StateRef::default(),
            &fleet_with(None),
            &PlanOptions::default(),
        )
        .unwrap();
        assert!(p.new_cell);
        let e = eligibility(&p, &prod());
        assert!(!e.eligible);
        // (The bare template of this fleet also fails the check: a reason of its own, below.)
        assert_eq!(
            e.reasons[..2],
            [
                "This is a new cell: adding `clusters/prod-c2/` always needs a person.",
                "Files other than `clusters/prod-c2/cell-metadata.yaml` change: `clusters/prod-c2/flux-system/gotk-sync.yaml`, `clusters/prod-c2/kustomization.yaml`."
            ]
        );
        assert_no_values(&e);
    }

    #[test]
    fn a_failing_check_is_not_eligible() {
        let mut p = plan_of(&[("vpc_id", "vpc-new")]);
        let finding = |variable: &str| Finding {
            file: "infrastructure/x.yaml".into(),
            line: 3,
            variable: variable.into(),
            layer: "infrastructure".into(),
            message: "variable not set".into(),
        };
        p.check.findings = vec![finding("queue_url"), finding("queue_url"), finding("")];
        let e = eligibility(&p, &prod());
        assert!(!e.eligible);
        assert_eq!(
            e.reasons,
            [
                "The strict substitution check failed: 3 findings (unset: `queue_url`) (`cellbridge/strict-substitution` failed)."
            ]
        );
        p.check.findings.clear();
        p.check_error = Some("clusters/prod-c1/x.yaml: bad YAML near vpc-new".into());
        let e = eligibility(&p, &prod());
        assert_eq!(
            e.reasons,
            ["The strict substitution check could not run (`cellbridge/strict-substitution` failed)."]
        );
        assert_no_values(&e);
    }

    #[test]
    fn another_file_changing_is_not_eligible() {
        let mut p = plan_of(&[("vpc_id", "vpc-new")]);
        p.files.push(FileChange {
            path: "clusters/prod-c1/apps.yaml".into(),
            old: Some("a".into()),
            new: "b".into(),
            mode: FileMode::Regular,
        });
        let e = eligibility(&p, &prod());
        assert!(!e.eligible);
        assert_eq!(
            e.reasons,
            ["Files other than `clusters/prod-c1/cell-metadata.yaml` change: `clusters/prod-c1/apps.yaml`."]
        );
        for i in 0..6 {
            p.files.push(FileChange {
                path: format!("clusters/prod-c1/more-{i}.yaml"),
                old: None,
                new: String::new(),
                mode: FileMode::Regular,
            });
        }
        let e = eligibility(&p, &prod());
        assert!(e.reasons[0].ends_with(" and 2 more."), "{:?}", e.reasons);
    }

    #[test]
    fn every_failing_rule_says_so() {
        let mut p = plan(
            &meta("dev-1", 1, &[("vpc_id", "vpc-new")]),
            StateRef::default(),
            &fleet_with(None),
            &PlanOptions::default(),
        )
        .unwrap();
        p.check_error = Some("broken".into());
        let e = eligibility(&p, &prod());
        assert!(!e.eligible);
        assert_eq!(e.reasons.len(), 4, "{:?}", e.reasons);
        assert!(e.reasons[0].contains("not opted in"));
        assert!(e.reasons[1].contains("new cell"));
        assert!(e.reasons[2].starts_with("Files other than"));
        assert!(e.reasons[3].contains("could not run"));
        let d = e.describe();
        assert_eq!(d.matches("\n- ").count(), 4, "{d}");
    }

    #[test]
    fn nothing_to_merge_is_not_eligible() {
        let base = meta("prod-c1", 4, &[("vpc_id", "vpc-old")]);
        let p = plan(
            &meta("prod-c1", 9, &[("vpc_id", "vpc-old")]),
            StateRef::default(),
            &fleet_with(Some(&base)),
            &PlanOptions::default(),
        )
        .unwrap();
        assert_eq!(p.outcome, Outcome::InSync);
        let e = eligibility(&p, &prod());
        assert!(!e.eligible);
        assert_eq!(
            e.reasons,
            ["Nothing changes: the fleet repo already holds these values."]
        );
    }

    #[test]
    fn a_decommission_is_never_eligible() {
        let e = decommission_eligibility();
        assert!(!e.eligible);
        assert_eq!(e.reasons.len(), 1);
        assert!(e.describe().contains("never merged automatically"), "{}", e.describe());
    }
}
