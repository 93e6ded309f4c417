//! Requests and time to bootstrap the Flux-sized set (tests/fixtures/flux) against the fake
//! Kubernetes API server, next to `kubectl apply --server-side` of the same files against the
//! same server, each from a freshly reset server (cold discovery, no CRDs).
//!
//! kubectl's sequence is what a person would type: apply gotk-components.yaml, `kubectl wait`
//! for the CRDs to be Established, apply the Git secret and gotk-sync.yaml. kubectl runs with
//! `--validate=false` because the fake serves no OpenAPI document.
//!
//! Run: `cargo bench -p cellbridge-tests --bench bootstrap` (ITERATIONS=N to change the count).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cellbridge::pure::fleet::LocalFleet;
use cellbridge::pure::template::{SyncSource, render_gotk_sync};
use cellbridge::{
    ports::cluster::kube::Tuning, rules::bootstrap::Bootstrapper, rules::bootstrap::Request, rules::bootstrap::Target,
    rules::bootstrap::config::Settings, rules::bootstrap::report::BootstrapOutcome,
};
use cellbridge_tests::kube::{KubeFake, ssh_keypair};
use cellbridge_tests::{moto, process::repo_root};
use serde_json::{Value, json};

const KNOWN_HOSTS: &str = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

struct Sample {
    requests: usize,
    writes: usize,
    elapsed: Duration,
}

fn counts(kube: &KubeFake) -> (usize, usize) {
    let reqs = kube.requests();
    let writes = reqs
        .iter()
        .filter(|r| matches!(r["method"].as_str(), Some("PATCH" | "POST" | "PUT" | "DELETE")))
        .count();
    (reqs.len(), writes)
}

