//! cluster-bootstrap end to end: moto for EKS, STS and Secrets Manager (with the access-entry
//! extension), the fake Kubernetes API server over TLS with its own CA, and the Flux-sized
//! fixture fleet. Each test has its own API server and its own cluster name.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cellbridge::pure::fleet::LocalFleet;
use cellbridge::shell::error::Classify;
use cellbridge::{
    ports::cluster::kube::Tuning,
    rules::bootstrap::BootstrapError,
    rules::bootstrap::Bootstrapper,
    rules::bootstrap::Phase,
    rules::bootstrap::Request,
    rules::bootstrap::Target,
    rules::bootstrap::config::Settings,
    rules::bootstrap::report::BootstrapOutcome,
    rules::bootstrap::report::Report,
    rules::bootstrap::{self},
};
use cellbridge_tests::kube::{KubeFake, http_json, ssh_keypair};
use cellbridge_tests::{leak, moto};
use serde_json::{Value, json};

const ROLE: &str = "arn:aws:iam::123456789012:role/cellbridge-bootstrap";
const REGION: &str = "eu-west-1";
const KNOWN_HOSTS: &str = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
const GIT_URL: &str = "ssh://git@github.com/acme/fleet";

// ---- output capture: every log line of the whole test binary -----------------------------

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let c = Captured::default();
        let w = c.clone();
        // This binary's own JSON capture (asserted on below), plus the suite-wide leak capture.
        leak::init_with(tracing_subscriber::Layer::with_filter(
            tracing_subscriber::fmt::layer().json().with_writer(move || w.clone()),
            tracing_subscriber::filter::LevelFilter::DEBUG,
        ));
        c
    })
}

// ---- the test bed -------------------------------------------------------------------------

static KEY: OnceLock<(String, String)> = OnceLock::new();

fn key() -> &'static (String, String) {
    KEY.get_or_init(|| {
        let k = ssh_keypair();
        leak::secret("bootstrap: SSH identity of the Flux Git secret", &k.0);
        k
    })
}

/// Credentials of an assumed role, as a Lambda function has them.
async fn role_config() -> aws_config::SdkConfig {
    moto::assumed(&moto::sdk_config().await, ROLE, "cluster-bootstrap").await
}

struct Bed {
    kube: KubeFake,
    cluster: String,
    /// The cluster's region (cellbridge's own, where the Git secret lives, is always `REGION`).
    region: String,
    secret: String,
    aws: aws_config::SdkConfig,
    fleet: LocalFleet,
}

fn fixture_fleet() -> PathBuf {
    cellbridge_tests::process::repo_root().join("tests/fixtures/flux/fleet")
}

fn tuning() -> Tuning {
    Tuning {
        request_timeout: Duration::from_secs(2),
        attempts: 5,
        backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        crd_timeout: Duration::from_secs(10),
        ready_timeout: Duration::from_secs(5),
        poll: Duration::from_millis(100),
        auth_grace: Duration::from_secs(3),
        token_refresh: Duration::from_secs(600),
    }
}

fn settings(secret: &str) -> Settings {
    Settings {
        flux_git_url: Some(GIT_URL.into()),
        flux_git_branch: None,
        flux_git_secret: Some(secret.into()),
        cluster_wait: Duration::from_secs(10),
        cluster_poll: Duration::from_millis(300),
        access_principal_arn: None,
        account_roles: Default::default(),
        tuning: tuning(),
    }
}

fn moto_control(path: &str, body: Value) {
    let (status, v) = http_json("POST", &format!("{}{path}", moto::endpoint()), Some(body));
    assert_eq!(status, 200, "{v}");
}

fn access_log(cluster: &str) -> Vec<String> {
    let (_, v) = http_json("GET", &format!("{}/_cellbridge/eks/log", moto::endpoint()), None);
    v.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cluster"] == cluster)
        .map(|e| e["op"].as_str().unwrap().to_owned())
        .collect()
}

async fn access_entries(aws: &aws_config::SdkConfig, cluster: &str) -> Vec<String> {
    access_entries_in(aws, REGION, cluster).await
}

async fn access_entries_in(aws: &aws_config::SdkConfig, region: &str, cluster: &str) -> Vec<String> {
    let regional = aws
        .to_builder()
        .region(aws_config::Region::new(region.to_owned()))
        .build();
    let eks = aws_sdk_eks::Client::new(&regional);
    eks.list_access_entries()
        .cluster_name(cluster)
        .send()
        .await
        .unwrap()
        .access_entries()
        .to_vec()
}

impl Bed {
    /// A new ACTIVE cluster `name` (tags given), its API served by a fresh fake, and the Git secret.
    async fn new(name: &str, tags: &[(&str, &str)], secret_json: Option<Value>) -> Bed {
        Self::new_in(REGION, name, tags, secret_json).await
    }

    /// Like [`Bed::new`], the cluster in `region`; the Git secret stays in cellbridge's own.
    async fn new_in(region: &str, name: &str, tags: &[(&str, &str)], secret_json: Option<Value>) -> Bed {
        // The API server authorizes like EKS: the token's caller needs an access entry.
        let eks_auth = format!("{},{region},{name}", moto::endpoint());
        Self::with_server_in(
            region,
            name,
            tags,
            secret_json,
            KubeFake::start_with(&["--eks-auth", &eks_auth]),
        )
        .await
    }

    async fn with_server(name: &str, tags: &[(&str, &str)], secret_json: Option<Value>, kube: KubeFake) -> Bed {
        Self::with_server_in(REGION, name, tags, secret_json, kube).await
    }

    async fn with_server_in(
        region: &str,
        name: &str,
        tags: &[(&str, &str)],
        secret_json: Option<Value>,
        kube: KubeFake,
    ) -> Bed {
        logs();
        let aws = role_config().await;
        kube.auto_ready(true);
        let regional = aws
            .to_builder()
            .region(aws_config::Region::new(region.to_owned()))
            .build();
        moto::create_cluster(&regional, name, tags).await;
        moto_control(
            &format!("/_cellbridge/eks/clusters/{name}"),
            json!({"region": region, "endpoint": kube.url(), "ca_pem": kube.ca_pem}),
        );
        let (private, public) = key();
        let secret = format!("{name}-flux-git");
        let value = secret_json
            .unwrap_or_else(|| json!({"identity": private, "identity.pub": public, "known_hosts": KNOWN_HOSTS}));
        for field in ["identity", "password", "githubAppPrivateKey"] {
            if let Some(v) = value[field].as_str() {
                leak::secret(&format!("bootstrap: `{field}` of {name}-flux-git"), v);
            }
        }
        let sm = aws_sdk_secretsmanager::Client::new(&aws);
        sm.create_secret()
            .name(&secret)
            .secret_string(value.to_string())
            .send()
            .await
            .unwrap();
        Bed {
            kube,
            cluster: name.into(),
            region: region.into(),
            secret,
            aws,
            fleet: LocalFleet::open(fixture_fleet()).unwrap(),
        }
    }

