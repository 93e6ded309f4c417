//! State extraction on a large Terraform-written state: cellbridge's streaming reader next to
//! `terraform output -json`, each in its own process, time and peak memory (ru_maxrss).
//!
//! The state is written by the real `terraform` binary (filler `terraform_data` resources) and
//! cached under target/bench-data/ so reruns skip the slow apply.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TARGET_MB: u64 = 50;
const RUNS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--child-read-state" {
        // The measured side: exactly what state-sync does with a state, in a fresh process.
        let s = cellbridge::pure::tfstate::read_state_file(Path::new(&args[2])).expect("state reads");
        let m = cellbridge::pure::metadata::from_state(&s).expect("contract holds");
        println!("{} keys, serial {}", m.data.len(), s.serial);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and test harness probes
    }
    println!("== State extraction: {TARGET_MB} MB Terraform-written state ==");
    let Some(terraform) = which("terraform") else {
        println!("SKIPPED: terraform is not installed; it both writes the state and is the peer measured against.");
        return;
    };
    let state = big_state(&terraform);
    let size = std::fs::metadata(&state).unwrap().len();
    println!("state file: {} ({:.1} MB)", state.display(), size as f64 / 1e6);

    let me = std::env::current_exe().unwrap();
    let ours = measure(|| {
        let mut c = Command::new(&me);
        c.arg("--child-read-state").arg(&state);
        c
    });
    let theirs = measure(|| {
        let mut c = Command::new(&terraform);
        c.args(["output", "-json", "-no-color"])
            .arg(format!("-state={}", state.display()));
        c
    });
    println!("{:<38} {:>12} {:>14}", "", "median time", "peak memory");
    println!(
        "{:<38} {:>10.0}ms {:>11.1} MB",
        "cellbridge (streaming reader)",
        ms(ours.0),
        ours.1 as f64 / 1024.0
    );
    println!(
        "{:<38} {:>10.0}ms {:>11.1} MB",
        "terraform output -json -state=FILE",
        ms(theirs.0),
        theirs.1 as f64 / 1024.0
    );
    println!(
        "ratio: {:.1}x faster, {:.1}% of terraform's peak memory (goals: >= 10x faster, <= 10%; peak under 32 MB: {})",
        ms(theirs.0) / ms(ours.0),
        100.0 * ours.1 as f64 / theirs.1 as f64,
        if ours.1 < 32 * 1024 { "yes" } else { "NO" }
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median wall time and the highest peak RSS (KiB) over RUNS runs of a child process.
fn measure(cmd: impl Fn() -> Command) -> (Duration, i64) {
    let mut times = Vec::new();
    let mut peak = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        // terraform complains on stderr about a missing ~/.terraformrc; only the numbers matter.
        // Reaped by rusage::wait (wait4), which std's Child::wait cannot replace.
        #[allow(clippy::zombie_processes)]
        let child = cmd()
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let usage = cellbridge_tests::rusage::wait(&child);
        times.push(start.elapsed());
        assert!(usage.status.success(), "child failed: {}", usage.status);
        peak = peak.max(usage.max_rss_kb);
    }
    times.sort();
    (times[RUNS / 2], peak)
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn big_state(terraform: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let dir = root.join("target/bench-data");
    let state = dir.join(format!("state-{TARGET_MB}mb.tfstate"));
    if state.exists() {
        return state;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::copy(
        root.join("tests/fixtures/terraform/cell/main.tf"),
        work.path().join("main.tf"),
    )
    .unwrap();
    // 500 resources of ~100 KB of attributes each: Terraform stores `input` and `output`, so
    // every resource weighs about twice its padding.
    let per = 50 * 1024;
    let count = (TARGET_MB * 1_000_000 / (2 * per)) as usize;
    println!("writing the state with terraform ({count} resources; cached for later runs)...");
    let run = |args: &[&str]| {
        let ok = Command::new(terraform)
            .args(args)
            .current_dir(work.path())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "terraform {args:?} failed");
    };
    run(&["init", "-input=false", "-no-color"]);
    let vars = root.join("tests/fixtures/terraform/cases/prod-eu-west-1.cell.tfvars.json");
    run(&[
        "apply",
        "-input=false",
        "-no-color",
        "-auto-approve",
        "-parallelism=50",
        &format!("-var-file={}", vars.display()),
        &format!("-var=padding={count}"),
        &format!("-var=padding_bytes={per}"),
        &format!("-state={}", state.display()),
    ]);
    state
}
