//! AWS in memory: accounts, STS, EKS clusters and their access entries.
//!
//! Rules modelled:
//! - DescribeCluster answers `ResourceNotFoundException` for an unknown cluster; a cluster being
//!   created reports `CREATING` until it is `ACTIVE`
//!   (<https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeCluster.html>).
//! - One access entry per IAM principal and cluster: CreateAccessEntry for a principal that has
//!   one answers `ResourceInUseException`; access entries need an authentication mode of `API`
//!   or `API_AND_CONFIG_MAP`, a `CONFIG_MAP` cluster refuses them with `InvalidRequestException`
//!   (<https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html>,
//!   <https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html>).
//!   AssociateAccessPolicy and DeleteAccessEntry on a missing entry answer
//!   `ResourceNotFoundException`.
//! - AssumeRole is refused (`AccessDenied`) unless the role trusts cellbridge
//!   (<https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>); the session
//!   it returns acts in the role's account. Clusters, access entries and DescribeCluster are per
//!   account: a cluster of the same name and region in another account is another cluster, and
//!   is not seen (<https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeCluster.html>).
//!   GetCallerIdentity's `Account` is the caller's
//!   (<https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html>).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;

use crate::ports::cluster::AccessError;
use crate::ports::cluster::access::principal_arn;
use crate::ports::cluster::eks::{ClusterInfo, ClusterStatus, EksError, EndpointAccess};
use crate::ports::cluster::kube::ClusterAuth;
use crate::ports::cluster::{AccessEntry, Accounts, ClusterApi};
use crate::shell::error::{Class, Classify};

const PROVIDER: &str = "cellbridge-memory";
const CA_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n";

/// An EKS cluster as the test describes it.
#[derive(Debug, Clone)]
pub struct MemCluster {
    pub name: String,
    pub region: String,
    /// What DescribeCluster reports once `creating_polls` are spent.
    pub status: String,
    /// How many DescribeCluster calls still see `CREATING`.
    pub creating_polls: usize,
    pub tags: BTreeMap<String, String>,
    pub authentication_mode: String,
    /// `resourcesVpcConfig`; `None`: DescribeCluster says nothing about it.
    pub endpoint_access: Option<EndpointAccess>,
    /// The account it is in; `None`: cellbridge's own.
    pub account: Option<String>,
}

impl MemCluster {
    /// An ACTIVE cluster that takes access entries.
    pub fn active(name: &str, region: &str) -> Self {
        Self {
            name: name.to_owned(),
            region: region.to_owned(),
            status: "ACTIVE".into(),
            creating_polls: 0,
            tags: BTreeMap::new(),
            authentication_mode: "API_AND_CONFIG_MAP".into(),
            endpoint_access: None,
            account: None,
        }
    }

    /// The cluster is in `account` (a 12-digit id), not cellbridge's own.
    pub fn in_account(mut self, account: &str) -> Self {
        self.account = Some(account.to_owned());
        self
    }

    /// The endpoint configuration DescribeCluster reports.
    pub fn endpoint_access(mut self, access: EndpointAccess) -> Self {
        self.endpoint_access = Some(access);
        self
    }