    fn request(&self) -> Request {
        Request {
            cluster: self.cluster.clone(),
            region: self.region.clone(),
            cell: None,
            account: None,
            force: false,
            dry_run: false,
        }
    }

    async fn run_with(&self, req: &Request, settings: Settings) -> Result<Report, BootstrapError> {
        let r = Bootstrapper::new(self.aws.clone(), settings)
            .run(&self.fleet, req, Target::Eks)
            .await;
        // Results and errors are output too: they go through the same capture.
        let what = format!("bootstrap of {}", self.cluster);
        let text = match &r {
            Ok(rep) => serde_json::to_string(rep).unwrap(),
            Err(e) => format!("error: {e}"),
        };
        logs().clone().write_all(text.as_bytes()).unwrap();
        leak::capture(&what, &text);
        if let Err(e) = &r {
            // No one is shown the Debug form, yet a secret in it would leak all the same.
            let debug = format!("{e:?}");
            logs().clone().write_all(debug.as_bytes()).unwrap();
            leak::capture_debug(&what, &debug);
        }
        r
    }

    async fn run(&self, req: &Request) -> Result<Report, BootstrapError> {
        self.run_with(req, settings(&self.secret)).await
    }

    fn writes(&self) -> Vec<Value> {
        self.kube
            .requests()
            .into_iter()
            .filter(|r| matches!(r["method"].as_str(), Some("PATCH" | "POST" | "PUT" | "DELETE")))
            .collect()
    }
}

