//! The Kubernetes side: a client that trusts the cluster's CA and renews its EKS token, and
//! server-side apply of any kind through discovery, with bounded retries.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use base64::Engine as _;
use http::{HeaderName, HeaderValue};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde::Serialize;
use serde_json::Value;

use super::plan::{KubeRef, Phase, Step};
use super::token;
use crate::error::{Class, Classify};
use crate::retry::{Again, Policy};

pub const FIELD_MANAGER: &str = "cellbridge";

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("cannot connect to the cluster: {reason}")]
    Connect { reason: String },
    #[error("{operation} {target}: HTTP {code} {reason}: {message}")]
    Api {
        operation: &'static str,
        target: String,
        code: u16,
        reason: String,
        message: String,
    },
    #[error("{operation} {target}: {reason}")]
    Transport {
        operation: &'static str,
        target: String,
        reason: String,
    },
    #[error("{target}: the cluster serves no kind {kind} in {api_version}{hint}")]
    UnknownKind {
        target: String,
        api_version: String,
        kind: String,
        hint: &'static str,
    },
    #[error("CRDs not Established after {waited_secs}s: {pending}")]
    CrdTimeout { pending: String, waited_secs: u64 },
}

impl Classify for ApplyError {
    /// Worth another run later when the cluster or the network had a bad moment (401 and 403
    /// included: a new access entry takes a while to reach the API server).
    fn class(&self) -> Class {
        match self {
            ApplyError::Api {
                code: 401 | 403 | 409 | 429 | 500 | 502 | 503 | 504,
                ..
            } => Class::Retryable,
            ApplyError::Transport { .. } | ApplyError::CrdTimeout { .. } | ApplyError::Connect { .. } => {
                Class::Retryable
            }
            ApplyError::Api { .. } | ApplyError::UnknownKind { .. } => Class::Final,
        }
    }
}

/// Timeouts and retry bounds; every wait of a bootstrap is bounded.
#[derive(Debug, Clone)]
pub struct Tuning {
    pub request_timeout: Duration,
    pub attempts: u32,
    pub backoff: Duration,
    pub max_backoff: Duration,
    pub crd_timeout: Duration,
    pub ready_timeout: Duration,
    pub poll: Duration,
    /// A new access entry takes a few seconds to reach the API server: 401/403 are retried
    /// for this long after it was created.
    pub auth_grace: Duration,
    /// Age at which the EKS token is replaced (EKS refuses tokens older than 15 minutes).
    pub token_refresh: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            attempts: 6,
            backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            crd_timeout: Duration::from_secs(120),
            ready_timeout: Duration::from_secs(120),
            poll: Duration::from_millis(500),
            auth_grace: Duration::from_secs(60),
            token_refresh: token::REFRESH_AFTER,
        }
    }
}

/// How the client proves who it is.
#[derive(Clone)]
pub enum ClusterAuth {
    /// An EKS cluster: a fresh token from these credentials, renewed before it expires.
    Eks {
        credentials: SharedCredentialsProvider,
        region: String,
        cluster: String,
        sts_endpoint: String,
        url: String,
        ca_pem: Vec<u8>,
    },
    /// Whatever a kubeconfig says (the command line's `--kubeconfig`).
    Config(Box<kube::Config>),
}

impl fmt::Debug for ClusterAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterAuth::Eks { cluster, url, .. } => write!(f, "Eks({cluster} at {url})"),
            ClusterAuth::Config(c) => write!(f, "Config({})", c.cluster_url),
        }
    }
}

/// PEM certificates → DER, what `kube::Config::root_cert` takes.
pub fn pem_to_der(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "CA is not PEM text".to_owned())?;
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            cur = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            let b64 = cur.take().ok_or("CA PEM has END without BEGIN")?;
            out.push(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| "CA PEM is not base64".to_owned())?,
            );
        } else if let Some(c) = cur.as_mut() {
            c.push_str(line);
        }
    }
    if out.is_empty() {
        return Err("CA PEM holds no certificate".into());
    }
    Ok(out)
}

/// A Kubernetes client that renews its EKS token before the 15 minutes EKS allows.
pub struct Session {
    auth: ClusterAuth,
    tuning: Tuning,
    client: Client,
    default_namespace: String,
    issued: Instant,
    /// Until when 401/403 may still be the access entry propagating.
    auth_grace_until: Option<Instant>,
}

