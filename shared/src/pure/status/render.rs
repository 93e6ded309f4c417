//! The rows as the dashboard issue's markdown, within GitHub's limit, and as the terminal's table.

use std::fmt::Write as _;

use super::{CellStatus, Flux, Kind, OnGithub, plural, summary};
use crate::pure::markdown::{cut, table_text};

/// The longest detail a markdown row carries (a reason listing many outputs is cut).
const DETAIL_LIMIT: usize = 300;

/// Room kept for the lines that count what did not fit.
const OVERFLOW_RESERVE: usize = 3 * 100;

/// The operator runbook the dashboard's rows link to: one entry per state (`#dashboard-<state>`)
/// and per Flux outcome (`#flux-<outcome>`). The docs' own address, like the module's
/// `runbook_url` default; the library's tests hold every anchor to `docs/runbook.md`.
pub const RUNBOOK_URL: &str = "https://github.com/cellbridge/cellbridge/blob/main/docs/runbook.md";

/// The runbook's anchor for a state of the `what` column: `state missing` → `dashboard-state-missing`.
pub fn runbook_anchor_of_state(kind: Kind) -> String {
    format!("dashboard-{}", kind.label().replace(' ', "-"))
}

/// The runbook's anchor for what the Flux column says of a cluster that needs a person: its stuck
/// outcome's entry, or the one for `unknown`. `None` for a cluster that needs nobody.
pub fn runbook_anchor_of_flux(flux: &Flux) -> Option<String> {
    match flux {
        Flux::Recorded(r) if flux.stuck() => Some(format!("flux-{}", r.outcome.as_str())),
        Flux::Unknown { .. } => Some("dashboard-flux-unknown".to_owned()),
        _ => None,
    }
}

/// A row's Flux column as the dashboard shows it: a cluster that needs a person links to its
/// runbook entry.
fn flux_markdown(r: &CellStatus) -> String {
    match r.flux.as_ref().and_then(runbook_anchor_of_flux) {
        Some(anchor) => format!("[{}]({RUNBOOK_URL}#{anchor})", flux_cell(r)),
        None => flux_cell(r).to_owned(),
    }
}

/// The line under the table linking each state it shows to its runbook entry, in the table's
/// order.
fn runbook_line(attention: &[&CellStatus]) -> String {
    let mut kinds: Vec<Kind> = attention.iter().map(|r| r.state.kind()).collect();
    kinds.dedup();
    let links: Vec<String> = kinds
        .into_iter()
        .map(|k| format!("[{}]({RUNBOOK_URL}#{})", k.label(), runbook_anchor_of_state(k)))
        .collect();
    format!("\nWhat to do, by state: {}\n", links.join(" · "))
}

/// Whether any row carries its cluster's Flux record: the column is shown only then (never by
/// `cellbridge status`, which asks no EKS).
fn with_flux(rows: &[CellStatus]) -> bool {
    rows.iter().any(|r| r.flux.is_some())
}

/// A row's Flux column: the outcome, `—` or `unknown`; empty for a row whose cell names no
/// cluster, or whose cluster is gone.
fn flux_cell(r: &CellStatus) -> &str {
    r.flux.as_ref().map_or("", Flux::label)
}

/// The dashboard's markdown: the summary line, a table with one row per state needing attention
/// (failed first, then refused, destroyed, state missing, pending; by cell within each; a row
/// whose cluster's Flux is stuck or unknown too), then the cells in sync (and stale, and
/// decommissioned) as compact lists, a cluster still confirming or not ready said beside its
/// cell. Where the rows' clusters were described, the table has a `flux` column. Never longer
/// than `limit` bytes (so never more characters either): rows and names that do not fit are
/// counted in a line that says so.
pub fn render_markdown(rows: &[CellStatus], limit: usize) -> String {
    let s = summary(rows);
    let mut out = format!("**{}**\n", table_text(&s.line()));
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
    let mut attention: Vec<&CellStatus> = rows.iter().filter(|r| r.needs_attention()).collect();
    attention.sort_by(|a, b| (a.state.kind(), &a.cell, &a.source).cmp(&(b.state.kind(), &b.cell, &b.source)));
    let runbook = if attention.is_empty() {
        String::new()
    } else {
        runbook_line(&attention)
    };
    let budget = limit.saturating_sub(OVERFLOW_RESERVE + runbook.len());
    let flux = with_flux(rows);
    if !attention.is_empty() {
        out.push_str(if flux {
            "\n| cell | what | flux | detail |\n|---|---|---|---|\n"
        } else {
            "\n| cell | what | detail |\n|---|---|---|\n"
        });
        let mut shown = 0;
        for r in &attention {
            let what = if flux {
                format!("{} | {}", r.state.kind().label(), flux_markdown(r))
            } else {
                r.state.kind().label().to_owned()
            };
            let line = format!(
                "| `{}` | {what} | {} |\n",
                table_text(&r.cell),
                table_text(&cut(&r.detail_with_source(), DETAIL_LIMIT))
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
        out.push_str(&runbook);
    }
    for (kind, title) in [
        (Kind::InSync, "In sync"),
        (Kind::Stale, "Stale (the fleet holds a newer serial)"),
        (
            Kind::Decommissioned,
            "Decommissioned (destroyed, the directory removed)",
        ),
    ] {
        let mut cells: Vec<(&str, Option<&Flux>)> = rows
            .iter()
            .filter(|r| r.state.kind() == kind)
            .map(|r| (r.cell.as_str(), r.flux.as_ref()))
            .collect();
        if cells.is_empty() {
            continue;
        }
        cells.sort_unstable_by_key(|(c, _)| *c);
        let _ = write!(out, "\n**{title}** ({}): ", cells.len());
        let mut shown = 0;
        for (c, flux) in &cells {
            // A cluster not ready yet (or no more) is said beside its cell.
            let note = match flux {
                Some(f @ (Flux::Recorded(_) | Flux::Unknown { .. })) if f.label() != "ready" => {
                    format!(" (flux {})", f.label())
                }
                _ => String::new(),
            };
            let item = format!("{}`{}`{note}", if shown > 0 { ", " } else { "" }, table_text(c));
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

/// The terminal's table: every row, aligned, by cell (then source), the summary line last; a
/// `FLUX` column after `STATE` where the rows carry their clusters' Flux records.
pub fn render_text(rows: &[CellStatus]) -> String {
    let mut sorted: Vec<&CellStatus> = rows.iter().collect();
    sorted.sort_by(|a, b| (&a.cell, &a.source).cmp(&(&b.cell, &b.source)));
    let flux = with_flux(rows);
    let table: Vec<Vec<String>> = sorted
        .iter()
        .map(|r| {
            let mut row = vec![r.cell.clone(), r.state.kind().label().to_owned()];
            if flux {
                row.push(match flux_cell(r) {
                    "" => "-".to_owned(),
                    f => f.to_owned(),
                });
            }
            row.push(r.serial.map_or_else(|| "-".to_owned(), |n| n.to_string()));
            row.push(r.source.clone().unwrap_or_else(|| "-".to_owned()));
            row.push(r.detail().replace(['\n', '\r'], " "));
            row
        })
        .collect();
    let mut header = vec!["CELL", "STATE"];
    if flux {
        header.push("FLUX");
    }
    header.extend(["SERIAL", "SOURCE", "DETAIL"]);
    let header: Vec<String> = header.into_iter().map(str::to_owned).collect();
    let mut widths = vec![0usize; header.len() - 1];
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
        out.push_str(&row[row.len() - 1]);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&summary(rows).line());
    out.push('\n');
    out
}