/// `(method, path)` of each request to the API, in order.
fn calls(kube: &KubeFake) -> Vec<(String, String)> {
    kube.requests()
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_owned(),
                r["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn kinds_in_order(report: &Report) -> Vec<String> {
    report.objects.iter().map(|o| o.target.kind.clone()).collect()
}

// ---- the tests ----------------------------------------------------------------------------

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

    // Ready reported; access given back.
    let git = report.git_repository.as_ref().unwrap();
    assert_eq!(git.ready, Some(true), "{git:?}");
    assert!(git.revision.as_deref().unwrap().starts_with("main@sha1:"));
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
    assert_eq!(calls(&bed.kube).len(), 1, "one read decides: {:?}", calls(&bed.kube));
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
async fn injected_api_faults_are_retried_to_success() {
    let bed = Bed::new("eks-faults", &[("cellbridge.dev/cell", "faults")], None).await;
    let k = &bed.kube;
    k.fault(
        json!({"method": "PATCH", "path": "/customresourcedefinitions/gitrepositories", "status": 503, "count": 2}),
    );
    k.fault(json!({"method": "PATCH", "path": "/deployments/source-controller", "status": 500, "count": 1}));
    k.fault(json!({"method": "PATCH", "path": "/secrets/flux-system", "status": 409, "count": 1}));
    k.fault(json!({"method": "PATCH", "path": "/services/", "sleep": 3, "count": 1}));
    k.fault(json!({"method": "GET", "path": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions$", "status": 429, "count": 1}));
    k.fault(json!({"method": "GET", "path": "/apis/source.toolkit.fluxcd.io/v1$", "status": 503, "count": 1}));
    // A new access entry takes a moment to reach the API server: the first answers are 401.
    k.fault(json!({"method": "GET", "path": "/kustomizations/flux-system$", "status": 401, "count": 2}));
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let faults: Vec<Value> = k.requests().into_iter().filter(|r| !r["fault"].is_null()).collect();
    assert_eq!(faults.len(), 9, "every injected fault was hit: {faults:?}");
    assert_eq!(k.objects(Some("Deployment")).len(), 4);
    assert_eq!(k.objects(Some("Service")).len(), 3);
    assert_eq!(k.objects(Some("Kustomization")).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_fault_is_a_clean_retryable_error_and_the_next_run_converges() {
    let bed = Bed::new("eks-down", &[("cellbridge.dev/cell", "down")], None).await;
    bed.kube
        .fault(json!({"method": "PATCH", "path": "/deployments/", "status": 503, "count": 1000}));
    let err = bed.run(&bed.request()).await.unwrap_err();
    let msg = err.to_string();
    assert!(err.retryable(), "{err:?}");
    assert!(
        msg.contains("Deployment flux-system/helm-controller") && msg.contains("503"),
        "{msg}"
    );
    let tries = bed
        .kube
        .requests()
        .iter()
        .filter(|r| r["path"].as_str().unwrap().contains("/deployments/"))
        .count();
    assert_eq!(tries, 5, "bounded retries");
    assert!(
        bed.kube.objects(Some("Kustomization")).is_empty(),
        "no sync objects after a failure"
    );
    assert!(
        access_entries(&bed.aws, &bed.cluster).await.is_empty(),
        "access given back after a failure too"
    );

    bed.kube.clear_faults();
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(bed.kube.objects(Some("Deployment")).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creating_cluster_is_waited_for_or_handed_back() {
    let bed = Bed::new("eks-creating", &[("cellbridge.dev/cell", "creating")], None).await;
    moto_control(
        "/_cellbridge/eks/clusters/eks-creating",
        json!({"region": REGION, "active_after": 1.0}),
    );
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);

    let bed2 = Bed::new("eks-creating-long", &[("cellbridge.dev/cell", "creating-long")], None).await;
    moto_control(
        "/_cellbridge/eks/clusters/eks-creating-long",
        json!({"region": REGION, "active_after": 600}),
    );
    let s = Settings {
        cluster_wait: Duration::from_millis(500),
        ..settings(&bed2.secret)
    };
    let report = bed2.run_with(&bed2.request(), s).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::ClusterNotReady);
    assert_eq!(report.cluster_status.as_deref(), Some("CREATING"));
    assert!(calls(&bed2.kube).is_empty());

    moto_control(
        "/_cellbridge/eks/clusters/eks-creating-long",
        json!({"region": REGION, "status": "FAILED"}),
    );
    let err = bed2.run(&bed2.request()).await.unwrap_err();
    assert!(err.to_string().contains("is FAILED"), "{err}");
    let err = bed2
        .run(&Request {
            cluster: "eks-never-made".into(),
            ..bed2.request()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("eks-never-made not found"), "{err}");
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

fn sqs_of(events: &[(&str, Value)]) -> Value {
    let records: Vec<Value> = events
        .iter()
        .map(|(id, body)| json!({"messageId": id, "receiptHandle": "h", "body": body.to_string(), "attributes": {}, "messageAttributes": {},
            "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:cellbridge-bootstrap", "awsRegion": REGION}))
        .collect();
    json!({"Records": records})
}

fn create_cluster_event(cluster: &str) -> Value {
    let text =
        std::fs::read_to_string(cellbridge_tests::process::repo_root().join("events/cloudtrail-create-cluster.json"))
            .unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["detail"]["requestParameters"]["name"] = json!(cluster);
    v["detail"]["responseElements"]["cluster"]["name"] = json!(cluster);
    v
}

/// The cluster-bootstrap service as the Lambda builds it, its fleet repo on a fake GitHub
/// seeded with the fixture fleet, the token in Secrets Manager.
async fn github_fleet_service(
    bed: &Bed,
) -> (
    cellbridge_tests::github::FakeGithub,
    cellbridge::jobs::bootstrap::handler::BootstrapService,
) {
    use cellbridge::adapters::github::GithubConfig;
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, GithubSource};
    use cellbridge_tests::github::{FakeGithub, TOKEN, fleet_files};
    let gh = FakeGithub::start();
    // As a merged cell's metadata does: it names the cell's cluster.
    let files: Vec<(String, String)> = fleet_files(&fixture_fleet())
        .into_iter()
        .map(|(p, t)| {
            let t = if p == "clusters/prod-eu/cell-metadata.yaml" {
                t.replace("\"eks-prod-eu\"", &format!("\"{}\"", bed.cluster))
            } else {
                t
            };
            (p, t)
        })
        .collect();
    gh.seed_files("acme/fleet", &files);
    leak::secret("bootstrap: GitHub token", TOKEN);
    let secret = format!("{}-github", bed.cluster);
    aws_sdk_secretsmanager::Client::new(&bed.aws)
        .create_secret()
        .name(&secret)
        .secret_string(json!({ "token": TOKEN }).to_string())
        .send()
        .await
        .unwrap();
    let github = GithubConfig::checked("acme".into(), "fleet".into(), None, secret, gh.url()).unwrap();
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings(&bed.secret)),
        fleets: GithubSource::new(github, &bed.aws).into(),
    };
    (gh, service)
}

/// The Lambda's way to the fleet: the base branch's archive from GitHub (the fake, which checks
/// every request against GitHub's description), with credentials from Secrets Manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_is_read_from_github_as_the_lambda_reads_it() {
    let bed = Bed::new("eks-gh-fleet", &[("cellbridge.dev/cell", "prod-eu")], None).await;
    let (gh, service) = github_fleet_service(&bed).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let inv = cellbridge_tests::handle(&service, &create_cluster_event("eks-gh-fleet"), deadline)
        .await
        .unwrap();
    leak::capture("bootstrap from the GitHub fleet", &inv.response.to_string());
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(inv.response["outcome"], "bootstrapped", "{}", inv.response);
    assert_eq!(
        inv.response["components_file"], "clusters/prod-eu/flux-system/gotk-components.yaml",
        "{}",
        inv.response
    );
    assert_eq!(bed.kube.objects(Some("Kustomization")).len(), 1);
    // Bootstrap only reads the fleet: the repository, its tarball and the download, once (the
    // cell whose metadata names the cluster kept in the same pass as the index).
    let log = gh.requests();
    assert_eq!(log["writes"], 0, "{log}");
    let paths: Vec<&str> = log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert_eq!(gh.conformance()["operations"]["repos/download-tarball-archive"], 1);
}

/// A failed bootstrap tells Lambda what to do about it: a fault worth retrying is
/// `cellbridge.Retryable` (EventBridge and asynchronous invocation retry it), whether it hit the
/// cluster or the reading of the fleet repo from GitHub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_is_reported_to_lambda_as_retryable() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    use cellbridge_tests::lambda_handler;
    let bed = Bed::new("eks-lambda-class", &[("cellbridge.dev/cell", "prod-eu")], None).await;
    let invoke = |service: BootstrapService, secs: u64| async move {
        let ctx = cellbridge_tests::lambda_context(secs);
        let event = lambda_runtime::LambdaEvent::new(create_cluster_event("eks-lambda-class"), ctx);
        let err = lambda_handler(&service, event).await.unwrap_err();
        leak::capture("bootstrap lambda error", &err.error_message);
        err
    };

    // The cluster answers 503 to every write.
    bed.kube
        .fault(json!({"method": "PATCH", "path": "/deployments/", "status": 503, "count": 1000}));
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings(&bed.secret)),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
    };
    let err = invoke(service, 120).await;
    assert_eq!(err.error_type, "cellbridge.Retryable", "{}", err.error_message);
    assert!(err.error_message.contains("503"), "{}", err.error_message);
    bed.kube.clear_faults();

    // GitHub answers 502 to the archive, for longer than the invocation lasts.
    let (gh, service) = github_fleet_service(&bed).await;
    gh.fault(json!({"match": "GET /repos/*/tarball/*", "status": 502, "times": 1000}));
    let err = invoke(service, 6).await;
    assert_eq!(err.error_type, "cellbridge.Retryable", "{}", err.error_message);
    assert!(err.error_message.contains("fleet repo"), "{}", err.error_message);
    assert!(bed.kube.objects(Some("Kustomization")).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_answers_sqs_batches_record_by_record() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    let ready = Bed::new("eks-sqs-ready", &[("cellbridge.dev/cell", "sqs-ready")], None).await;
    let creating = Bed::new("eks-sqs-creating", &[("cellbridge.dev/cell", "sqs-creating")], None).await;
    moto_control(
        "/_cellbridge/eks/clusters/eks-sqs-creating",
        json!({"region": REGION, "active_after": 600}),
    );
    // One secret serves both clusters here.
    let s = Settings {
        cluster_wait: Duration::from_millis(300),
        ..settings(&ready.secret)
    };
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(ready.aws.clone(), s),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
    };
    let mut other = create_cluster_event("x");
    other["detail"]["eventName"] = json!("UpdateClusterConfig");
    let event = sqs_of(&[
        ("m-ready", create_cluster_event("eks-sqs-ready")),
        ("m-creating", create_cluster_event("eks-sqs-creating")),
        ("m-other", other),
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let inv = cellbridge_tests::handle(&service, &event, deadline).await.unwrap();
    assert_eq!(
        inv.response,
        json!({"batchItemFailures": [{"itemIdentifier": "m-creating"}]})
    );
    assert_eq!(ready.kube.objects(Some("Kustomization")).len(), 1);
    assert!(calls(&creating.kube).is_empty());

    // Delivered directly by EventBridge, a cluster still CREATING fails the invocation (so that
    // EventBridge retries it), and says why.
    let inv = cellbridge_tests::handle(&service, &create_cluster_event("eks-sqs-creating"), deadline)
        .await
        .unwrap();
    assert!(inv.failed());
    assert!(
        inv.response["error"].as_str().unwrap().contains("still CREATING"),
        "{}",
        inv.response
    );

    // The manual payload through the same handler: a dry run answers with the plan.
    let manual = json!({"action": "bootstrap", "cluster": "eks-sqs-ready", "region": REGION, "dry_run": true});
    let inv = cellbridge_tests::handle(&service, &manual, deadline).await.unwrap();
    assert!(!inv.failed());
    assert_eq!(inv.response["outcome"], "planned");
    assert_eq!(inv.response["objects"].as_array().unwrap().len(), 34);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cells_bootstrap_role_is_assumed_before_any_eks_or_kubernetes_call() {
    use cellbridge::pure::fleet::Overlay;
    let bed = Bed::new("eks-xacct", &[], None).await;
    // The cell is known only from the fleet (no tag), and names the role to use.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  aws_region: \"eu-west-1\"\n  cell_name: \"xacct\"\n  cluster_name: \"eks-xacct\"\n  bootstrap_role_arn: \"arn:aws:iam::123456789012:role/cells/xacct-bootstrap\"\n  schema: \"1\"\n";
    let fleet = Overlay::new(
        &bed.fleet,
        [("clusters/xacct/cell-metadata.yaml".to_owned(), cm.as_bytes().to_vec())],
    );
    let report = Bootstrapper::new(bed.aws.clone(), settings(&bed.secret))
        .run(&fleet, &bed.request(), Target::Eks)
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some("xacct"));
    assert_eq!(
        report.access_entry.unwrap().principal_arn,
        "arn:aws:iam::123456789012:role/cells/xacct-bootstrap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eks_token_is_renewed_when_it_gets_old() {
    let bed = Bed::new("eks-token", &[("cellbridge.dev/cell", "token")], None).await;
    // Renew on every request: each one then carries a token signed anew (one-second dates).
    let s = Settings {
        tuning: Tuning {
            token_refresh: Duration::ZERO,
            ..tuning()
        },
        ..settings(&bed.secret)
    };
    let report = bed.run_with(&bed.request(), s).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let ids: BTreeSet<String> = bed
        .kube
        .requests()
        .iter()
        .filter_map(|r| r["auth_id"].as_str().map(str::to_owned))
        .collect();
    assert!(ids.len() >= 2, "expected renewed tokens, saw {} distinct", ids.len());

    // With the default (14 minutes) one token serves the whole run.
    let bed2 = Bed::new("eks-token-once", &[("cellbridge.dev/cell", "token-once")], None).await;
    bed2.run(&bed2.request()).await.unwrap();
    let ids: BTreeSet<String> = bed2
        .kube
        .requests()
        .iter()
        .filter_map(|r| r["auth_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 1);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_entry_someone_else_made_without_a_policy_is_not_changed() {
    let bed = Bed::new("eks-entry-no-policy", &[("cellbridge.dev/cell", "nopolicy")], None).await;
    let eks = aws_sdk_eks::Client::new(&bed.aws);
    eks.create_access_entry()
        .cluster_name(&bed.cluster)
        .principal_arn(ROLE)
        .send()
        .await
        .unwrap();
    let err = bed.run(&bed.request()).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("HTTP 403"),
        "the API server refuses a principal without a policy: {msg}"
    );
    assert!(
        !access_log(&bed.cluster)
            .iter()
            .any(|op| op == "AssociateAccessPolicy" || op == "DeleteAccessEntry")
    );
    assert_eq!(access_entries(&bed.aws, &bed.cluster).await, [ROLE]);
    assert!(bed.writes().is_empty());
}

fn moto_fault(f: Value) {
    moto_control("/_cellbridge/faults", f);
}

fn access_key(aws: &aws_config::SdkConfig) -> String {
    use aws_credential_types::provider::ProvideCredentials;
    let provider = aws.credentials_provider().unwrap();
    block_on(provider.provide_credentials())
        .unwrap()
        .access_key_id()
        .to_owned()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_calls_that_fail_throttle_or_hang_are_retried() {
    let bed = Bed::new("eks-awsfaults", &[("cellbridge.dev/cell", "awsfaults")], None).await;
    // Short attempt timeouts, so that a hung call is abandoned and retried quickly.
    let t = aws_config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(1))
        .build();
    let aws = bed.aws.to_builder().timeout_config(t).build();
    let key = access_key(&aws);
    let c = &bed.cluster;
    moto_fault(json!({"service": "eks", "operation": format!("^GET /clusters/{c}$"), "kind": "throttle", "count": 1}));
    moto_fault(
        json!({"service": "eks", "operation": format!("^POST /clusters/{c}/access-entries$"), "kind": "5xx", "count": 1}),
    );
    moto_fault(
        json!({"service": "eks", "operation": format!("^DELETE /clusters/{c}/access-entries/"), "kind": "5xx", "count": 1}),
    );
    moto_fault(
        json!({"service": "secretsmanager", "operation": "GetSecretValue", "body_contains": bed.secret, "kind": "timeout", "sleep": 3, "count": 1}),
    );
    moto_fault(
        json!({"service": "sts", "operation": "GetCallerIdentity", "access_key": key, "kind": "5xx", "count": 1}),
    );
    let report = Bootstrapper::new(aws.clone(), settings(&bed.secret))
        .run(&bed.fleet, &bed.request(), Target::Eks)
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert!(report.access_entry.as_ref().unwrap().removed);
    assert!(access_entries(&bed.aws, c).await.is_empty());
    let (_, faults) = http_json("GET", &format!("{}/_cellbridge/faults", moto::endpoint()), None);
    let mine: Vec<&Value> = faults
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            let s = f.to_string();
            s.contains(c.as_str()) || s.contains(&bed.secret) || s.contains(&key)
        })
        .collect();
    assert_eq!(mine.len(), 5);
    assert!(
        mine.iter().all(|f| f["hits"] == 1),
        "every fault was hit once: {mine:?}"
    );

    // A call that keeps failing ends in a clean, retryable error naming the call.
    moto_fault(json!({"service": "eks", "operation": format!("^GET /clusters/{c}$"), "kind": "5xx", "count": 50}));
    let err = Bootstrapper::new(aws, settings(&bed.secret))
        .run(&bed.fleet, &bed.request(), Target::Eks)
        .await
        .unwrap_err();
    assert!(err.retryable(), "{err:?}");
    assert!(err.to_string().contains("DescribeCluster"), "{err}");
}

// ---- examples/teams-fleet: a GitHub App, SOPS, a new cell and a merged one --

const TEAMS_REPO: &str = "acme/teams-fleet";
const NEW_CELL: &str = "payments-us-east-2";
const NEW_CELL_REGION: &str = "us-east-2";
const MERGED_CELL: &str = "payments-eu-west-1";

fn teams_fleet() -> PathBuf {
    cellbridge_tests::process::repo_root().join("examples/teams-fleet")
}

/// The fake GitHub with `examples/teams-fleet` as `acme/teams-fleet`'s main, its trimmed
/// `gotk-components.yaml` (a Namespace only) replaced by Flux's full set from the fixtures, as a
/// team's fleet holds it: without Flux's CRDs no cluster takes a GitRepository.
fn teams_github() -> cellbridge_tests::github::FakeGithub {
    let gh = cellbridge_tests::github::FakeGithub::start();
    gh.seed_dir(TEAMS_REPO, &teams_fleet());
    let full =
        std::fs::read_to_string(fixture_fleet().join("clusters/_template/flux-system/gotk-components.yaml")).unwrap();
    let template = "clusters/_template/flux-system/gotk-components.yaml".to_owned();
    let merged = format!("clusters/{MERGED_CELL}/flux-system/gotk-components.yaml");
    gh.commit(
        TEAMS_REPO,
        "main",
        &[
            (template.as_str(), Some(full.as_str())),
            (merged.as_str(), Some(full.as_str())),
        ],
        "flux install --export",
    );
    gh
}

/// The fake's GitHub App as Flux's Git secret holds it (`flux create secret githubapp`'s keys).
fn flux_app_secret(gh: &cellbridge_tests::github::FakeGithub) -> Value {
    let app = gh.app();
    let key = app["private_key"]
        .as_str()
        .expect("the fake GitHub generates its App's key (needs Python's `cryptography`)");
    json!({
        "githubAppID": app["app_id"].to_string(),
        "githubAppInstallationID": app["installation_id"].to_string(),
        "githubAppPrivateKey": key,
    })
}

/// The cluster-bootstrap service as the Lambda builds it for the teams' fleet: cellbridge reads
/// `acme/teams-fleet` from the fake GitHub as the same GitHub App, and no Flux Git URL or branch
/// is configured (the template's own are used).
async fn teams_service(
    bed: &Bed,
    gh: &cellbridge_tests::github::FakeGithub,
) -> cellbridge::jobs::bootstrap::handler::BootstrapService {
    use cellbridge::adapters::github::GithubConfig;
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, GithubSource};
    let app = gh.app();
    let secret = format!("{}-github", bed.cluster);
    aws_sdk_secretsmanager::Client::new(&bed.aws)
        .create_secret()
        .name(&secret)
        .secret_string(
            json!({"app_id": app["app_id"], "installation_id": app["installation_id"], "private_key": app["private_key"]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    let (owner, repo) = TEAMS_REPO.split_once('/').unwrap();
    let github = GithubConfig::checked(owner.into(), repo.into(), None, secret, gh.url()).unwrap();
    let settings = Settings {
        flux_git_url: None,
        ..settings(&bed.secret)
    };
    BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings),
        fleets: GithubSource::new(github, &bed.aws).into(),
    }
}

/// CloudTrail's `eks:CreateCluster` for `bed`'s cluster, in its region, through the handler.
async fn handle_create(
    bed: &Bed,
    service: &cellbridge::jobs::bootstrap::handler::BootstrapService,
) -> cellbridge::shell::lambda::Invocation {
    let mut event = create_cluster_event(&bed.cluster);
    event["region"] = json!(bed.region);
    event["detail"]["awsRegion"] = json!(bed.region);
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let inv = cellbridge_tests::handle(service, &event, deadline).await.unwrap();
    leak::capture(&format!("bootstrap of {}", bed.cluster), &inv.response.to_string());
    logs().clone().write_all(inv.response.to_string().as_bytes()).unwrap();
    inv
}

/// The documents of a fleet file on the fake GitHub's main.
fn documents_on_main(gh: &cellbridge_tests::github::FakeGithub, path: &str) -> Vec<(bootstrap::KubeRef, Value)> {
    let state = gh.state(TEAMS_REPO);
    let text = main_files(&state)[path]
        .as_str()
        .unwrap_or_else(|| panic!("{path} is not on main"))
        .to_owned();
    cellbridge::pure::bootstrap::plan::parse_objects(&text, path).unwrap()
}

/// path → text of every file on main, from the fake's state.
fn main_files(state: &Value) -> &Value {
    &state["files"]["main"]
}

/// The object of `kind` named `flux-system` the API server holds.
fn flux_object(kube: &KubeFake, kind: &str) -> Value {
    let all = kube.objects(Some(kind));
    let found: Vec<&Value> = all.iter().filter(|o| o["metadata"]["name"] == "flux-system").collect();
    assert_eq!(found.len(), 1, "{kind} flux-system: {all:?}");
    found[0].clone()
}

/// What an applied object holds of its manifest: identity, labels, annotations and spec (the
/// server adds its own metadata and a status).
fn as_manifest(o: &Value) -> Value {
    json!({
        "apiVersion": o["apiVersion"],
        "kind": o["kind"],
        "metadata": {
            "name": o["metadata"]["name"],
            "namespace": o["metadata"]["namespace"],
            "labels": o["metadata"]["labels"],
            "annotations": o["metadata"]["annotations"],
        },
        "spec": o["spec"],
    })
}

fn decoded(secret: &Value, key: &str) -> String {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(secret["data"][key].as_str().unwrap_or_else(|| panic!("no {key}")))
        .unwrap();
    String::from_utf8(raw).unwrap()
}

/// A new cluster for the cell whose pull request is still open: Flux gets the template's sync
/// objects (GitHub App provider, SOPS decryption) unchanged but for the cell's path, and the
/// GitHub App in its Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_cell_of_the_teams_fleet_gets_the_templates_github_app_sync_and_sops_decryption() {
    let gh = teams_github();
    let flux_secret = flux_app_secret(&gh);
    let bed = Bed::new_in(
        NEW_CELL_REGION,
        NEW_CELL,
        &[("cellbridge.dev/cell", NEW_CELL)],
        Some(flux_secret.clone()),
    )
    .await;
    let service = teams_service(&bed, &gh).await;
    // The cell's pull request is not merged: main has no clusters/payments-us-east-2/.
    let state = gh.state(TEAMS_REPO);
    let on_main: Vec<&String> = main_files(&state).as_object().unwrap().keys().collect();
    assert!(
        on_main
            .iter()
            .any(|p| p.starts_with(&format!("clusters/{MERGED_CELL}/")))
    );
    assert!(
        !on_main.iter().any(|p| p.starts_with(&format!("clusters/{NEW_CELL}/"))),
        "{on_main:?}"
    );

    let inv = handle_create(&bed, &service).await;
    let r = &inv.response;
    assert!(!inv.failed(), "{r}");
    assert_eq!(r["outcome"], "bootstrapped", "{r}");
    assert_eq!(r["cell"], NEW_CELL);
    assert_eq!(r["region"], NEW_CELL_REGION);
    assert_eq!(
        r["components_file"],
        "clusters/_template/flux-system/gotk-components.yaml"
    );
    assert_eq!(
        r["sync_file"],
        format!("clusters/_template/flux-system/gotk-sync.yaml (written for {NEW_CELL})")
    );
    assert_eq!(r["credentials"], "github_app");

    // The sync objects: the template's documents, the Kustomization's path aside.
    let template = documents_on_main(&gh, "clusters/_template/flux-system/gotk-sync.yaml");
    assert_eq!(template.len(), 2);
    let repo = flux_object(&bed.kube, "GitRepository");
    let ks = flux_object(&bed.kube, "Kustomization");
    assert_eq!(repo["spec"]["provider"], "github");
    assert_eq!(repo["spec"]["url"], "https://github.com/acme/teams-fleet.git");
    assert_eq!(repo["spec"]["ref"], json!({"branch": "main"}));
    assert_eq!(repo["spec"]["interval"], "1m0s");
    assert_eq!(repo["spec"]["secretRef"]["name"], "flux-system");
    assert_eq!(
        ks["spec"]["decryption"],
        json!({"provider": "sops", "secretRef": {"name": "sops-age"}})
    );
    assert_eq!(ks["spec"]["path"], format!("./clusters/{NEW_CELL}"));
    for (target, doc) in &template {
        let applied = flux_object(&bed.kube, &target.kind);
        let mut expected = as_manifest(doc);
        if target.kind == "Kustomization" {
            expected["spec"]["path"] = json!(format!("./clusters/{NEW_CELL}"));
        }
        assert_eq!(as_manifest(&applied), expected, "{}", target.kind);
    }

    // Flux's Secret holds the GitHub App, nothing else.
    let secret = flux_object(&bed.kube, "Secret");
    let keys: BTreeSet<&str> = secret["data"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["githubAppID", "githubAppInstallationID", "githubAppPrivateKey"])
    );
    for key in keys {
        assert_eq!(
            decoded(&secret, key).trim(),
            flux_secret[key].as_str().unwrap().trim(),
            "{key}"
        );
    }

    // GitHub was only read (the one POST is the App's installation token); access was given
    // back in the cluster's region.
    let writes: Vec<Value> = gh.requests()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["write"] == true)
        .map(|q| json!([q["method"], q["path"]]))
        .collect();
    let token = format!(
        "/app/installations/{}/access_tokens",
        flux_secret["githubAppInstallationID"].as_str().unwrap()
    );
    assert_eq!(writes, [json!(["POST", token])]);
    let access = &r["access_entry"];
    assert_eq!(access["principal_arn"], ROLE);
    assert_eq!(access["removed"], true);
    assert_eq!(
        access_log(&bed.cluster),
        ["CreateAccessEntry", "AssociateAccessPolicy", "DeleteAccessEntry"]
    );
    assert!(access_entries_in(&bed.aws, &bed.region, &bed.cluster).await.is_empty());
    assert!(!r.to_string().contains("PRIVATE KEY"), "{r}");
}

