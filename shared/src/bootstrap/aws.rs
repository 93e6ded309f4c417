//! The real [`Accounts`] and [`ClusterApi`]: the AWS SDK's EKS and STS clients, in the cell's
//! region, as cellbridge's own identity or the cell's bootstrap role. What their answers mean
//! (which error codes are worth a retry) is decided here, once.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_config::{Region, SdkConfig};
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_eks::error::ProvideErrorMetadata;
use aws_sdk_eks::types::{AccessScope, AccessScopeType};
use base64::Engine as _;

use super::access::{
    ADMIN_POLICY, AccessError, CREATED_AT_TAG, TEMPORARY_TAG, format_rfc3339, parse_rfc3339, principal_arn,
};
use super::apply::ClusterAuth;
use super::eks::{ClusterInfo, ClusterStatus, EksError, EndpointAccess};
use super::ports::{AccessEntry, Accounts, ClusterApi};
use super::token;

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
        let regional = self.aws.to_builder().region(Region::new(region.to_owned())).build();
        let conf = match role {
            None => regional,
            Some(role) => {
                tracing::info!(role, "assuming the cell's bootstrap role");
                let provider = aws_config::sts::AssumeRoleProvider::builder(role)
                    .session_name("cellbridge-bootstrap")
                    .configure(&regional)
                    .build()
                    .await;
                // Assumed once, here, so that a failure names the call and the role (rather
                // than surfacing as "an error occurred while loading credentials" in whatever
                // call came first), and the AWS clients and the EKS token share one session: a
                // run is far shorter than the session's hour.
                let creds = provider
                    .provide_credentials()
                    .await
                    .map_err(|e| AccessError::AssumeRole {
                        role: role.to_owned(),
                        reason: aws_sdk_sts::error::DisplayErrorContext(&e).to_string(),
                        retryable: assume_role_retryable(&e),
                    })?;
                regional
                    .to_builder()
                    .credentials_provider(SharedCredentialsProvider::new(creds))
                    .build()
            }
        };
        Ok(EksApi {
            eks: aws_sdk_eks::Client::new(&conf),
            region: region.to_owned(),
            conf,
        })
    }

    async fn home_account(&self) -> Result<String, AccessError> {
        self.home
            .get_or_try_init(|| async {
                let sts = aws_sdk_sts::Client::new(&self.aws);
                let out = sts.get_caller_identity().send().await.map_err(|e| AccessError::Sts {
                    reason: aws_sdk_sts::error::DisplayErrorContext(&e).to_string(),
                    retryable: sts_retryable(&e),
                })?;
                out.account()
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .ok_or_else(|| AccessError::Sts {
                        reason: "GetCallerIdentity named no account".into(),
                        retryable: false,
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

/// Whether an STS call that failed may succeed later: throttling and server errors, and any
/// failure to get an answer at all (timeouts, connections); not a refusal such as AccessDenied.
pub fn sts_retryable<E: ProvideErrorMetadata>(e: &aws_sdk_sts::error::SdkError<E>) -> bool {
    match e {
        aws_sdk_sts::error::SdkError::ServiceError(se) => {
            se.raw().status().is_server_error()
                || matches!(
                    e.code(),
                    Some("Throttling" | "ThrottlingException" | "RequestLimitExceeded" | "ServiceUnavailable")
                )
        }
        _ => true,
    }
}

/// Whether assuming the cell's role may work later: STS throttling, server errors and no answer
/// at all, not a refusal (the role's trust policy) or a broken configuration.
fn assume_role_retryable(e: &CredentialsError) -> bool {
    use aws_sdk_sts::operation::assume_role::AssumeRoleError;
    match e {
        CredentialsError::ProviderTimedOut(_) => true,
        CredentialsError::ProviderError(_) => std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<aws_sdk_sts::error::SdkError<AssumeRoleError>>())
            .is_none_or(sts_retryable),
        _ => false,
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

const NOT_FOUND: &str = "ResourceNotFoundException";

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
                }))
            }
            Err(e) if e.code() == Some(NOT_FOUND) => Ok(None),
            Err(e) => Err(api_error("DescribeAccessEntry", cluster, &e)),
        }
    }

    async fn create_access_entry(&self, cluster: &str, principal: &str) -> Result<bool, EksError> {
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

    async fn caller_principal(&self) -> Result<String, AccessError> {
        let sts = aws_sdk_sts::Client::new(&self.conf);
        let out = sts.get_caller_identity().send().await.map_err(|e| AccessError::Sts {
            reason: aws_sdk_sts::error::DisplayErrorContext(&e).to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sts_throttling_and_server_errors_are_retryable_refusals_are_not() {
        use aws_sdk_sts::config::http::HttpResponse;
        use aws_sdk_sts::error::{ErrorMetadata, SdkError};
        use aws_sdk_sts::operation::get_caller_identity::GetCallerIdentityError;
        let service = |status: u16, code: &str| {
            let err = GetCallerIdentityError::generic(ErrorMetadata::builder().code(code).build());
            SdkError::service_error(err, HttpResponse::new(status.try_into().unwrap(), "".into()))
        };
        assert!(sts_retryable(&service(503, "ServiceUnavailable")));
        assert!(sts_retryable(&service(500, "InternalFailure")));
        assert!(sts_retryable(&service(400, "Throttling")));
        assert!(!sts_retryable(&service(403, "AccessDenied")));
        assert!(!sts_retryable(&service(400, "ExpiredToken")));
        assert!(sts_retryable(
            &SdkError::<GetCallerIdentityError, HttpResponse>::timeout_error("attempt timeout")
        ));
    }

    #[test]
    fn a_refused_assume_role_is_final_a_throttled_or_failed_one_is_retried() {
        use aws_sdk_sts::config::http::HttpResponse;
        use aws_sdk_sts::error::{ErrorMetadata, SdkError};
        use aws_sdk_sts::operation::assume_role::AssumeRoleError;
        let sts = |status: u16, code: &str| {
            let err = AssumeRoleError::generic(ErrorMetadata::builder().code(code).build());
            CredentialsError::provider_error(SdkError::service_error(
                err,
                HttpResponse::new(status.try_into().unwrap(), "".into()),
            ))
        };
        assert!(assume_role_retryable(&sts(400, "Throttling")));
        assert!(assume_role_retryable(&sts(503, "ServiceUnavailable")));
        assert!(!assume_role_retryable(&sts(403, "AccessDenied")));
        let timeout = SdkError::<AssumeRoleError, HttpResponse>::timeout_error("attempt timeout");
        assert!(assume_role_retryable(&CredentialsError::provider_error(timeout)));
        assert!(!assume_role_retryable(&CredentialsError::invalid_configuration("no")));
    }
}
