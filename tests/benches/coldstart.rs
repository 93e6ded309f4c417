//! Cold start: from process start to the function's first request to the Lambda Runtime API
//! (`GET /2018-06-01/runtime/invocation/next`), served here on 127.0.0.1. The peer is a
//! hello-world `lambda_runtime` binary built with the same profile in the same run.
//!
//! Run through `make bench`, which builds the binaries first with `--profile bench`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const RUNS: usize = 31;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = bin_dir();
    println!("== Cold start (median of {RUNS}, the binaries taking turns) ==");
    println!("init: process start to the first Runtime API request (`next`), the issue's measure");
    println!("first answer: process start to the answer to a first event that needs no network;");
    println!("  for cellbridge that includes building its AWS clients, which it defers to this point");
    let hello = dir.join("hello_lambda");
    if !hello.exists() {
        println!(
            "SKIPPED: {} is missing; run `make bench` (it builds the binaries with the bench profile)",
            hello.display()
        );
        return;
    }
    // Events each function answers without a network call, from events/: a Terraform lock file
    // written (not a state), and an EKS API call that is not CreateCluster.
    let events_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../events");
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(events_dir.join(name)).unwrap()).unwrap()
    };
    let mut update = read("cloudtrail-create-cluster.json");
    update["detail"]["eventName"] = json!("UpdateClusterConfig");
    let mut subjects = vec![("hello-world", hello, json!({"hello": "world"}))];
    for (f, event) in [("state-sync", read("s3-tflock.json")), ("cluster-bootstrap", update)] {
        let bin = dir.join(f);
        if bin.exists() {
            subjects.push((f, bin, event));
        } else {
            println!("{f:<20} SKIPPED: {} is missing", bin.display());
        }
    }
    // Taking turns, so that a change in the machine's load touches every binary alike.
    let mut runs: Vec<Vec<Run>> = subjects.iter().map(|_| Vec::new()).collect();
    for _ in 0..RUNS {
        for (i, (_, bin, event)) in subjects.iter().enumerate() {
            runs[i].push(run_once(bin, event));
        }
    }
    let m: Vec<Measure> = runs.into_iter().map(Measure::of).collect();
    println!("{:<20} {:>8} {:>14} {:>10}", "", "init", "first answer", "peak RSS");
    for (i, (name, _, _)) in subjects.iter().enumerate() {
        let mut line = format!(
            "{:<20} {:>6.1}ms {:>12.1}ms {:>7.1} MB",
            name,
            ms(m[i].init),
            ms(m[i].answer),
            m[i].peak_kib as f64 / 1024.0
        );
        if i > 0 {
            line.push_str(&format!(
                "   init {:.2}x hello-world (goal <= 1.5x), first answer {:.2}x",
                ms(m[i].init) / ms(m[0].init),
                ms(m[i].answer) / ms(m[0].answer)
            ));
        }
        println!("{line}");
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The binaries of the bench profile sit beside this bench's own executable's parent.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/coldstart-<hash> → target/<profile>
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

struct Measure {
    init: Duration,
    answer: Duration,
    peak_kib: i64,
}

/// One cold start: the time to the first `next`, to the first answer, and the peak RSS (KiB).
struct Run(Duration, Duration, i64);

impl Measure {
    /// Medians of the times, the highest peak.
    fn of(runs: Vec<Run>) -> Measure {
        let median = |mut v: Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        Measure {
            init: median(runs.iter().map(|r| r.0).collect()),
            answer: median(runs.iter().map(|r| r.1).collect()),
            peak_kib: runs.iter().map(|r| r.2).max().unwrap_or(0),
        }
    }
}

fn run_once(bin: &Path, event: &Value) -> Run {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let start = Instant::now();
    let mut child = Command::new(bin)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_ACCESS_KEY_ID", "bench")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        // What the Terraform module sets; nothing is fetched for these events, so no server
        // is needed.
        .env("CELLBRIDGE_FLEET_REPO", "acme/fleet")
        .env("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github")
        .env("CELLBRIDGE_STATE_BUCKET", "acme-tfstate")
        .env("CELLBRIDGE_FLUX_GIT_URL", "ssh://git@github.com/acme/fleet")
        .env("CELLBRIDGE_FLUX_GIT_SECRET", "cellbridge/flux-git")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let fail = |child: std::process::Child, what: &str| -> ! {
        let out = child.wait_with_output().unwrap();
        panic!("{}: {what}: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    };
    let Some((mut conn, _)) = accept_with_deadline(&listener, Duration::from_secs(10)) else {
        let _ = child.kill();
        fail(child, "never called the Runtime API");
    };
    let (line, _) = read_request(&mut conn);
    let init = start.elapsed();
    assert!(
        line.starts_with("GET /2018-06-01/runtime/invocation/next"),
        "unexpected first request {line:?}"
    );
    // The event, on a connection the runtime must not reuse, so its answer arrives on a new one.
    let body = event.to_string();
    let deadline_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 60_000;
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nlambda-runtime-aws-request-id: bench-1\r\n\
             lambda-runtime-deadline-ms: {deadline_ms}\r\n\
             lambda-runtime-invoked-function-arn: arn:aws:lambda:eu-west-1:123456789012:function:bench\r\n\
             lambda-runtime-trace-id: Root=1-00000000-000000000000000000000000\r\n\
             connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    drop(conn);
    let Some((mut conn, _)) = accept_with_deadline(&listener, Duration::from_secs(10)) else {
        let _ = child.kill();
        fail(child, "never answered the event");
    };
    let (line, answer) = read_request(&mut conn);
    let answered = start.elapsed();
    let peak = rss_kib(child.id());
    let _ = conn.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n");
    let _ = child.kill();
    if !line.starts_with("POST /2018-06-01/runtime/invocation/bench-1/response") {
        fail(child, &format!("answered {line:?} with {answer}"));
    }
    let _ = child.wait();
    Run(init, answered, peak)
}

/// The request line and body of one HTTP/1.1 request.
fn read_request(conn: &mut std::net::TcpStream) -> (String, String) {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let mut len = 0;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap() == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (line.trim_end().to_owned(), String::from_utf8_lossy(&body).into_owned())
}

fn accept_with_deadline(l: &TcpListener, deadline: Duration) -> Option<(std::net::TcpStream, std::net::SocketAddr)> {
    l.set_nonblocking(true).unwrap();
    let start = Instant::now();
    while start.elapsed() < deadline {
        match l.accept() {
            Ok(c) => {
                c.0.set_nonblocking(false).unwrap();
                return Some(c);
            }
            Err(_) => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    None
}

/// VmHWM: the peak resident set of a live process.
fn rss_kib(pid: u32) -> i64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