/// The same new cell with SSH, then HTTPS, credentials in Flux's secret: the template's
/// GitRepository says `provider: github`, which Flux authenticates only with a GitHub App. The
/// run stops before it touches EKS access or the cluster, says what the secret needs, and
/// shows none of its values; with the App in the secret, the next run bootstraps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_teams_cell_with_ssh_or_password_credentials_is_refused_before_anything_is_applied() {
    use cellbridge::shell::error::Class;
    let gh = teams_github();
    // A second cluster of the cell (blue/green): found by its tag, as the first.
    let bed = Bed::new_in(
        NEW_CELL_REGION,
        &format!("{NEW_CELL}-blue"),
        &[("cellbridge.dev/cell", NEW_CELL)],
        None,
    )
    .await;
    let service = teams_service(&bed, &gh).await;
    let sm = aws_sdk_secretsmanager::Client::new(&bed.aws);
    let password = "gho-3f9c1e7a5d2b80461c";
    leak::secret("bootstrap: HTTPS password of the teams fleet", password);
    let private = key().0.clone();
    let key_body: Vec<&str> = private.lines().filter(|l| !l.starts_with("-----")).collect();

    for (what, held) in [
        ("SSH", None),
        ("HTTPS", Some(json!({"username": "git", "password": password}))),
    ] {
        if let Some(v) = held {
            sm.put_secret_value()
                .secret_id(&bed.secret)
                .secret_string(v.to_string())
                .send()
                .await
                .unwrap();
        }
        let inv = handle_create(&bed, &service).await;
        assert!(inv.failed(), "{what}: {}", inv.response);
        assert_eq!(
            inv.class,
            Some(Class::Final),
            "{what}: only a person changing the secret helps"
        );
        let msg = inv.response["error"].as_str().unwrap();
        for needed in [
            bed.secret.as_str(),
            "spec.provider: github",
            "GitHub App",
            "githubAppID",
            "githubAppPrivateKey",
            "githubAppInstallationID",
        ] {
            assert!(msg.contains(needed), "{what}: {needed:?} not in: {msg}");
        }
        for value in key_body.iter().copied().chain([password]) {
            assert!(!msg.contains(value), "{what}: a secret value in: {msg}");
        }
        // Nothing reached the cluster, and no access entry was made.
        assert!(calls(&bed.kube).is_empty(), "{what}: {:?}", calls(&bed.kube));
        assert!(access_log(&bed.cluster).is_empty(), "{what}");
        assert!(access_entries_in(&bed.aws, &bed.region, &bed.cluster).await.is_empty());
    }
    let out = String::from_utf8_lossy(&logs().0.lock().unwrap()).into_owned();
    for value in key_body.iter().copied().chain([password]) {
        assert!(!out.contains(value), "secret material in the output");
    }

    // The secret fixed: the next run installs Flux.
    let app = flux_app_secret(&gh);
    sm.put_secret_value()
        .secret_id(&bed.secret)
        .secret_string(app.to_string())
        .send()
        .await
        .unwrap();
    let inv = handle_create(&bed, &service).await;
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(inv.response["outcome"], "bootstrapped");
    assert_eq!(inv.response["credentials"], "github_app");
    assert_eq!(
        flux_object(&bed.kube, "Kustomization")["spec"]["path"],
        format!("./clusters/{NEW_CELL}")
    );
    assert!(access_entries_in(&bed.aws, &bed.region, &bed.cluster).await.is_empty());
}

