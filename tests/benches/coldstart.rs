//! Cold start: from process start to the function's first request to the Lambda Runtime API
//! (`GET /2018-06-01/runtime/invocation/next`), served here on 127.0.0.1. The peer is a
//! hello-world `lambda_runtime` binary built with the same profile in the same run.
//!
//! Run through `make bench`, which builds the binaries first with `--profile bench`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cellbridge_tests::runtime_api::{Answer, Function};
use serde_json::{Value, json};

const RUNS: usize = 31;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = bin_dir();
    println!("== Cold start (median of {RUNS}, the binaries taking turns) ==");
    println!("init: process start to the first Runtime API request (`next`), what Lambda reports as Init Duration");
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
    // What the Terraform module sets; nothing is fetched for these events, so no server is needed.
    let env = [
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "bench"),
        ("AWS_SECRET_ACCESS_KEY", "bench"),
        ("CELLBRIDGE_FLEET_REPO", "acme/fleet"),
        ("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github"),
        ("CELLBRIDGE_STATE_BUCKET", "acme-tfstate"),
        ("CELLBRIDGE_FLUX_GIT_URL", "ssh://git@github.com/acme/fleet"),
        ("CELLBRIDGE_FLUX_GIT_SECRET", "cellbridge/flux-git"),
    ];
    let mut f = Function::start(bin, &env, vec![event.clone()]);
    let answers = f.wait_for_answers(1, Duration::from_secs(10));
    let (init, answered, peak) = (f.init_time(), f.first_answer_time(), f.peak_rss_kib());
    let (_, out) = f.finish(Duration::ZERO);
    match (init, answered, answers.first()) {
        (Some(init), Some(answered), Some((_, Answer::Response(_)))) => Run(init, answered, peak.unwrap_or(0)),
        _ => panic!("{}: no answer to {event}: {answers:?}\n{out}", bin.display()),
    }
}
