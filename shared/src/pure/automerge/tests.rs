use crate::pure::automerge::*;
use crate::pure::check::Finding;
use crate::pure::fleet::{FileMode, MemFleet};
use crate::pure::plan::fixtures::{fleet_with, meta};
use crate::pure::plan::{FileChange, Outcome, Plan, PlanOptions, StateRef, plan};

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

// Plans, from the real planner over an in-memory fleet (as the planner's own tests build them).

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
        d.starts_with("**Auto-merge: eligible.** The cell is opted in by `prod-*` in `.cellbridge/auto-merge.yaml`"),
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
        ["Cell `prod-c1` is not opted in: no pattern of `.cellbridge/auto-merge.yaml` on the base branch matches it."]
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
        kind: if variable.is_empty() {
            crate::pure::check::FindingKind::Malformed
        } else {
            crate::pure::check::FindingKind::Unset
        },
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
