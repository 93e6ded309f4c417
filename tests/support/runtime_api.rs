//! A local Lambda Runtime API (`AWS_LAMBDA_RUNTIME_API`) that runs a function binary the way
//! Lambda does: it hands out the given events one by one on `next`, records each answer
//! (`response` or `error`) and any init error, and keeps the last `next` waiting, as Lambda
//! does between invocations.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What the function sent back.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Response(Value),
    Error(Value),
}

#[derive(Default)]
struct Log {
    nexts: usize,
    /// When the first `next` request arrived (the end of the init phase).
    first_next: Option<Instant>,
    answers: Vec<(String, Answer)>,
    /// When each answer arrived.
    answered: Vec<Instant>,
    init_errors: Vec<Value>,
}

/// A function process under a local Runtime API.
pub struct Function {
    /// Just before the process was spawned.
    pub started: Instant,
    child: Option<Child>,
    log: Arc<Mutex<Log>>,
}

impl Function {
    /// Starts `bin` with exactly `env` (plus the Runtime API's own variables) and serves it `events`.
    pub fn start(bin: &Path, env: &[(&str, &str)], events: Vec<Value>) -> Function {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let served = log.clone();
        std::thread::spawn(move || serve(listener, events, served));
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "cellbridge-test")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "test")
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let started = Instant::now();
        Function {
            started,
            child: Some(cmd.spawn().unwrap()),
            log,
        }
    }

    /// Waits until `n` answers have arrived or the process has exited (at most `within`).
    pub fn wait_for_answers(&mut self, n: usize, within: Duration) -> Vec<(String, Answer)> {
        let start = Instant::now();
        while start.elapsed() < within {
            if self.log.lock().unwrap().answers.len() >= n {
                break;
            }
            if let Some(c) = self.child.as_mut()
                && c.try_wait().unwrap().is_some()
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.log.lock().unwrap().answers.clone()
    }

    /// How many times the function asked for its next event.
    pub fn nexts(&self) -> usize {
        self.log.lock().unwrap().nexts
    }

    /// Waits until the function has asked for its `n`-th event or exited (at most `within`):
    /// the request for the next event follows an answer by a moment, never at once.
    pub fn wait_for_nexts(&mut self, n: usize, within: Duration) -> usize {
        let start = Instant::now();
        while start.elapsed() < within && self.nexts() < n {
            if let Some(c) = self.child.as_mut()
                && c.try_wait().unwrap().is_some()
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.nexts()
    }

    /// From spawning the process to its first `next` request: the init phase.
    pub fn init_time(&self) -> Option<Duration> {
        self.log.lock().unwrap().first_next.map(|t| t - self.started)
    }

    /// From spawning the process to the first answer.
    pub fn first_answer_time(&self) -> Option<Duration> {
        self.log.lock().unwrap().answered.first().map(|t| *t - self.started)
    }

    /// The peak resident set of the running process (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> Option<i64> {
        let pid = self.child.as_ref()?.id();
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()?
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
    }

    pub fn init_errors(&self) -> Vec<Value> {
        self.log.lock().unwrap().init_errors.clone()
    }

    /// Stops the process (if it still runs) and returns its exit status (None: it was killed)
    /// and everything it printed, stdout then stderr.
    pub fn finish(mut self, within: Duration) -> (Option<i32>, String) {
        let mut child = self.child.take().unwrap();
        let start = Instant::now();
        let mut status = None;
        while start.elapsed() < within {
            if let Some(s) = child.try_wait().unwrap() {
                status = s.code();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if status.is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (status, text)
    }
}

/// Asserts that the function's output (`finish`) logs `clients ready` exactly once, within the
/// first invocation's request span, with the set-up time; returns that log line.
pub fn assert_clients_built_once(out: &str) -> Value {
    let ready: Vec<&str> = out.lines().filter(|l| l.contains("clients ready")).collect();
    assert_eq!(ready.len(), 1, "built once, by the first invocation: {out}");
    let line: Value = serde_json::from_str(ready[0]).unwrap();
    assert!(line["fields"]["setup_ms"].as_f64().is_some(), "{line}");
    assert_eq!(line["span"]["requestId"], "req-0", "{line}");
    line
}

/// Asserts that an answer is a handled invocation that could not read its event: answered with
/// `"class": "invalid_input"` and the error, not a Lambda error (which an asynchronous
/// invocation would retry, to fail the same way).
pub fn assert_invalid_event(answer: &Answer) {
    let Answer::Response(resp) = answer else {
        panic!("expected a handled invocation: {answer:?}")
    };
    assert_eq!(resp["class"], "invalid_input", "{resp}");
    assert!(resp["error"].as_str().unwrap().contains("event"), "{resp}");
}

impl Drop for Function {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn serve(listener: TcpListener, events: Vec<Value>, log: Arc<Mutex<Log>>) {
    let events = Arc::new(Mutex::new(events.into_iter().enumerate()));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { return };
        let (events, log) = (events.clone(), log.clone());
        // A connection per thread: the runtime keeps connections alive between requests.
        std::thread::spawn(move || {
            let mut conn = conn;
            while let Some((method, path, body)) = read_request(&conn) {
                if method == "GET" && path.ends_with("/runtime/invocation/next") {
                    {
                        let mut l = log.lock().unwrap();
                        l.nexts += 1;
                        l.first_next.get_or_insert_with(Instant::now);
                    }
                    let next = events.lock().unwrap().next();
                    let Some((i, event)) = next else {
                        // No more events: Lambda would freeze the process here.
                        std::thread::sleep(Duration::from_secs(3600));
                        return;
                    };
                    let body = event.to_string();
                    let deadline = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis()
                        + 60_000;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nlambda-runtime-aws-request-id: req-{i}\r\n\
                         lambda-runtime-deadline-ms: {deadline}\r\n\
                         lambda-runtime-invoked-function-arn: arn:aws:lambda:eu-west-1:123456789012:function:cellbridge-test\r\n\
                         lambda-runtime-trace-id: Root=1-00000000-000000000000000000000000\r\n\
                         content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if conn.write_all(head.as_bytes()).is_err() {
                        return;
                    }
                    continue;
                }
                let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                {
                    let mut l = log.lock().unwrap();
                    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
                    match parts.as_slice() {
                        [_, "runtime", "init", "error"] => l.init_errors.push(value),
                        [_, "runtime", "invocation", id, "response"] => {
                            l.answered.push(Instant::now());
                            l.answers.push((id.to_string(), Answer::Response(value)))
                        }
                        [_, "runtime", "invocation", id, "error"] => {
                            l.answered.push(Instant::now());
                            l.answers.push((id.to_string(), Answer::Error(value)))
                        }
                        _ => {}
                    }
                }
                if conn
                    .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\n{}")
                    .is_err()
                {
                    return;
                }
            }
        });
    }
}

/// One HTTP/1.1 request: method, path, body (None when the connection closed).
fn read_request(conn: &TcpStream) -> Option<(String, String, Vec<u8>)> {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut it = line.split_whitespace();
    let (method, path) = (it.next()?.to_owned(), it.next()?.to_owned());
    let mut len = 0;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        if h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some((method, path, body))
}
