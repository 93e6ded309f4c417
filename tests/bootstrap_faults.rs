//! Fault-injection matrix for cluster-bootstrap, the counterpart of `faults.rs`: every external
//! call a bootstrap makes, and every call a re-check of its confirmation makes, gets a 5xx, a
//! throttle (HTTP 429 from Kubernetes, ThrottlingException from AWS) and a hang longer than the
//! call's timeout.
//!
//! The calls are not hard-coded: a probe bootstraps two clusters cleanly (one through a cell's
//! `bootstrap_role_arn`, one without) and reads what moto (`/_cellbridge/calls`) and the fake
//! API server (`/_fake/requests`) saw: STS AssumeRole and GetCallerIdentity, EKS DescribeCluster,
//! the access-entry calls and TagResource (the outcome on the cluster's tags), Secrets Manager
//! GetSecretValue, and every kind of Kubernetes request (discovery of each group version, the
//! server-side apply PATCH of each resource, the CRD list that waits for Established, the
//! Kustomization read that decides, the first check's reads of Flux's state: the Deployments and
//! Pods of flux-system, the Nodes, the GitRepository). The probe then makes the re-check each
//! clean bootstrap hands on and learns its calls the same way (`recheck.rs`). A call either
//! starts making is in the matrix (and must pass) from then on.
//!
//! A hung AWS call is served and its answer held back (the write happened, the client never
//! learns it); a hung Kubernetes request is served when its sleep ends. Either way the client
//! times out and retries against a world the first attempt may already have changed.
//!
//! Per fault kind, two things are shown:
//! - a fault that lasts one attempt, at every call of one run (a few runs for hangs, which cost
//!   a timeout each): the run succeeds through its bounded retries;
//! - per call, a fault that does not go away: after a bounded number of attempts the run fails
//!   with a retryable error that names the call (or succeeds without it: TagResource's record
//!   is best effort, a first check that cannot read leaves the bootstrap confirming), leaves
//!   nothing half-applied (the Kustomization `flux-system`, which tells later runs that Flux
//!   owns the cluster, exists only with everything else), and a clean re-run converges: every
//!   object of a clean bootstrap, its access entry deleted. An entry the failed run left (its
//!   DeleteAccessEntry failing) is young: the clean re-run uses it, reports it adopted and
//!   leaves it (a run at work may hold it); aged past a run's longest (its `createdAt` in
//!   moto), the run after deletes it, and none is left.
//!
//! And the same for a re-check (`Bootstrapper::recheck`, one look whether Flux took over, from
//! the message a clean bootstrap hands on; `recheck.rs`): one failed attempt at each call, it
//! succeeds; a fault that does not go away, it answers `confirming` (or `timed-out`) saying in
//! `flux.sentence` which read failed, or fails retryably naming the call, and leaves no access
//! entry but the temporary one a failing DeleteAccessEntry could not delete; a clean re-check
//! after it answers a verdict and uses that young entry, adopted and left, and the re-check
//! after the entry is older than a run's longest deletes it and leaves none.
//!
//! Plus runs cut off by their deadline in the middle of each kind of apply (the Lambda killed),
//! finished by the next run, which uses the dead run's young entry and leaves it; the run
//! after, once the entry is older than a run's longest, deletes it. Every case has its own cluster, API server, secret and
//! credentials, so cases run side by side.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aws_credential_types::Credentials;
use cellbridge::ports::cluster::access::TEMPORARY_TAG;
use cellbridge::pure::fleet::{LocalFleet, Overlay};
use cellbridge::shell::error::Classify;
use cellbridge::{
    ports::cluster::kube::Tuning, rules::bootstrap::BootstrapError, rules::bootstrap::Bootstrapper,
    rules::bootstrap::Request, rules::bootstrap::Target, rules::bootstrap::access::RUN_LONGEST,
    rules::bootstrap::config::Settings, rules::bootstrap::report::AccessReport,
    rules::bootstrap::report::BootstrapOutcome, rules::bootstrap::report::Report,
};
use cellbridge_tests::kube::{KubeFake, http_json, ssh_keypair};
use cellbridge_tests::{leak, moto};
use serde_json::{Value, json};

#[path = "bootstrap_faults/recheck.rs"]
mod recheck;

const BASE_ROLE: &str = "arn:aws:iam::123456789012:role/cellbridge-bootstrap";
const REGION: &str = "eu-west-1";
const KNOWN_HOSTS: &str = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
const GIT_URL: &str = "ssh://git@github.com/acme/fleet";

/// Per-attempt timeouts: AWS (the SDK's operation attempt) and Kubernetes (`request_timeout`).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// A hang outlasts one attempt; the hung request still lands (see above).
const HANG_SECS: u64 = 4;
/// Kubernetes attempts per request (`Tuning::attempts`), and the AWS SDK's default.
const KUBE_ATTEMPTS: u32 = 4;
const AWS_ATTEMPTS: u64 = 3;
/// Hung calls per run when each lasts one attempt.
const HANGS_PER_RUN: usize = 6;
/// Cases at a time, over the whole binary (2 cores; every case runs an API server).
const PARALLEL: usize = 24;

fn say(line: &str) {
    leak::capture("bootstrap faults", line);
    println!("{line}");
}

fn key() -> &'static (String, String) {
    static KEY: OnceLock<(String, String)> = OnceLock::new();
    KEY.get_or_init(|| {
        let k = ssh_keypair();
        leak::secret("bootstrap faults: SSH identity of the Flux Git secret", &k.0);
        k
    })
}

