//! cluster-bootstrap end to end: the apply over the fake Kubernetes API server. A new cluster is
//! bootstrapped in order from the template; a cell found in the fleet uses its own components and a
//! second run writes nothing; a run killed after the CRDs is completed by the next; force reapplies
//! everything; a kubeconfig target skips EKS (and a real cluster through `KUBECONFIG`, when set); new
//! kinds that reach discovery late are waited for; no secret value appears in any output; the
//! fixture is Flux-sized.

use crate::support::*;
use cellbridge::{
    ports::cluster::kube::Tuning, rules::bootstrap::Bootstrapper, rules::bootstrap::Phase, rules::bootstrap::Request,
    rules::bootstrap::Target, rules::bootstrap::config::Settings, rules::bootstrap::report::BootstrapOutcome,
    rules::bootstrap::report::Report,
};
use cellbridge_tests::kube::KubeFake;
use cellbridge_tests::moto;
use serde_json::json;
use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

fn kinds_in_order(report: &Report) -> Vec<String> {
    report.objects.iter().map(|o| o.target.kind.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_cluster_is_bootstrapped_in_order_from_the_template() {
    // Tagged for a cell whose pull request is not merged: the template's components are used.
    let bed = Bed::new("eks-new-order", &[("cellbridge.dev/cell", "staging-us")], None).await;
    let report = bed.run(&bed.request()).await.unwrap();

    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some("staging-us"));
    assert_eq!(
        report.components_file.as_deref(),
        Some("clusters/_template/flux-system/gotk-components.yaml")
    );
    assert_eq!(
        report.objects.len(),
        31 + 1 + 2,
        "31 components, the Git secret, 2 sync objects"
    );
    let phases: Vec<Phase> = report.objects.iter().map(|o| o.phase).collect();
    assert!(
        phases.windows(2).all(|w| w[0] <= w[1]),
        "phases out of order: {phases:?}"
    );
    let kinds = kinds_in_order(&report);
    assert_eq!(kinds[0], "Namespace");
    assert!(kinds[1..11].iter().all(|k| k == "CustomResourceDefinition"));
    assert_eq!(&kinds[kinds.len() - 3..], ["Secret", "GitRepository", "Kustomization"]);

    // What the API server saw: the same order, the CRDs Established (listed) before anything
    // else, and every write a server-side apply by `cellbridge`.
    let c = calls(&bed.kube);
    let patches: Vec<&String> = c.iter().filter(|(m, _)| m == "PATCH").map(|(_, p)| p).collect();
    assert_eq!(patches.len(), 34);
    assert_eq!(patches[0], "/api/v1/namespaces/flux-system");
    assert!(
        patches[1..11]
            .iter()
            .all(|p| p.starts_with("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"))
    );
    let first_list = c
        .iter()
        .position(|(m, p)| m == "GET" && p == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        .unwrap();
    let eleventh_patch = c
        .iter()
        .enumerate()
        .filter(|(_, (m, _))| m == "PATCH")
        .nth(11)
        .unwrap()
        .0;
    assert!(
        first_list < eleventh_patch,
        "CRDs must be waited for before the other components"
    );
    for r in bed.kube.requests().iter().filter(|r| r["method"] == "PATCH") {
        assert_eq!(r["content_type"], "application/apply-patch+yaml");
        assert!(r["query"].as_str().unwrap().contains("fieldManager=cellbridge"), "{r}");
    }

    // The Git secret and the sync objects as Flux needs them.
    let secrets = bed.kube.objects(Some("Secret"));
    let s = secrets.iter().find(|s| s["metadata"]["name"] == "flux-system").unwrap();
    let keys: BTreeSet<&str> = s["data"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["identity", "identity.pub", "known_hosts"]));
    use base64::Engine as _;
    let identity = base64::engine::general_purpose::STANDARD
        .decode(s["data"]["identity"].as_str().unwrap())
        .unwrap();
    assert_eq!(String::from_utf8(identity).unwrap().trim(), key().0.trim());
    let repo = &bed.kube.objects(Some("GitRepository"))[0];
    assert_eq!(repo["spec"]["url"], GIT_URL);
    assert_eq!(repo["spec"]["ref"]["branch"], "main");
    assert_eq!(repo["spec"]["secretRef"]["name"], "flux-system");
    let ks = &bed.kube.objects(Some("Kustomization"))[0];
    assert_eq!(ks["spec"]["path"], "./clusters/staging-us");
    // They are the template's own, unchanged but for the Kustomization's path.
    assert_eq!(
        report.sync_file.as_deref(),
        Some("clusters/_template/flux-system/gotk-sync.yaml (written for staging-us)")
    );
    let template_text =
        std::fs::read_to_string(fixture_fleet().join("clusters/_template/flux-system/gotk-sync.yaml")).unwrap();
    let template = cellbridge::pure::bootstrap::plan::parse_objects(&template_text, "gotk-sync.yaml").unwrap();
    assert_eq!(repo["spec"], template[0].1["spec"]);
    let mut ks_spec = template[1].1["spec"].clone();
    ks_spec["path"] = json!("./clusters/staging-us");
    assert_eq!(ks["spec"], ks_spec);

    // The first check: the fake's controllers never report Available, so Flux has not taken
    // over; the cluster says so on its tags, and the next check is due in 30 s.
    let flux = report.flux.as_ref().unwrap();
    assert_eq!(
        (flux.outcome.as_str(), flux.check, flux.recorded),
        ("confirming", 1, true),
        "{flux:?}"
    );
    assert_eq!(flux.next_check_secs, Some(30));
    let tags = cluster_tags(&bed.aws, &bed.cluster).await;
    assert_eq!(tags.get("cellbridge.dev/flux").map(String::as_str), Some("confirming"));
    assert_eq!(tags.get("cellbridge.dev/flux-since"), Some(&flux.since));
    let access = report.access_entry.as_ref().unwrap();
    assert_eq!(access.principal_arn, ROLE);
    assert!(access.temporary && access.removed);
    assert_eq!(
        access_log(&bed.cluster),
        ["CreateAccessEntry", "AssociateAccessPolicy", "DeleteAccessEntry"]
    );
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_found_in_the_fleet_uses_its_own_components_and_a_second_run_writes_nothing() {
    // No tag: the fleet's clusters/prod-eu/cell-metadata.yaml names cluster eks-prod-eu.
    let bed = Bed::new("eks-prod-eu", &[], None).await;
    let first = bed.run(&bed.request()).await.unwrap();
    assert_eq!(first.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(first.cell.as_deref(), Some("prod-eu"));
    assert_eq!(
        first.components_file.as_deref(),
        Some("clusters/prod-eu/flux-system/gotk-components.yaml")
    );

    bed.kube.clear_requests();
    let second = bed.run(&bed.request()).await.unwrap();
    assert_eq!(second.outcome, BootstrapOutcome::AlreadyBootstrapped);
    assert!(second.objects.is_empty());
    assert!(bed.writes().is_empty(), "second run wrote: {:?}", bed.writes());
    // One read decides nothing is to be applied; the rest is the check of whether Flux took
    // over, reads only.
    let calls = calls(&bed.kube);
    assert_eq!(
        calls[0].1, "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/flux-system",
        "one read decides: {calls:?}"
    );
    assert!(calls.iter().all(|(m, _)| m == "GET"), "{calls:?}");
    assert_eq!(second.flux.as_ref().map(|f| f.check), Some(1));
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_after_the_crds_is_completed_by_the_next() {
    let bed = Bed::new("eks-killed", &[("cellbridge.dev/cell", "killed")], None).await;
    // The first object after the CRDs hangs, every retry of it too (a single hang would let the
    // client's retry through before the cut on a slow machine); the run is cut off as a Lambda
    // deadline would.
    bed.kube
        .fault(json!({"method": "PATCH", "path": "/resourcequotas/", "sleep": 30, "count": 1000}));
    let cut = tokio::time::timeout(Duration::from_secs(4), bed.run(&bed.request())).await;
    assert!(cut.is_err(), "the run should have been cut off");
    assert_eq!(bed.kube.objects(Some("CustomResourceDefinition")).len(), 10);
    assert!(bed.kube.objects(Some("Deployment")).is_empty());
    assert!(bed.kube.objects(Some("Kustomization")).is_empty());
    // The dead run left its access entry; it is tagged as cellbridge's.
    assert_eq!(access_entries(&bed.aws, &bed.cluster).await, [ROLE]);
    bed.kube.clear_faults();

    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(bed.kube.objects(Some("Deployment")).len(), 4);
    assert_eq!(bed.kube.objects(Some("Kustomization")).len(), 1);
    // Young, the entry may be another run's at work: used, and left to it.
    let access = report.access_entry.as_ref().unwrap();
    assert!(access.adopted && !access.removed, "{access:?}");
    assert_eq!(access_entries(&bed.aws, &bed.cluster).await, [ROLE]);
    // Older than a run's longest, the run that made it is over: the next run deletes it.
    moto_control(
        &format!("/_cellbridge/eks/entries/{}", bed.cluster),
        json!({"region": REGION, "account": "123456789012", "principal": ROLE, "age_secs": 1000}),
    );
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::AlreadyBootstrapped);
    assert!(
        report.access_entry.as_ref().unwrap().removed,
        "the leftover entry is recognised and deleted"
    );
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_reapplies_everything() {
    let bed = Bed::new("eks-force", &[("cellbridge.dev/cell", "forced")], None).await;
    bed.run(&bed.request()).await.unwrap();
    bed.kube.clear_requests();
    let report = bed
        .run(&Request {
            force: true,
            ..bed.request()
        })
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let patches = calls(&bed.kube).into_iter().filter(|(m, _)| m == "PATCH").count();
    assert_eq!(patches, 34);
    // Same content: the server stored no change.
    assert!(
        bed.kube.requests().iter().all(|r| r["mutated"] == false),
        "force with unchanged manifests changes nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_target_skips_eks() {
    let bed = Bed::new("eks-kubeconfig", &[], None).await;
    let kc = bed.kube.kubeconfig();
    // No such EKS cluster is needed: the cell is named, the kubeconfig says where the API is.
    let req = Request {
        cluster: "laptop-cluster".into(),
        cell: Some("laptop".into()),
        ..bed.request()
    };
    let report = Bootstrapper::new(bed.aws.clone(), settings(&bed.secret))
        .run(&bed.fleet, &req, Target::Kubeconfig(&kc))
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert!(report.access_entry.is_none());
    assert!(access_log("laptop-cluster").is_empty());
    assert_eq!(
        bed.kube.objects(Some("Kustomization"))[0]["spec"]["path"],
        "./clusters/laptop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_cluster_through_kubeconfig() {
    // Installs Flux's CRDs and controllers: only on a cluster that is there to be used so.
    let (Ok(kc), Ok(_)) = (
        std::env::var("KUBECONFIG"),
        std::env::var("CELLBRIDGE_TEST_REAL_CLUSTER"),
    ) else {
        // Straight to stderr: the test harness would swallow eprintln! of a passing test.
        let _ = writeln!(
            std::io::stderr(),
            "a_real_cluster_through_kubeconfig: skipped: set KUBECONFIG and CELLBRIDGE_TEST_REAL_CLUSTER=1 to bootstrap a disposable real cluster"
        );
        return;
    };
    let bed = Bed::new("eks-real", &[], None).await;
    let req = Request {
        cluster: "real".into(),
        cell: Some("real".into()),
        ..bed.request()
    };
    let s = Settings {
        tuning: Tuning {
            ready_timeout: Duration::from_secs(120),
            crd_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(30),
            ..tuning()
        },
        ..settings(&bed.secret)
    };
    let report = Bootstrapper::new(bed.aws.clone(), s)
        .run(&bed.fleet, &req, Target::Kubeconfig(std::path::Path::new(&kc)))
        .await
        .unwrap();
    assert!(
        matches!(
            report.outcome,
            BootstrapOutcome::Bootstrapped | BootstrapOutcome::AlreadyBootstrapped
        ),
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_value_appears_in_any_output() {
    let password = "https-password-8c1f0e5bd2";
    let bed = Bed::new("eks-leak", &[("cellbridge.dev/cell", "leak")], None).await;
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    // A failing run that holds a password, with API errors on the Secret.
    let sm = aws_sdk_secretsmanager::Client::new(&bed.aws);
    let https = Bed::new(
        "eks-leak-https",
        &[("cellbridge.dev/cell", "leak-https")],
        Some(json!({"username": "git", "password": password})),
    )
    .await;
    let s = Settings {
        flux_git_url: Some("https://github.com/acme/fleet".into()),
        ..settings(&https.secret)
    };
    https
        .kube
        .fault(json!({"method": "PATCH", "path": "/secrets/flux-system", "status": 500, "count": 100}));
    let err = https.run_with(&https.request(), s).await.unwrap_err();
    assert!(err.to_string().contains("Secret flux-system/flux-system"), "{err}");
    let _ = sm;

    let out = String::from_utf8_lossy(&logs().0.lock().unwrap()).into_owned();
    assert!(out.contains("applied"), "the capture works");
    let private = &key().0;
    let key_body: Vec<&str> = private.lines().filter(|l| !l.starts_with("-----")).collect();
    for needle in key_body.iter().copied().chain([password, "k8s-aws-v1."]) {
        assert!(!out.contains(needle), "secret material in the output: {needle}");
    }
    // The report itself names the kind of credentials, nothing else.
    let json = serde_json::to_string(&report).unwrap();
    assert!(json.contains("\"credentials\":\"ssh\""));
}

#[test]
fn the_fixture_is_flux_sized() {
    let text =
        std::fs::read_to_string(fixture_fleet().join("clusters/_template/flux-system/gotk-components.yaml")).unwrap();
    assert!(text.len() >= 250 * 1024, "{} bytes", text.len());
    let objects = cellbridge::pure::bootstrap::plan::parse_objects(&text, "gotk-components.yaml").unwrap();
    assert!(objects.len() >= 30);
    for kind in [
        "CustomResourceDefinition",
        "Deployment",
        "ClusterRole",
        "NetworkPolicy",
        "ResourceQuota",
        "ServiceAccount",
        "Service",
    ] {
        assert!(objects.iter().any(|(r, _)| r.kind == kind), "no {kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_kinds_that_reach_discovery_late_are_waited_for() {
    // Established at 0.3 s, in discovery 4 s later: custom resources would 404 meanwhile.
    let eks_auth = format!("{},{REGION},eks-lag", moto::endpoint());
    let kube = KubeFake::start_with(&["--crd-delay", "0.3", "--discovery-lag", "4.0", "--eks-auth", &eks_auth]);
    let bed = Bed::with_server("eks-lag", &[("cellbridge.dev/cell", "lag")], None, kube).await;
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let misses = bed
        .kube
        .requests()
        .iter()
        .filter(|r| r["path"] == "/apis/source.toolkit.fluxcd.io/v1" && r["status"] == 404)
        .count();
    assert!(misses >= 1, "the lag was observed");
}
