//! The real [`Accounts`] and [`ClusterApi`]: the AWS SDK's EKS and STS clients, in the cell's
//! region, as cellbridge's own identity or the cell's bootstrap role. What their answers mean
//! (which error codes are worth a retry) is decided here, once.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_config::SdkConfig;
use aws_sdk_eks::error::ProvideErrorMetadata;
use aws_sdk_eks::types::{AccessScope, AccessScopeType};
use base64::Engine as _;

use super::kube::token;
use super::probe::{self, NOT_FOUND, sts_retryable};
use crate::ports::cluster::AccessError;
use crate::ports::cluster::access::{
    ADMIN_POLICY, CREATED_AT_TAG, RUN_TAG, TEMPORARY_TAG, format_rfc3339, parse_rfc3339, principal_arn,
};
use crate::ports::cluster::eks::{ClusterInfo, ClusterStatus, EksError, EndpointAccess};
use crate::ports::cluster::kube::ClusterAuth;
use crate::ports::cluster::{AccessEntry, Accounts, ClusterApi};

/// cellbridge's AWS configuration; [`Accounts::open`] gives it a region and, for a cell in
/// another account, the cell's role.
#[derive(Clone)]
pub struct AwsAccounts {
    aws: SdkConfig,
    /// cellbridge's own account, asked once per process.
    home: std::sync::Arc<tokio::sync::OnceCell<String>>,
}

impl AwsAccounts {
    pub fn new(aws: SdkConfig) -> Self {
        // Without a timeout an AWS call that hangs holds the run until the Lambda deadline;
        // with one, the SDK's retries get another go.
        let has_attempt_timeout = aws
            .timeout_config()
            .and_then(|t| t.operation_attempt_timeout())
            .is_some();
        let aws = if has_attempt_timeout {
            aws
        } else {
            let t = aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(std::time::Duration::from_secs(5))
                .operation_attempt_timeout(std::time::Duration::from_secs(20))
                .operation_timeout(std::time::Duration::from_secs(90))
                .build();
            aws.to_builder().timeout_config(t).build()
        };
        Self {
            aws,
            home: Default::default(),
        }
    }

    pub fn config(&self) -> &SdkConfig {
        &self.aws
    }
}

impl Accounts for AwsAccounts {
    type Api = EksApi;

    async fn open(&self, region: &str, role: Option<&str>) -> Result<EksApi, AccessError> {
        let conf = probe::regional(&self.aws, region, role, "cellbridge-bootstrap", None)
            .await
            .map_err(|f| AccessError::AssumeRole {
                role: role.unwrap_or_default().to_owned(),
                reason: f.reason,
                retryable: f.retryable,
            })?;
        Ok(EksApi {
            eks: aws_sdk_eks::Client::new(&conf),
            region: region.to_owned(),
            conf,
        })
    }

    async fn home_account(&self) -> Result<String, AccessError> {
        self.home
            .get_or_try_init(|| async {
                probe::caller_account(&self.aws).await.map_err(|f| AccessError::Sts {
                    reason: f.reason,
                    retryable: f.retryable,
                })
            })
            .await
            .cloned()
    }
}

/// EKS and STS in one region, with one identity.
pub struct EksApi {
    eks: aws_sdk_eks::Client,
    region: String,
    conf: SdkConfig,
}

pub(crate) fn api_error<E: ProvideErrorMetadata + std::error::Error + 'static>(
    operation: &'static str,
    cluster: &str,
    e: &aws_sdk_eks::error::SdkError<E>,
) -> EksError {
    let retryable = probe::eks_retryable(e);
    let reason = probe::eks_reason(e);
    EksError::Api {
        operation,
        cluster: cluster.into(),
        reason,
        retryable,
    }
}

fn cluster_info(c: &aws_sdk_eks::types::Cluster, cluster: &str, region: &str) -> Result<ClusterInfo, EksError> {
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
    Ok(ClusterInfo {
        name: c.name().unwrap_or(cluster).to_owned(),
        arn: c.arn().map(str::to_owned),
        region: region.to_owned(),
        status: ClusterStatus::parse(c.status().map(|s| s.as_str()).unwrap_or("")),
        endpoint: c.endpoint().map(str::to_owned),
        ca_pem,
        tags: c.tags().cloned().unwrap_or_else(HashMap::new),
        authentication_mode: c
            .access_config()
            .and_then(|a| a.authentication_mode())
            .map(|m| m.as_str().to_owned()),
        // The SDK reads a missing flag as false; EKS never reports both endpoints off, so that
        // is a service (or a double, moto without them) that did not say: nothing is decided.
        endpoint_access: c
            .resources_vpc_config()
            .filter(|v| v.endpoint_public_access() || v.endpoint_private_access())
            .map(|v| EndpointAccess {
                public: v.endpoint_public_access(),
                private: v.endpoint_private_access(),
                public_cidrs: v.public_access_cidrs().to_vec(),
                vpc_id: v.vpc_id().map(str::to_owned),
                cluster_security_group: v.cluster_security_group_id().map(str::to_owned),
            }),
    })
}