/// The fleet's Flux components with the CRDs' schemas left out: the same objects, kinds and
/// requests as the Flux-sized fixture (which `bootstrap/` applies whole), at a fraction of the
/// parsing and storing, which a few hundred runs on 2 cores feel.
fn components() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let path = "tests/fixtures/flux/fleet/clusters/_template/flux-system/gotk-components.yaml";
        let text = std::fs::read_to_string(cellbridge_tests::process::repo_root().join(path)).unwrap();
        let docs: Vec<String> = cellbridge::pure::bootstrap::plan::parse_objects(&text, path)
            .unwrap()
            .into_iter()
            .map(|(_, mut o)| {
                for v in o["spec"]["versions"].as_array_mut().into_iter().flatten() {
                    if let Some(v) = v.as_object_mut() {
                        v.remove("schema");
                    }
                }
                o.to_string()
            })
            .collect();
        docs.join("\n---\n")
    })
}

fn permits() -> &'static tokio::sync::Semaphore {
    static S: OnceLock<tokio::sync::Semaphore> = OnceLock::new();
    S.get_or_init(|| tokio::sync::Semaphore::new(PARALLEL))
}

// ---- the test bed -------------------------------------------------------------------------

/// One cluster with its own API server, Git secret and AWS credentials (an assumed-role
/// session of its own, so STS faults can be aimed at its calls only). With `role`, the cluster
/// has no tag and the fleet's `cell-metadata.yaml` names it and a bootstrap role to assume.
struct Bed {
    id: String,
    kube: KubeFake,
    cluster: String,
    cell: String,
    secret: String,
    /// What the bootstrap gets: short attempt timeouts.
    aws: aws_config::SdkConfig,
    /// The same credentials with the SDK's default timeouts, for the test's own calls.
    setup: aws_config::SdkConfig,
    access_key: String,
    fleet: LocalFleet,
    role: Option<String>,
    /// The Flux components its bootstraps apply: [`components`] unless a case says otherwise.
    components: &'static str,
}

