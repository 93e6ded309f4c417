//! The pull request a plan becomes: its title, and the markdown body a reviewer reads (where the
//! state came from, which keys change, what the strict check found).

use std::fmt::Write as _;

use super::Plan;
use crate::pure::check;
use crate::pure::fleet::FileMode;
use crate::pure::markdown::table_code;
use crate::pure::metadata::CellMetadata;

pub(super) fn title(p: &Plan) -> String {
    if p.new_cell {
        format!("cellbridge: new cell {} (state serial {})", p.cell, p.serial)
    } else if p.key_set_changed {
        format!(
            "cellbridge: {} cell-metadata schema {} (state serial {})",
            p.cell, p.schema_new, p.serial
        )
    } else {
        let n = p.key_changes.len();
        format!(
            "cellbridge: {} cell-metadata, {n} key{} changed (state serial {})",
            p.cell,
            if n == 1 { "" } else { "s" },
            p.serial
        )
    }
}

pub(super) fn body(p: &Plan, meta: &CellMetadata) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "## Cell `{}`\n", p.cell);
    if p.new_cell {
        let _ = writeln!(
            b,
            "**New cell.** This pull request adds `clusters/{}/` from `clusters/_template/` with the cell's `cell-metadata` ConfigMap and Flux sync objects. Merging it lets Flux manage the cell.\n",
            p.cell
        );
        let special: Vec<String> = p
            .files
            .iter()
            .filter_map(|f| match f.mode {
                FileMode::Regular => None,
                FileMode::Executable => Some(format!("{} (executable)", table_code(&f.path))),
                FileMode::Symlink => Some(format!("{} (symlink → {})", table_code(&f.path), table_code(&f.new))),
            })
            .collect();
        if !special.is_empty() {
            let links = if p.files.iter().any(|f| f.mode == FileMode::Symlink) {
                " Flux's source artifact leaves symlinks out: nothing in the cell may depend on them."
            } else {
                ""
            };
            let _ = writeln!(
                b,
                "Copied with their modes, as the template has them: {}.{links}\n",
                special.join(", ")
            );
        }
    }
    let _ = writeln!(b, "| Terraform state | |\n|---|---|");
    let _ = writeln!(
        b,
        "| object | {} |",
        table_code(&match &p.source.bucket {
            Some(bk) => format!("s3://{bk}/{}", p.source.key),
            None => p.source.key.clone(),
        })
    );
    if let Some(v) = &p.source.version_id {
        let _ = writeln!(b, "| version | {} |", table_code(v));
    }
    let _ = writeln!(b, "| serial | {} |", p.serial);
    let _ = writeln!(b, "| lineage | {} |", table_code(&p.lineage));
    if !meta.terraform_version.is_empty() {
        let _ = writeln!(b, "| terraform | {} |", table_code(&meta.terraform_version));
    }
    if let (Some(s), Some(l)) = (p.base_serial, &p.base_lineage) {
        let note = if *l != p.lineage {
            " (another lineage: the state was re-created)"
        } else {
            ""
        };
        let _ = writeln!(b, "| base branch has | serial {s}{note} |");
    }

    let _ = writeln!(b, "\n### Changed keys\n");
    if p.key_changes.is_empty() {
        let _ = writeln!(b, "None.");
    } else {
        let _ = writeln!(b, "| key | old | new |\n|---|---|---|");
        for k in &p.key_changes {
            let cell = |v: &Option<String>| v.as_deref().map(table_code).unwrap_or_else(|| "—".to_owned());
            let _ = writeln!(b, "| `{}` | {} | {} |", k.key, cell(&k.old), cell(&k.new));
        }
    }

    if p.key_set_changed {
        let (added, removed) = p.added_and_removed_keys();
        let _ = writeln!(b, "\n### Schema change\n");
        let _ = writeln!(
            b,
            "The key set changed (added: {}; removed: {}).",
            list_or_none(&added),
            list_or_none(&removed)
        );
        if p.schema_violation {
            let _ = writeln!(
                b,
                "\n> [!WARNING]\n> `schema` stayed at {} (base has {}). Adding, removing or renaming a key needs a new `schema` number in the Terraform output: bump it and apply again.",
                p.schema_new,
                p.schema_old.as_deref().unwrap_or("none")
            );
        } else {
            let _ = writeln!(
                b,
                "Schema {} → {}. Check every consumer of the renamed or removed keys before merging.",
                p.schema_old.as_deref().unwrap_or("none"),
                p.schema_new
            );
        }
    }

    let _ = writeln!(b, "\n### Strict substitution check\n");
    if let Some(e) = &p.check_error {
        let _ = writeln!(b, "❌ The check could not run: {e}");
    } else if p.check.passed() {
        let files: usize = p.check.layers.iter().map(|l| l.files).sum();
        let _ = writeln!(
            b,
            "✅ {} layer{} ({files} files): every `${{variable}}` has a value.",
            p.check.layers.len(),
            if p.check.layers.len() == 1 { "" } else { "s" }
        );
    } else {
        let _ = writeln!(
            b,
            "❌ {} finding{}: Flux would fail these layers.\n",
            p.check.findings.len(),
            if p.check.findings.len() == 1 { "" } else { "s" }
        );
        let _ = writeln!(b, "| where | variable | layer | problem |\n|---|---|---|---|");
        for f in &p.check.findings {
            let _ = writeln!(
                b,
                "| `{}:{}` | {} | `{}` | {} |",
                f.file,
                f.line,
                if f.variable.is_empty() {
                    "—".into()
                } else {
                    table_code(&f.variable)
                },
                f.layer,
                f.message.replace('|', "\\|")
            );
        }
    }
    if !p.check.layers.is_empty() {
        let _ = writeln!(
            b,
            "\nLayers: {}.",
            p.check
                .layers
                .iter()
                .map(|l| format!("`{}` ({})", l.name, l.path))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !p.check.layers.is_empty() {
        // Which release's rules said so: strict mode and its operators differ by release.
        let _ = writeln!(b, "\nChecked with the rules of {}.", p.check.flux.describe());
        if let Some(notice) = &p.check.flux.notice {
            let _ = writeln!(b, "\nℹ️ {notice}.");
        }
    }
    let empty = p
        .check
        .warnings
        .iter()
        .filter(|w| w.kind == check::FindingKind::Empty)
        .count();
    warning_table(
        &mut b,
        p,
        check::FindingKind::Empty,
        &format!(
            "⚠️ {empty} variable{} whose value is empty, so Flux writes `\"\"` where {} used (Flux accepts it: a warning, not a failure); first use:",
            if empty == 1 { "" } else { "s" },
            if empty == 1 { "it is" } else { "they are" },
        ),
    );
    let unset = p
        .check
        .warnings
        .iter()
        .filter(|w| w.kind == check::FindingKind::Unset)
        .count();
    warning_table(
        &mut b,
        p,
        check::FindingKind::Unset,
        &format!(
            "⚠️ {unset} variable{} nothing sets, which this release substitutes as an empty string (not a failure here; a failure once strict mode is on):",
            if unset == 1 { "" } else { "s" },
        ),
    );
    if !p.check.unverified.is_empty() {
        let n = p.check.unverified.len();
        let rows = p.check.unverified.iter().map(|u| {
            vec![
                format!("`{}:{}`", u.file, u.line),
                table_code(&u.variable),
                format!("`{}`", u.layer),
                u.sources
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        });
        reference_table(
            &mut b,
            &format!(
                "⚠️ {n} reference{} only a source created in the cluster could supply (not verified, not a failure; declare the source's keys in `{}` to check them):",
                if n == 1 { "" } else { "s" },
                crate::pure::check::IN_CLUSTER_SOURCES
            ),
            &["where", "variable", "layer", "could come from"],
            rows,
        );
    }
    if !p.check.unused_keys.is_empty() {
        let _ = writeln!(
            b,
            "\nKeys no manifest uses: {}.",
            p.check
                .unused_keys
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        b,
        "\n---\nOpened by cellbridge from `terraform apply`. Commits you push to `{}` are kept: cellbridge rewrites only `{}` on a new state, on top of them.",
        p.branch,
        crate::pure::configmap::path_for(&p.cell)
    );
    // Read back by cellbridge to order updates; invisible in the rendered pull request.
    let _ = writeln!(
        b,
        "{}",
        crate::pure::record::line(&[("serial", &p.serial.to_string()), ("lineage", &p.lineage)])
    );
    b
}

fn list_or_none(v: &[&str]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
    }
}

/// A paragraph and a markdown table of references, one row each.
/// The warnings of `kind`, one row each (where, variable, layer), under `intro`; nothing when
/// there are none.
fn warning_table(b: &mut String, p: &Plan, kind: check::FindingKind, intro: &str) {
    let rows = p.check.warnings.iter().filter(|w| w.kind == kind).map(|w| {
        vec![
            format!("`{}:{}`", w.file, w.line),
            table_code(&w.variable),
            format!("`{}`", w.layer),
        ]
    });
    if p.check.warnings.iter().any(|w| w.kind == kind) {
        reference_table(b, intro, &["where", "variable", "layer"], rows);
    }
}

fn reference_table(b: &mut String, intro: &str, headers: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    let _ = writeln!(b, "\n{intro}\n");
    let _ = writeln!(b, "| {} |\n|{}", headers.join(" | "), "---|".repeat(headers.len()));
    for row in rows {
        let _ = writeln!(b, "| {} |", row.join(" | "));
    }
}
