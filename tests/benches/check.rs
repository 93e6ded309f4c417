//! `cargo bench -p cellbridge-tests --bench check`: `cellbridge check` (the strict substitution
//! check) over the fleet bench's 1,000-cell fleet, today's CLI against the CLI at [`BASELINE`],
//! the check as it was before its Flux-exactness rework, both run on the same files in the same
//! run. Goal: at most [`GOAL`] times the baseline's CPU time and peak memory.
//!
//! The fleet is `fleetgen`'s, read where the fleet bench keeps it (`target/bench-data/`) rather
//! than copied to a temporary directory: it is already plain files, and the check writes nothing.
//!
//! Both binaries are built here with the bench profile, by the same command
//! (`cargo build --profile bench -p cellbridge-cli`, the CLI's features alone, as it ships):
//! - today's in this workspace's target directory (CARGO_TARGET_DIR if set), where `make bench`
//!   has already built it;
//! - the baseline in a git worktree of that revision, `target/bench-baseline/<rev>/`, with a
//!   target directory of its own beside it, `target/bench-baseline/target/`. Both are under the
//!   workspace root whatever CARGO_TARGET_DIR says: the baseline's cache belongs to the checkout
//!   that compares against it, and a second run finds it there and rebuilds nothing. A worktree
//!   at another commit, with local changes, or that git no longer knows as one is removed and
//!   added again; the build cache beside it survives that.
//!
//! Without git or the revision (a tarball, a shallow clone) or when the baseline does not build,
//! the baseline is `SKIPPED` with the reason and today's figures are still printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cellbridge_tests::fleetgen;
use cellbridge_tests::process::repo_root;
use cellbridge_tests::rusage;
use serde_json::Value;

/// The commit before the check's Flux-exactness work began.
const BASELINE: &str = "43db4e1";
/// The fleet bench's largest fleet.
const CELLS: usize = 1000;
/// Timed runs of each binary; each figure is their median.
const REPEATS: usize = 3;
/// Today's CPU time and peak RSS, each at most this many times the baseline's.
const GOAL: f64 = 2.0;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and test harness probes
    }
    println!("== Strict check: `cellbridge check` over the fleet bench's 1,000-cell fleet ==");
    let t = Instant::now();
    let fleet = fleetgen::fleet(CELLS);
    println!(
        "fleet: {} cells, {} files, {:.1} MB at {} (generated or reused in {:.1} s)",
        fleet.cells.len(),
        fleet.files,
        fleet.bytes as f64 / 1e6,
        shown(&fleet.root),
        t.elapsed().as_secs_f64()
    );
    let now = match build_now() {
        Ok(bin) => bin,
        Err(e) => fail(&format!("today's CLI did not build: {e}")),
    };
    println!("now: {}", shown(&now));
    println!(
        "before ({BASELINE}): a worktree at {} built into {} (the first run builds it: several minutes)",
        shown(&baseline_dir().join(BASELINE)),
        shown(&baseline_dir().join("target"))
    );
    let baseline = build_baseline();
    match &baseline {
        Ok(bin) => println!("before ({BASELINE}): {}", shown(bin)),
        Err(e) => println!("before ({BASELINE}): SKIPPED: {e}"),
    }

    let mut subjects = vec![("now".to_owned(), now)];
    if let Ok(bin) = &baseline {
        subjects.push((format!("before ({BASELINE})"), bin.clone()));
    }
    // One untimed run each, so that neither pays alone for a cold page cache; then the binaries
    // take turns, so that a change in the machine's load touches both alike.
    for (_, bin) in &subjects {
        run_once(bin, &fleet.root);
    }
    let mut runs: Vec<Vec<Run>> = subjects.iter().map(|_| Vec::new()).collect();
    for _ in 0..REPEATS {
        for (i, (_, bin)) in subjects.iter().enumerate() {
            runs[i].push(run_once(bin, &fleet.root));
        }
    }
    println!(
        "each row: {REPEATS} runs of `cellbridge --output json check --fleet <fleet>`, each in a fresh process, the binaries taking turns after one untimed run each; the median wall time, CPU (user + system) and peak RSS (wait4's ru_maxrss); the exit code and what the JSON report holds"
    );
    println!(
        "{:<18} {:>8} {:>8} {:>10}  {:<6} {:>6} {:>9}",
        "", "wall", "CPU", "peak RSS", "exit", "cells", "findings"
    );
    let figures: Vec<Figures> = runs.iter().map(|r| Figures::of(r)).collect();
    for ((label, _), f) in subjects.iter().zip(&figures) {
        println!(
            "{label:<18} {:>6.2} s {:>6.2} s {:>7.1} MB  {:<6} {:>6} {:>9}",
            f.wall.as_secs_f64(),
            f.cpu.as_secs_f64(),
            f.rss_mb,
            f.exit,
            f.cells,
            f.findings
        );
    }
    let now = &figures[0];
    if let Err(e) = &now.checked {
        fail(&format!("today's check did not check the fleet: {e}"));
    }
    let Some(before) = figures.get(1) else {
        println!(
            "check, 1,000 cells: now {:.2} s CPU / {:.1} MB peak RSS; before ({BASELINE}) SKIPPED: {}; goal (<= {GOAL}× the baseline) not checked",
            now.cpu.as_secs_f64(),
            now.rss_mb,
            baseline.err().unwrap_or_default()
        );
        return;
    };
    if let Err(e) = &before.checked {
        println!(
            "check, 1,000 cells: now {:.2} s CPU / {:.1} MB peak RSS; before ({BASELINE}) SKIPPED: it did not check the fleet: {e}; goal (<= {GOAL}× the baseline) not checked",
            now.cpu.as_secs_f64(),
            now.rss_mb,
        );
        return;
    }
    // Wall time is shown, not held to the goal: the check is single-threaded, so CPU time is its
    // own cost, and the rest of wall time is this shared 2-core machine's other work.
    let cpu = now.cpu.as_secs_f64() / before.cpu.as_secs_f64();
    let rss = now.rss_mb / before.rss_mb;
    let ok = cpu <= GOAL && rss <= GOAL;
    println!(
        "check, 1,000 cells: now {:.2} s CPU / {:.1} MB peak RSS; before ({BASELINE}) {:.2} s / {:.1} MB; ratio {cpu:.2}× / {rss:.2}× (goal <= {GOAL}×): {}; wall {:.2} s / {:.2} s, {:.2}×",
        now.cpu.as_secs_f64(),
        now.rss_mb,
        before.cpu.as_secs_f64(),
        before.rss_mb,
        if ok { "ok" } else { "OVER" },
        now.wall.as_secs_f64(),
        before.wall.as_secs_f64(),
        now.wall.as_secs_f64() / before.wall.as_secs_f64()
    );
    if !ok {
        println!(
            "BUDGET CHECK FAILED: the check over 1,000 cells takes {cpu:.2}× the CPU time and {rss:.2}× the peak memory of the check at {BASELINE} (goal: at most {GOAL}× each)"
        );
        std::process::exit(1);
    }
}