impl Bed {
    async fn new(id: &str, role: bool) -> Bed {
        leak::init();
        let base = moto::sdk_config().await;
        let out = aws_sdk_sts::Client::new(&base)
            .assume_role()
            .role_arn(BASE_ROLE)
            .role_session_name(format!("bf-{id}"))
            .send()
            .await
            .unwrap();
        let c = out.credentials().unwrap();
        let access_key = c.access_key_id().to_owned();
        let creds = Credentials::new(
            c.access_key_id(),
            c.secret_access_key(),
            Some(c.session_token().to_owned()),
            None,
            "bootstrap-faults",
        );
        // Short attempt timeouts, so that a hung AWS call is abandoned and retried quickly.
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(ATTEMPT_TIMEOUT)
            .build();
        let setup = base
            .to_builder()
            .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(creds))
            .build();
        let aws = setup.to_builder().timeout_config(timeouts).build();
        let cluster = format!("bf-{id}");
        let cell = format!("bfc-{id}");
        let kube = KubeFake::start_with(&["--eks-auth", &format!("{},{REGION},{cluster}", moto::endpoint())]);
        kube.auto_ready(true);
        // The bed's own calls keep the SDK's default timeouts: a slow answer on a busy machine
        // must not turn into a retried CreateCluster.
        let tags: &[(&str, &str)] = if role { &[] } else { &[("cellbridge.dev/cell", &cell)] };
        moto::create_cluster(&setup, &cluster, tags).await;
        moto_post(
            &format!("/_cellbridge/eks/clusters/{cluster}"),
            json!({"region": REGION, "endpoint": kube.url(), "ca_pem": kube.ca_pem}),
        );
        let (private, public) = key();
        let secret = format!("{cluster}-flux-git");
        aws_sdk_secretsmanager::Client::new(&setup)
            .create_secret()
            .name(&secret)
            .secret_string(json!({"identity": private, "identity.pub": public, "known_hosts": KNOWN_HOSTS}).to_string())
            .send()
            .await
            .unwrap();
        Bed {
            id: id.into(),
            kube,
            role: role.then(|| format!("arn:aws:iam::123456789012:role/cells/{cell}-bootstrap")),
            cluster,
            cell,
            secret,
            aws,
            setup,
            access_key,
            fleet: LocalFleet::open(cellbridge_tests::process::repo_root().join("tests/fixtures/flux/fleet")).unwrap(),
            components: components(),
        }
    }

    fn settings(&self) -> Settings {
        Settings {
            flux_git_url: Some(GIT_URL.into()),
            flux_git_branch: None,
            flux_git_secret: Some(self.secret.clone()),
            cluster_wait: Duration::from_secs(10),
            cluster_poll: Duration::from_millis(300),
            access_principal_arn: None,
            account_roles: Default::default(),
            confirm: Default::default(),
            tuning: Tuning {
                request_timeout: ATTEMPT_TIMEOUT,
                attempts: KUBE_ATTEMPTS,
                backoff: Duration::from_millis(50),
                max_backoff: Duration::from_millis(400),
                crd_timeout: Duration::from_secs(20),
                ready_timeout: Duration::ZERO,
                poll: Duration::from_millis(100),
                auth_grace: Duration::from_secs(3),
                token_refresh: Duration::from_secs(600),
            },
        }
    }

    async fn run(&self, force: bool) -> Result<Report, BootstrapError> {
        let req = Request {
            cluster: self.cluster.clone(),
            region: REGION.into(),
            cell: None,
            account: None,
            force,
            dry_run: false,
        };
        let mut files = vec![(
            "clusters/_template/flux-system/gotk-components.yaml".to_owned(),
            self.components.as_bytes().to_vec(),
        )];
        if let Some(role) = &self.role {
            let cm = format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  aws_region: \"{REGION}\"\n  cell_name: \"{}\"\n  cluster_name: \"{}\"\n  bootstrap_role_arn: \"{role}\"\n  schema: \"1\"\n",
                self.cell, self.cluster
            );
            files.push((format!("clusters/{}/cell-metadata.yaml", self.cell), cm.into_bytes()));
        }
        let fleet = Overlay::new(&self.fleet, files);
        let r = Bootstrapper::new(self.aws.clone(), self.settings())
            .run(&fleet, &req, Target::Eks)
            .await;
        // Results and errors are output too: they go through the leak capture.
        let what = format!("bootstrap of {}", self.cluster);
        let text = match &r {
            Ok(rep) => serde_json::to_string(rep).unwrap(),
            Err(e) => format!("error: {e}"),
        };
        leak::capture(&what, &text);
        if let Err(e) = &r {
            // No one is shown the Debug form, yet a secret in it would leak all the same.
            leak::capture_debug(&what, &format!("{e:?}"));
        }
        r
    }

    /// Stored objects per kind.
    fn counts(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        let objects = self.kube.control("GET", "/_fake/objects?brief=1", None);
        for o in objects.as_array().into_iter().flatten() {
            *out.entry(o["kind"].as_str().unwrap_or("").to_owned()).or_insert(0) += 1;
        }
        out
    }

    async fn access_entries(&self) -> Vec<String> {
        aws_sdk_eks::Client::new(&self.setup)
            .list_access_entries()
            .cluster_name(&self.cluster)
            .send()
            .await
            .unwrap()
            .access_entries()
            .to_vec()
    }

    /// Every AWS call of this bed moto has seen, in order: signed with the bed's key, or aimed
    /// at its cluster (a cell role's session signs with a key of its own). The API server's own
    /// replay of the EKS token is not a call of ours.
    fn aws_seen(&self) -> Vec<Value> {
        let all = moto_get("/_cellbridge/calls");
        // moto keeps the last 20000: a full log may have lost calls a probe is counting.
        assert!(all.len() < 20_000, "moto's call log is full");
        let arn = format!("%2F{}", self.cluster);
        all.into_iter()
            .filter(|c| {
                let line = c["line"].as_str().unwrap_or("");
                let path = line.split_once(' ').map_or("", |x| x.1);
                let at_cluster = path.split('/').any(|s| s == self.cluster || s.ends_with(&arn));
                (c["access_key"] == json!(self.access_key) || at_cluster) && c["presigned"] != true
            })
            .collect()
    }

    /// `seen` (one run's share of [`Bed::aws_seen`]) as calls, each the `nth` of its kind, the
    /// bed's names in their request lines left as placeholders.
    fn aws_calls(&self, seen: &[Value], role: bool) -> Vec<Call> {
        let mut nth: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut calls = Vec::new();
        for c in seen {
            let service = c["service"].as_str().unwrap().to_owned();
            let operation = c["operation"].as_str().unwrap().to_owned();
            let n = nth.entry((service.clone(), operation.clone())).or_insert(0);
            let line = c["line"].as_str().unwrap_or("");
            calls.push(Call::Aws {
                service,
                operation,
                line: line.replace(&self.cell, "{cell}").replace(&self.cluster, "{cluster}"),
                nth: *n,
                role,
            });
            *n += 1;
        }
        calls
    }

    /// Nothing half-applied: the Kustomization `flux-system` (which makes later runs stop)
    /// exists only together with every other object.
    fn check_not_half_applied(&self, clean: &BTreeMap<String, usize>) -> Result<(), String> {
        let got = self.counts();
        if got.get("Kustomization").copied().unwrap_or(0) > 0 && &got != clean {
            return Err(format!(
                "[{}] the Kustomization exists but the rest is not all there: {got:?}, a clean bootstrap has {clean:?}",
                self.id
            ));
        }
        Ok(())
    }

    /// A clean run after whatever happened: it converges to a clean bootstrap's objects and
    /// gives its access back; or, when it found the young entry an earlier run left (cut off,
    /// or its DeleteAccessEntry failing), it uses that entry and leaves it (it may be a run's at
    /// work), and the run after it, once the entry is older than a run's longest, deletes it.
    async fn converges(&self, clean: &BTreeMap<String, usize>) -> Result<BootstrapOutcome, String> {
        let id = &self.id;
        let before = self.entries_with_age().await?;
        let rep = self
            .run(false)
            .await
            .map_err(|e| format!("[{id}] the clean re-run failed: {e}"))?;
        if !matches!(
            rep.outcome,
            BootstrapOutcome::Bootstrapped | BootstrapOutcome::AlreadyBootstrapped
        ) {
            return Err(format!("[{id}] the clean re-run did not converge: {:?}", rep.outcome));
        }
        let got = self.counts();
        if &got != clean {
            return Err(format!(
                "[{id}] after the clean re-run: {got:?}, a clean bootstrap has {clean:?}"
            ));
        }
        if self.left_to_its_run(&before, rep.access_entry.as_ref()).await? {
            // Older than a run's longest, the entry's run is over: the next run deletes it.
            self.age_past_a_run(&before);
            let rep = self
                .run(false)
                .await
                .map_err(|e| format!("[{id}] the re-run after the window failed: {e}"))?;
            if rep.outcome != BootstrapOutcome::AlreadyBootstrapped {
                return Err(format!("[{id}] the re-run after the window: {:?}", rep.outcome));
            }
            self.gave_back(rep.access_entry.as_ref(), "the re-run after the window")
                .await?;
        }
        Ok(rep.outcome)
    }

    /// cellbridge's temporary entries on the cluster now, each with its age (EKS's `createdAt`
    /// as moto keeps it); an entry without the tag is an error.
    async fn entries_with_age(&self) -> Result<Vec<(String, Duration)>, String> {
        let eks = aws_sdk_eks::Client::new(&self.setup);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let listed = http_json(
            "GET",
            &format!(
                "{}/_cellbridge/eks/entries/{}?region={REGION}",
                moto::endpoint(),
                self.cluster
            ),
            None,
        )
        .1;
        let mut out = Vec::new();
        for principal in self.access_entries().await {
            let tagged = eks
                .describe_access_entry()
                .cluster_name(&self.cluster)
                .principal_arn(&principal)
                .send()
                .await
                .map_err(|e| format!("[{}] DescribeAccessEntry {principal}: {e:?}", self.id))?
                .access_entry()
                .and_then(|a| a.tags())
                .is_some_and(|t| t.contains_key(TEMPORARY_TAG));
            if !tagged {
                return Err(format!("[{}] an access entry left untagged: {principal}", self.id));
            }
            let created = listed
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["principalArn"] == json!(principal))
                .and_then(|e| e["createdAt"].as_f64())
                .ok_or_else(|| format!("[{}] moto keeps no createdAt of {principal}: {listed}", self.id))?;
            out.push((principal, now.saturating_sub(Duration::from_secs_f64(created))));
        }
        Ok(out)
    }

    /// After a clean run (or re-check) that found `before` (the entries an earlier run left,
    /// from [`Bed::entries_with_age`]): with none found, the run gave its own entry back; with
    /// one, that entry, young, may be a run's at work: the run used it, reported it adopted
    /// and left it, and nothing else is left. `Ok(true)`: an entry was left so.
    async fn left_to_its_run(
        &self,
        before: &[(String, Duration)],
        access: Option<&AccessReport>,
    ) -> Result<bool, String> {
        let id = &self.id;
        if before.is_empty() {
            self.gave_back(access, "the clean re-run").await?;
            return Ok(false);
        }
        let young = before.iter().all(|(_, age)| *age < RUN_LONGEST);
        let adopted = access.is_some_and(|a| a.temporary && a.adopted && !a.removed);
        let left: Vec<String> = self.entries_with_age().await?.into_iter().map(|(p, _)| p).collect();
        let found: Vec<String> = before.iter().map(|(p, _)| p.clone()).collect();
        if before.len() != 1 || !young || !adopted || left != found {
            return Err(format!(
                "[{id}] found {before:?} (a run's, younger than {RUN_LONGEST:?}: used, reported adopted and left); access {access:?}, left {left:?}"
            ));
        }
        Ok(true)
    }

    /// The run deleted its entry and none is left.
    async fn gave_back(&self, access: Option<&AccessReport>, what: &str) -> Result<(), String> {
        let left = self.access_entries().await;
        if !left.is_empty() || !access.is_some_and(|a| a.temporary && a.removed && !a.adopted) {
            return Err(format!(
                "[{}] {what} did not give its access back: {access:?}, left {left:?}",
                self.id
            ));
        }
        Ok(())
    }

    /// The entries in `found` made longer ago than a run's longest (their `createdAt` in moto).
    fn age_past_a_run(&self, found: &[(String, Duration)]) {
        for (principal, _) in found {
            moto_post(
                &format!("/_cellbridge/eks/entries/{}", self.cluster),
                json!({"region": REGION, "account": "123456789012", "principal": principal,
                       "age_secs": RUN_LONGEST.as_secs() + 100}),
            );
        }
    }
}