/// The merged cell: its own `gotk-sync.yaml` on main is applied exactly as it is, even after the
/// template has moved on (Flux applies that very file at its first reconciliation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merged_teams_cell_gets_exactly_its_own_gotk_sync_yaml() {
    let gh = teams_github();
    // The template changed since the cell was merged: that must not reach the cell.
    let template_path = "clusters/_template/flux-system/gotk-sync.yaml";
    let template = std::fs::read_to_string(teams_fleet().join(template_path)).unwrap();
    let moved_on = template.replace("interval: 1m0s", "interval: 5m0s");
    assert_ne!(moved_on, template);
    gh.commit(
        TEAMS_REPO,
        "main",
        &[(template_path, Some(moved_on.as_str()))],
        "template: poll every 5 minutes",
    );
    // No tag: clusters/payments-eu-west-1/cell-metadata.yaml names the cluster and its region.
    let bed = Bed::new(MERGED_CELL, &[], Some(flux_app_secret(&gh))).await;
    let service = teams_service(&bed, &gh).await;
    let inv = handle_create(&bed, &service).await;
    let r = &inv.response;
    assert!(!inv.failed(), "{r}");
    assert_eq!(r["outcome"], "bootstrapped", "{r}");
    assert_eq!(r["cell"], MERGED_CELL);
    let own = format!("clusters/{MERGED_CELL}/flux-system/gotk-sync.yaml");
    assert_eq!(
        r["components_file"],
        format!("clusters/{MERGED_CELL}/flux-system/gotk-components.yaml")
    );
    assert_eq!(r["sync_file"], own);
    assert_eq!(r["credentials"], "github_app");

    // Exactly the file's documents, in its order, and nothing else of theirs.
    let docs = documents_on_main(&gh, &own);
    let synced: Vec<Value> = r["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["phase"] == "sync")
        .map(|o| {
            let mut t = o.clone();
            t.as_object_mut().unwrap().remove("phase");
            t
        })
        .collect();
    let expected: Vec<Value> = docs.iter().map(|(t, _)| serde_json::to_value(t).unwrap()).collect();
    assert_eq!(synced, expected);
    for (target, doc) in &docs {
        assert_eq!(
            as_manifest(&flux_object(&bed.kube, &target.kind)),
            as_manifest(doc),
            "{}",
            target.kind
        );
    }
    assert_eq!(bed.kube.objects(Some("GitRepository")).len(), 1);
    assert_eq!(bed.kube.objects(Some("Kustomization")).len(), 1);
    let repo = flux_object(&bed.kube, "GitRepository");
    assert_eq!(repo["spec"]["interval"], "1m0s", "the cell's, not the template's");
    assert_eq!(repo["spec"]["provider"], "github");
    let ks = flux_object(&bed.kube, "Kustomization");
    assert_eq!(ks["spec"]["path"], format!("./clusters/{MERGED_CELL}"));
    assert_eq!(ks["spec"]["decryption"]["secretRef"]["name"], "sops-age");
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}