impl Session {
    pub async fn connect(auth: ClusterAuth, tuning: Tuning, fresh_access_entry: bool) -> Result<Session, ApplyError> {
        crate::telemetry::install_crypto_provider();
        let (client, default_namespace) = build_client(&auth, &tuning).await?;
        let auth_grace_until = fresh_access_entry.then(|| Instant::now() + tuning.auth_grace);
        Ok(Session {
            auth,
            tuning,
            client,
            default_namespace,
            issued: Instant::now(),
            auth_grace_until,
        })
    }

    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// The client, rebuilt with a new token when the current one is close to expiry.
    pub async fn client(&mut self) -> Result<Client, ApplyError> {
        if matches!(self.auth, ClusterAuth::Eks { .. }) && self.issued.elapsed() >= self.tuning.token_refresh {
            tracing::info!("renewing the EKS token");
            self.client = build_client(&self.auth, &self.tuning).await?.0;
            self.issued = Instant::now();
        }
        Ok(self.client.clone())
    }

    fn in_auth_grace(&self) -> bool {
        self.auth_grace_until.is_some_and(|t| Instant::now() < t)
    }
}

async fn build_client(auth: &ClusterAuth, tuning: &Tuning) -> Result<(Client, String), ApplyError> {
    let connect = |reason: String| ApplyError::Connect { reason };
    let mut config = match auth {
        ClusterAuth::Config(c) => (**c).clone(),
        ClusterAuth::Eks {
            credentials,
            region,
            cluster,
            sts_endpoint,
            url,
            ca_pem,
        } => {
            let creds = credentials
                .provide_credentials()
                .await
                .map_err(|e| connect(format!("no AWS credentials to sign the EKS token: {e}")))?;
            let tok = token::eks_token(&creds, region, cluster, sts_endpoint, SystemTime::now())
                .map_err(|e| connect(e.to_string()))?;
            let uri: http::Uri = url
                .parse()
                .map_err(|_| connect(format!("cluster endpoint {url:?} is not a URL")))?;
            let mut c = kube::Config::new(uri);
            c.root_cert = Some(pem_to_der(ca_pem).map_err(|e| connect(format!("cluster {cluster}: {e}")))?);
            let mut value = HeaderValue::from_str(&format!("Bearer {tok}"))
                .map_err(|_| connect("token is not a header value".into()))?;
            value.set_sensitive(true);
            c.headers.push((HeaderName::from_static("authorization"), value));
            c
        }
    };
    // Our own retry loop knows which errors are worth retrying and bounds them.
    config.default_retry = false;
    config.read_timeout = Some(tuning.request_timeout);
    config.write_timeout = Some(tuning.request_timeout);
    config.connect_timeout = Some(tuning.request_timeout.min(Duration::from_secs(10)));
    let ns = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| connect(e.to_string()))?;
    Ok((client, ns))
}

/// Serializes as the JSON it holds; `Debug` never shows it (a Step may carry credentials).
struct Opaque<'a>(&'a Value);

impl Serialize for Opaque<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl fmt::Debug for Opaque<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<object>")
    }
}

enum Verdict {
    Retry,
    AuthPending,
    Fail,
}

fn classify(e: &kube::Error) -> Verdict {
    match e {
        kube::Error::Api(s) => match s.code {
            409 if s.reason != "AlreadyExists" => Verdict::Retry,
            429 | 500 | 502 | 503 | 504 => Verdict::Retry,
            401 | 403 => Verdict::AuthPending,
            _ => Verdict::Fail,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => Verdict::Retry,
        _ => Verdict::Fail,
    }
}

fn to_error(operation: &'static str, target: &str, e: kube::Error, quiet: bool) -> ApplyError {
    match e {
        kube::Error::Api(s) => ApplyError::Api {
            operation,
            target: target.into(),
            code: s.code,
            reason: s.reason.clone(),
            // The server's words about a Secret are not repeated: it may quote the data.
            message: if quiet {
                "(message withheld for a Secret)".into()
            } else {
                s.message.clone()
            },
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => ApplyError::Transport {
            operation,
            target: target.into(),
            reason: crate::redact::chain(&e),
        },
        other => ApplyError::Transport {
            operation,
            target: target.into(),
            reason: other.to_string(),
        },
    }
}

/// Retries `f` on transient errors with exponential backoff ([`crate::retry`]), at most
/// `tuning.attempts` tries; a 401/403 while the new access entry propagates is waited out
/// without counting, for as long as the session's grace lasts.
async fn retry<T, F, Fut>(
    session: &Session,
    operation: &'static str,
    target: &str,
    quiet: bool,
    f: F,
) -> Result<T, ApplyError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let tuning = &session.tuning;
    let policy = Policy {
        first: tuning.backoff,
        max: tuning.max_backoff,
        attempts: tuning.attempts,
        jitter: false,
        deadline: None,
    };
    let mut auth_waits = 0u32;
    let judge = |e: &kube::Error| match classify(e) {
        Verdict::Retry => Again::Yes,
        Verdict::AuthPending if session.in_auth_grace() => Again::Uncounted,
        Verdict::AuthPending | Verdict::Fail => Again::No,
    };
    let notify = |e: &kube::Error, attempt: u32, _wait: Duration| match classify(e) {
        Verdict::AuthPending => {
            auth_waits += 1;
            tracing::info!(%target, waits = auth_waits, "access not effective yet, waiting for the access entry");
        }
        // The server's message is left out: for a Secret it may quote the data.
        _ => tracing::warn!(%target, attempt = attempt + 1, error = %brief(e), "retrying"),
    };
    crate::retry::retry(&policy, f, judge, notify)
        .await
        .map_err(|gave_up| to_error(operation, target, gave_up.into_error(), quiet))
}

/// A Kubernetes error without the server's message.
fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("HTTP {} {}", s.code, s.reason),
        other => crate::redact::chain(other),
    }
}