fn moto_post(path: &str, body: Value) {
    let (status, v) = http_json("POST", &format!("{}{path}", moto::endpoint()), Some(body));
    assert_eq!(status, 200, "{v}");
}

fn moto_get(path: &str) -> Vec<Value> {
    let (status, v) = http_json("GET", &format!("{}{path}", moto::endpoint()), None);
    assert_eq!(status, 200, "{v}");
    v.as_array().cloned().unwrap_or_default()
}

fn moto_clear(tag: &str) {
    let (status, v) = http_json(
        "DELETE",
        &format!("{}/_cellbridge/faults?tag={tag}", moto::endpoint()),
        None,
    );
    assert_eq!(status, 200, "{v}");
}

// ---- the calls ----------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Call {
    /// An AWS operation; the `nth` of its kind in a run.
    Aws {
        service: String,
        operation: String,
        /// `METHOD /path` as moto saw it in the probe (REST operations are matched on it).
        line: String,
        nth: usize,
        /// Made only when the cell names a bootstrap role.
        role: bool,
    },
    /// A kind of Kubernetes request: `METHOD /path` with object names as `*`.
    Kube { kind: String, needles: Vec<String> },
}

impl Call {
    fn name(&self) -> String {
        match self {
            Call::Aws { operation, nth, .. } if *nth > 0 => format!("{operation}#{}", nth + 1),
            Call::Aws { operation, .. } => operation.clone(),
            Call::Kube { kind, .. } => kind.clone(),
        }
    }

