//! The EKS side: what the cluster is (status, endpoint, CA, tags, authentication mode), and
//! waiting for a cluster that is still being created.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::ports::ClusterApi;
use crate::error::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum EksError {
    #[error("EKS cluster {cluster} not found in {region}")]
    NotFound { cluster: String, region: String },
    #[error("EKS cluster {cluster} is {status}: nothing to bootstrap")]
    Unusable { cluster: String, status: String },
    #[error(
        "EKS cluster {cluster} accepts only aws-auth ConfigMap authentication (CONFIG_MAP); cellbridge needs access entries: run `aws eks update-cluster-config --name {cluster} --access-config authenticationMode=API_AND_CONFIG_MAP`, or set `authentication_mode = \"API_AND_CONFIG_MAP\"` in the cluster's Terraform"
    )]
    ConfigMapOnly { cluster: String },
    #[error("EKS cluster {cluster}: {reason}")]
    Invalid { cluster: String, reason: String },
    #[error("EKS {operation} for cluster {cluster}: {reason}")]
    Api {
        operation: &'static str,
        cluster: String,
        reason: String,
        retryable: bool,
    },
}

impl Classify for EksError {
    fn class(&self) -> Class {
        match self {
            EksError::Api { retryable: true, .. } => Class::Retryable,
            _ => Class::Final,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterStatus {
    Creating,
    Active,
    Updating,
    Pending,
    Failed,
    Deleting,
    Other(String),
}

impl ClusterStatus {
    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "CREATING" => Self::Creating,
            "ACTIVE" => Self::Active,
            "UPDATING" => Self::Updating,
            "PENDING" => Self::Pending,
            "FAILED" => Self::Failed,
            "DELETING" => Self::Deleting,
            o => Self::Other(o.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Creating => "CREATING",
            Self::Active => "ACTIVE",
            Self::Updating => "UPDATING",
            Self::Pending => "PENDING",
            Self::Failed => "FAILED",
            Self::Deleting => "DELETING",
            Self::Other(s) => s,
        }
    }
}

/// What DescribeCluster says, in the shape bootstrap needs.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub name: String,
    pub region: String,
    pub status: ClusterStatus,
    pub endpoint: Option<String>,
    /// The cluster CA as PEM (DescribeCluster returns it base64-encoded).
    pub ca_pem: Option<Vec<u8>>,
    pub tags: HashMap<String, String>,
    pub authentication_mode: Option<String>,
}

impl ClusterInfo {
    /// Refuses a cluster whose API cannot take access entries.
    pub fn check_access_entries(&self) -> Result<(), EksError> {
        match self.authentication_mode.as_deref() {
            Some("CONFIG_MAP") => Err(EksError::ConfigMapOnly {
                cluster: self.name.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// The endpoint and CA, which an ACTIVE cluster always has.
    pub fn connection(&self) -> Result<(String, Vec<u8>), EksError> {
        let endpoint = self.endpoint.clone().filter(|e| !e.is_empty());
        let ca = self.ca_pem.clone();
        match (endpoint, ca) {
            (Some(e), Some(c)) => Ok((e, c)),
            _ => Err(EksError::Invalid {
                cluster: self.name.clone(),
                reason: "DescribeCluster returned no endpoint or certificate authority".into(),
            }),
        }
    }
}

pub enum Waited {
    Active(ClusterInfo),
    /// Still not ACTIVE when the budget ran out.
    StillCreating(ClusterInfo),
}

/// Polls until ACTIVE, FAILED/DELETING (an error), or `budget` has passed.
pub async fn wait_active(
    api: &impl ClusterApi,
    cluster: &str,
    region: &str,
    budget: Duration,
    poll: Duration,
) -> Result<Waited, EksError> {
    let start = Instant::now();
    loop {
        let info = api.describe_cluster(cluster).await?.ok_or_else(|| EksError::NotFound {
            cluster: cluster.into(),
            region: region.into(),
        })?;
        match info.status {
            ClusterStatus::Active | ClusterStatus::Updating => return Ok(Waited::Active(info)),
            ClusterStatus::Failed | ClusterStatus::Deleting => {
                return Err(EksError::Unusable {
                    cluster: cluster.into(),
                    status: info.status.as_str().to_owned(),
                });
            }
            _ => {
                if start.elapsed() + poll > budget {
                    return Ok(Waited::StillCreating(info));
                }
                tracing::info!(
                    cluster,
                    status = info.status.as_str(),
                    "waiting for the cluster to become ACTIVE"
                );
                tokio::time::sleep(poll).await;
            }
        }
    }
}
