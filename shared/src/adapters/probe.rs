//! Whether a cell's cluster exists, as EKS says in the cell's account and region: what state-sync
//! asks before it proposes removing a destroyed cell's directory (a state that looks destroyed
//! is not proof: a state moved to another key, `terraform state rm` or a wrong backend look the
//! same while the cluster runs).
//!
//! The port is [`ClusterProbe`]; its real adapter, [`EksProbe`], is the AWS SDK's
//! `DescribeCluster` (<https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeCluster.html>:
//! `ResourceNotFoundException` for a cluster that is not there, `status` one of CREATING, ACTIVE,
//! DELETING, FAILED, UPDATING, PENDING otherwise). Reaching another account's clusters goes
//! through the cell's role ([`crate::rules::cells::role_of`]), assumed with [`assume`], which the bootstrap's
//! accounts use too.

use aws_config::{Region, SdkConfig};
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_eks::error::ProvideErrorMetadata;

use crate::ports::probe::{ClusterProbe, Presence, ProbeError};

/// The probe state-sync holds: EKS ([`EksProbe`]), or the in-memory accounts of the
/// `test-support` feature.
#[derive(Clone)]
pub enum Probe {
    Eks(Box<EksProbe>),
    #[cfg(feature = "test-support")]
    Mem(crate::doubles::cluster::MemAws),
}

impl From<EksProbe> for Probe {
    fn from(p: EksProbe) -> Self {
        Probe::Eks(Box::new(p))
    }
}

#[cfg(feature = "test-support")]
impl From<crate::doubles::cluster::MemAws> for Probe {
    fn from(p: crate::doubles::cluster::MemAws) -> Self {
        Probe::Mem(p)
    }
}

impl ClusterProbe for Probe {
    async fn presence(&self, cluster: &str, region: &str, role: Option<&str>) -> Result<Presence, ProbeError> {
        match self {
            Probe::Eks(p) => p.presence(cluster, region, role).await,
            #[cfg(feature = "test-support")]
            Probe::Mem(p) => p.presence(cluster, region, role).await,
        }
    }

    async fn home_account(&self) -> Result<String, ProbeError> {
        match self {
            Probe::Eks(p) => p.home_account().await,
            #[cfg(feature = "test-support")]
            Probe::Mem(p) => p.home_account().await,
        }
    }
}

/// The session policy of the role [`EksProbe`] assumes. state-sync's role in a cell's account is
/// already describe-only in IAM (`CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES`, the module's
/// `modules/cell-account`), and that role's trust names state-sync alone; this policy stays as
/// defence in depth, should the role be granted more. A session's permissions are the
/// intersection of the role's and this policy ("Session policies",
/// <https://docs.aws.amazon.com/IAM/latest/UserGuide/access_policies.html#policies_session>), so
/// that session can call `eks:DescribeCluster` and nothing else.
pub const DESCRIBE_ONLY: &str = r#"{"Version":"2012-10-17","Statement":[{"Sid":"DescribeOnly","Effect":"Allow","Action":"eks:DescribeCluster","Resource":"*"}]}"#;

/// [`ClusterProbe`] over the AWS SDK.
#[derive(Clone)]
pub struct EksProbe {
    aws: SdkConfig,
    session: &'static str,
    home: std::sync::Arc<tokio::sync::OnceCell<String>>,
}

impl EksProbe {
    /// `session` names the assumed role's sessions, as CloudTrail shows them
    /// (`cellbridge-state-sync`).
    pub fn new(aws: SdkConfig, session: &'static str) -> Self {
        Self {
            aws,
            session,
            home: Default::default(),
        }
    }
}

impl ClusterProbe for EksProbe {
    async fn presence(&self, cluster: &str, region: &str, role: Option<&str>) -> Result<Presence, ProbeError> {
        let conf = regional(&self.aws, region, role, self.session, Some(DESCRIBE_ONLY))
            .await
            .map_err(|f| ProbeError::AssumeRole {
                role: role.unwrap_or_default().to_owned(),
                reason: f.reason,
                retryable: f.retryable,
            })?;
        let eks = aws_sdk_eks::Client::new(&conf);
        match eks.describe_cluster().name(cluster).send().await {
            Ok(out) => Ok(Presence::Exists {
                status: out
                    .cluster()
                    .and_then(|c| c.status())
                    .map_or_else(|| "UNKNOWN".to_owned(), |s| s.as_str().to_owned()),
                tags: out.cluster().and_then(|c| c.tags()).cloned().unwrap_or_default(),
            }),
            Err(e) if e.code() == Some(NOT_FOUND) => Ok(Presence::Gone),
            Err(e) => Err(ProbeError::Describe {
                cluster: cluster.to_owned(),
                region: region.to_owned(),
                reason: eks_reason(&e),
                retryable: eks_retryable(&e),
            }),
        }
    }

