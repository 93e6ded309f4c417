//! Cold start: from process start to the function's first request to the Lambda Runtime API
//! (`GET /2018-06-01/runtime/invocation/next`), served here on 127.0.0.1. The peer is a
//! hello-world `lambda_runtime` binary built with the same profile in the same run.
//!
//! Run through `make bench`, which builds the binaries first with `--profile bench`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 15;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = bin_dir();
    println!("== Cold start: process start to first Runtime API request (median of {RUNS}) ==");
    let hello = dir.join("hello_lambda");
    if !hello.exists() {
        println!(
            "SKIPPED: {} is missing; run `make bench` (it builds the binaries with the bench profile)",
            hello.display()
        );
        return;
    }
    let base = measure(&hello);
    println!(
        "{:<22} {:>9.1} ms   {:>7.1} MB peak",
        "hello-world",
        ms(base.0),
        base.1 as f64 / 1024.0
    );
    for f in ["state-sync", "cluster-bootstrap"] {
        let bin = dir.join(f);
        if !bin.exists() {
            println!("{f:<22} SKIPPED: {} is missing", bin.display());
            continue;
        }
        let m = measure(&bin);
        println!(
            "{:<22} {:>9.1} ms   {:>7.1} MB peak   {:.2}x hello-world (goal <= 1.5x)",
            f,
            ms(m.0),
            m.1 as f64 / 1024.0,
            ms(m.0) / ms(base.0)
        );
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

/// Median time to the first /next request, and the peak RSS (KiB) seen by then.
fn measure(bin: &Path) -> (Duration, i64) {
    let mut times = Vec::new();
    let mut peak = 0;
    for _ in 0..RUNS {
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
            // What the Terraform module sets; nothing is fetched at start, so no server is needed.
            .env("CELLBRIDGE_FLEET_REPO", "acme/fleet")
            .env("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github")
            .env("CELLBRIDGE_STATE_BUCKET", "acme-tfstate")
            .env("CELLBRIDGE_FLUX_GIT_URL", "ssh://git@github.com/acme/fleet")
            .env("CELLBRIDGE_FLUX_GIT_SECRET", "cellbridge/flux-git")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        listener.set_nonblocking(false).unwrap();
        let Some((mut conn, _)) = accept_with_deadline(&listener, Duration::from_secs(10)) else {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{} never called the Runtime API: {}",
                bin.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let mut line = String::new();
        BufReader::new(&conn).read_line(&mut line).unwrap();
        let elapsed = start.elapsed();
        assert!(
            line.starts_with("GET /2018-06-01/runtime/invocation/next"),
            "unexpected first request {line:?}"
        );
        peak = peak.max(rss_kib(child.id()));
        let _ = conn.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n");
        let _ = child.kill();
        let _ = child.wait();
        times.push(elapsed);
    }
    times.sort();
    (times[RUNS / 2], peak)
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
