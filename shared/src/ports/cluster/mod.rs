//! The outside services as the bootstrap sees them: the cell's AWS account (EKS and STS, one
//! region and identity at a time), a Kubernetes API to apply to, and the store of Flux's Git
//! secret. [`crate::rules::bootstrap::Bootstrapper`] runs the same sequence whatever implements these: the AWS SDK
//! and kube-rs (`adapters/aws.rs`, `adapters/kube/`), or the in-memory doubles of the
//! `test-support` feature (`doubles/cluster/`), which keep the services' rules, not a second copy of the sequence.
//!
//! Each method answers what the service answers, already classified (see [`crate::shell::error`]): an
//! absent object is `Ok(None)` / `Ok(false)`, not an error, because the sequence decides what
//! absence means.

use std::collections::BTreeMap;
use std::future::Future;

use serde_json::Value;

pub mod access;
pub mod eks;
pub mod kube;

use crate::ports::cluster::eks::{ClusterInfo, EksError};
use crate::pure::bootstrap::confirm::Snapshot;
use crate::pure::bootstrap::plan::{KubeRef, Step};
use crate::shell::error::{Class, Classify};
use kube::{Applied, ApplyError, ClusterAuth, Observe, Tuning};

/// An access entry as DescribeAccessEntry shows it, as far as cellbridge needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessEntry {
    /// Tagged [`crate::ports::cluster::access::TEMPORARY_TAG`]: cellbridge made it, and deletes it.
    pub temporary: bool,
    /// When it was made: EKS's `createdAt` (authoritative), else cellbridge's
    /// [`crate::ports::cluster::access::CREATED_AT_TAG`]; `None` when neither says (an entry made before the tag
    /// existed counts as old).
    pub created_at: Option<std::time::SystemTime>,
    /// Its [`crate::ports::cluster::access::RUN_TAG`]: the run that made it, when cellbridge's.
    pub run: Option<String>,
}

/// The EKS and STS calls of a bootstrap, in one region with one identity.
pub trait ClusterApi: Send + Sync {
    /// ListClusters, every page: the clusters of this region and identity's account.
    fn list_clusters(&self) -> impl Future<Output = Result<Vec<String>, EksError>> + Send;
    /// DescribeCluster; `None` when there is no such cluster.
    fn describe_cluster(&self, cluster: &str) -> impl Future<Output = Result<Option<ClusterInfo>, EksError>> + Send;
    /// DescribeAccessEntry; `None` when the principal has none.
    fn access_entry(
        &self,
        cluster: &str,
        principal: &str,
    ) -> impl Future<Output = Result<Option<AccessEntry>, EksError>> + Send;
    /// CreateAccessEntry (type STANDARD, tagged temporary, with its creation time and the
    /// making `run`'s token); `Ok(false)` when the principal already has one
    /// (ResourceInUseException).
    fn create_access_entry(
        &self,
        cluster: &str,
        principal: &str,
        run: &str,
    ) -> impl Future<Output = Result<bool, EksError>> + Send;
    /// AssociateAccessPolicy: `AmazonEKSClusterAdminPolicy`, cluster scope.
    fn associate_admin_policy(
        &self,
        cluster: &str,
        principal: &str,
    ) -> impl Future<Output = Result<(), EksError>> + Send;
    /// DeleteAccessEntry; `Ok(false)` when there was none.
    fn delete_access_entry(
        &self,
        cluster: &str,
        principal: &str,
    ) -> impl Future<Output = Result<bool, EksError>> + Send;
    /// TagResource on the cluster `arn` (DescribeCluster's `arn`): adds or overwrites `tags`,
    /// leaves the others (<https://docs.aws.amazon.com/eks/latest/APIReference/API_TagResource.html>).
    fn tag_cluster(
        &self,
        cluster: &str,
        arn: &str,
        tags: &[(String, String)],
    ) -> impl Future<Output = Result<(), EksError>> + Send;
    /// STS GetCallerIdentity, as the IAM principal an access entry names.
    fn caller_principal(&self) -> impl Future<Output = Result<String, AccessError>> + Send;
    /// How a Kubernetes client of this identity authenticates to the cluster at `endpoint`.
    fn kube_auth(
        &self,
        cluster: &str,
        endpoint: String,
        ca_pem: Vec<u8>,
    ) -> impl Future<Output = Result<ClusterAuth, AccessError>> + Send;
}

