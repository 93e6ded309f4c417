//! The rows as the dashboard issue's markdown, within GitHub's limit, and as the terminal's table.

use std::fmt::Write as _;

use super::{CellStatus, Kind, OnGithub, plural, summary};
use crate::pure::markdown::{cut, table_text};

/// The longest detail a markdown row carries (a reason listing many outputs is cut).
const DETAIL_LIMIT: usize = 300;

/// Room kept for the lines that count what did not fit.
const OVERFLOW_RESERVE: usize = 3 * 100;

/// The dashboard's markdown: the summary line, a table with one row per state needing attention
/// (failed first, then refused, destroyed, state missing, pending; by cell within each), then
/// the cells in sync (and stale, and decommissioned) as compact lists. Never longer than `limit` bytes (so never more
/// characters either): rows and names that do not fit are counted in a line that says so.
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
    let budget = limit.saturating_sub(OVERFLOW_RESERVE);

    let mut attention: Vec<&CellStatus> = rows.iter().filter(|r| r.needs_attention()).collect();
    attention.sort_by(|a, b| (a.state.kind(), &a.cell, &a.source).cmp(&(b.state.kind(), &b.cell, &b.source)));
    if !attention.is_empty() {
        out.push_str("\n| cell | what | detail |\n|---|---|---|\n");
        let mut shown = 0;
        for r in &attention {
            let line = format!(
                "| `{}` | {} | {} |\n",
                table_text(&r.cell),
                r.state.kind().label(),
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
            let item = format!("{}`{}`", if shown > 0 { ", " } else { "" }, table_text(c));
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