    async fn home_account(&self) -> Result<String, ProbeError> {
        self.home
            .get_or_try_init(|| caller_account(&self.aws))
            .await
            .cloned()
            .map_err(|f| ProbeError::Identity {
                reason: f.reason,
                retryable: f.retryable,
            })
    }
}

/// The account of the identity `conf` signs with (STS GetCallerIdentity's `Account`, which needs
/// no permission).
pub async fn caller_account(conf: &SdkConfig) -> Result<String, AssumeFailure> {
    let sts = aws_sdk_sts::Client::new(conf);
    let out = sts.get_caller_identity().send().await.map_err(|e| AssumeFailure {
        reason: crate::pure::redact::chain(&e),
        retryable: sts_retryable(&e),
    })?;
    out.account()
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| AssumeFailure {
            reason: "GetCallerIdentity named no account".into(),
            retryable: false,
        })
}

/// EKS's answer for a cluster (or access entry) that is not there.
pub const NOT_FOUND: &str = "ResourceNotFoundException";

/// Why assuming a role failed, and whether a later try may work.
#[derive(Debug, Clone)]
pub struct AssumeFailure {
    pub reason: String,
    pub retryable: bool,
}

/// `aws` in `region`, as `role` when given: the role assumed once, here (session `session`,
/// narrowed to the session policy `policy` when given), so that a refusal names the role rather
/// than surfacing in whatever call came first, and every client made from the answer shares one
/// session (a run is far shorter than its hour).
pub async fn regional(
    aws: &SdkConfig,
    region: &str,
    role: Option<&str>,
    session: &str,
    policy: Option<&str>,
) -> Result<SdkConfig, AssumeFailure> {
    let regional = aws.to_builder().region(Region::new(region.to_owned())).build();
    match role {
        None => Ok(regional),
        Some(role) => assume(&regional, role, session, policy).await,
    }
}

/// `conf` with the credentials of `role`, assumed now (narrowed to the session policy `policy`).
pub async fn assume(
    conf: &SdkConfig,
    role: &str,
    session: &str,
    policy: Option<&str>,
) -> Result<SdkConfig, AssumeFailure> {
    tracing::info!(role, session, narrowed = policy.is_some(), "assuming the cell's role");
    let mut builder = aws_config::sts::AssumeRoleProvider::builder(role).session_name(session);
    if let Some(policy) = policy {
        builder = builder.policy(policy);
    }
    let provider = builder.configure(conf).build().await;
    let creds = provider.provide_credentials().await.map_err(|e| AssumeFailure {
        reason: crate::pure::redact::chain(&e),
        retryable: assume_role_retryable(&e),
    })?;
    Ok(conf
        .to_builder()
        .credentials_provider(SharedCredentialsProvider::new(creds))
        .build())
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

/// Whether assuming a role may work later: STS throttling, server errors and no answer at all,
/// not a refusal (the role's trust policy) or a broken configuration.
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

/// Whether an EKS call that failed may succeed later: EKS's server-side and throttling errors
/// (<https://docs.aws.amazon.com/eks/latest/APIReference/CommonErrors.html>) and any failure to
/// get an answer at all; not a refusal (AccessDenied, InvalidParameter...).
pub fn eks_retryable<E: ProvideErrorMetadata>(e: &aws_sdk_eks::error::SdkError<E>) -> bool {
    match e {
        aws_sdk_eks::error::SdkError::ServiceError(_) => matches!(
            e.code().unwrap_or(""),
            "ServerException" | "ServiceUnavailableException" | "ThrottlingException" | "TooManyRequestsException"
        ),
        _ => true,
    }
}

/// An EKS error as one line: its code and message, else the error with its causes.
pub fn eks_reason<E: ProvideErrorMetadata + std::error::Error + 'static>(
    e: &aws_sdk_eks::error::SdkError<E>,
) -> String {
    match e.code() {
        Some(code) if !code.is_empty() => format!("{code}: {}", e.message().unwrap_or("")),
        _ => crate::pure::redact::chain(e),
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
