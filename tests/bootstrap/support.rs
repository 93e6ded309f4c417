//! The end-to-end bed of cluster-bootstrap, shared by every file of the suite: moto for EKS, STS
//! and Secrets Manager (with the access-entry extension), the fake Kubernetes API server over TLS with
//! its own CA, the Flux-sized fixture fleet, and the capture of every log line of the binary.

use cellbridge::pure::fleet::LocalFleet;
use cellbridge::{
    ports::cluster::kube::Tuning, rules::bootstrap::BootstrapError, rules::bootstrap::Bootstrapper,
    rules::bootstrap::Request, rules::bootstrap::Target, rules::bootstrap::config::Settings,
    rules::bootstrap::report::Report,
};
use cellbridge_tests::kube::{KubeFake, http_json, ssh_keypair};
use cellbridge_tests::{leak, moto};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub(crate) const ROLE: &str = "arn:aws:iam::123456789012:role/cellbridge-bootstrap";

pub(crate) const REGION: &str = "eu-west-1";

pub(crate) const KNOWN_HOSTS: &str =
    "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

pub(crate) const GIT_URL: &str = "ssh://git@github.com/acme/fleet";

#[derive(Clone, Default)]
pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) fn logs() -> &'static Captured {
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

pub(crate) static KEY: OnceLock<(String, String)> = OnceLock::new();

pub(crate) fn key() -> &'static (String, String) {
    KEY.get_or_init(|| {
        let k = ssh_keypair();
        leak::secret("bootstrap: SSH identity of the Flux Git secret", &k.0);
        k
    })
}

/// Credentials of an assumed role, as a Lambda function has them.
pub(crate) async fn role_config() -> aws_config::SdkConfig {
    moto::assumed(&moto::sdk_config().await, ROLE, "cluster-bootstrap").await
}

pub(crate) struct Bed {
    pub(crate) kube: KubeFake,
    pub(crate) cluster: String,
    /// The cluster's region (cellbridge's own, where the Git secret lives, is always `REGION`).
    pub(crate) region: String,
    pub(crate) secret: String,
    pub(crate) aws: aws_config::SdkConfig,
    pub(crate) fleet: LocalFleet,
}

pub(crate) fn fixture_fleet() -> PathBuf {
    cellbridge_tests::process::repo_root().join("tests/fixtures/flux/fleet")
}

pub(crate) fn tuning() -> Tuning {
    Tuning {
        request_timeout: Duration::from_secs(2),
        attempts: 5,
        backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        crd_timeout: Duration::from_secs(10),
        // One check in the bootstrap's run: the tests set what the cluster reports first.
        ready_timeout: Duration::ZERO,
        poll: Duration::from_millis(100),
        auth_grace: Duration::from_secs(3),
        token_refresh: Duration::from_secs(600),
    }
}

pub(crate) fn settings(secret: &str) -> Settings {
    Settings {
        flux_git_url: Some(GIT_URL.into()),
        flux_git_branch: None,
        flux_git_secret: Some(secret.into()),
        cluster_wait: Duration::from_secs(10),
        cluster_poll: Duration::from_millis(300),
        access_principal_arn: None,
        account_roles: Default::default(),
        confirm: Default::default(),
        tuning: tuning(),
    }
}

pub(crate) fn moto_control(path: &str, body: Value) {
    let (status, v) = http_json("POST", &format!("{}{path}", moto::endpoint()), Some(body));
    assert_eq!(status, 200, "{v}");
}

pub(crate) fn access_log(cluster: &str) -> Vec<String> {
    let (_, v) = http_json("GET", &format!("{}/_cellbridge/eks/log", moto::endpoint()), None);
    v.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cluster"] == cluster)
        .map(|e| e["op"].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) async fn access_entries(aws: &aws_config::SdkConfig, cluster: &str) -> Vec<String> {
    access_entries_in(aws, REGION, cluster).await
}

pub(crate) async fn access_entries_in(aws: &aws_config::SdkConfig, region: &str, cluster: &str) -> Vec<String> {
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

/// The cluster's tags, as DescribeCluster shows them.
pub(crate) async fn cluster_tags(
    aws: &aws_config::SdkConfig,
    cluster: &str,
) -> std::collections::HashMap<String, String> {
    let regional = aws
        .to_builder()
        .region(aws_config::Region::new(REGION.to_owned()))
        .build();
    let eks = aws_sdk_eks::Client::new(&regional);
    let out = eks.describe_cluster().name(cluster).send().await.unwrap();
    out.cluster().and_then(|c| c.tags()).cloned().unwrap_or_default()
}

impl Bed {
    /// A new ACTIVE cluster `name` (tags given), its API served by a fresh fake, and the Git secret.
    pub(crate) async fn new(name: &str, tags: &[(&str, &str)], secret_json: Option<Value>) -> Bed {
        Self::new_in(REGION, name, tags, secret_json).await
    }

    /// Like [`Bed::new`], the cluster in `region`; the Git secret stays in cellbridge's own.
    pub(crate) async fn new_in(region: &str, name: &str, tags: &[(&str, &str)], secret_json: Option<Value>) -> Bed {
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

    pub(crate) async fn with_server(
        name: &str,
        tags: &[(&str, &str)],
        secret_json: Option<Value>,
        kube: KubeFake,
    ) -> Bed {
        Self::with_server_in(REGION, name, tags, secret_json, kube).await
    }

    pub(crate) async fn with_server_in(
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

    pub(crate) fn request(&self) -> Request {
        Request {
            cluster: self.cluster.clone(),
            region: self.region.clone(),
            cell: None,
            account: None,
            force: false,
            dry_run: false,
        }
    }

    pub(crate) async fn run_with(&self, req: &Request, settings: Settings) -> Result<Report, BootstrapError> {
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

    pub(crate) async fn run(&self, req: &Request) -> Result<Report, BootstrapError> {
        self.run_with(req, settings(&self.secret)).await
    }

    pub(crate) fn writes(&self) -> Vec<Value> {
        self.kube
            .requests()
            .into_iter()
            .filter(|r| matches!(r["method"].as_str(), Some("PATCH" | "POST" | "PUT" | "DELETE")))
            .collect()
    }
}

/// `(method, path)` of each request to the API, in order.
pub(crate) fn calls(kube: &KubeFake) -> Vec<(String, String)> {
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

pub(crate) fn create_cluster_event(cluster: &str) -> Value {
    let text =
        std::fs::read_to_string(cellbridge_tests::process::repo_root().join("events/cloudtrail-create-cluster.json"))
            .unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["detail"]["requestParameters"]["name"] = json!(cluster);
    v["detail"]["responseElements"]["cluster"]["name"] = json!(cluster);
    v
}

pub(crate) const TEAMS_REPO: &str = "acme/teams-fleet";

pub(crate) const MERGED_CELL: &str = "payments-eu-west-1";

pub(crate) fn teams_fleet() -> PathBuf {
    cellbridge_tests::process::repo_root().join("examples/teams-fleet")
}

/// The object of `kind` named `flux-system` the API server holds.
pub(crate) fn flux_object(kube: &KubeFake, kind: &str) -> Value {
    let all = kube.objects(Some(kind));
    let found: Vec<&Value> = all.iter().filter(|o| o["metadata"]["name"] == "flux-system").collect();
    assert_eq!(found.len(), 1, "{kind} flux-system: {all:?}");
    found[0].clone()
}
