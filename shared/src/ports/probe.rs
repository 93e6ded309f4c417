//! Whether EKS still knows a cell's cluster, asked in the cluster's account and region: state-sync
//! decommissions only what EKS confirms gone, and its dashboard shows the bootstrap record the
//! cluster's tags hold. EKS and STS in [`crate::adapters::probe`].

use std::collections::HashMap;
use std::future::Future;

use crate::shell::error::{Class, Classify};

/// What EKS says of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "presence", rename_all = "kebab-case")]
pub enum Presence {
    /// DescribeCluster answered `ResourceNotFoundException`: no such cluster in that account and
    /// region.
    Gone,
    /// The cluster is there, in this status (`DELETING` while `DeleteCluster` runs), with its
    /// tags (the bootstrap's record among them: [`crate::pure::bootstrap::record`]). The tags are
    /// people's to write and stay out of any answer.
    Exists {
        status: String,
        #[serde(skip)]
        tags: HashMap<String, String>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("STS AssumeRole {role}: {reason}")]
    AssumeRole {
        role: String,
        reason: String,
        retryable: bool,
    },
    #[error("STS GetCallerIdentity (cellbridge's own account): {reason}")]
    Identity { reason: String, retryable: bool },
    #[error("EKS DescribeCluster {cluster} in {region}: {reason}")]
    Describe {
        cluster: String,
        region: String,
        reason: String,
        retryable: bool,
    },
}

impl Classify for ProbeError {
    fn class(&self) -> Class {
        match self {
            ProbeError::AssumeRole { retryable: true, .. }
            | ProbeError::Identity { retryable: true, .. }
            | ProbeError::Describe { retryable: true, .. } => Class::Retryable,
            _ => Class::Final,
        }
    }
}

/// Asks EKS about one cluster, in `region`, as `role` when given (else cellbridge's own
/// identity, in its own account).
pub trait ClusterProbe: Send + Sync {
    fn presence(
        &self,
        cluster: &str,
        region: &str,
        role: Option<&str>,
    ) -> impl Future<Output = Result<Presence, ProbeError>> + Send;
    /// cellbridge's own account: where a question asked without a role is answered. EKS's "not
    /// found" there says nothing of a cluster in another account.
    fn home_account(&self) -> impl Future<Output = Result<String, ProbeError>> + Send;
}