/// Ends the bench as failed: `tests/bench/run.sh` reports it after the whole report.
fn fail(why: &str) -> ! {
    println!("FAILED: {why}");
    std::process::exit(1);
}

/// What the check printed, as far as the bench needs it.
struct Report {
    cells: usize,
    findings: usize,
}

/// One run of one binary.
struct Run {
    wall: Duration,
    usage: rusage::Usage,
    report: Option<Report>,
    stderr: String,
}

fn run_once(bin: &Path, fleet: &Path) -> Run {
    let out = tempfile::NamedTempFile::new().unwrap();
    let err = tempfile::NamedTempFile::new().unwrap();
    let start = Instant::now();
    // Reaped by rusage::wait (wait4), which std's Child::wait cannot replace.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(bin)
        .args(["--output", "json", "check", "--fleet"])
        .arg(fleet)
        // A RUST_LOG of the caller's would have one binary log more than the other.
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
        .stderr(err.reopen().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    let usage = rusage::wait(&child);
    let wall = start.elapsed();
    Run {
        wall,
        usage,
        report: report(&std::fs::read_to_string(out.path()).unwrap_or_default()),
        stderr: std::fs::read_to_string(err.path()).unwrap_or_default(),
    }
}

/// Cells and findings from the check's JSON report (`--output json`: `{"passed", "cells": [{
/// "cell", "findings": [...], ...}]}`, the same at both revisions). Counted from the report rather
/// than the text lines, whose wording the check's rework may change; and the report is looked for
/// at each line that opens an object rather than taken to be all of stdout, so that a line
/// printed before or after it does not lose the count.
fn report(stdout: &str) -> Option<Report> {
    let starts = std::iter::once(0).chain(stdout.match_indices('\n').map(|(i, _)| i + 1));
    starts.filter(|&i| stdout[i..].starts_with('{')).find_map(|i| {
        let v: Value = serde_json::Deserializer::from_str(&stdout[i..])
            .into_iter()
            .next()?
            .ok()?;
        let cells = v["cells"].as_array()?;
        Some(Report {
            cells: cells.len(),
            findings: cells.iter().map(|c| c["findings"].as_array().map_or(0, Vec::len)).sum(),
        })
    })
}

/// One binary's medians, and what its runs said.
struct Figures {
    wall: Duration,
    cpu: Duration,
    rss_mb: f64,
    /// The runs' exit codes, cells and findings, `a/b` where they differ.
    exit: String,
    cells: String,
    findings: String,
    /// Exit 1 is the check's verdict (findings); any other failure, or no report, means the run
    /// did not check the fleet, and its figures are not the check's.
    checked: Result<(), String>,
}

impl Figures {
    fn of(runs: &[Run]) -> Figures {
        let median = |f: &dyn Fn(&Run) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let seen = |f: &dyn Fn(&Run) -> String| {
            let mut v: Vec<String> = runs.iter().map(f).collect();
            v.dedup();
            v.join("/")
        };
        let count = |f: fn(&Report) -> usize| seen(&|r| r.report.as_ref().map_or("-".to_owned(), |x| f(x).to_string()));
        let exit = |r: &Run| {
            r.usage
                .status
                .code()
                .map_or(r.usage.status.to_string(), |c| c.to_string())
        };
        let checked = match runs
            .iter()
            .find(|r| r.report.is_none() || !matches!(r.usage.status.code(), Some(0 | 1)))
        {
            None => Ok(()),
            Some(r) => {
                let lines: Vec<&str> = r.stderr.trim().lines().collect();
                let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
                Err(format!(
                    "exit {}, {}; stderr: {}",
                    exit(r),
                    if r.report.is_some() {
                        "a JSON report"
                    } else {
                        "no JSON report"
                    },
                    if tail.is_empty() { "nothing" } else { &tail }
                ))
            }
        };
        Figures {
            wall: Duration::from_secs_f64(median(&|r| r.wall.as_secs_f64())),
            cpu: Duration::from_secs_f64(median(&|r| r.usage.cpu.as_secs_f64())),
            rss_mb: median(&|r| r.usage.max_rss_mb()),
            exit: seen(&exit),
            cells: count(|x| x.cells),
            findings: count(|x| x.findings),
            checked,
        }
    }
}

/// `path` as the report shows it: from the workspace root when it is under it, as in docs/strict-check.md.
fn shown(path: &Path) -> String {
    path.strip_prefix(repo_root()).unwrap_or(path).display().to_string()
}

fn baseline_dir() -> PathBuf {
    repo_root().join("target/bench-baseline")
}

/// `cargo build --profile bench -p cellbridge-cli` in `dir`, into `target_dir` if given (else the
/// caller's); cargo's progress and errors go to `log`. The binary's path, as cargo reports it.
fn build_cli(dir: &Path, target_dir: Option<&Path>, locked: bool, log: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--profile",
        "bench",
        "-p",
        "cellbridge-cli",
        "--message-format=json-render-diagnostics",
    ])
    .current_dir(dir)
    .stdin(Stdio::null())
    .stderr(std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?);
    if locked {
        cmd.arg("--locked");
    }
    if let Some(t) = target_dir {
        cmd.env("CARGO_TARGET_DIR", t);
    }
    let out = cmd.output().map_err(|e| format!("running cargo: {e}"))?;
    let exe = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "cellbridge")
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .next_back();
    match exe {
        Some(exe) if out.status.success() => Ok(exe),
        _ => {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            Err(format!(
                "cargo build ({}) failed; the end of {}: {}",
                out.status,
                log.display(),
                lines[lines.len().saturating_sub(5)..].join(" | ")
            ))
        }
    }
}