impl ClusterApi for EksApi {
    async fn list_clusters(&self) -> Result<Vec<String>, EksError> {
        // "ListClusters": at most 100 a page, `nextToken` for the rest
        // (https://docs.aws.amazon.com/eks/latest/APIReference/API_ListClusters.html).
        let mut names = Vec::new();
        let mut pages = self.eks.list_clusters().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page =
                page.map_err(|e| api_error("ListClusters", &format!("* (every cluster of {})", self.region), &e))?;
            names.extend(page.clusters().iter().cloned());
        }
        Ok(names)
    }

    async fn describe_cluster(&self, cluster: &str) -> Result<Option<ClusterInfo>, EksError> {
        let out = match self.eks.describe_cluster().name(cluster).send().await {
            Ok(o) => o,
            Err(e) if e.code() == Some(NOT_FOUND) => return Ok(None),
            Err(e) => return Err(api_error("DescribeCluster", cluster, &e)),
        };
        out.cluster()
            .map(|c| cluster_info(c, cluster, &self.region))
            .transpose()
    }

    async fn access_entry(&self, cluster: &str, principal: &str) -> Result<Option<AccessEntry>, EksError> {
        match self
            .eks
            .describe_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal)
            .send()
            .await
        {
            Ok(out) => {
                // DescribeAccessEntry answers `createdAt` (epoch timestamp) and `tags`
                // (https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAccessEntry.html,
                // API_AccessEntry.html): EKS's own time is authoritative, the tag is the fallback.
                let entry = out.access_entry();
                let tags = entry.and_then(|e| e.tags());
                let created_at = entry
                    .and_then(|e| e.created_at())
                    .and_then(|t| SystemTime::try_from(*t).ok())
                    .or_else(|| tags.and_then(|t| t.get(CREATED_AT_TAG)).and_then(|v| parse_rfc3339(v)));
                Ok(Some(AccessEntry {
                    temporary: tags.is_some_and(|t| t.contains_key(TEMPORARY_TAG)),
                    created_at,
                    run: tags.and_then(|t| t.get(RUN_TAG)).cloned(),
                }))
            }
            Err(e) if e.code() == Some(NOT_FOUND) => Ok(None),
            Err(e) => Err(api_error("DescribeAccessEntry", cluster, &e)),
        }
    }

    async fn create_access_entry(&self, cluster: &str, principal: &str, run: &str) -> Result<bool, EksError> {
        match self
            .eks
            .create_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal)
            .r#type("STANDARD")
            .tags(TEMPORARY_TAG, "true")
            // CreateAccessEntry takes `tags` (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html):
            // the creation time travels with the entry, for the sweep (`sweep.rs`).
            .tags(CREATED_AT_TAG, format_rfc3339(SystemTime::now()))
            .tags(RUN_TAG, run)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some("ResourceInUseException") => Ok(false),
            Err(e) => Err(api_error("CreateAccessEntry", cluster, &e)),
        }
    }

    async fn associate_admin_policy(&self, cluster: &str, principal: &str) -> Result<(), EksError> {
        let partition = principal.split(':').nth(1).unwrap_or("aws");
        let scope = AccessScope::builder().r#type(AccessScopeType::Cluster).build();
        self.eks
            .associate_access_policy()
            .cluster_name(cluster)
            .principal_arn(principal)
            .policy_arn(format!("arn:{partition}:eks::aws:cluster-access-policy/{ADMIN_POLICY}"))
            .access_scope(scope)
            .send()
            .await
            .map_err(|e| api_error("AssociateAccessPolicy", cluster, &e))?;
        Ok(())
    }

    async fn delete_access_entry(&self, cluster: &str, principal: &str) -> Result<bool, EksError> {
        match self
            .eks
            .delete_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(NOT_FOUND) => Ok(false),
            Err(e) => Err(api_error("DeleteAccessEntry", cluster, &e)),
        }
    }

    async fn tag_cluster(&self, cluster: &str, arn: &str, tags: &[(String, String)]) -> Result<(), EksError> {
        let tags: HashMap<String, String> = tags.iter().cloned().collect();
        match self
            .eks
            .tag_resource()
            .resource_arn(arn)
            .set_tags(Some(tags))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => Err(api_error("TagResource", cluster, &e)),
        }
    }

    async fn caller_principal(&self) -> Result<String, AccessError> {
        let sts = aws_sdk_sts::Client::new(&self.conf);
        let out = sts.get_caller_identity().send().await.map_err(|e| AccessError::Sts {
            reason: crate::pure::redact::chain(&e),
            retryable: sts_retryable(&e),
        })?;
        principal_arn(out.arn().unwrap_or_default())
    }

    async fn kube_auth(&self, cluster: &str, endpoint: String, ca_pem: Vec<u8>) -> Result<ClusterAuth, AccessError> {
        let credentials = self.conf.credentials_provider().ok_or_else(|| AccessError::Sts {
            reason: "no AWS credentials configured".into(),
            retryable: false,
        })?;
        Ok(ClusterAuth::Eks {
            credentials,
            region: self.region.clone(),
            cluster: cluster.to_owned(),
            sts_endpoint: token::sts_endpoint(&self.region, self.conf.endpoint_url()),
            url: endpoint,
            ca_pem,
        })
    }
}