    fn role(&self) -> bool {
        matches!(self, Call::Aws { role: true, .. })
    }

    /// What an error about this call must mention (case-insensitively).
    fn needles(&self) -> Vec<String> {
        match self {
            Call::Aws { operation, .. } if operation == "GetSecretValue" => vec!["secrets manager".into()],
            Call::Aws { operation, .. } => vec![operation.to_lowercase()],
            Call::Kube { needles, .. } => needles.clone(),
        }
    }

    fn slug(&self) -> String {
        let raw = match self {
            Call::Aws { operation, nth, .. } => format!("{operation}{}", if *nth > 0 { "2" } else { "" }),
            Call::Kube { kind, .. } => {
                let (method, path) = kind.split_once(' ').unwrap();
                let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty() && *s != "*").collect();
                let last = segs.last().copied().unwrap_or("");
                let what = match (method, segs.len()) {
                    ("GET", 2) => format!("disc-{}", segs[1]),
                    ("GET", 3) if segs[0] == "apis" => format!("disc-{}", segs[1].split('.').next().unwrap()),
                    _ => last.to_owned(),
                };
                format!("{}-{what}", method.to_lowercase())
            }
        };
        raw.to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect()
    }
}

/// The calls in `found` not in `calls` yet, added in their order.
fn add_calls(calls: &mut Vec<Call>, found: Vec<Call>) {
    for call in found {
        if !calls.iter().any(|c| c.name() == call.name()) {
            calls.push(call);
        }
    }
}

/// The kinds of request in the API server's log, in the order first made.
fn kube_calls(requests: &[Value]) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    for r in requests {
        let (kind, needles) = kube_kind(r["method"].as_str().unwrap(), r["path"].as_str().unwrap());
        add_calls(&mut calls, vec![Call::Kube { kind, needles }]);
    }
    calls
}

/// `PATCH /apis/apps/v1/namespaces/flux-system/deployments/helm-controller` →
/// (`PATCH /apis/apps/v1/namespaces/flux-system/deployments/*`, what an error about it says).
fn kube_kind(method: &str, path: &str) -> (String, Vec<String>) {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (gv, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ((*v).to_owned(), rest.to_vec()),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest.to_vec()),
        _ => (String::new(), vec![]),
    };
    let gv_needle = format!("({gv})");
    match rest.len() {
        // Discovery of a group version: it resolves the kind of the object about to be applied.
        0 => (format!("{method} {path}"), vec!["discover".into(), gv_needle]),
        // A list (the CRDs, waited for until Established; the Nodes a check counts).
        1 => (format!("{method} {path}"), vec!["list".into(), rest[0].to_lowercase()]),
        // A list in a namespace (the Deployments and Pods a check reads).
        3 => (
            format!("{method} {path}"),
            vec![format!("list {}", rest[2].to_lowercase())],
        ),
        // One object, cluster-wide or in a namespace.
        2 | 4 => {
            let name = rest[rest.len() - 1];
            let plural = rest[rest.len() - 2];
            let kind = match plural.strip_suffix("ies") {
                Some(stem) => format!("{stem}y"),
                None => plural.trim_end_matches('s').to_owned(),
            };
            let op = if method == "PATCH" { "apply" } else { "get" };
            let head = &path[..path.len() - name.len()];
            (
                format!("{method} {head}*"),
                vec![format!("{op} {kind}"), name.to_lowercase()],
            )
        }
        _ => (format!("{method} {path}"), vec![]),
    }
}

