//! The fake GitHub's description check, seen from a client: requests that break GitHub's REST
//! description are answered as GitHub documents and recorded, so the test that sent them fails.
//! (`tests/fakes/test_github_openapi.py` covers the rules one by one; this drives the running fake
//! over HTTP the way the product does.)

// The scenario suite run against both GitHubs shares this binary: one link less for the suite.
#[path = "github_scenarios/mod.rs"]
mod github_scenarios;

use std::io::{Read, Write};
use std::net::TcpStream;

use cellbridge_tests::github::{FakeGithub, TOKEN};
use serde_json::{Value, json};

const REPO: &str = "acme/fleet";

/// Sends `head` (request line and header lines, CRLF-separated, no final blank line) and `body`
/// as they are: duplicate header lines stay duplicates.
fn raw(gh: &FakeGithub, head: &str, body: &str) -> (u16, Value) {
    let url = gh.url();
    let port: u16 = url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/api/v3")
        .parse()
        .unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{head}\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

const GOOD_HEADERS: &str =
    "User-Agent: cellbridge-tests\r\nAccept: application/vnd.github+json\r\nX-GitHub-Api-Version: 2022-11-28";

fn violations(gh: &FakeGithub) -> Vec<(String, String)> {
    gh.conformance()["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["check"].as_str().unwrap().to_owned(),
                v["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn planted_nonconforming_requests_are_answered_as_github_does_and_recorded() {
    let gh = FakeGithub::start();
    let head = gh.seed(REPO, "main", &[("README.md", "fleet\n")]);

    // The control: a conforming request is served and leaves nothing recorded.
    let (status, v) = raw(&gh, &format!("GET /repos/{REPO} HTTP/1.1\r\n{GOOD_HEADERS}"), "");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["default_branch"], "main");
    assert!(violations(&gh).is_empty(), "{:?}", violations(&gh));

    // Two X-GitHub-Api-Version lines: GitHub joins them with a comma, and that is no version.
    let (status, v) = raw(
        &gh,
        &format!("GET /repos/{REPO} HTTP/1.1\r\n{GOOD_HEADERS}\r\nX-GitHub-Api-Version: 2022-11-28"),
        "",
    );
    assert_eq!(status, 400, "{v}");
    assert!(v["message"].as_str().unwrap().contains("2022-11-28, 2022-11-28"), "{v}");

    // An undocumented field in the body of git/update-ref.
    let body = json!({"sha": head, "force": false, "bogus": 1}).to_string();
    let (status, v) = raw(
        &gh,
        &format!(
            "PATCH /repos/{REPO}/git/refs/heads/main HTTP/1.1\r\n{GOOD_HEADERS}\r\nContent-Type: application/json"
        ),
        &body,
    );
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["message"], "Validation Failed");

    // A path no operation has.
    let (status, v) = raw(
        &gh,
        &format!("GET /repos/{REPO}/git/refz/heads/main HTTP/1.1\r\n{GOOD_HEADERS}"),
        "",
    );
    assert_eq!(status, 404, "{v}");

    let seen = violations(&gh);
    let checks: Vec<&str> = seen.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(checks, ["api-version", "body", "route"], "{seen:?}");
    assert!(seen[1].1.contains("bogus"), "the detail names the field: {seen:?}");
    // None of the refused requests changed anything.
    assert_eq!(gh.state(REPO)["branches"]["main"], head.as_str());
    // Planted on purpose: forget them, or the fake's handle fails this test when dropped.
    gh.clear_conformance();
}

#[test]
fn enterprise_server_answers_below_api_v3_only() {
    let gh = FakeGithub::start_enterprise();
    gh.seed(REPO, "main", &[("README.md", "fleet\n")]);
    let (status, v) = raw(&gh, &format!("GET /api/v3/repos/{REPO} HTTP/1.1\r\n{GOOD_HEADERS}"), "");
    assert_eq!(status, 200, "{v}");
    let (status, _) = raw(&gh, &format!("GET /repos/{REPO} HTTP/1.1\r\n{GOOD_HEADERS}"), "");
    assert_eq!(status, 404, "github.com's paths are not GHES's");
    assert_eq!(violations(&gh).len(), 1);
    gh.clear_conformance();
}
