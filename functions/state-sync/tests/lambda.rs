//! The state-sync binary under a local Lambda Runtime API: what its init phase checks, and that
//! its clients are built once, by the first invocation.

use std::path::Path;
use std::time::Duration;

use cellbridge_tests::leak;
use cellbridge_tests::runtime_api::{Answer, Function, assert_clients_built_once, assert_invalid_event};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_state-sync");

fn env(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        // Nothing listens here: the events below need no network.
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("CELLBRIDGE_FLEET_REPO", "acme/fleet"),
        ("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github"),
        ("CELLBRIDGE_STATE_BUCKET", "acme-tfstate"),
    ];
    v.extend_from_slice(extra);
    v
}

fn event(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_bad_variable_fails_the_cold_start_and_names_it() {
    let f = Function::start(
        Path::new(BIN),
        &env(&[("CELLBRIDGE_STATE_KEY_PATTERN", "cells/terraform.tfstate")]),
        vec![event("s3-tflock.json")],
    );
    let (status, out) = f.finish(Duration::from_secs(20));
    leak::capture("state-sync binary, bad variable", &out);
    assert!(matches!(status, Some(c) if c != 0), "exit status {status:?}: {out}");
    assert!(
        out.contains("CELLBRIDGE_STATE_KEY_PATTERN") && out.contains("must contain {cell}"),
        "{out}"
    );
}

#[test]
fn events_are_answered_and_the_clients_built_once() {
    let mut f = Function::start(
        Path::new(BIN),
        &env(&[]),
        vec![
            event("s3-tflock.json"),
            event("s3-test-event.json"),
            json!({"hello": "world"}),
        ],
    );
    let answers = f.wait_for_answers(3, Duration::from_secs(30));
    let nexts = f.wait_for_nexts(4, Duration::from_secs(10));
    let (status, out) = f.finish(Duration::ZERO);
    leak::capture("state-sync binary, three events", &out);
    assert_eq!(status, None, "still waiting for its next event: {out}");
    assert_eq!(answers.len(), 3, "{answers:?}\n{out}");
    assert_eq!(nexts, 4, "asked for a fourth event after answering three");
    let Answer::Response(first) = &answers[0].1 else {
        panic!("{answers:?}")
    };
    assert_eq!(answers[0].0, "req-0");
    // A Terraform lock file is no state: nothing to sync.
    assert_eq!(first, &json!({"cells": []}));
    assert!(matches!(answers[1].1, Answer::Response(_)), "{answers:?}");
    // An event of no known shape fails its invocation, naming what it could not read.
    assert_invalid_event(&answers[2].1);
    assert_clients_built_once(&out);
}
