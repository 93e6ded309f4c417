//! cluster-bootstrap end to end: a changed Git credential is applied without `force`. The fake's
//! source-controller reads the GitRepository's Secret only when it reconciles it, and its Git
//! server takes one key only (`accepts`); the Flux Git secret lives in moto's Secrets Manager. A
//! re-check that finds the key refused compares Secrets Manager's credentials with the Secret the
//! cluster holds: unchanged, nothing is written; changed, that Secret alone is applied again, the
//! GitRepository asked to reconcile (`reconcile.fluxcd.io/requestedAt`), and once
//! `status.lastHandledReconcileAt` shows it, the cluster reads `ready`.

use crate::support::*;
use cellbridge::pure::bootstrap::confirm::Outcome;
use cellbridge::rules::bootstrap::Bootstrapper;
use cellbridge::rules::bootstrap::rekey::GitSecretAction;
use cellbridge::rules::bootstrap::report::BootstrapOutcome;
use cellbridge_tests::kube::{KubeFake, ssh_keypair};
use cellbridge_tests::leak;
use serde_json::{Value, json};
use std::io::Write as _;
use std::time::{Duration, Instant};

/// The hex SHA-256 of `value`, as the fake's `accepts` compares it (no value goes to the fake).
fn sha256(value: &str) -> String {
    let mut child = std::process::Command::new(cellbridge_tests::process::python())
        .args([
            "-c",
            "import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(value.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// What a cluster whose Flux took over shows but for its source: the controllers Available, the
/// Kustomization Ready having applied the revision the fake's source-controller fetches
/// (kustomize-controller v1.7 `docs/spec/v1/kustomizations.md`, "Ready Kustomization").
fn all_but_the_source_works(kube: &KubeFake) {
    const REVISION: &str = "main@sha1:0123456789abcdef0123456789abcdef01234567";
    kube.nodes(2);
    for d in kube.objects(Some("Deployment")) {
        let name = d["metadata"]["name"].as_str().unwrap().to_owned();
        kube.set_status(
            "apps/v1",
            "Deployment",
            Some("flux-system"),
            &name,
            json!({"observedGeneration": 1, "replicas": 1,
                   "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                                   "message": "Deployment has minimum availability.",
                                   "lastTransitionTime": "2025-01-20T10:00:00Z", "lastUpdateTime": "2025-01-20T10:00:00Z"}]}),
        );
    }
    let generation = flux_object(kube, "Kustomization")["metadata"]["generation"].clone();
    kube.set_status(
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        Some("flux-system"),
        "flux-system",
        json!({"observedGeneration": generation, "lastAppliedRevision": REVISION,
               "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                               "message": format!("Applied revision: {REVISION}"),
                               "observedGeneration": generation, "lastTransitionTime": "2025-01-20T10:01:00Z"}]}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_secret_changed_in_secrets_manager_is_applied_by_the_next_re_check_and_an_unchanged_one_is_not() {
    let bed = Bed::new("eks-rekey", &[("cellbridge.dev/cell", "staging-us")], None).await;
    // The corrected key, and the Git server accepting only it.
    let (private, public) = ssh_keypair();
    leak::secret("bootstrap: the corrected SSH identity", &private);
    bed.kube.control(
        "POST",
        "/_fake/auto-ready",
        Some(json!({"delay": 0.1, "accepts": {"key": "identity", "sha256": sha256(&private)}})),
    );
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    all_but_the_source_works(&bed.kube);
    let (first, _) = report
        .recheck
        .clone()
        .expect("still confirming: a re-check is handed on");
    assert_eq!(first.git_secret.as_deref(), Some("flux-system"));

    // The re-checks wait for source-controller's answer a few seconds at most.
    let mut settings = settings(&bed.secret);
    settings.confirm.poll = Duration::from_millis(100);
    settings.tuning.ready_timeout = Duration::from_secs(5);
    let checker = Bootstrapper::new(bed.aws.clone(), settings);
    let deadline = || Some(Instant::now() + Duration::from_secs(120));
    let refused = |r: &cellbridge::rules::bootstrap::report::Report| {
        let flux = r.flux.clone().unwrap();
        (
            flux.outcome == Outcome::GitAuth || flux.suspect == Some(Outcome::GitAuth),
            flux,
        )
    };

    // Unchanged: the key is refused, Secrets Manager holds the same one; nothing is written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    bed.kube.clear_requests();
    let again = checker
        .recheck(&first, cellbridge::rules::bootstrap::Target::Eks, deadline())
        .await
        .unwrap();
    leak::capture("re-check of eks-rekey", &serde_json::to_string(&again).unwrap());
    let (was_refused, flux) = refused(&again);
    assert!(was_refused, "{flux:?}");
    let check = flux.git_secret.clone().unwrap();
    assert_eq!(check.action, GitSecretAction::Unchanged, "{check:?}");
    assert!(
        flux.sentence.contains("put corrected credentials there"),
        "{}",
        flux.sentence
    );
    assert!(
        bed.writes().is_empty(),
        "unchanged: nothing written: {:?}",
        bed.writes()
    );

    // The corrected key put in Secrets Manager: the next re-check applies it, and Flux takes over.
    let sm = aws_sdk_secretsmanager::Client::new(&bed.aws);
    let value = json!({"identity": private, "identity.pub": public, "known_hosts": KNOWN_HOSTS});
    sm.put_secret_value()
        .secret_id(&bed.secret)
        .secret_string(value.to_string())
        .send()
        .await
        .unwrap();
    let (next, _) = again.recheck.clone().unwrap();
    let before = flux_object(&bed.kube, "GitRepository");
    bed.kube.clear_requests();
    let fixed = checker
        .recheck(&next, cellbridge::rules::bootstrap::Target::Eks, deadline())
        .await
        .unwrap();
    let text = serde_json::to_string(&fixed).unwrap();
    leak::capture("re-check of eks-rekey", &text);
    assert!(!text.contains(&private), "no value in the report");
    let flux = fixed.flux.clone().unwrap();
    assert_eq!(flux.outcome, Outcome::Ready, "{flux:?}");
    let check = flux.git_secret.clone().unwrap();
    assert_eq!(
        (check.action, check.secret.as_str()),
        (GitSecretAction::Reapplied, "flux-system/flux-system")
    );
    assert!(
        flux.sentence.contains("changed since it was applied"),
        "{}",
        flux.sentence
    );
    // Written: that Secret (server-side apply), then the GitRepository's annotation alone (a
    // merge patch); nothing else, no `force` of the bootstrap's.
    let writes: Vec<(String, String)> = bed
        .writes()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                r["content_type"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        writes,
        [
            (
                "/api/v1/namespaces/flux-system/secrets/flux-system".to_owned(),
                "application/apply-patch+yaml".to_owned()
            ),
            (
                "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/flux-system".to_owned(),
                "application/merge-patch+json".to_owned()
            ),
        ]
    );
    let after = flux_object(&bed.kube, "GitRepository");
    assert_eq!(after["spec"], before["spec"], "Flux's own object: its spec untouched");
    let requested = after["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"].clone();
    assert!(requested.is_string(), "{after}");
    assert_eq!(after["status"]["lastHandledReconcileAt"], requested);
    let secret = flux_object(&bed.kube, "Secret");
    let held: Value = secret["data"]["identity"].clone();
    use base64::Engine as _;
    let held = base64::engine::general_purpose::STANDARD
        .decode(held.as_str().unwrap())
        .unwrap();
    assert_eq!(held, private.as_bytes(), "the cluster holds the corrected key");
    assert!(fixed.recheck.is_none(), "ready: nothing more queued");
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}