/// Against moto: moto keeps `resourcesVpcConfig` as given (CreateCluster,
/// UpdateClusterConfig) and answers it in DescribeCluster, without the `vpcId` and
/// `clusterSecurityGroupId` EKS adds. A private-only endpoint, the function outside any VPC:
/// one final failure that says why, before any access entry or Kubernetes request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_only_endpoint_out_of_reach_fails_finally_before_any_access_entry() {
    use cellbridge::ports::cluster::eks::Network;
    let bed = Bed::new("eks-private-only", &[("cellbridge.dev/cell", "private")], None).await;
    let eks = aws_sdk_eks::Client::new(&bed.aws);
    eks.update_cluster_config()
        .name(&bed.cluster)
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-1")
                .endpoint_public_access(false)
                .endpoint_private_access(true)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let outside = Network {
        vpc_id: None,
        reachable_vpcs: vec![],
        egress_cidrs: vec![],
    };
    let err = Bootstrapper::new(bed.aws.clone(), settings(&bed.secret))
        .with_network(Some(outside))
        .run(&bed.fleet, &bed.request(), Target::Eks)
        .await
        .unwrap_err();
    assert_eq!(err.class(), cellbridge::shell::error::Class::Final, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("eks-private-only") && msg.contains("private only") && msg.contains("outside any VPC"),
        "{msg}"
    );
    assert!(access_log(&bed.cluster).is_empty(), "{:?}", access_log(&bed.cluster));
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
    assert!(bed.writes().is_empty());
}

