//! The Kubernetes side, as the bootstrap sees it: how to reach a cluster ([`ClusterAuth`]), the
//! bounds of every wait ([`Tuning`]), what an apply answers ([`Applied`]), what
//! to read to confirm Flux took over ([`Observe`]) and Kubernetes' refusals, classified
//! ([`ApplyError`]). kube-rs speaks it in `adapters/kube/`.

use std::fmt;
use std::time::Duration;

use aws_credential_types::provider::SharedCredentialsProvider;
use serde::Serialize;

use crate::pure::bootstrap::plan::{KubeRef, Phase};
use crate::shell::error::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("cannot connect to the cluster: {reason}")]
    Connect { reason: String },
    /// No connection to the API server within the connect timeout, and it never answered in
    /// this run: the endpoint's network access excludes where the function runs.
    #[error(
        "cannot reach the cluster's API endpoint {endpoint} from where cellbridge runs: no connection within {waited_ms} ms ({reason}); check the cluster's endpoint access (private only, or publicAccessCidrs without this function's egress addresses), the route to its VPC and the cluster security group (TCP 443 from this function)"
    )]
    Unreachable {
        endpoint: String,
        waited_ms: u64,
        reason: String,
    },
    #[error("kubeconfig {path}: {reason}")]
    Kubeconfig { path: String, reason: String },
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
    /// The invocation's deadline came first; the temporary access entry is still deleted.
    #[error(
        "the invocation's deadline came before the install finished: applied {applied} of {total} objects, left: {left} (the next run completes it)"
    )]
    OutOfTime { applied: usize, total: usize, left: String },
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
            ApplyError::Transport { .. }
            | ApplyError::CrdTimeout { .. }
            | ApplyError::Connect { .. }
            | ApplyError::OutOfTime { .. } => Class::Retryable,
            // Final: the same network answers the same silence; a retry only
            // repeats the wait. Someone has to change the endpoint access or the network.
            ApplyError::Api { .. }
            | ApplyError::UnknownKind { .. }
            | ApplyError::Kubeconfig { .. }
            | ApplyError::Unreachable { .. } => Class::Final,
        }
    }
}

/// What happened to one object.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub phase: Phase,
    #[serde(flatten)]
    pub target: KubeRef,
}

/// What [`crate::ports::cluster::KubeApi::observe`] reads to fill a
/// [`crate::pure::bootstrap::confirm::Snapshot`]: the Deployments and Pods of `namespace`, the
/// number of Nodes, and the named Flux objects in `namespace`. Reads only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observe {
    pub namespace: String,
    /// The controller Deployments the applied components define (gotk-components.yaml's, or the
    /// operator's): the caller knows them from what it applied, the cluster cannot say which
    /// Deployments of the namespace matter.
    pub controllers: Vec<String>,
    /// `source.toolkit.fluxcd.io/v1` GitRepository.
    pub git_repository: String,
    /// `kustomize.toolkit.fluxcd.io/v1` Kustomization.
    pub kustomization: String,
    /// A Flux Operator cell: the `fluxcd.controlplane.io/v1` FluxInstance of this name (the
    /// operator reconciles only one, named `flux`).
    pub flux_instance: Option<String>,
    /// The Git secret the bootstrap applied in `namespace` (`None`: none known): when the
    /// source refuses the credentials, it is compared with the one Secrets Manager holds.
    pub git_secret: Option<String>,
}

impl Observe {
    /// What `flux bootstrap` leaves: everything in `flux-system`, both sync objects named
    /// `flux-system`.
    pub fn flux_system(controllers: Vec<String>) -> Observe {
        Observe {
            namespace: FLUX_SYSTEM.into(),
            controllers,
            git_repository: FLUX_SYSTEM.into(),
            kustomization: FLUX_SYSTEM.into(),
            flux_instance: None,
            git_secret: None,
        }
    }
}

const FLUX_SYSTEM: &str = "flux-system";

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
            token_refresh: REFRESH_AFTER,
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
    /// Whatever this kubeconfig file says (the command line's `--kubeconfig`).
    Kubeconfig(std::path::PathBuf),
}

impl fmt::Debug for ClusterAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterAuth::Eks { cluster, url, .. } => write!(f, "Eks({cluster} at {url})"),
            ClusterAuth::Kubeconfig(p) => write!(f, "Kubeconfig({})", p.display()),
        }
    }
}

/// Build a new token before this age: EKS refuses tokens older than 15 minutes.
pub const REFRESH_AFTER: Duration = Duration::from_secs(14 * 60);
