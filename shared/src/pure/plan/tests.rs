use super::fixtures::fleet_with;
use crate::pure::plan::*;

fn meta(serial: u64, data: &[(&str, &str)]) -> CellMetadata {
    fixtures::meta("c1", serial, data)
}

#[test]
fn new_cell_gets_its_whole_directory() {
    let p = plan(
        &meta(1, &[("vpc_id", "vpc-1")]),
        StateRef::default(),
        &fleet_with(None),
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.outcome, Outcome::Change);
    assert!(p.new_cell);
    let paths: Vec<&str> = p.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "clusters/c1/cell-metadata.yaml",
            "clusters/c1/flux-system/gotk-sync.yaml",
            "clusters/c1/kustomization.yaml"
        ]
    );
    assert_eq!(p.labels, ["cellbridge", "new-cell"]);
    assert!(p.title.contains("new cell c1"));
    assert!(p.unified_diff().contains("+++ b/clusters/c1/cell-metadata.yaml"));
    assert_eq!(recorded_serial(&p.body), Some((1, "L".into())));
}

#[test]
fn changed_value_rewrites_only_the_configmap() {
    let base = meta(4, &[("vpc_id", "vpc-1")]);
    let p = plan(
        &meta(5, &[("vpc_id", "vpc-2")]),
        StateRef::default(),
        &fleet_with(Some(&base)),
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.outcome, Outcome::Change);
    assert_eq!(p.files.len(), 1);
    assert_eq!(
        p.key_changes,
        vec![KeyChange {
            key: "vpc_id".into(),
            old: Some("vpc-1".into()),
            new: Some("vpc-2".into())
        }]
    );
    assert!(!p.key_set_changed);
    assert!(p.body.contains("| `vpc_id` | `vpc-1` | `vpc-2` |"), "{}", p.body);
}

#[test]
fn unchanged_map_is_in_sync_whatever_the_serial() {
    let base = meta(4, &[("vpc_id", "vpc-1")]);
    let p = plan(
        &meta(9, &[("vpc_id", "vpc-1")]),
        StateRef::default(),
        &fleet_with(Some(&base)),
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.outcome, Outcome::InSync);
    assert!(p.files.is_empty());
}

#[test]
fn older_serial_is_stale() {
    let base = meta(8, &[("vpc_id", "vpc-new")]);
    let p = plan(
        &meta(5, &[("vpc_id", "vpc-old")]),
        StateRef::default(),
        &fleet_with(Some(&base)),
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.outcome, Outcome::Stale);
    assert!(p.files.is_empty());
}

#[test]
fn key_added_without_bump_violates_the_schema_rule() {
    let base = meta(4, &[("vpc_id", "vpc-1")]);
    let p = plan(
        &meta(5, &[("vpc_id", "vpc-1"), ("queue", "q")]),
        StateRef::default(),
        &fleet_with(Some(&base)),
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(p.key_set_changed && p.schema_violation && !p.status_ok());
    assert!(p.labels.contains(&"schema-change".to_owned()));
    assert!(p.status_description().contains("schema"));
    let bumped = plan(
        &meta(5, &[("vpc_id", "vpc-1"), ("queue", "q"), ("schema", "2")]),
        StateRef::default(),
        &fleet_with(Some(&base)),
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(bumped.key_set_changed && !bumped.schema_violation);
}

#[test]
fn status_names_unset_variables_and_malformed_expressions() {
    let base = meta(4, &[("vpc_id", "vpc-1")]);
    let mut p = plan(
        &meta(5, &[("vpc_id", "vpc-2")]),
        StateRef::default(),
        &fleet_with(Some(&base)),
        &PlanOptions::default(),
    )
    .unwrap();
    let finding = |variable: &str, line| check::Finding {
        file: "infrastructure/x.yaml".into(),
        line,
        variable: variable.into(),
        layer: "infrastructure".into(),
        message: if variable.is_empty() {
            "bad substitution".into()
        } else {
            "variable not set".into()
        },
        kind: if variable.is_empty() {
            check::FindingKind::Malformed
        } else {
            check::FindingKind::Unset
        },
    };
    p.check.findings = vec![finding("queue", 3), finding("queue", 9), finding("", 12)];
    assert!(!p.status_ok());
    assert_eq!(
        p.status_description(),
        "unset: queue; infrastructure/x.yaml:12: bad substitution"
    );
    p.check.findings = vec![finding("", 12)];
    assert_eq!(p.status_description(), "infrastructure/x.yaml:12: bad substitution");

    // GitHub keeps few characters of a status: the schema rule survives a long finding.
    p.schema_violation = true;
    p.check.findings = vec![check::Finding {
        file: format!("clusters/eu-c1/{}/layer.yaml", "deep/".repeat(30)),
        ..finding("", 1)
    }];
    let d = p.status_description();
    assert!(d.starts_with("key set changed without a schema bump; "), "{d}");
    assert_eq!(d.chars().count(), crate::pure::plan::STATUS_DESCRIPTION_MAX, "{d}");
}

#[test]
fn an_empty_value_a_layer_uses_is_a_warning_in_the_body_not_a_failure() {
    let base = meta(4, &[("vpc_id", "vpc-1")]);
    let mut fleet = fleet_with(Some(&base));
    fleet.insert(
        "clusters/c1/kustomization.yaml",
        "resources:\n  - cell-metadata.yaml\n  - layers.yaml\n",
    );
    fleet.insert(
        "clusters/c1/layers.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cell-metadata\n",
    );
    fleet.insert(
        "apps/a.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  vpc: ${vpc_id}\n  cell: ${cell_name}\n",
    );
    let p = plan(
        &meta(5, &[("vpc_id", "")]),
        StateRef::default(),
        &fleet,
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(p.status_ok(), "{}", p.status_description());
    assert!(
        p.body.contains("⚠️ 1 variable whose value is empty")
            && p.body.contains("| `apps/a.yaml:6` | `vpc_id` | `apps` |"),
        "{}",
        p.body
    );
}
