//! The cluster-bootstrap binary under a local Lambda Runtime API: what its init phase checks,
//! and that its clients are built once, by the first invocation.

use std::path::Path;
use std::time::Duration;

use cellbridge_tests::leak;
use cellbridge_tests::runtime_api::{Answer, Function, assert_clients_built_once, assert_invalid_event};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_cluster-bootstrap");

const ENV: [(&str, &str); 6] = [
    ("AWS_REGION", "eu-west-1"),
    ("AWS_ACCESS_KEY_ID", "test"),
    ("AWS_SECRET_ACCESS_KEY", "test"),
    // Nothing listens here: the events below need no network.
    ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github"),
    ("CELLBRIDGE_FLUX_GIT_SECRET", "cellbridge/flux-git"),
];

/// An EKS API call the function is not for (the pattern routes only CreateCluster, but a
/// manual re-drive or a widened pattern can bring others).
fn update_cluster_event() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events/cloudtrail-create-cluster.json");
    let mut e: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    e["detail"]["eventName"] = json!("UpdateClusterConfig");
    e
}

#[test]
fn a_missing_variable_fails_the_cold_start_and_names_it() {
    // CELLBRIDGE_FLEET_REPO is not set.
    let f = Function::start(Path::new(BIN), &ENV, vec![update_cluster_event()]);
    let (status, out) = f.finish(Duration::from_secs(20));
    leak::capture("cluster-bootstrap binary, missing variable", &out);
    assert!(matches!(status, Some(c) if c != 0), "exit status {status:?}: {out}");
    assert!(out.contains("CELLBRIDGE_FLEET_REPO"), "{out}");
}

/// The same checks as state-sync's: one GitHub configuration for both functions.
#[test]
fn a_bad_github_variable_fails_the_cold_start_as_in_state_sync() {
    for (name, value) in [
        ("GITHUB_API_URL", "github.example/api/v3"),
        ("CELLBRIDGE_BASE_BRANCH", "../main"),
    ] {
        let mut env = ENV.to_vec();
        env.push(("CELLBRIDGE_FLEET_REPO", "acme/fleet"));
        env.push((name, value));
        let f = Function::start(Path::new(BIN), &env, vec![update_cluster_event()]);
        let (status, out) = f.finish(Duration::from_secs(20));
        leak::capture("cluster-bootstrap binary, bad GitHub variable", &out);
        assert!(
            matches!(status, Some(c) if c != 0),
            "{name}: exit status {status:?}: {out}"
        );
        assert!(out.contains(&format!("{name}=")), "{name} is not named: {out}");
    }
}

#[test]
fn events_are_answered_and_the_clients_built_once() {
    let mut env = ENV.to_vec();
    env.push(("CELLBRIDGE_FLEET_REPO", "acme/fleet"));
    let mut f = Function::start(
        Path::new(BIN),
        &env,
        vec![
            update_cluster_event(),
            update_cluster_event(),
            json!({"hello": "world"}),
        ],
    );
    let answers = f.wait_for_answers(3, Duration::from_secs(30));
    let (status, out) = f.finish(Duration::ZERO);
    leak::capture("cluster-bootstrap binary, three events", &out);
    assert_eq!(status, None, "still waiting for its next event: {out}");
    assert_eq!(answers.len(), 3, "{answers:?}\n{out}");
    let Answer::Response(first) = &answers[0].1 else {
        panic!("{answers:?}")
    };
    assert!(first.to_string().contains("UpdateClusterConfig"), "{first}");
    assert_eq!(answers[1].1, answers[0].1);
    assert_invalid_event(&answers[2].1);
    assert_clients_built_once(&out);
}
