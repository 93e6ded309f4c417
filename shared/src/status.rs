//! The fleet's status, one row per cell (per state, when workspaces give a cell several): what
//! `cellbridge status` prints and what the GitHub dashboard issue shows. Pure: the rows are
//! computed by the caller (from local files, or from S3 and the base branch), rendered here.
//!
//! A row never holds a value of `cell_metadata`: a refused state's reason is the contract's
//! error message, which names the key and never the value.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

/// GitHub's limit on an issue body, in characters: the dashboard's markdown fits in it.
pub const BODY_LIMIT: usize = 65_536;

/// The longest detail a markdown row carries (a reason listing many outputs is cut).
const DETAIL_LIMIT: usize = 300;

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
        /// The `cellbridge/strict-substitution` status of its head; read for pending cells only
        /// (and not for all of them when there are very many: `None`).
        #[serde(skip_serializing_if = "Option::is_none")]
        check: Option<HeadCheck>,
    },
    /// Nothing is open, and the cell's newest pull request, which proposed these very values,
    /// was closed by a person without merging: cellbridge leaves it closed.
    Declined { number: u64, url: String },
    /// No pull request is open for the cell.
    None,
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
}

impl CellStatus {
    /// Whether a person should look: everything but in sync, stale and decommissioned (a
    /// destroyed cell the base never had whose pull request is still open needs a look too).
    pub fn needs_attention(&self) -> bool {
        match self.state {
            CellState::InSync | CellState::Stale => false,
            CellState::Decommissioned => matches!(self.github, Some(OnGithub::Open { .. })),
            _ => true,
        }
    }

