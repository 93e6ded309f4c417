//! Temporary cluster access through an EKS access entry for our own role.
//!
//! The entry is tagged when cellbridge creates it, so a run that died before deleting it is
//! recognised by the next run, which then deletes it; an entry someone else made is used as it
//! is and never touched.

use aws_sdk_eks::error::ProvideErrorMetadata;
use aws_sdk_eks::types::{AccessScope, AccessScopeType};

use super::eks::{EksError, api_error};
use crate::error::{Class, Classify};

pub const ADMIN_POLICY: &str = "AmazonEKSClusterAdminPolicy";
pub const TEMPORARY_TAG: &str = "cellbridge.dev/temporary";

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

/// The IAM principal an access entry is made for: an assumed-role session ARN becomes its
/// role's ARN (`arn:aws:sts::1:assumed-role/R/s` → `arn:aws:iam::1:role/R`).
pub fn principal_arn(caller: &str) -> Result<String, AccessError> {
    let bad = || AccessError::Principal { arn: caller.to_owned() };
    let parts: Vec<&str> = caller.splitn(6, ':').collect();
    if parts.len() != 6 || parts[0] != "arn" {
        return Err(bad());
    }
    let (partition, service, account, resource) = (parts[1], parts[2], parts[4], parts[5]);
    match (service, resource.split('/').collect::<Vec<_>>().as_slice()) {
        ("sts", ["assumed-role", role, _session]) => Ok(format!("arn:{partition}:iam::{account}:role/{role}")),
        ("iam", [kind, ..]) if *kind == "role" || *kind == "user" => Ok(caller.to_owned()),
        _ => Err(bad()),
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

pub async fn caller_principal(sts: &aws_sdk_sts::Client) -> Result<String, AccessError> {
    let out = sts.get_caller_identity().send().await.map_err(|e| AccessError::Sts {
        reason: aws_sdk_sts::error::DisplayErrorContext(&e).to_string(),
        retryable: sts_retryable(&e),
    })?;
    principal_arn(out.arn().unwrap_or_default())
}

/// How we hold access to the cluster for this run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    pub principal_arn: String,
    /// True when the entry is cellbridge's (created now, or left by a run that died) and is
    /// deleted at the end.
    pub temporary: bool,
}

/// The grant an existing entry gives, if there is one: cellbridge's own (tagged) entry gets
/// its policy made sure of and is deleted after the run; anyone else's is used as it is.
async fn existing(eks: &aws_sdk_eks::Client, cluster: &str, principal: &str) -> Result<Option<Grant>, AccessError> {
    match eks
        .describe_access_entry()
        .cluster_name(cluster)
        .principal_arn(principal)
        .send()
        .await
    {
        Ok(out) => {
            let ours = out
                .access_entry()
                .and_then(|e| e.tags())
                .is_some_and(|t| t.contains_key(TEMPORARY_TAG));
            if ours {
                // A run that died left it: make sure its policy is there, and delete it after.
                associate(eks, cluster, principal).await?;
            }
            tracing::info!(cluster, principal, temporary = ours, "access entry exists");
            Ok(Some(Grant {
                principal_arn: principal.into(),
                temporary: ours,
            }))
        }
        Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(None),
        Err(e) => Err(api_error("DescribeAccessEntry", cluster, &e).into()),
    }
}

/// Makes sure `principal` has an access entry with cluster-admin rights.
pub async fn ensure(eks: &aws_sdk_eks::Client, cluster: &str, principal: &str) -> Result<Grant, AccessError> {
    if let Some(grant) = existing(eks, cluster, principal).await? {
        return Ok(grant);
    }
    match eks
        .create_access_entry()
        .cluster_name(cluster)
        .principal_arn(principal)
        .r#type("STANDARD")
        .tags(TEMPORARY_TAG, "true")
        .send()
        .await
    {
        Ok(_) => {}
        // Created in between: by someone else, by another run, or by this very call (an attempt
        // that worked but whose answer was lost, retried by the SDK). The tag tells.
        Err(e) if e.code() == Some("ResourceInUseException") => {
            return match existing(eks, cluster, principal).await? {
                Some(grant) => Ok(grant),
                // Gone again already: let a later run sort it out.
                None => Err(api_error("CreateAccessEntry", cluster, &e).into()),
            };
        }
        Err(e) => return Err(api_error("CreateAccessEntry", cluster, &e).into()),
    }
    tracing::info!(cluster, principal, "created a temporary access entry");
    let grant = Grant {
        principal_arn: principal.into(),
        temporary: true,
    };
    if let Err(e) = associate(eks, cluster, principal).await {
        // Do not leave a useless entry behind.
        let _ = release(eks, cluster, &grant).await;
        return Err(e);
    }
    Ok(grant)
}

async fn associate(eks: &aws_sdk_eks::Client, cluster: &str, principal: &str) -> Result<(), AccessError> {
    let partition = principal.split(':').nth(1).unwrap_or("aws");
    let scope = AccessScope::builder().r#type(AccessScopeType::Cluster).build();
    eks.associate_access_policy()
        .cluster_name(cluster)
        .principal_arn(principal)
        .policy_arn(format!("arn:{partition}:eks::aws:cluster-access-policy/{ADMIN_POLICY}"))
        .access_scope(scope)
        .send()
        .await
        .map_err(|e| api_error("AssociateAccessPolicy", cluster, &e))?;
    Ok(())
}

/// Deletes the entry when it is ours; an entry someone else made stays.
pub async fn release(eks: &aws_sdk_eks::Client, cluster: &str, grant: &Grant) -> Result<bool, AccessError> {
    if !grant.temporary {
        return Ok(false);
    }
    match eks
        .delete_access_entry()
        .cluster_name(cluster)
        .principal_arn(&grant.principal_arn)
        .send()
        .await
    {
        Ok(_) => {
            tracing::info!(cluster, principal = %grant.principal_arn, "deleted the temporary access entry");
            Ok(true)
        }
        Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(true),
        Err(e) => Err(api_error("DeleteAccessEntry", cluster, &e).into()),
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
    fn assumed_role_becomes_role() {
        assert_eq!(
            principal_arn("arn:aws:sts::123456789012:assumed-role/cellbridge-bootstrap/fn-session").unwrap(),
            "arn:aws:iam::123456789012:role/cellbridge-bootstrap"
        );
        assert_eq!(
            principal_arn("arn:aws-cn:sts::1:assumed-role/r/s").unwrap(),
            "arn:aws-cn:iam::1:role/r"
        );
        assert_eq!(
            principal_arn("arn:aws:iam::1:user/alice").unwrap(),
            "arn:aws:iam::1:user/alice"
        );
        assert!(principal_arn("arn:aws:sts::1:federated-user/x").is_err());
        assert!(principal_arn("nonsense").is_err());
    }
}