fn kube_regex(kind: &str) -> (String, String) {
    let (method, path) = kind.split_once(' ').unwrap();
    let re = path.split('*').map(regex_escape).collect::<Vec<_>>().join("[^/]+");
    (method.to_owned(), format!("^{re}$"))
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '-' || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// What a clean bootstrap does, learnt once per test binary.
struct Probe {
    calls: Vec<Call>,
    /// Stored objects per kind after a clean bootstrap.
    clean: BTreeMap<String, usize>,
    /// What the re-check a clean bootstrap hands on does (`recheck.rs`).
    rechecks: Vec<Call>,
}

async fn probe() -> &'static Probe {
    static PROBE: tokio::sync::OnceCell<Probe> = tokio::sync::OnceCell::const_new();
    PROBE
        .get_or_init(|| async {
            moto::configure_env();
            let mut calls: Vec<Call> = Vec::new();
            let mut rechecks: Vec<Call> = Vec::new();
            let mut clean = BTreeMap::new();
            for role in [false, true] {
                let bed = Bed::new(if role { "probe-role" } else { "probe" }, role).await;
                let before = bed.aws_seen().len();
                let rep = bed.run(false).await.expect("a clean bootstrap");
                assert_eq!(rep.outcome, BootstrapOutcome::Bootstrapped);
                // A call made either way is the run without a role's.
                add_calls(&mut calls, bed.aws_calls(&bed.aws_seen()[before..], role));
                if !role {
                    add_calls(&mut calls, kube_calls(&bed.kube.requests()));
                    clean = bed.counts();
                }
                recheck::probe(&bed, &rep, role, &mut rechecks).await;
            }
            let names: Vec<String> = calls.iter().map(Call::name).collect();
            for needed in [
                "AssumeRole",
                "GetCallerIdentity",
                "DescribeCluster",
                "GetSecretValue",
                "DescribeAccessEntry",
                "CreateAccessEntry",
                "AssociateAccessPolicy",
                "DeleteAccessEntry",
                "GET /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/*",
                "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                "PATCH /apis/apiextensions.k8s.io/v1/customresourcedefinitions/*",
                "PATCH /api/v1/namespaces/flux-system/secrets/*",
                "PATCH /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/*",
                "GET /apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/*",
                "GET /apis/apps/v1",
            ] {
                assert!(
                    names.iter().any(|n| n == needed),
                    "a clean bootstrap makes {needed}: {names:?}"
                );
            }
            for c in &calls {
                if let Call::Kube { kind, needles } = c {
                    assert!(!needles.is_empty(), "a Kubernetes request of unknown shape: {kind}");
                }
            }
            assert!(clean.get("Kustomization") == Some(&1), "{clean:?}");
            say(&format!("bootstrap calls ({}): {names:?}", names.len()));
            say(&format!("objects of a clean bootstrap: {clean:?}"));
            recheck::check_probe(&rechecks);
            Probe { calls, clean, rechecks }
        })
        .await
}

// ---- faults -------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    ServerError,
    Throttle,
    Hang,
}

/// An injected fault, and how to find it again.
enum Injected {
    Aws { tag: String },
    Kube { method: String, path: String },
}

/// Injects `fault` at `call` for `count` hits.
fn inject(bed: &Bed, call: &Call, fault: Fault, count: u32, tag: &str) -> Injected {
    match call {
        Call::Aws {
            service,
            operation,
            line,
            nth,
            ..
        } => {
            let kind = match fault {
                Fault::ServerError => "5xx",
                Fault::Throttle => "throttle",
                Fault::Hang => "timeout",
            };
            let mut f = json!({"service": service, "kind": kind, "count": count, "skip": nth,
                               "sleep": HANG_SECS, "land": true, "tag": tag});
            match service.as_str() {
                // Query and JSON protocols: the operation's name, aimed by key or by secret.
                "sts" => {
                    f["operation"] = json!(operation);
                    f["access_key"] = json!(bed.access_key);
                }
                "secretsmanager" => {
                    f["operation"] = json!(operation);
                    f["body_contains"] = json!(bed.secret);
                }
                // REST: the request line, with this bed's cluster (and any principal; the
                // cluster's own ARN, TagResource's, is this bed's).
                _ => {
                    let line = line.replace("{cell}", &bed.cell).replace("{cluster}", &bed.cluster);
                    let (method, path) = line.split_once(' ').unwrap();
                    let segs: Vec<String> = path
                        .split('/')
                        .map(|s| {
                            if s.contains("%3A") && !s.contains(&bed.cluster) {
                                "[^/]+".to_owned()
                            } else {
                                regex_escape(s)
                            }
                        })
                        .collect();
                    f["operation"] = json!(format!("^{method} {}$", segs.join("/")));
                }
            }
            moto_post("/_cellbridge/faults", f);
            Injected::Aws { tag: tag.into() }
        }
        Call::Kube { kind, .. } => {
            let (method, path) = kube_regex(kind);
            let mut f = json!({"method": method, "path": path, "count": count});
            match fault {
                Fault::ServerError => f["status"] = json!(503),
                Fault::Throttle => {
                    f["status"] = json!(429);
                    f["retry_after"] = json!(1);
                }
                Fault::Hang => f["sleep"] = json!(HANG_SECS),
            }
            bed.kube.fault(f);
            Injected::Kube { method, path }
        }
    }
}

fn hits(bed: &Bed, injected: &Injected) -> u64 {
    match injected {
        Injected::Aws { tag } => moto_get("/_cellbridge/faults")
            .iter()
            .filter(|f| f["tag"] == json!(tag))
            .map(|f| f["hits"].as_u64().unwrap_or(0))
            .sum(),
        Injected::Kube { method, path } => bed
            .kube
            .control("GET", "/_fake/faults", None)
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["method"] == json!(method) && f["path"] == json!(path))
            .map(|f| f["hits"].as_u64().unwrap_or(0))
            .sum(),
    }
}

fn clear(bed: &Bed, injected: &[Injected]) {
    for i in injected {
        if let Injected::Aws { tag } = i {
            moto_clear(tag);
        }
    }
    bed.kube.clear_faults();
}

fn fault_tag(fault: Fault) -> &'static str {
    match fault {
        Fault::ServerError => "e5xx",
        Fault::Throttle => "thr",
        Fault::Hang => "hang",
    }
}

/// One failed attempt injected at each of `calls`, then `work` (a run, a re-check): what it
/// answered, how long it took, and the calls whose fault was not met exactly once; the faults
/// are cleared after (hung requests given the time to land first).
async fn once_at_each<T>(
    bed: &Bed,
    calls: &[Call],
    fault: Fault,
    id: &str,
    work: impl std::future::Future<Output = T>,
) -> (T, Duration, Vec<String>) {
    let injected: Vec<(String, Injected)> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name(), inject(bed, c, fault, 1, &format!("{id}-{i}"))))
        .collect();
    let t = Instant::now();
    let got = work.await;
    let took = t.elapsed();
    let missed: Vec<String> = injected
        .iter()
        .filter(|(_, i)| hits(bed, i) != 1)
        .map(|(n, _)| n.clone())
        .collect();
    let injected: Vec<Injected> = injected.into_iter().map(|(_, i)| i).collect();
    if fault == Fault::Hang {
        tokio::time::sleep(Duration::from_secs(HANG_SECS + 1)).await;
    }
    clear(bed, &injected);
    (got, took, missed)
}

/// A fault at every call in `calls` that lasts one attempt: the run succeeds through its
/// retries, each fault was met once, and the cluster ends as after a clean bootstrap.
async fn run_transient(id: String, calls: Vec<Call>, fault: Fault) -> Result<String, String> {
    let _permit = permits().acquire().await.unwrap();
    let probe = probe().await;
    let bed = Bed::new(&id, calls.iter().any(Call::role)).await;
    let (r, took, missed) = once_at_each(&bed, &calls, fault, &id, bed.run(false)).await;
    let rep = r.map_err(|e| format!("[{id}] one failed attempt at each call was not retried through: {e}"))?;
    if !missed.is_empty() {
        return Err(format!("[{id}] faults not met exactly once: {missed:?}"));
    }
    if rep.outcome != BootstrapOutcome::Bootstrapped {
        return Err(format!("[{id}] outcome {:?}", rep.outcome));
    }
    let got = bed.counts();
    if got != probe.clean {
        return Err(format!(
            "[{id}] objects {got:?}, a clean bootstrap has {:?}",
            probe.clean
        ));
    }
    let left = bed.access_entries().await;
    if !left.is_empty() || !rep.access_entry.as_ref().is_some_and(|a| a.temporary && a.removed) {
        return Err(format!(
            "[{id}] access not given back: {:?}, left {left:?}",
            rep.access_entry
        ));
    }
    Ok(format!(
        "{id}: {} calls each failed once, retried through in {took:.1?}",
        calls.len()
    ))
}

/// A fault at `call` that does not go away: a bounded, retryable failure naming the call
/// (or a success that needed no more of it), nothing half-applied, and a clean re-run
/// converges.
async fn run_persistent(id: String, call: Call, fault: Fault) -> Result<String, String> {
    let _permit = permits().acquire().await.unwrap();
    let probe = probe().await;
    let bed = Bed::new(&id, call.role()).await;
    let injected = inject(&bed, &call, fault, 1000, &id);
    let t = Instant::now();
    let r = bed.run(false).await;
    let took = t.elapsed();
    let n = hits(&bed, &injected);
    // Let hung requests the client gave up on land before looking at what is left.
    if fault == Fault::Hang {
        tokio::time::sleep(Duration::from_secs(HANG_SECS + 1)).await;
    }
    clear(&bed, std::slice::from_ref(&injected));
    within_bounds(&id, &call, n, took, "run", &r)?;
    let outcome = match &r {
        Ok(rep) => {
            let given_back = rep.access_entry.as_ref().is_none_or(|a| !a.temporary || a.removed);
            if rep.outcome != BootstrapOutcome::Bootstrapped || !given_back {
                return Err(format!(
                    "[{id}] the run neither failed nor finished cleanly: {:?}, access {:?}",
                    rep.outcome, rep.access_entry
                ));
            }
            "succeeded".to_owned()
        }
        Err(e) => {
            let msg = e.to_string();
            if !e.retryable() {
                return Err(format!("[{id}] failed without being retryable: {msg}"));
            }
            let missing = unnamed(&bed, &call, &msg);
            if !missing.is_empty() {
                return Err(format!("[{id}] the error does not name the call ({missing:?}): {msg}"));
            }
            format!("failed retryably ({msg})")
        }
    };
    bed.check_not_half_applied(&probe.clean)?;
    let left = bed.access_entries().await.len();
    let end = bed.converges(&probe.clean).await?;
    Ok(format!(
        "{id}: {n} attempt(s), {outcome} in {took:.1?}; {left} access entr(y/ies) left; clean re-run: {end:?}"
    ))
}

/// What `text` (an error, a reason) does not say of `call`: the call must be named by the text
/// itself, not by the case's names in it.
fn unnamed(bed: &Bed, call: &Call, text: &str) -> Vec<String> {
    let lower = text.replace(&bed.cluster, "").replace(&bed.cell, "").to_lowercase();
    call.needles().into_iter().filter(|n| !lower.contains(n)).collect()
}

async fn gather(what: &str, handles: Vec<tokio::task::JoinHandle<Result<String, String>>>, started: Instant) {
    let total = handles.len();
    let mut failures = Vec::new();
    for h in handles {
        match h.await {
            Ok(Ok(line)) => say(&line),
            Ok(Err(e)) => {
                say(&format!("FAILED {e}"));
                failures.push(e);
            }
            Err(e) => failures.push(format!("a case panicked: {e}")),
        }
    }
    say(&format!("{what}: {total} cases in {:.1?}", started.elapsed()));
    assert!(
        failures.is_empty(),
        "{} case(s) misbehaved:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The cases of a matrix over `calls`, ids starting with `prefix`: the runs where one attempt
/// fails at every call (a few runs: hangs cost a timeout each; calls of the role's run need the
/// role), and per call the run where it keeps failing.
/// A call that keeps failing was reached, tried no more often than its client's bound, and the
/// `what` (a run, a re-check) failing on it took no longer than 45 s; `got` is what it answered.
fn within_bounds(
    id: &str,
    call: &Call,
    n: u64,
    took: Duration,
    what: &str,
    got: &dyn std::fmt::Debug,
) -> Result<(), String> {
    if n == 0 {
        return Err(format!(
            "[{id}] the fault at {} was never reached: {got:?}",
            call.name()
        ));
    }
    let bound = match call {
        Call::Aws { .. } => AWS_ATTEMPTS,
        Call::Kube { .. } => u64::from(KUBE_ATTEMPTS),
    };
    if n > bound {
        return Err(format!(
            "[{id}] {} was tried {n} times (bound {bound}): {got:?}",
            call.name()
        ));
    }
    if took > Duration::from_secs(45) {
        return Err(format!("[{id}] the failing {what} took {took:?}"));
    }
    Ok(())
}

/// A matrix's cases: (id, calls) of each run failing one attempt at every call, and (id, call)
/// of each run where one call keeps failing.
struct Cases {
    once: Vec<(String, Vec<Call>)>,
    each: Vec<(String, Call)>,
}

fn cases_of(calls: &[Call], fault: Fault, prefix: &str) -> Cases {
    let mut once = Vec::new();
    for role in [false, true] {
        let mine: Vec<Call> = calls.iter().filter(|c| c.role() == role).cloned().collect();
        let per_run = if fault == Fault::Hang {
            HANGS_PER_RUN
        } else {
            mine.len()
        };
        for (i, group) in mine.chunks(per_run.max(1)).enumerate() {
            once.push((
                format!("{prefix}-once-{}{i}", if role { "r" } else { "" }),
                group.to_vec(),
            ));
        }
    }
    let each = calls
        .iter()
        .enumerate()
        .map(|(i, call)| (format!("{prefix}-{i:02}-{}", call.slug()), call.clone()))
        .collect();
    Cases { once, each }
}

async fn matrix(fault: Fault) {
    let started = Instant::now();
    let tag = fault_tag(fault);
    let calls = probe().await.calls.clone();
    let mut handles = Vec::new();
    let Cases { once, each } = cases_of(&calls, fault, tag);
    for (id, group) in once {
        handles.push(tokio::spawn(run_transient(id, group, fault)));
    }
    for (id, call) in each {
        handles.push(tokio::spawn(run_persistent(id, call, fault)));
    }
    handles.extend(recheck::cases(fault).await);
    gather(&format!("{fault:?}"), handles, started).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_5xx_at_any_call_is_retried_or_fails_retryably_and_a_rerun_converges() {
    matrix(Fault::ServerError).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_throttle_at_any_call_is_retried_or_fails_retryably_and_a_rerun_converges() {
    matrix(Fault::Throttle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "slow: every hang waits out a timeout (about a minute of the suite); `make bench` runs it"]
async fn a_hang_at_any_call_is_timed_out_and_retried_or_fails_retryably_and_a_rerun_converges() {
    matrix(Fault::Hang).await;
}

// ---- cut off by the deadline --------------------------------------------------------------

/// The run is killed (as a Lambda at its deadline) while a request of `call`'s kind hangs;
/// the hung request lands later. The next run finishes the bootstrap with the access entry the
/// dead run left: young, it may be a run's at work, so that run uses it and leaves it; once
/// older than a run's longest, the run after deletes it (`Bed::converges`).
async fn run_cut(id: String, call: Call) -> Result<String, String> {
    let _permit = permits().acquire().await.unwrap();
    let probe = probe().await;
    let bed = Bed::new(&id, false).await;
    let injected = inject(&bed, &call, Fault::Hang, 1000, &id);
    let t = Instant::now();
    let cut = async {
        // The deadline falls while the request hangs, whenever the run gets there.
        while hits(&bed, &injected) == 0 {
            if t.elapsed() > Duration::from_secs(60) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let finished = tokio::select! {
        r = bed.run(false) => Some(r),
        _ = cut => None,
    };
    let took = t.elapsed();
    let n = hits(&bed, &injected);
    clear(&bed, std::slice::from_ref(&injected));
    if let Some(r) = finished {
        return Err(format!("[{id}] the run ended before its deadline ({n} hits): {r:?}"));
    }
    if n == 0 {
        return Err(format!("[{id}] the hang at {} was never reached", call.name()));
    }
    // The hung request lands after the run is gone.
    tokio::time::sleep(Duration::from_secs(HANG_SECS + 1)).await;
    bed.check_not_half_applied(&probe.clean)?;
    let left = bed.access_entries().await;
    if left.is_empty() {
        return Err(format!("[{id}] a run killed mid-apply left no access entry?"));
    }
    let end = bed.converges(&probe.clean).await?;
    Ok(format!(
        "{id}: cut after {took:.1?} at {}; the next run: {end:?} with the dead run's entry, left young, deleted once older than a run",
        call.name()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_cut_off_by_its_deadline_in_any_kind_of_apply_is_finished_by_the_next() {
    let started = Instant::now();
    let applies: Vec<Call> = probe()
        .await
        .calls
        .iter()
        .filter(|c| matches!(c, Call::Kube { kind, .. } if kind.starts_with("PATCH ")))
        .cloned()
        .collect();
    assert!(applies.len() >= 5, "{applies:?}");
    let handles = applies
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(run_cut(format!("cut-{i:02}-{}", c.slug()), c)))
        .collect();
    gather("deadline cuts", handles, started).await;
}
