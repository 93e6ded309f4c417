use crate::pure::tfstate::*;

const STATE: &str = r#"{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": 7,
  "lineage": "5f0c1a2b-0000-4000-8000-000000000001",
  "outputs": {
    "cell_metadata": {"value": {"cell_name": "prod-eu-west-1", "schema": "1"}, "type": ["map", "string"]},
    "db_password": {"value": "x", "type": "string", "sensitive": true}
  },
  "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "instances": [{"attributes": {"id": "a"}}]}],
  "check_results": null
}"#;

#[test]
fn reads_scalars_and_outputs() {
    let s = read_state(STATE.as_bytes(), "t.tfstate").unwrap();
    assert_eq!(s.serial, 7);
    assert_eq!(s.lineage, "5f0c1a2b-0000-4000-8000-000000000001");
    assert_eq!(s.terraform_version, "1.11.4");
    assert_eq!(s.outputs.len(), 2);
    assert!(s.outputs["db_password"].sensitive);
    assert_eq!(s.outputs["cell_metadata"].value["cell_name"], "prod-eu-west-1");
}

#[test]
fn syntax_error_names_file_and_byte_offset() {
    let bad = r#"{"version": 4, "serial": 1,, "lineage": "x"}"#;
    let e = read_state(bad.as_bytes(), "bad.tfstate").unwrap_err();
    match &e {
        StateError::NotJson { offset, .. } => assert_eq!(*offset, 27, "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().starts_with("bad.tfstate: not JSON at byte 27"), "{e}");
}

#[test]
fn truncated_state_is_named_truncated() {
    let cut = &STATE[..STATE.len() / 2];
    let e = read_state(cut.as_bytes(), "cut.tfstate").unwrap_err();
    assert!(matches!(e, StateError::Truncated { .. }), "{e:?}");
    assert!(e.to_string().contains("cut.tfstate: truncated"));
}

#[test]
fn version_3_is_refused_by_number() {
    let v3 = r#"{"version": 3, "terraform_version": "0.11.14", "serial": 2, "lineage": "x", "modules": []}"#;
    let e = read_state(v3.as_bytes(), "old.tfstate").unwrap_err();
    assert_eq!(
        e.to_string(),
        "old.tfstate: unsupported state format version 3 (cellbridge reads version 4, written by Terraform 0.12 and later)"
    );
}

#[test]
fn trailing_garbage_is_refused() {
    let e = read_state(format!("{STATE} x").as_bytes(), "t").unwrap_err();
    assert!(matches!(e, StateError::NotJson { .. }), "{e:?}");
}

#[test]
fn a_json_array_is_not_a_state() {
    let e = read_state("[1,2]".as_bytes(), "t").unwrap_err();
    assert!(matches!(e, StateError::NotAState { .. }), "{e:?}");
}

/// Hands out one byte per read: every buffer boundary case at once.
struct OneByte<'a>(&'a [u8]);

impl Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.split_first() {
            Some((b, rest)) if !buf.is_empty() => {
                buf[0] = *b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

#[test]
fn buffer_boundaries_do_not_matter() {
    let a = read_state(STATE.as_bytes(), "t").unwrap();
    let b = read_state(OneByte(STATE.as_bytes()), "t").unwrap();
    assert_eq!(a, b);
}

#[test]
fn skipped_sections_are_still_checked_for_structure() {
    for (bad, why) in [
        (
            r#"{"version": 4, "resources": [1 2], "serial": 1, "lineage": "x"}"#,
            "expected `,` or `]`",
        ),
        (
            r#"{"version": 4, "resources": {"a" 1}, "serial": 1, "lineage": "x"}"#,
            "expected `:`",
        ),
        (
            r#"{"version": 4, "resources": [tru], "serial": 1, "lineage": "x"}"#,
            "invalid literal",
        ),
        (
            r#"{"version": 4, "resources": ["a\qb"], "serial": 1, "lineage": "x"}"#,
            "invalid escape",
        ),
        (
            r#"{"version": 4, "resources": [}, "serial": 1, "lineage": "x"}"#,
            "expected a value",
        ),
    ] {
        let e = read_state(bad.as_bytes(), "t").unwrap_err();
        assert!(
            matches!(e, StateError::NotJson { .. }) && e.to_string().contains(why),
            "{bad}: {e}"
        );
    }
    let e = read_state("{\"version\": 4, \"resources\": [\"a\u{1}\"]}".as_bytes(), "t").unwrap_err();
    assert!(e.to_string().contains("control character"), "{e}");
    let e = read_state(r#"{"version": 4, "resources": ["unterminated"#.as_bytes(), "t").unwrap_err();
    assert!(matches!(e, StateError::Truncated { .. }), "{e}");
}

#[test]
fn kept_values_are_fully_parsed() {
    let e = read_state(r#"{"version": 4, "serial": "seven", "lineage": "x"}"#.as_bytes(), "t").unwrap_err();
    assert!(
        matches!(e, StateError::NotAState { .. }) && e.to_string().contains("\"serial\""),
        "{e}"
    );
    let e = read_state(r#"{"version": 4, "serial": 12x, "lineage": "x"}"#.as_bytes(), "t").unwrap_err();
    assert!(matches!(e, StateError::NotJson { offset: 27, .. }), "{e}");
    assert_eq!(
        read_state("".as_bytes(), "t").unwrap_err().to_string(),
        "t: not a Terraform state: the file is empty"
    );
}

proptest::proptest! {
    #[test]
    fn any_resources_section_reads_like_a_full_parse(resources in arb_json(), keep in "[a-z]{1,8}") {
        let doc = serde_json::json!({
            "version": 4, "terraform_version": "1.11.4", "serial": 9, "lineage": keep,
            "outputs": {"cell_metadata": {"value": {"cell_name": keep, "x": resources.clone()}}},
            "resources": resources,
            "check_results": null
        });
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let s = read_state(OneByte(text.as_bytes()), "t").unwrap();
        // serde_json's own reading of the same text is the reference (floats included).
        let full: serde_json::Value = serde_json::from_str(&text).unwrap();
        proptest::prop_assert_eq!(&s.outputs["cell_metadata"].value, &full["outputs"]["cell_metadata"]["value"]);
        proptest::prop_assert_eq!(s.serial, 9);
        proptest::prop_assert_eq!(s.has_resources, full["resources"].as_array().is_some_and(|a| !a.is_empty()));
    }
}

fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        ".*".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(".*", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