/// What happened to one object.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub phase: Phase,
    #[serde(flatten)]
    pub target: KubeRef,
}

/// The GitRepository's Ready condition, as the report shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SourceStatus {
    /// `None`: no Ready condition before the wait ran out.
    pub ready: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// Applies steps with server-side apply, resolving each kind through discovery once per
/// group/version.
pub struct Applier {
    session: Session,
    manager: String,
    discovered: HashMap<String, Vec<(ApiResource, ApiCapabilities)>>,
}

fn crd_resource() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

fn split_api_version(av: &str) -> (&str, &str) {
    match av.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", av),
    }
}

impl Applier {
    pub fn new(session: Session) -> Self {
        Self {
            session,
            manager: FIELD_MANAGER.into(),
            discovered: HashMap::new(),
        }
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Whether the object exists; a kind the cluster does not serve yet counts as absent.
    /// `plural` is given so that no discovery is needed for this one read.
    pub async fn exists(
        &mut self,
        api_version: &str,
        kind: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<bool, ApplyError> {
        let (group, version) = split_api_version(api_version);
        let ar = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let client = self.session.client().await?;
        let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &ar);
        let target = format!("{kind} {namespace}/{name}");
        let found = retry(&self.session, "get", &target, false, || api.get_opt(name)).await;
        match found {
            Ok(o) => Ok(o.is_some()),
            // A group that does not exist yet answers 404 with a plain-text page.
            Err(ApplyError::Api { code: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn resolve(
        &mut self,
        target: &KubeRef,
        after_crds: bool,
    ) -> Result<(ApiResource, ApiCapabilities), ApplyError> {
        let (group, version) = split_api_version(&target.api_version);
        let key = target.api_version.clone();
        let find =
            |list: &Vec<(ApiResource, ApiCapabilities)>| list.iter().find(|(ar, _)| ar.kind == target.kind).cloned();
        if let Some(hit) = self.discovered.get(&key).and_then(find) {
            return Ok(hit);
        }
        // A CRD's kinds can reach discovery a moment after it is Established: look again a
        // few times before calling the kind unknown.
        let tries = if after_crds { 30 } else { 1 };
        let gv = kube::core::GroupVersion::gv(group, version);
        for i in 0..tries {
            let client = self.session.client().await?;
            let tstr = target.to_string();
            let res = retry(&self.session, "discover", &tstr, false, || {
                kube::discovery::pinned_group(&client, &gv)
            })
            .await;
            match res {
                Ok(g) => {
                    let list = g.versioned_resources(version);
                    let hit = find(&list);
                    self.discovered.insert(key.clone(), list);
                    if let Some(hit) = hit {
                        return Ok(hit);
                    }
                }
                Err(ApplyError::Api { code: 404, .. }) => {}
                Err(e) => return Err(e),
            }
            if i + 1 < tries {
                tokio::time::sleep(self.session.tuning.poll.min(Duration::from_millis(300))).await;
            }
        }
        Err(ApplyError::UnknownKind {
            target: target.to_string(),
            api_version: target.api_version.clone(),
            kind: target.kind.clone(),
            hint: if group.ends_with(".k8s.io") || group.is_empty() || group == "apps" {
                ""
            } else {
                " (is its CRD in gotk-components.yaml?)"
            },
        })
    }

    /// Server-side apply of one step, forcing ownership of its fields for our field manager.
    pub async fn apply(&mut self, step: &Step) -> Result<Applied, ApplyError> {
        let after_crds = step.phase > Phase::Crd;
        let (ar, caps) = self.resolve(&step.target, after_crds).await?;
        let client = self.session.client().await?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client, &ar),
            Scope::Namespaced => {
                let ns = step
                    .target
                    .namespace
                    .clone()
                    .unwrap_or_else(|| self.session.default_namespace.clone());
                Api::namespaced_with(client, &ns, &ar)
            }
        };
        let pp = PatchParams::apply(&self.manager).force();
        let target = step.target.to_string();
        let quiet = step.phase == Phase::GitSecret;
        let patch = Patch::Apply(Opaque(step.object()));
        retry(&self.session, "apply", &target, quiet, || {
            api.patch(&step.target.name, &pp, &patch)
        })
        .await?;
        tracing::info!(phase = ?step.phase, object = %target, "applied");
        Ok(Applied {
            phase: step.phase,
            target: step.target.clone(),
        })
    }

    /// Waits until every named CRD is Established (bounded by `crd_timeout`), listing all
    /// CRDs in one request per poll.
    pub async fn wait_established(&mut self, names: &[String]) -> Result<(), ApplyError> {
        if names.is_empty() {
            return Ok(());
        }
        let start = Instant::now();
        let mut delay = Duration::from_millis(100);
        loop {
            let client = self.session.client().await?;
            let api: Api<DynamicObject> = Api::all_with(client, &crd_resource());
            let lp = ListParams::default();
            let list = retry(&self.session, "list", "CustomResourceDefinitions", false, || {
                api.list(&lp)
            })
            .await?;
            let established: std::collections::HashSet<String> = list
                .items
                .iter()
                .filter(|o| condition(&o.data, "Established").0 == Some(true))
                .filter_map(|o| o.metadata.name.clone())
                .collect();
            let pending: Vec<&str> = names
                .iter()
                .filter(|n| !established.contains(*n))
                .map(String::as_str)
                .collect();
            if pending.is_empty() {
                tracing::info!(
                    crds = names.len(),
                    waited_ms = start.elapsed().as_millis() as u64,
                    "CRDs established"
                );
                return Ok(());
            }
            if start.elapsed() >= self.session.tuning.crd_timeout {
                return Err(ApplyError::CrdTimeout {
                    pending: pending.join(", "),
                    waited_secs: start.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.session.tuning.poll.max(Duration::from_millis(100)));
        }
    }

    /// Waits (bounded by `ready_timeout`) for the GitRepository to report Ready True or False
    /// for its current generation; the last status seen is returned either way.
    pub async fn wait_source_ready(&mut self, target: &KubeRef) -> Result<SourceStatus, ApplyError> {
        let (ar, _) = self.resolve(target, true).await?;
        let ns = target
            .namespace
            .clone()
            .unwrap_or_else(|| self.session.default_namespace.clone());
        let start = Instant::now();
        let tstr = target.to_string();
        loop {
            let client = self.session.client().await?;
            let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &ar);
            let obj = retry(&self.session, "get", &tstr, false, || api.get(&target.name)).await?;
            let generation = obj.metadata.generation.unwrap_or(0);
            let observed = obj
                .data
                .pointer("/status/observedGeneration")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let (ready, reason, message) = condition(&obj.data, "Ready");
            let status = SourceStatus {
                ready,
                reason,
                message,
                revision: obj
                    .data
                    .pointer("/status/artifact/revision")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            };
            if status.ready.is_some() && observed >= generation {
                return Ok(status);
            }
            if start.elapsed() >= self.session.tuning.ready_timeout {
                return Ok(SourceStatus { ready: None, ..status });
            }
            tokio::time::sleep(self.session.tuning.poll).await;
        }
    }
}

/// `(status, reason, message)` of the condition `kind` in `.status.conditions`.
fn condition(obj: &Value, kind: &str) -> (Option<bool>, Option<String>, Option<String>) {
    let Some(conds) = obj.pointer("/status/conditions").and_then(Value::as_array) else {
        return (None, None, None);
    };
    for c in conds {
        if c.get("type").and_then(Value::as_str) == Some(kind) {
            let status = match c.get("status").and_then(Value::as_str) {
                Some("True") => Some(true),
                Some("False") => Some(false),
                _ => None,
            };
            let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
            return (status, s("reason"), s("message"));
        }
    }
    (None, None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_bundles_become_der() {
        let pem = b"-----BEGIN CERTIFICATE-----\nAAEC\nAw==\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nBAU=\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_to_der(pem).unwrap(), vec![vec![0, 1, 2, 3], vec![4, 5]]);
        assert!(pem_to_der(b"junk").is_err());
    }

    #[test]
    fn conditions_are_read() {
        let v = serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "AuthFailed", "message": "no"}]}});
        assert_eq!(
            condition(&v, "Ready"),
            (Some(false), Some("AuthFailed".into()), Some("no".into()))
        );
        assert_eq!(condition(&v, "Established").0, None);
    }
}