// ---- a new cell in a second account ----------------------------------------

const ACCOUNT_B: &str = "210987654321";
const ROLE_B: &str = "arn:aws:iam::210987654321:role/cellbridge-bootstrap";

/// A cluster named `name`, tagged as `cell`'s, in the account of `conf`'s credentials.
async fn create_tagged_cluster(conf: &aws_config::SdkConfig, name: &str, cell: &str) {
    moto::create_cluster(conf, name, &[("cellbridge.dev/cell", cell)]).await;
}

/// Access-entry operations on `cluster` in `account`'s cluster of that name.
fn access_log_in(account: &str, cluster: &str) -> Vec<String> {
    let (_, v) = http_json("GET", &format!("{}/_cellbridge/eks/log", moto::endpoint()), None);
    v.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cluster"] == cluster && e["account"] == account)
        .map(|e| e["op"].as_str().unwrap().to_owned())
        .collect()
}

/// A new cell's cluster in a second account, found by its tag
/// before the cell's pull request merges (no `clusters/<cell>/` on main: the template), is
/// reached through the role `CELLBRIDGE_ACCOUNT_ROLES` gives the event's account, never through
/// the home account's cluster of the same name; an account not in the map is refused, finally,
/// before anything is looked up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_cell_in_a_second_account_bootstraps_from_its_clusters_tag_before_its_pull_request_merges() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    use cellbridge_tests::lambda_handler;
    const NAME: &str = "cross-acct-cell";
    const CELL: &str = "cross-acct";
    // The home account's cluster of the same name, untagged; its API server is the bed's.
    let bed = Bed::new(NAME, &[], None).await;
    // The cell is not merged: the fleet has no clusters/cross-acct/, only the template.
    assert!(!fixture_fleet().join("clusters").join(CELL).exists());
    // Account B's, tagged with the new cell (same endpoint: the override is by region and name).
    let b = moto::assumed(&moto::sdk_config().await, ROLE_B, "test-account-b").await;
    let caller = aws_sdk_sts::Client::new(&b).get_caller_identity().send().await.unwrap();
    assert_eq!(caller.account(), Some(ACCOUNT_B));
    create_tagged_cluster(&b, NAME, CELL).await;
    let home = aws_sdk_eks::Client::new(&bed.aws)
        .describe_cluster()
        .name(NAME)
        .send()
        .await
        .unwrap();
    assert!(
        home.cluster().unwrap().tags().is_none_or(|t| t.is_empty()),
        "two clusters"
    );

    let settings = Settings {
        account_roles: [(ACCOUNT_B.to_owned(), ROLE_B.to_owned())].into(),
        ..settings(&bed.secret)
    };
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
    };
    let from = |account: &str| {
        let mut e = create_cluster_event(NAME);
        e["account"] = json!(account);
        e["detail"]["recipientAccountId"] = json!(account);
        e
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let inv = cellbridge_tests::handle(&service, &from(ACCOUNT_B), deadline)
        .await
        .unwrap();
    let r = &inv.response;
    leak::capture("bootstrap in account B", &r.to_string());
    assert!(!inv.failed(), "{r}");
    assert_eq!(r["outcome"], "bootstrapped", "{r}");
    assert_eq!(r["cell"], CELL);
    assert_eq!(
        r["components_file"],
        "clusters/_template/flux-system/gotk-components.yaml"
    );
    assert_eq!(r["access_entry"]["principal_arn"], ROLE_B, "{r}");
    assert_eq!(r["access_entry"]["removed"], true, "{r}");
    // Access was given and taken back in account B's cluster; the home one was never touched.
    assert_eq!(
        access_log_in(ACCOUNT_B, NAME),
        ["CreateAccessEntry", "AssociateAccessPolicy", "DeleteAccessEntry"]
    );
    assert!(access_log_in("123456789012", NAME).is_empty());
    assert!(access_entries(&b, NAME).await.is_empty());
    assert!(access_entries(&bed.aws, NAME).await.is_empty());
    assert_eq!(bed.kube.objects(Some("GitRepository")).len(), 1);
    assert_eq!(
        flux_object(&bed.kube, "Kustomization")["spec"]["path"],
        format!("./clusters/{CELL}")
    );

    // An account CELLBRIDGE_ACCOUNT_ROLES does not name: a handled final failure, nothing made.
    let requests = bed.kube.requests().len();
    let ctx = cellbridge_tests::lambda_context(60);
    let event = lambda_runtime::LambdaEvent::new(from("333333333333"), ctx);
    let v = lambda_handler(&service, event).await.unwrap();
    leak::capture("bootstrap from an unmapped account", &v.to_string());
    assert_eq!(v["class"], "final", "{v}");
    let msg = v["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains("333333333333") && msg.contains("CELLBRIDGE_ACCOUNT_ROLES"),
        "{v}"
    );
    assert_eq!(bed.kube.requests().len(), requests);
    assert_eq!(access_log_in(ACCOUNT_B, NAME).len(), 3);
    assert!(access_log_in("123456789012", NAME).is_empty());
    assert!(access_log_in("333333333333", NAME).is_empty());
}