fn median(mut v: Vec<Sample>) -> Sample {
    v.sort_by_key(|s| s.elapsed);
    v.swap_remove(v.len() / 2)
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let iterations: usize = std::env::var("ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    cellbridge::shell::telemetry::install_crypto_provider();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet_dir = repo_root().join("tests/fixtures/flux/fleet");
    let components = fleet_dir.join("clusters/_template/flux-system/gotk-components.yaml");
    let size_kb = std::fs::metadata(&components).unwrap().len() / 1024;
    let fleet = LocalFleet::open(&fleet_dir).unwrap();
    let kube = KubeFake::start();
    let kubeconfig = kube.kubeconfig();

    // The Git secret in Secrets Manager (moto), as the function reads it.
    let (private, public) = ssh_keypair();
    let secret_json = json!({"identity": private, "identity.pub": public, "known_hosts": KNOWN_HOSTS});
    let aws = rt.block_on(moto::sdk_config());
    rt.block_on(async {
        let sm = aws_sdk_secretsmanager::Client::new(&aws);
        let _ = sm
            .create_secret()
            .name("bench-flux-git")
            .secret_string(secret_json.to_string())
            .send()
            .await;
    });
    let source = SyncSource {
        url: "ssh://git@github.com/acme/fleet".into(),
        branch: "main".into(),
    };
    let settings = Settings {
        flux_git_url: Some(source.url.clone()),
        flux_git_branch: Some(source.branch.clone()),
        flux_git_secret: Some("bench-flux-git".into()),
        cluster_wait: Duration::from_secs(10),
        cluster_poll: Duration::from_secs(1),
        access_principal_arn: None,
        account_roles: Default::default(),
        confirm: Default::default(),
        // No source-controller answers here: one look at the GitRepository, no waiting.
        tuning: Tuning {
            ready_timeout: Duration::ZERO,
            ..Tuning::default()
        },
    };
    let req = Request {
        cluster: "bench".into(),
        region: "eu-west-1".into(),
        cell: Some("bench".into()),
        account: None,
        force: false,
        dry_run: false,
    };
    let bootstrapper = Bootstrapper::new(aws.clone(), settings);

    let mut ours = Vec::new();
    let mut rechecks = Vec::new();
    let mut objects = 0;
    for _ in 0..iterations {
        kube.control("POST", "/_fake/reset", None);
        let start = Instant::now();
        let report = rt
            .block_on(bootstrapper.run(&fleet, &req, Target::Kubeconfig(&kubeconfig)))
            .expect("bootstrap");
        let elapsed = start.elapsed();
        assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
        objects = report.objects.len();
        let (requests, writes) = counts(&kube);
        ours.push(Sample {
            requests,
            writes,
            elapsed,
        });
        // The confirmation's re-check the run queued (no controller reports Available here:
        // still confirming), made as the function makes it, from its message alone.
        let (next, _) = report.recheck.clone().expect("a re-check queued");
        kube.clear_requests();
        let start = Instant::now();
        let checked = rt
            .block_on(bootstrapper.recheck(&next, Target::Kubeconfig(&kubeconfig), None))
            .expect("re-check");
        let elapsed = start.elapsed();
        assert_eq!(checked.outcome, BootstrapOutcome::Checked);
        let (requests, writes) = counts(&kube);
        rechecks.push(Sample {
            requests,
            writes,
            elapsed,
        });
    }
    let ours = median(ours);
    let recheck = median(rechecks);

    let theirs = if kubectl_available() {
        let dir = tempfile::tempdir().unwrap();
        let sync = dir.path().join("gotk-sync.yaml");
        std::fs::write(&sync, render_gotk_sync("bench", &source)).unwrap();
        let secret = dir.path().join("secret.yaml");
        let data: serde_json::Map<String, Value> = secret_json.as_object().unwrap().clone();
        let secret_obj = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "flux-system", "namespace": "flux-system"}, "stringData": data});
        std::fs::write(&secret, secret_obj.to_string()).unwrap();
        let mut samples = Vec::new();
        for i in 0..iterations {
            kube.control("POST", "/_fake/reset", None);
            let cache = dir.path().join(format!("cache-{i}"));
            let start = Instant::now();
            let c = components.to_str().unwrap();
            kubectl(
                &kubeconfig,
                &cache,
                &["apply", "--server-side", "--validate=false", "-f", c],
            );
            kubectl(
                &kubeconfig,
                &cache,
                &["wait", "--for=condition=established", "crd", "--all", "--timeout=60s"],
            );
            kubectl(
                &kubeconfig,
                &cache,
                &[
                    "apply",
                    "--server-side",
                    "--validate=false",
                    "-f",
                    secret.to_str().unwrap(),
                    "-f",
                    sync.to_str().unwrap(),
                ],
            );
            let elapsed = start.elapsed();
            let (requests, writes) = counts(&kube);
            samples.push(Sample {
                requests,
                writes,
                elapsed,
            });
        }
        Some(median(samples))
    } else {
        None
    };

    println!(
        "Bootstrap of the Flux-sized set ({objects} objects, gotk-components.yaml {size_kb} KB) against tests/fakes/kube_fake.py over TLS, median of {iterations}:"
    );
    println!("  {:<44} {:>8} {:>7} {:>10}", "", "requests", "writes", "time");
    println!(
        "  {:<44} {:>8} {:>7} {:>8}ms",
        "cellbridge bootstrap (server-side apply)",
        ours.requests,
        ours.writes,
        ours.elapsed.as_millis()
    );
    println!(
        "  {:<44} {:>8} {:>7} {:>8}ms",
        "a confirmation's re-check (one look)",
        recheck.requests,
        recheck.writes,
        recheck.elapsed.as_millis()
    );
    match theirs {
        Some(t) => {
            println!(
                "  {:<44} {:>8} {:>7} {:>8}ms",
                "kubectl apply --server-side + kubectl wait",
                t.requests,
                t.writes,
                t.elapsed.as_millis()
            );
            println!(
                "  ratio cellbridge/kubectl: requests {:.2}, time {:.2}",
                ours.requests as f64 / t.requests as f64,
                ours.elapsed.as_secs_f64() / t.elapsed.as_secs_f64()
            );
        }
        None => println!("  kubectl: skipped (no kubectl on PATH)"),
    }
    println!("  (cellbridge's time includes reading the Git secret from Secrets Manager and validating it;");
    println!("   on EKS a re-check adds DescribeCluster, its own access entry (Create, Associate, Delete),");
    println!("   TagResource and, while still confirming, one SendMessageBatch; no GitHub request)");
}