    pub fn tag(mut self, key: &str, value: &str) -> Self {
        self.tags.insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn creating_for(mut self, polls: usize) -> Self {
        self.creating_polls = polls;
        self
    }

    pub fn status(mut self, status: &str) -> Self {
        self.status = status.to_owned();
        self
    }

    pub fn authentication_mode(mut self, mode: &str) -> Self {
        self.authentication_mode = mode.to_owned();
        self
    }

    /// EKS's cluster ARN (<https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html#amazonelastickubernetesservice-resources-for-iam-policies>).
    fn arn(&self, account: &str) -> String {
        format!("arn:aws:eks:{}:{account}:cluster/{}", self.region, self.name)
    }

    fn endpoint(&self) -> String {
        format!("https://{}.{}.eks.memory", self.name, self.region)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemEntry {
    pub principal: String,
    pub temporary: bool,
    pub admin_policy: bool,
    /// EKS's `createdAt`; `None`: an entry that says nothing of its age.
    pub created_at: Option<std::time::SystemTime>,
    /// The making run's token (`cellbridge.dev/run`), when a run made it.
    pub run: Option<String>,
}

/// A fault: the next `times` calls of `operation` fail, retryably or not.
#[derive(Debug, Clone)]
struct AwsFault {
    operation: String,
    times: usize,
    retryable: bool,
}

#[derive(Default)]
struct AwsWorld {
    identity: String,
    trusted_roles: BTreeSet<String>,
    /// (account, region, name).
    clusters: BTreeMap<(String, String, String), MemCluster>,
    entries: BTreeMap<(String, String, String), BTreeMap<String, MemEntry>>,
    faults: Vec<AwsFault>,
    /// (account, call).
    calls: Vec<(String, String)>,
    /// How long each STS session takes to open (the sweep's visits, a fleet's size in time).
    latency: std::time::Duration,
}

/// The account of an ARN (`arn:partition:service:region:account:resource`).
fn arn_account(arn: &str) -> String {
    arn.split(':').nth(4).unwrap_or_default().to_owned()
}

/// AWS accounts in memory: EKS clusters with their access entries, STS, trusted roles.
#[derive(Clone, Default)]
pub struct MemAws {
    world: Arc<Mutex<AwsWorld>>,
}

impl MemAws {
    /// cellbridge runs as `identity` (an IAM role ARN).
    pub fn new(identity: &str) -> Self {
        let aws = Self::default();
        aws.lock().identity = identity.to_owned();
        aws
    }

    pub fn add_cluster(&self, cluster: MemCluster) {
        let mut w = self.lock();
        let account = cluster.account.clone().unwrap_or_else(|| arn_account(&w.identity));
        let key = (account, cluster.region.clone(), cluster.name.clone());
        w.clusters.insert(key, cluster);
    }

    /// DeleteCluster done: DescribeCluster answers `ResourceNotFoundException` from now on.
    /// `account`: `None` for cellbridge's own.
    pub fn remove_cluster(&self, account: Option<&str>, region: &str, name: &str) {
        let mut w = self.lock();
        let account = account.map_or_else(|| arn_account(&w.identity), str::to_owned);
        w.clusters.remove(&(account, region.to_owned(), name.to_owned()));
    }

    /// TagResource on a cluster: adds or overwrites `tags`, leaves its others (`account`: `None`
    /// for cellbridge's own). A cluster that is not there is left alone.
    pub fn add_cluster_tags(&self, account: Option<&str>, region: &str, name: &str, tags: &[(&str, &str)]) {
        let mut w = self.lock();
        let account = account.map_or_else(|| arn_account(&w.identity), str::to_owned);
        if let Some(c) = w.clusters.get_mut(&(account, region.to_owned(), name.to_owned())) {
            c.tags
                .extend(tags.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        }
    }

    /// cellbridge's own account: its identity's.
    pub fn home(&self) -> String {
        arn_account(&self.lock().identity)
    }

    /// Each session opened from now on takes `latency` (tokio's clock: paused in tests, it
    /// costs no time).
    pub fn latency(&self, latency: std::time::Duration) {
        self.lock().latency = latency;
    }

    /// A role whose trust policy lets cellbridge assume it.
    pub fn trust_role(&self, role: &str) {
        self.lock().trusted_roles.insert(role.to_owned());
    }

    /// An access entry made outside cellbridge (`temporary` false), or left by a run that died.
    /// Made just now.
    pub fn add_entry(&self, region: &str, cluster: &str, principal: &str, temporary: bool) {
        let home = self.home();
        self.add_entry_in(
            &home,
            region,
            cluster,
            principal,
            temporary,
            Some(std::time::SystemTime::now()),
        );
    }

    /// An access entry in a cluster of `account`, made at `created_at`.
    pub fn add_entry_in(
        &self,
        account: &str,
        region: &str,
        cluster: &str,
        principal: &str,
        temporary: bool,
        created_at: Option<std::time::SystemTime>,
    ) {
        self.lock()
            .entries
            .entry((account.to_owned(), region.to_owned(), cluster.to_owned()))
            .or_default()
            .insert(
                principal.to_owned(),
                MemEntry {
                    principal: principal.to_owned(),
                    temporary,
                    admin_policy: true,
                    created_at,
                    run: None,
                },
            );
    }

    /// The tags of a cluster of cellbridge's own account, as DescribeCluster would show them.
    pub fn cluster_tags(&self, region: &str, cluster: &str) -> BTreeMap<String, String> {
        let w = self.lock();
        let home = arn_account(&w.identity);
        w.clusters
            .get(&(home, region.to_owned(), cluster.to_owned()))
            .map(|c| c.tags.clone())
            .unwrap_or_default()
    }

    /// The access entries of a cluster of cellbridge's own account.
    pub fn entries(&self, region: &str, cluster: &str) -> Vec<MemEntry> {
        self.entries_in(&self.home(), region, cluster)
    }

    /// The access entries of a cluster of `account`.
    pub fn entries_in(&self, account: &str, region: &str, cluster: &str) -> Vec<MemEntry> {
        self.lock()
            .entries
            .get(&(account.to_owned(), region.to_owned(), cluster.to_owned()))
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The next `times` calls of `operation` (an EKS or STS operation name, e.g.
    /// `DeleteAccessEntry`, `AssumeRole`) fail: as throttling when `retryable`, else refused.
    pub fn fail(&self, operation: &str, times: usize, retryable: bool) {
        self.lock().faults.push(AwsFault {
            operation: operation.to_owned(),
            times,
            retryable,
        });
    }

    /// Every call so far, as `Operation` or `Operation cluster`.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.iter().map(|(_, c)| c.clone()).collect()
    }

    /// The calls made in `account` (with a session of that account).
    pub fn calls_in(&self, account: &str) -> Vec<String> {
        self.lock()
            .calls
            .iter()
            .filter(|(a, _)| a == account)
            .map(|(_, c)| c.clone())
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, AwsWorld> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `principal` may use the Kubernetes API of the cluster: `Ok` or the HTTP status.
    pub(super) fn authorize(&self, region: &str, cluster: &str, principal: &str) -> Result<(), u16> {
        let w = self.lock();
        match w
            .entries
            .get(&(arn_account(principal), region.to_owned(), cluster.to_owned()))
            .and_then(|m| m.get(principal))
        {
            None => Err(401),
            Some(e) if !e.admin_policy => Err(403),
            Some(_) => Ok(()),
        }
    }
}

impl AwsWorld {
    /// Records the call and spends a matching fault.
    fn call(&mut self, account: &str, operation: &str, cluster: &str) -> Option<bool> {
        let call = if cluster.is_empty() {
            operation.to_owned()
        } else {
            format!("{operation} {cluster}")
        };
        self.calls.push((account.to_owned(), call));
        let f = self
            .faults
            .iter_mut()
            .find(|f| f.operation == operation && f.times > 0)?;
        f.times -= 1;
        Some(f.retryable)
    }
}

fn eks_fault(operation: &'static str, cluster: &str, retryable: bool) -> EksError {
    EksError::Api {
        operation,
        cluster: cluster.to_owned(),
        reason: if retryable {
            "ThrottlingException: injected".into()
        } else {
            "AccessDeniedException: injected".into()
        },
        retryable,
    }
}

fn not_found(operation: &'static str, cluster: &str, what: &str) -> EksError {
    EksError::Api {
        operation,
        cluster: cluster.to_owned(),
        reason: format!("ResourceNotFoundException: No {what} found"),
        retryable: false,
    }
}

impl Accounts for MemAws {
    type Api = MemEks;

    async fn open(&self, region: &str, role: Option<&str>) -> Result<MemEks, AccessError> {
        let latency = self.lock().latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let principal = {
            let mut w = self.lock();
            match role {
                None => w.identity.clone(),
                Some(role) => {
                    let home = arn_account(&w.identity);
                    if let Some(retryable) = w.call(&home, "AssumeRole", "") {
                        return Err(AccessError::AssumeRole {
                            role: role.to_owned(),
                            reason: "injected".into(),
                            retryable,
                        });
                    }
                    if !w.trusted_roles.contains(role) {
                        return Err(AccessError::AssumeRole {
                            role: role.to_owned(),
                            reason: format!(
                                "AccessDenied: {} is not authorized to perform sts:AssumeRole",
                                w.identity
                            ),
                            retryable: false,
                        });
                    }
                    role.to_owned()
                }
            }
        };
        Ok(MemEks {
            aws: self.clone(),
            region: region.to_owned(),
            account: arn_account(&principal),
            principal,
        })
    }

    async fn home_account(&self) -> Result<String, AccessError> {
        let mut w = self.lock();
        let home = arn_account(&w.identity);
        if let Some(retryable) = w.call(&home, "GetCallerIdentity", "") {
            return Err(AccessError::Sts {
                reason: "injected".into(),
                retryable,
            });
        }
        Ok(home)
    }
}

/// What state-sync asks of EKS, answered by the same accounts and clusters the bootstrap sees.
impl crate::ports::probe::ClusterProbe for MemAws {
    async fn presence(
        &self,
        cluster: &str,
        region: &str,
        role: Option<&str>,
    ) -> Result<crate::ports::probe::Presence, crate::ports::probe::ProbeError> {
        presence_via(self, cluster, region, role).await
    }

    async fn home_account(&self) -> Result<String, crate::ports::probe::ProbeError> {
        Ok(self.home())
    }
}

/// EKS and STS of [`MemAws`] in one region, as one identity.
pub struct MemEks {
    aws: MemAws,
    region: String,
    /// The session's account: the assumed role's, else cellbridge's own.
    account: String,
    principal: String,
}

impl MemEks {
    fn key(&self, cluster: &str) -> (String, String, String) {
        (self.account.clone(), self.region.clone(), cluster.to_owned())
    }
}

impl ClusterApi for MemEks {
    async fn list_clusters(&self) -> Result<Vec<String>, EksError> {
        let mut w = self.aws.lock();
        if let Some(retryable) = w.call(&self.account, "ListClusters", &self.region) {
            return Err(eks_fault("ListClusters", &self.region, retryable));
        }
        Ok(w.clusters
            .keys()
            .filter(|(a, r, _)| *a == self.account && *r == self.region)
            .map(|(_, _, c)| c.clone())
            .collect())
    }

    async fn describe_cluster(&self, cluster: &str) -> Result<Option<ClusterInfo>, EksError> {
        let mut w = self.aws.lock();
        if let Some(retryable) = w.call(&self.account, "DescribeCluster", cluster) {
            return Err(eks_fault("DescribeCluster", cluster, retryable));
        }
        let Some(c) = w.clusters.get_mut(&self.key(cluster)) else {
            return Ok(None);
        };
        let status = if c.creating_polls > 0 {
            c.creating_polls -= 1;
            "CREATING".to_owned()
        } else {
            c.status.clone()
        };
        // A cluster being created has no endpoint yet.
        let ready = status != "CREATING";
        Ok(Some(ClusterInfo {
            name: c.name.clone(),
            arn: Some(c.arn(&self.account)),
            region: c.region.clone(),
            status: ClusterStatus::parse(&status),
            endpoint: ready.then(|| c.endpoint()),
            ca_pem: ready.then(|| CA_PEM.to_vec()),
            tags: c.tags.clone().into_iter().collect(),
            authentication_mode: Some(c.authentication_mode.clone()),
            endpoint_access: c.endpoint_access.clone(),
        }))
    }

    /// TagResource finds the cluster by its ARN; an ARN of no cluster is EKS's
    /// `ResourceNotFoundException`, and tags are added or overwritten, never removed.
    async fn tag_cluster(&self, cluster: &str, arn: &str, tags: &[(String, String)]) -> Result<(), EksError> {
        let mut w = self.aws.lock();
        if let Some(retryable) = w.call(&self.account, "TagResource", cluster) {
            return Err(eks_fault("TagResource", cluster, retryable));
        }
        let key = self.key(cluster);
        match w.clusters.get_mut(&key) {
            Some(c) if c.arn(&self.account) == arn => {
                c.tags.extend(tags.iter().cloned());
                Ok(())
            }
            _ => Err(not_found("TagResource", cluster, "cluster")),
        }
    }

    async fn access_entry(&self, cluster: &str, principal: &str) -> Result<Option<AccessEntry>, EksError> {
        let mut w = self.aws.lock();
        if let Some(retryable) = w.call(&self.account, "DescribeAccessEntry", cluster) {
            return Err(eks_fault("DescribeAccessEntry", cluster, retryable));
        }
        Ok(w.entries
            .get(&self.key(cluster))
            .and_then(|m| m.get(principal))
            .map(|e| AccessEntry {
                temporary: e.temporary,
                created_at: e.created_at,
                run: e.run.clone(),
            }))
    }

    async fn create_access_entry(&self, cluster: &str, principal: &str, run: &str) -> Result<bool, EksError> {
        let mut w = self.aws.lock();
        if let Some(retryable) = w.call(&self.account, "CreateAccessEntry", cluster) {
            return Err(eks_fault("CreateAccessEntry", cluster, retryable));
        }
        let key = self.key(cluster);
        let Some(c) = w.clusters.get(&key) else {
            return Err(not_found("CreateAccessEntry", cluster, "cluster"));
        };
        if c.authentication_mode == "CONFIG_MAP" {
            return Err(EksError::Api {
                operation: "CreateAccessEntry",
                cluster: cluster.to_owned(),
                reason: "InvalidRequestException: The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation".into(),
                retryable: false,
            });
        }
        let entries = w.entries.entry(key).or_default();
        if entries.contains_key(principal) {
            return Ok(false);
        }
        entries.insert(
            principal.to_owned(),
            MemEntry {
                principal: principal.to_owned(),
                temporary: true,
                admin_policy: false,
                created_at: Some(std::time::SystemTime::now()),
                run: Some(run.to_owned()),
            },
        );
        Ok(true)
    }

    async fn associate_admin_policy(&self, cluster: &str, principal: &str) -> Result<(), EksError> {
        let mut w = self.aws.lock();
        if let Some(retryable) = w.call(&self.account, "AssociateAccessPolicy", cluster) {
            return Err(eks_fault("AssociateAccessPolicy", cluster, retryable));
        }
        match w.entries.get_mut(&self.key(cluster)).and_then(|m| m.get_mut(principal)) {
            Some(e) => {
                e.admin_policy = true;
                Ok(())
            }
            None => Err(not_found("AssociateAccessPolicy", cluster, "access entry")),
        }
    }

    async fn delete_access_entry(&self, cluster: &str, principal: &str) -> Result<bool, EksError> {
        let mut w = self.aws.lock();
        if let Some(retryable) = w.call(&self.account, "DeleteAccessEntry", cluster) {
            return Err(eks_fault("DeleteAccessEntry", cluster, retryable));
        }
        Ok(w.entries
            .get_mut(&self.key(cluster))
            .and_then(|m| m.remove(principal))
            .is_some())
    }

    async fn caller_principal(&self) -> Result<String, AccessError> {
        if let Some(retryable) = self.aws.lock().call(&self.account, "GetCallerIdentity", "") {
            return Err(AccessError::Sts {
                reason: "injected".into(),
                retryable,
            });
        }
        principal_arn(&self.principal)
    }

    async fn kube_auth(&self, cluster: &str, endpoint: String, ca_pem: Vec<u8>) -> Result<ClusterAuth, AccessError> {
        // The token proves the principal, as EKS's STS round trip does: here it is carried as
        // the credentials' key id.
        let creds = Credentials::new(&self.principal, "memory", None, None, PROVIDER);
        Ok(ClusterAuth::Eks {
            credentials: SharedCredentialsProvider::new(creds),
            region: self.region.clone(),
            cluster: cluster.to_owned(),
            sts_endpoint: "memory".into(),
            url: endpoint,
            ca_pem,
        })
    }
}

/// [`crate::ports::probe::ClusterProbe`] through the bootstrap's own ports: DescribeCluster in `region`
/// as `role`, for any [`Accounts`].
async fn presence_via<A: Accounts>(
    accounts: &A,
    cluster: &str,
    region: &str,
    role: Option<&str>,
) -> Result<crate::ports::probe::Presence, crate::ports::probe::ProbeError> {
    use crate::ports::probe::{Presence, ProbeError};
    let retryable = |c: Class| c == Class::Retryable;
    let api = accounts.open(region, role).await.map_err(|e| ProbeError::AssumeRole {
        role: role.unwrap_or_default().to_owned(),
        retryable: retryable(e.class()),
        reason: e.to_string(),
    })?;
    match api.describe_cluster(cluster).await {
        Ok(None) => Ok(Presence::Gone),
        Ok(Some(info)) => Ok(Presence::Exists {
            status: info.status.as_str().to_owned(),
            tags: info.tags,
        }),
        Err(e) => Err(ProbeError::Describe {
            cluster: cluster.to_owned(),
            region: region.to_owned(),
            retryable: retryable(e.class()),
            reason: e.to_string(),
        }),
    }
}