/// The accounts cells live in: a [`ClusterApi`] for a region, as cellbridge's own identity or
/// as the cell's bootstrap role.
pub trait Accounts: Send + Sync {
    type Api: ClusterApi;
    /// Assumes `role` when given (a refusal is [`AccessError::AssumeRole`]).
    fn open(&self, region: &str, role: Option<&str>) -> impl Future<Output = Result<Self::Api, AccessError>> + Send;
    /// cellbridge's own account (STS GetCallerIdentity's `Account`, with its own identity).
    fn home_account(&self) -> impl Future<Output = Result<String, AccessError>> + Send;
}

/// One connection to a cluster's Kubernetes API.
pub trait KubeApi: Send {
    /// Whether the object exists; a kind the cluster does not serve counts as absent. `plural`
    /// is given so that no discovery is needed for this one read.
    fn exists(&mut self, target: &KubeRef, plural: &str) -> impl Future<Output = Result<bool, ApplyError>> + Send;
    /// Server-side apply, forcing ownership of the step's fields for cellbridge's field manager.
    fn apply(&mut self, step: &Step) -> impl Future<Output = Result<Applied, ApplyError>> + Send;
    /// Until every named CRD is Established (bounded by the tuning's `crd_timeout`).
    fn wait_established(&mut self, crds: &[String]) -> impl Future<Output = Result<(), ApplyError>> + Send;
    /// One reading of what the cluster reports about Flux, for
    /// [`crate::pure::bootstrap::confirm::classify`]: reads only, no wait. An object not there
    /// yet, or of a kind the cluster does not serve (no FluxInstance CRD), is absent, not an
    /// error; `controllers` and `operator` are the request's, `secrets` is left to the caller.
    fn observe(&mut self, what: &Observe) -> impl Future<Output = Result<Snapshot, ApplyError>> + Send;
    /// One object as the API server answers it; `None` when it is not there or its kind is not
    /// served. A Secret's answer holds its values: never logged, never reported.
    fn get(&mut self, target: &KubeRef, plural: &str)
    -> impl Future<Output = Result<Option<Value>, ApplyError>> + Send;
    /// Sets `annotations` with a JSON merge patch of `metadata.annotations` alone (how a
    /// reconcile is asked for), taking no other field.
    fn annotate(
        &mut self,
        target: &KubeRef,
        plural: &str,
        annotations: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), ApplyError>> + Send;
}

/// Opens [`KubeApi`] connections.
pub trait KubeConnect: Send + Sync {
    type Api: KubeApi;
    /// `fresh_entry`: the access entry was made moments ago, so 401/403 may be it propagating.
    fn connect(
        &self,
        auth: ClusterAuth,
        tuning: &Tuning,
        fresh_entry: bool,
    ) -> impl Future<Output = Result<Self::Api, ApplyError>> + Send;
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(transparent)]
    Eks(#[from] EksError),
    #[error("STS GetCallerIdentity: {reason}")]
    Sts { reason: String, retryable: bool },
    #[error("STS AssumeRole {role}: {reason}")]
    AssumeRole {
        role: String,
        reason: String,
        retryable: bool,
    },
    #[error("cannot map caller {arn} to an IAM principal for an access entry")]
    Principal { arn: String },
}

impl Classify for AccessError {
    fn class(&self) -> Class {
        match self {
            AccessError::Eks(e) => e.class(),
            AccessError::Sts { retryable: true, .. } | AccessError::AssumeRole { retryable: true, .. } => {
                Class::Retryable
            }
            _ => Class::Final,
        }
    }
}
