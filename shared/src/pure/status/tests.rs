use crate::pure::fleet::FleetRead;
use crate::pure::status::*;
use crate::pure::tfstate::Output;

fn row(cell: &str, state: CellState) -> CellStatus {
    CellStatus {
        cell: cell.into(),
        state,
        source: Some(format!("cells/{cell}/terraform.tfstate")),
        serial: Some(3),
        github: None,
        flux: None,
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
            flux: None,
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

fn state_of(outputs: Option<serde_json::Value>) -> StateOutputs {
    StateOutputs {
        serial: 4,
        lineage: "l".into(),
        terraform_version: "1.11.4".into(),
        outputs: outputs
            .into_iter()
            .map(|value| {
                (
                    "cell_metadata".to_owned(),
                    Output {
                        value,
                        sensitive: false,
                        value_type: None,
                    },
                )
            })
            .collect(),
        has_resources: false,
    }
}

#[test]
fn the_contract_makes_the_rows_it_decides() {
    let kept = state_of(Some(serde_json::json!({"cell_name": "pay-eu-1", "schema": "1"})));
    let meta = contract_row("pay-eu-1", &kept, "--key-pattern", || unreachable!("not destroyed")).ok();
    assert_eq!(meta.map(|m| m.cell).as_deref(), Some("pay-eu-1"));
    assert_eq!(
        contract_row("pay-eu-2", &kept, "--key-pattern", || true).err(),
        Some(CellState::Refused {
            reason: "the key says cell `pay-eu-2` (--key-pattern) but cell_metadata.cell_name is `pay-eu-1`".into()
        })
    );
    assert_eq!(
        contract_row("Pay_1", &kept, "CELLBRIDGE_STATE_KEY_PATTERN", || true).err(),
        Some(CellState::Refused {
            reason: "the cell part \"Pay_1\" of the key is not a DNS-1123 label".into()
        })
    );
    let destroyed = state_of(None);
    assert_eq!(
        contract_row("pay-eu-1", &destroyed, "x", || true).err(),
        Some(CellState::Destroyed)
    );
    assert_eq!(
        contract_row("pay-eu-1", &destroyed, "x", || false).err(),
        Some(CellState::Decommissioned)
    );
}

#[test]
fn a_planned_state_is_pending_only_when_files_change() {
    assert_eq!(
        CellState::planned(Outcome::InSync, false, 0, Some(true)),
        CellState::InSync
    );
    assert_eq!(CellState::planned(Outcome::Stale, false, 2, None), CellState::Stale);
    assert_eq!(
        CellState::planned(Outcome::Change, true, 3, None),
        CellState::Pending {
            new_cell: true,
            check_ok: None,
            keys_changed: 3
        }
    );
}

/// What both callers compute for one state: the command line's full plan and the dashboard's
/// outcome against the base.
fn both_depths(key_cell: &str, state: StateOutputs, fleet: &dyn FleetRead) -> [CellStatus; 2] {
    let cells = FleetCells::read(fleet).unwrap();
    let opts = crate::pure::plan::PlanOptions::default();
    let key = format!("cells/{key_cell}/terraform.tfstate");
    [Depth::Plan(&opts), Depth::Outcome]
        .map(|depth| state_row(&key, key_cell, Ok(state.clone()), "--key-pattern", fleet, &cells, depth).status)
}

fn kept_state(cell: &str) -> StateOutputs {
    let mut s = state_of(Some(
        serde_json::json!({"cell_name": cell, "schema": "1", "vpc_id": "vpc-1"}),
    ));
    s.has_resources = true;
    s
}

#[test]
fn a_cell_part_that_is_no_dns_1123_label_is_refused_by_both_callers() {
    let fleet = crate::pure::plan::fixtures::fleet_with(None);
    for row in both_depths("Pay_1", kept_state("Pay_1"), &fleet) {
        assert_eq!(
            row.state,
            CellState::Refused {
                reason: "the cell part \"Pay_1\" of the key is not a DNS-1123 label".into()
            }
        );
        assert_eq!(row.serial, Some(4));
    }
}

#[test]
fn a_symlinked_cell_directory_fails_for_both_callers_and_a_destroyed_stack_is_still_there() {
    let mut fleet = crate::pure::plan::fixtures::fleet_with(None);
    fleet.insert("clusters/real-eu-1/kustomization.yaml", "resources: []\n");
    fleet.insert_symlink("clusters/pay-eu-1", "real-eu-1");
    let expect = CellState::Failed {
        reason: "fleet path clusters/pay-eu-1 is a symlink (→ real-eu-1): Flux leaves symlinks out of its source artifact, so nothing is there for it".into(),
    };
    for row in both_depths("pay-eu-1", kept_state("pay-eu-1"), &fleet) {
        assert_eq!(row.state, expect);
    }
    for row in both_depths("pay-eu-1", state_of(None), &fleet) {
        assert_eq!(
            row.state,
            CellState::Destroyed,
            "the link is what a decommission removes"
        );
    }
    for row in both_depths("gone-eu-1", state_of(None), &fleet) {
        assert_eq!(row.state, CellState::Decommissioned);
    }
}

#[test]
fn both_callers_agree_on_where_a_kept_state_stands_but_for_the_strict_check() {
    let meta = crate::pure::plan::fixtures::meta("pay-eu-1", 4, &[("vpc_id", "vpc-1")]);
    let in_sync = crate::pure::plan::fixtures::fleet_with(Some(&meta));
    for row in both_depths("pay-eu-1", kept_state("pay-eu-1"), &in_sync) {
        assert_eq!(row.state, CellState::InSync);
    }
    let changed = crate::pure::plan::fixtures::meta("pay-eu-1", 4, &[("vpc_id", "vpc-0")]);
    let fleet = crate::pure::plan::fixtures::fleet_with(Some(&changed));
    let [cli, dashboard] = both_depths("pay-eu-1", kept_state("pay-eu-1"), &fleet);
    assert!(
        matches!(
            cli.state,
            CellState::Pending {
                new_cell: false,
                check_ok: Some(_),
                keys_changed: 1
            }
        ),
        "{cli:?}"
    );
    assert_eq!(
        dashboard.state,
        CellState::Pending {
            new_cell: false,
            check_ok: None,
            keys_changed: 1
        }
    );
    let new = crate::pure::plan::fixtures::fleet_with(None);
    let [cli, dashboard] = both_depths("pay-eu-1", kept_state("pay-eu-1"), &new);
    assert!(
        matches!(cli.state, CellState::Pending { new_cell: true, .. }),
        "{cli:?}"
    );
    assert!(
        matches!(dashboard.state, CellState::Pending { new_cell: true, .. }),
        "{dashboard:?}"
    );
    assert_eq!(
        cli.state.detail().split(';').next(),
        Some(dashboard.state.detail().as_str())
    );
}

#[test]
fn the_setting_named_is_the_caller_s_and_an_unread_state_fails() {
    let fleet = crate::pure::plan::fixtures::fleet_with(None);
    let cells = FleetCells::read(&fleet).unwrap();
    let row = state_row(
        "cells/pay-eu-2/terraform.tfstate",
        "pay-eu-2",
        Ok(kept_state("pay-eu-1")),
        "CELLBRIDGE_STATE_KEY_PATTERN",
        &fleet,
        &cells,
        Depth::Outcome,
    );
    assert_eq!(
        row.status.state,
        CellState::Refused {
            reason:
                "the key says cell `pay-eu-2` (CELLBRIDGE_STATE_KEY_PATTERN) but cell_metadata.cell_name is `pay-eu-1`"
                    .into()
        }
    );
    assert_eq!(row.meta, None);
    let row = state_row(
        "k",
        "pay-eu-1",
        Err("k: not JSON".into()),
        "x",
        &fleet,
        &cells,
        Depth::Outcome,
    );
    assert_eq!(
        row.status.state,
        CellState::Failed {
            reason: "k: not JSON".into()
        }
    );
    assert_eq!((row.status.serial, row.status.source.as_deref()), (None, Some("k")));
}

#[test]
fn the_fleet_s_cells_are_its_directories_and_links_under_clusters_but_the_underscore_ones() {
    let mut fleet = crate::pure::plan::fixtures::fleet_with(None);
    fleet.insert("clusters/_shared/kustomization.yaml", "resources: []\n");
    fleet.insert("clusters/a-eu-1/kustomization.yaml", "resources: []\n");
    fleet.insert("clusters/README.md", "cells\n");
    fleet.insert_symlink("clusters/b-eu-1", "a-eu-1");
    fleet.insert_symlink("clusters/_alias", "a-eu-1");
    let cells = FleetCells::read(&fleet).unwrap();
    assert_eq!(cells.names().collect::<Vec<_>>(), ["a-eu-1", "b-eu-1"]);
    let rows = [row("a-eu-1", CellState::InSync)];
    let missing = cells.state_missing(&rows);
    assert_eq!(missing.len(), 1);
    assert_eq!(
        (missing[0].cell.as_str(), &missing[0].state, &missing[0].source),
        ("b-eu-1", &CellState::StateMissing, &None)
    );
}

#[test]
fn the_flux_column_shows_where_the_clusters_were_described_and_counts_the_stuck() {
    use crate::pure::bootstrap::confirm::Outcome;
    use crate::pure::bootstrap::record::{FluxRecord, parse_time};
    let since = "2026-12-05T20:31:42Z";
    let recorded = |outcome| {
        Some(Flux::Recorded(FluxRecord {
            outcome,
            since: parse_time(since).unwrap(),
        }))
    };
    let pending = CellState::Pending {
        new_cell: false,
        check_ok: None,
        keys_changed: 1,
    };
    let mut rows = vec![
        row("a-ready", CellState::InSync),
        row("b-stuck", CellState::InSync),
        row("c-no-cluster", pending.clone()),
        row("d-no-record", pending.clone()),
        row("e-unknown", CellState::Stale),
        row("f-confirming", CellState::InSync),
    ];
    // Without the clusters described, the rows are what `cellbridge status` shows.
    assert!(!render_text(&rows).contains("FLUX") && !render_markdown(&rows, BODY_LIMIT).contains("flux"));
    rows[0].flux = recorded(Outcome::Ready);
    rows[1].flux = recorded(Outcome::GitAuth);
    rows[3].flux = Some(Flux::NoRecord);
    rows[4].flux = Some(Flux::Unknown {
        reason: "cell e-unknown: EKS DescribeCluster e-unknown in eu-west-1: ThrottlingException: slow down".into(),
    });
    rows[5].flux = recorded(Outcome::Confirming);
    let attention: Vec<&str> = rows
        .iter()
        .filter(|r| r.needs_attention())
        .map(|r| r.cell.as_str())
        .collect();
    assert_eq!(attention, ["b-stuck", "c-no-cluster", "d-no-record", "e-unknown"]);
    let s = summary(&rows);
    assert_eq!((s.flux_stuck, s.flux_unknown, s.needs_attention), (1, 1, 4));
    assert!(
        s.line().ends_with("; 4 need attention; 1 cluster stuck"),
        "{}",
        s.line()
    );

    let md = render_markdown(&rows, BODY_LIMIT);
    assert!(
        md.contains("\n| cell | what | flux | detail |\n|---|---|---|---|\n"),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "| `b-stuck` | in sync | [git-auth]({RUNBOOK_URL}#flux-git-auth) | the fleet holds this cell_metadata; Flux did not take over: git-auth (bootstrapped {since})"
        )),
        "{md}"
    );
    assert!(md.contains("| `c-no-cluster` | pending |  | 1 key changed"), "{md}");
    assert!(md.contains("| `d-no-record` | pending | — | 1 key changed"), "{md}");
    // Under the table, each state it shows links to its runbook entry, in the table's order.
    assert!(
        md.contains(&format!(
            "\nWhat to do, by state: [pending]({RUNBOOK_URL}#dashboard-pending) · [stale]({RUNBOOK_URL}#dashboard-stale) · [in sync]({RUNBOOK_URL}#dashboard-in-sync)\n"
        )),
        "{md}"
    );
    assert!(
        md.contains(&format!("| `e-unknown` | stale | [unknown]({RUNBOOK_URL}#dashboard-flux-unknown) | the fleet holds a newer serial; Flux unknown: cell e-unknown: EKS DescribeCluster e-unknown in eu-west-1: ThrottlingException")),
        "{md}"
    );
    assert!(
        md.contains("\n**In sync** (3): `a-ready`, `b-stuck` (flux git-auth), `f-confirming` (flux confirming)\n"),
        "{md}"
    );
    assert!(
        md.contains("**Stale (the fleet holds a newer serial)** (1): `e-unknown` (flux unknown)"),
        "{md}"
    );

    let text = render_text(&rows);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("CELL          STATE    FLUX        SERIAL"),
        "{text}"
    );
    assert!(lines[2].starts_with("b-stuck       in sync  git-auth    3"), "{text}");
    assert!(lines[3].starts_with("c-no-cluster  pending  -           3"), "{text}");
    assert!(lines[4].starts_with("d-no-record   pending  —           3"), "{text}");
    let json = serde_json::to_value(&rows[1]).unwrap();
    assert_eq!(json["flux"], serde_json::json!({"outcome": "git-auth", "since": since}));
    assert!(serde_json::to_value(&rows[2]).unwrap().get("flux").is_none());
}