    /// What the row says: the state's detail, with what GitHub holds for the cell when it was
    /// read.
    pub fn detail(&self) -> String {
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
                    ..
                },
            ) => {
                if *decommission {
                    return format!("{d}; decommission pull request #{number} still open");
                }
                let check = match check {
                    Some(HeadCheck::Passes) => "strict check passes".to_owned(),
                    Some(HeadCheck::Fails { description }) => format!("strict check fails: {description}"),
                    Some(HeadCheck::NotPosted) => "strict check not posted on its head yet".to_owned(),
                    None => "its head's status not read (too many pending cells for one run)".to_owned(),
                };
                format!("{d}; pull request #{number} {}; {check}", days(*age_days))
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
    fn detail_with_source(&self) -> String {
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

/// Room kept for the lines that count what did not fit.
const OVERFLOW_RESERVE: usize = 3 * 100;

/// The dashboard's markdown: the summary line, a table with one row per state needing attention
/// (failed first, then refused, destroyed, state missing, pending; by cell within each), then
/// the cells in sync (and stale, and decommissioned) as compact lists. Never longer than `limit` bytes (so never more
/// characters either): rows and names that do not fit are counted in a line that says so.
pub fn render_markdown(rows: &[CellStatus], limit: usize) -> String {
    let s = summary(rows);
    let mut out = format!("**{}**\n", escape(&s.line()));
    // Pull requests open, by cell (a cell whose workspaces have several rows has one).
    let open: std::collections::BTreeMap<&str, bool> = rows
        .iter()
        .filter_map(|r| match &r.github {
            Some(OnGithub::Open { decommission, .. }) => Some((r.cell.as_str(), *decommission)),
            _ => None,
        })
        .collect();
    if !open.is_empty() {
        let decommissions = open.values().filter(|d| **d).count();
        let _ = write!(out, "\n{} open", plural(open.len(), "pull request"));
        if decommissions > 0 {
            let _ = write!(out, " ({decommissions} to decommission a cell)");
        }
        out.push('\n');
    }
    let budget = limit.saturating_sub(OVERFLOW_RESERVE);

    let mut attention: Vec<&CellStatus> = rows.iter().filter(|r| r.needs_attention()).collect();
    attention.sort_by(|a, b| (a.state.kind(), &a.cell, &a.source).cmp(&(b.state.kind(), &b.cell, &b.source)));
    if !attention.is_empty() {
        out.push_str("\n| cell | what | detail |\n|---|---|---|\n");
        let mut shown = 0;
        for r in &attention {
            let line = format!(
                "| `{}` | {} | {} |\n",
                escape(&r.cell),
                r.state.kind().label(),
                escape(&cut(&r.detail_with_source(), DETAIL_LIMIT))
            );
            if out.len() + line.len() > budget {
                break;
            }
            out.push_str(&line);
            shown += 1;
        }
        if shown < attention.len() {
            let _ = writeln!(
                out,
                "\n… and {} more {} needing attention not shown",
                attention.len() - shown,
                if attention.len() - shown == 1 { "cell" } else { "cells" }
            );
        }
    }
    for (kind, title) in [
        (Kind::InSync, "In sync"),
        (Kind::Stale, "Stale (the fleet holds a newer serial)"),
        (
            Kind::Decommissioned,
            "Decommissioned (destroyed, the directory removed)",
        ),
    ] {
        let mut cells: Vec<&str> = rows
            .iter()
            .filter(|r| r.state.kind() == kind)
            .map(|r| r.cell.as_str())
            .collect();
        if cells.is_empty() {
            continue;
        }
        cells.sort_unstable();
        let _ = write!(out, "\n**{title}** ({}): ", cells.len());
        let mut shown = 0;
        for c in &cells {
            let item = format!("{}`{}`", if shown > 0 { ", " } else { "" }, escape(c));
            // Keep room for the other list's heading and this list's count.
            if out.len() + item.len() > budget.saturating_sub(100) {
                break;
            }
            out.push_str(&item);
            shown += 1;
        }
        if shown < cells.len() {
            let _ = write!(
                out,
                "{}… and {} more not shown",
                if shown > 0 { ", " } else { "" },
                cells.len() - shown
            );
        }
        out.push('\n');
    }
    if out.len() > limit {
        // Only a limit smaller than the reserve gets here: cut on a character boundary.
        let mut end = limit.saturating_sub('…'.len_utf8());
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        if limit >= '…'.len_utf8() {
            out.push('…');
        }
    }
    out
}

/// Markdown table cells: no line breaks, no column separators.
fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

/// The terminal's table: every row, aligned, by cell (then source), the summary line last.
pub fn render_text(rows: &[CellStatus]) -> String {
    let mut sorted: Vec<&CellStatus> = rows.iter().collect();
    sorted.sort_by(|a, b| (&a.cell, &a.source).cmp(&(&b.cell, &b.source)));
    let table: Vec<[String; 5]> = sorted
        .iter()
        .map(|r| {
            [
                r.cell.clone(),
                r.state.kind().label().to_owned(),
                r.serial.map_or_else(|| "-".to_owned(), |n| n.to_string()),
                r.source.clone().unwrap_or_else(|| "-".to_owned()),
                r.detail().replace(['\n', '\r'], " "),
            ]
        })
        .collect();
    let header = ["CELL", "STATE", "SERIAL", "SOURCE", "DETAIL"].map(str::to_owned);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&table) {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&table) {
        for (w, c) in widths.iter().zip(row) {
            let _ = write!(out, "{c:<w$}  ");
        }
        out.push_str(&row[4]);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&summary(rows).line());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{self, ContractError};
    use crate::tfstate::{Output, StateOutputs};

    fn row(cell: &str, state: CellState) -> CellStatus {
        CellStatus {
            cell: cell.into(),
            state,
            source: Some(format!("cells/{cell}/terraform.tfstate")),
            serial: Some(3),
            github: None,
        }
    }

    const SECRET: &str = "q8Zr4Lx2Vb7Nw1Ps9Tk3Yd6Hf0Jg5MaCeWuXo2RiT7";

    /// A reason made by the contract itself from a state holding a secret-looking value.
    fn refused_reason() -> String {
        let value = serde_json::json!({
            "cell_name": "pay-eu-1",
            "schema": "1",
            "bootstrap_blob": SECRET,
        });
        let state = StateOutputs {
            serial: 4,
            lineage: "l".into(),
            terraform_version: "1.11.4".into(),
            outputs: [(
                "cell_metadata".to_owned(),
                Output {
                    value,
                    sensitive: false,
                    value_type: None,
                },
            )]
            .into(),
            has_resources: true,
        };
        let err = metadata::from_state(&state).unwrap_err();
        assert!(matches!(err, ContractError::SecretLooking { .. }), "{err}");
        err.to_string()
    }

    fn mixed() -> Vec<CellStatus> {
        vec![
            row("a-in-sync", CellState::InSync),
            row(
                "b-new",
                CellState::Pending {
                    new_cell: true,
                    check_ok: Some(true),
                    keys_changed: 9,
                },
            ),
            row(
                "c-changed",
                CellState::Pending {
                    new_cell: false,
                    check_ok: Some(false),
                    keys_changed: 1,
                },
            ),
            row("d-stale", CellState::Stale),
            row(
                "pay-eu-1",
                CellState::Refused {
                    reason: refused_reason(),
                },
            ),
            row("e-gone", CellState::Destroyed),
            row(
                "f-broken",
                CellState::Failed {
                    reason: "cells/f-broken/terraform.tfstate: truncated: the state ends at byte 9".into(),
                },
            ),
            CellStatus {
                cell: "g-orphan".into(),
                state: CellState::StateMissing,
                source: None,
                serial: None,
                github: None,
            },
        ]
    }

    #[test]
    fn attention_is_everything_but_in_sync_and_stale() {
        let rows = mixed();
        let attention: Vec<&str> = rows
            .iter()
            .filter(|r| r.needs_attention())
            .map(|r| r.cell.as_str())
            .collect();
        assert_eq!(
            attention,
            ["b-new", "c-changed", "pay-eu-1", "e-gone", "f-broken", "g-orphan"]
        );
        let s = summary(&rows);
        assert_eq!((s.cells, s.rows, s.needs_attention), (8, 8, 6));
        assert_eq!((s.in_sync, s.pending, s.stale, s.refused), (1, 2, 1, 1));
        assert_eq!((s.destroyed, s.failed, s.state_missing), (1, 1, 1));
        assert_eq!(
            s.line(),
            "8 cells: 1 failed, 1 refused, 1 destroyed, 1 state missing, 2 pending, 1 stale, 1 in sync; 6 need attention"
        );
    }

    #[test]
    fn markdown_lists_what_needs_attention_then_the_cells_in_sync_and_never_a_value() {
        let md = render_markdown(&mixed(), BODY_LIMIT);
        assert!(md.starts_with("**8 cells: 1 failed,"), "{md}");
        assert!(
            md.contains("| cell | what | detail |\n|---|---|---|\n| `f-broken` | failed |"),
            "{md}"
        );
        assert!(
            md.contains("| `pay-eu-1` | refused | cell_metadata key `bootstrap_blob` looks like a secret"),
            "{md}"
        );
        assert!(
            md.contains("| `b-new` | pending | new cell (9 keys); strict check passes"),
            "{md}"
        );
        assert!(
            md.contains("| `c-changed` | pending | 1 key changed; strict check fails"),
            "{md}"
        );
        assert!(
            md.contains("| `e-gone` | destroyed | no outputs and no resources"),
            "{md}"
        );
        assert!(
            md.contains("| `g-orphan` | state missing | clusters/<cell>/ is in the fleet"),
            "{md}"
        );
        assert!(md.contains("\n**In sync** (1): `a-in-sync`\n"), "{md}");
        assert!(
            md.contains("\n**Stale (the fleet holds a newer serial)** (1): `d-stale`\n"),
            "{md}"
        );
        assert!(!md.contains("not shown"), "{md}");
        assert!(!md.contains(SECRET), "a value reached the dashboard:\n{md}");
        // Failed first, pending last among the rows needing attention.
        let pos = |c: &str| md.find(&format!("| `{c}` |")).unwrap();
        assert!(pos("f-broken") < pos("pay-eu-1") && pos("pay-eu-1") < pos("e-gone"));
        assert!(pos("e-gone") < pos("g-orphan") && pos("g-orphan") < pos("b-new"));
    }

    #[test]
    fn a_5000_cell_fleet_fits_the_body_limit_and_counts_what_does_not() {
        let reason = refused_reason();
        let mut rows = Vec::new();
        for i in 0..5000 {
            let cell = format!("cell-{i:04}-eu-west-1");
            let state = match i % 5 {
                0 => CellState::Refused { reason: reason.clone() },
                1 => CellState::Pending {
                    new_cell: false,
                    check_ok: Some(i % 2 == 0),
                    keys_changed: 2,
                },
                _ => CellState::InSync,
            };
            rows.push(row(&cell, state));
        }
        let md = render_markdown(&rows, BODY_LIMIT);
        assert!(md.len() <= BODY_LIMIT, "{} bytes", md.len());
        assert!(md.chars().count() <= BODY_LIMIT);
        assert!(md.starts_with("**5000 cells: 1000 refused, 1000 pending, 3000 in sync; 2000 need attention**"));
        let shown = md.lines().filter(|l| l.starts_with("| `cell-")).count();
        assert!(shown > 50 && shown < 2000, "{shown} rows shown");
        assert!(
            md.contains(&format!(
                "\n… and {} more cells needing attention not shown\n",
                2000 - shown
            )),
            "{}",
            &md[md.len() - 500..]
        );
        // The in-sync list got what room was left, and says how many it leaves out.
        assert!(md.contains("\n**In sync** (3000): "), "{}", &md[md.len() - 500..]);
        let listed = md
            .lines()
            .find(|l| l.starts_with("**In sync**"))
            .unwrap()
            .matches("`cell-")
            .count();
        assert!(md.contains(&format!("… and {} more not shown", 3000 - listed)));
        assert!(!md.contains(SECRET));

        // A small limit: still within it, still counted.
        let small = render_markdown(&rows, 2000);
        assert!(small.len() <= 2000, "{}", small.len());
        assert!(small.contains("more cells needing attention not shown"), "{small}");
        // Smaller than anything useful: cut, never over.
        assert!(render_markdown(&rows, 40).len() <= 40);
    }

    #[test]
    fn markdown_cells_cannot_break_the_table() {
        let rows = [row(
            "x",
            CellState::Failed {
                reason: "a | b\nc".into(),
            },
        )];
        let md = render_markdown(&rows, BODY_LIMIT);
        assert!(
            md.contains("| `x` | failed | a \\| b c (state cells/x/terraform.tfstate, serial 3) |\n"),
            "{md}"
        );
    }

    #[test]
    fn text_is_aligned_by_cell_with_the_summary_last() {
        let text = render_text(&mixed());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("CELL "), "{text}");
        let detail_col = lines[0].find("DETAIL").unwrap();
        let state_col = lines[0].find("STATE").unwrap();
        for l in &lines[1..9] {
            assert_eq!(l[state_col - 2..state_col].trim(), "", "{text}");
            assert!(l.len() > detail_col, "{text}");
        }
        assert!(lines[1].starts_with("a-in-sync "));
        assert_eq!(&lines[1][state_col..state_col + 7], "in sync");
        let g = lines.iter().find(|l| l.starts_with("g-orphan")).unwrap();
        assert_eq!(&g[state_col..state_col + 13], "state missing");
        assert!(g.contains(" - "), "{g}");
        assert!(lines.last().unwrap().starts_with("8 cells: "));
        assert!(!text.contains(SECRET));
    }

    #[test]
    fn json_rows_are_tagged_in_kebab_case() {
        let v = serde_json::to_value(mixed()).unwrap();
        assert_eq!(v[0]["state"], "in-sync");
        assert_eq!(v[1]["state"], "pending");
        assert_eq!(v[1]["new_cell"], true);
        assert_eq!(v[1]["keys_changed"], 9);
        assert_eq!(v[4]["state"], "refused");
        assert_eq!(v[7]["state"], "state-missing");
        assert_eq!(v[7]["source"], serde_json::Value::Null);
        assert_eq!(v[2]["serial"], 3);
    }
}
