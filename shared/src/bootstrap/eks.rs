//! The EKS side: what the cluster is (status, endpoint, CA, tags, authentication mode), and
//! waiting for a cluster that is still being created.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::{Class, Classify};
use aws_sdk_eks::error::ProvideErrorMetadata;
use base64::Engine as _;

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

pub(crate) fn api_error<E: ProvideErrorMetadata + std::error::Error + 'static>(
    operation: &'static str,
    cluster: &str,
    e: &aws_sdk_eks::error::SdkError<E>,
) -> EksError {
    use aws_sdk_eks::error::SdkError;
    let code = e.code().unwrap_or("");
    let retryable = match e {
        SdkError::ServiceError(_) => matches!(
            code,
            "ServerException" | "ServiceUnavailableException" | "ThrottlingException" | "TooManyRequestsException"
        ),
        _ => true,
    };
    let reason = if code.is_empty() {
        aws_sdk_eks::error::DisplayErrorContext(e).to_string()
    } else {
        format!("{code}: {}", e.message().unwrap_or(""))
    };
    EksError::Api {
        operation,
        cluster: cluster.into(),
        reason,
        retryable,
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
    fn parse(s: &str) -> Self {
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

/// DescribeCluster; `None` when there is no such cluster.
pub async fn describe(
    client: &aws_sdk_eks::Client,
    cluster: &str,
    region: &str,
) -> Result<Option<ClusterInfo>, EksError> {
    let out = match client.describe_cluster().name(cluster).send().await {
        Ok(o) => o,
        Err(e) if e.code() == Some("ResourceNotFoundException") => return Ok(None),
        Err(e) => return Err(api_error("DescribeCluster", cluster, &e)),
    };
    let Some(c) = out.cluster() else { return Ok(None) };
    let ca_pem = match c.certificate_authority().and_then(|ca| ca.data()) {
        Some(b64) if !b64.is_empty() => {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|_| EksError::Invalid {
                    cluster: cluster.into(),
                    reason: "certificateAuthority.data is not base64".into(),
                })?;
            if !pem.starts_with(b"-----BEGIN CERTIFICATE-----") {
                return Err(EksError::Invalid {
                    cluster: cluster.into(),
                    reason: "certificateAuthority.data is not a PEM certificate".into(),
                });
            }
            Some(pem)
        }
        _ => None,
    };
    Ok(Some(ClusterInfo {
        name: c.name().unwrap_or(cluster).to_owned(),
        region: region.to_owned(),
        status: ClusterStatus::parse(c.status().map(|s| s.as_str()).unwrap_or("")),
        endpoint: c.endpoint().map(str::to_owned),
        ca_pem,
        tags: c.tags().cloned().unwrap_or_default(),
        authentication_mode: c
            .access_config()
            .and_then(|a| a.authentication_mode())
            .map(|m| m.as_str().to_owned()),
    }))
}

pub enum Waited {
    Active(ClusterInfo),
    /// Still not ACTIVE when the budget ran out.
    StillCreating(ClusterInfo),
}

/// Polls until ACTIVE, FAILED/DELETING (an error), or `budget` has passed.
pub async fn wait_active(
    client: &aws_sdk_eks::Client,
    cluster: &str,
    region: &str,
    budget: Duration,
    poll: Duration,
) -> Result<Waited, EksError> {
    let start = Instant::now();
    loop {
        let info = describe(client, cluster, region)
            .await?
            .ok_or_else(|| EksError::NotFound {
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