fn build_now() -> Result<PathBuf, String> {
    let log = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    build_cli(&repo_root(), None, false, log.path())
}

/// The CLI at [`BASELINE`], built (or found built) in its worktree.
fn build_baseline() -> Result<PathBuf, String> {
    let tree = baseline_tree()?;
    let dir = baseline_dir();
    // The revision's own Cargo.lock, as it was tested; the worktree stays as git checked it out.
    build_cli(&tree, Some(&dir.join("target")), true, &dir.join("build.log"))
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git is not available ({e})"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "git {} ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The worktree of [`BASELINE`], added again unless it is a clean checkout of that commit.
fn baseline_tree() -> Result<PathBuf, String> {
    let root = repo_root();
    git(&root, &["rev-parse", "--git-dir"]).map_err(|e| format!("{} is not a git checkout: {e}", root.display()))?;
    let sha = git(
        &root,
        &["rev-parse", "--verify", "--quiet", &format!("{BASELINE}^{{commit}}")],
    )
    .map_err(|_| format!("revision {BASELINE} is not in this checkout's history (a shallow clone?)"))?;
    let tree = baseline_dir().join(BASELINE);
    // Inside this checkout, git in a broken worktree answers for the checkout around it: the
    // top level shows whose answer it is.
    let fresh = || -> Result<bool, String> {
        let top = PathBuf::from(git(&tree, &["rev-parse", "--show-toplevel"])?);
        Ok(top.canonicalize().ok() == tree.canonicalize().ok()
            && git(&tree, &["rev-parse", "HEAD"])? == sha
            && git(&tree, &["status", "--porcelain"])?.is_empty())
    };
    if tree.is_dir() && fresh().unwrap_or(false) {
        return Ok(tree);
    }
    let path = tree.to_str().ok_or("the worktree's path is not UTF-8")?;
    if tree.exists() {
        println!(
            "before ({BASELINE}): {} is not a clean checkout of {sha}: adding it again",
            shown(&tree)
        );
        let _ = git(&root, &["worktree", "remove", "--force", path]);
        if tree.exists() {
            std::fs::remove_dir_all(&tree).map_err(|e| format!("removing {path}: {e}"))?;
        }
    }
    // Forgets a worktree whose directory is gone, which `worktree add` would refuse.
    git(&root, &["worktree", "prune"])?;
    git(&root, &["worktree", "add", "--detach", "--quiet", path, &sha])?;
    Ok(tree)
}
