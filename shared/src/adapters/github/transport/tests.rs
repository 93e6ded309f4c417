use crate::adapters::github::Credentials;
use crate::adapters::github::transport::*;
use crate::pure::redact::Secret;

#[test]
fn secondary_rate_limits_are_transient_and_forbidden_is_not() {
    let mut h = HeaderMap::new();
    let forbidden = Response {
        status: StatusCode::FORBIDDEN,
        headers: h.clone(),
        body: Bytes::from_static(br#"{"message":"Resource not accessible by integration"}"#),
        permission: "statuses=write",
    };
    assert!(!is_transient(&forbidden));
    h.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
    let limited = Response {
        status: StatusCode::FORBIDDEN,
        headers: h,
        body: Bytes::from_static(br#"{"message":"You have exceeded a secondary rate limit"}"#),
        permission: "statuses=write",
    };
    assert!(is_transient(&limited));
    assert_eq!(retry_after(&limited.headers), Some(Duration::from_secs(3)));
}

/// What reaches the wire: one request to a listener that records its header lines and
/// answers like GitHub's `GET /repos/{owner}/{repo}`.
async fn header_lines_of_one_request(creds: Credentials, api_path: &str) -> Vec<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{api_path}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client closed before its headers ended");
            raw.extend_from_slice(&buf[..n]);
        }
        let body = br#"{"default_branch":"main"}"#;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(body).await.unwrap();
        String::from_utf8(raw).unwrap()
    });
    let fleet = GithubFleet::new(&url, "o", "r", None, &creds).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    assert_eq!(fleet.base_branch(deadline).await.unwrap(), "main");
    let raw = server.await.unwrap();
    raw.split("\r\n")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn every_request_carries_one_api_version_accept_and_user_agent() {
    let lines = header_lines_of_one_request(Credentials::Token(Secret::new("t0k".to_owned())), "").await;
    for name in ["x-github-api-version", "accept", "user-agent"] {
        let values: Vec<&str> = lines
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(values.len(), 1, "{name} sent {} times: {values:?}", values.len());
    }
    let get = |name: &str| lines.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    // Not GitHub Enterprise Server's `/api/v3`: github.com's newest version.
    assert_eq!(get("x-github-api-version"), Some("2026-03-10"));
    assert_eq!(get("authorization"), Some("Bearer t0k"));
    assert_eq!(get("accept"), Some("application/vnd.github+json"));
    let agent = get("user-agent").unwrap();
    assert!(
        agent.starts_with(concat!("cellbridge/", env!("CARGO_PKG_VERSION"), " ")),
        "GitHub asks for the application's name: {agent}"
    );
}

#[tokio::test]
async fn the_api_version_is_chosen_by_the_api_url() {
    let version = |lines: Vec<(String, String)>| {
        let v: Vec<String> = lines
            .into_iter()
            .filter(|(k, _)| k == "x-github-api-version")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(v.len(), 1, "{v:?}");
        v[0].clone()
    };
    let token = || Credentials::Token(Secret::new("t0k".to_owned()));
    assert_eq!(version(header_lines_of_one_request(token(), "").await), "2026-03-10");
    assert_eq!(
        version(header_lines_of_one_request(token(), "/api/v3").await),
        "2022-11-28",
        "GitHub Enterprise Server supports 2022-11-28 only"
    );
}

#[test]
fn a_token_no_header_can_carry_is_a_setup_error_never_quoting_it() {
    let bad = Credentials::Token(Secret::new("hunter2\nX-Injected: 1".to_owned()));
    let e = match GithubFleet::new("https://api.github.com", "o", "r", None, &bad) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert!(e.contains("no HTTP header may carry") && !e.contains("hunter2"), "{e}");
}