/// Through moto's EKS and STS: the daily sweep finds the clusters tagged with a
/// cell that is not merged yet (ListClusters and DescribeCluster, in cellbridge's own account and,
/// through `CELLBRIDGE_ACCOUNT_ROLES`, in account B) and deletes the temporary access entries a
/// killed run left there once they are older than the TTL; a fresh one is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_finds_tagged_clusters_of_unmerged_cells_in_every_account() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    use cellbridge::ports::cluster::access::{CREATED_AT_TAG, TEMPORARY_TAG};
    let home = role_config().await;
    let b = moto::assumed(&moto::sdk_config().await, ROLE_B, "test-account-b").await;
    let entry = |conf: &aws_config::SdkConfig, cluster: &'static str, principal: &'static str| {
        let eks = aws_sdk_eks::Client::new(conf);
        async move {
            eks.create_access_entry()
                .cluster_name(cluster)
                .principal_arn(principal)
                .tags(TEMPORARY_TAG, "true")
                .tags(CREATED_AT_TAG, "2026-01-01T00:00:00Z")
                .send()
                .await
                .unwrap();
        }
    };
    let age = |account: &str, cluster: &str, principal: &str, secs: u64| {
        let (status, v) = http_json(
            "POST",
            &format!("{}/_cellbridge/eks/entries/{cluster}", moto::endpoint()),
            Some(json!({"region": REGION, "account": account, "principal": principal, "age_secs": secs})),
        );
        assert_eq!(status, 200, "{v}");
    };
    create_tagged_cluster(&home, "sweep-home", "sweep-new-home").await;
    create_tagged_cluster(&b, "sweep-b", "sweep-new-b").await;
    create_tagged_cluster(&home, "sweep-fresh", "sweep-new-fresh").await;
    entry(&home, "sweep-home", ROLE).await;
    entry(&b, "sweep-b", ROLE_B).await;
    entry(&home, "sweep-fresh", ROLE).await;
    age("123456789012", "sweep-home", ROLE, 7200);
    age(ACCOUNT_B, "sweep-b", ROLE_B, 7200);

    let settings = Settings {
        account_roles: [(ACCOUNT_B.to_owned(), ROLE_B.to_owned())].into(),
        ..settings("unused")
    };
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(home.clone(), settings),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let inv = cellbridge_tests::handle(&service, &json!({"action": "sweep"}), deadline)
        .await
        .unwrap();
    let r = &inv.response;
    leak::capture("the sweep's report", &r.to_string());
    let result_of = |cluster: &str| {
        r["report"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cluster"] == cluster)
            .unwrap_or_else(|| panic!("{cluster} not swept: {r}"))
            .clone()
    };
    // Every bootstrap run ends with a sweep, and the other tests' runs share this moto account:
    // one of them may have deleted the expired home entry first. Gone is what matters; only
    // account B (reached through the role only this test maps) is this sweep's alone.
    let home_result = result_of("sweep-home")["result"].clone();
    assert!(home_result == "deleted" || home_result == "none", "{r}");
    assert_eq!(result_of("sweep-home")["cell"], "sweep-new-home");
    assert_eq!(result_of("sweep-b")["result"], "deleted", "{r}");
    assert_eq!(result_of("sweep-b")["role"], ROLE_B);
    assert_eq!(result_of("sweep-fresh")["result"], "kept", "{r}");
    assert!(access_entries(&home, "sweep-home").await.is_empty());
    assert!(access_entries(&b, "sweep-b").await.is_empty());
    assert_eq!(access_entries(&home, "sweep-fresh").await, [ROLE]);
}
