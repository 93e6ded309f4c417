//! The EKS side, as EKS describes a cluster: its status, endpoint and the network that may reach
//! it, CA, tags, authentication mode; and EKS's answers, classified ([`EksError`]). Waiting for a
//! cluster still being created is a rule of the bootstrap (`rules/bootstrap/active.rs`).

use std::collections::HashMap;

use crate::shell::error::{Class, Classify};

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
    /// The endpoint configuration says cluster-bootstrap cannot reach the API server from
    /// where it runs ([`EndpointAccess::reachable_from`]): nothing was tried, nothing created.
    #[error("EKS cluster {cluster}: its API endpoint cannot be reached from where cluster-bootstrap runs: {reason}")]
    Unreachable { cluster: String, reason: String },
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
    /// DescribeCluster's `arn`: what TagResource names.
    pub arn: Option<String>,
    pub region: String,
    pub status: ClusterStatus,
    pub endpoint: Option<String>,
    /// The cluster CA as PEM (DescribeCluster returns it base64-encoded).
    pub ca_pem: Option<Vec<u8>>,
    pub tags: HashMap<String, String>,
    pub authentication_mode: Option<String>,
    /// `resourcesVpcConfig`: who may reach the API endpoint. `None` when DescribeCluster did
    /// not say (no decision is made then).
    pub endpoint_access: Option<EndpointAccess>,
}

/// The cluster's endpoint configuration, DescribeCluster's `resourcesVpcConfig`
/// (<https://docs.aws.amazon.com/eks/latest/APIReference/API_VpcConfigResponse.html>,
/// <https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html>).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointAccess {
    /// `endpointPublicAccess`.
    pub public: bool,
    /// `endpointPrivateAccess`: requests from within the cluster's VPC use the private endpoint.
    pub private: bool,
    /// `publicAccessCidrs`: who may use the public endpoint (EKS reports `0.0.0.0/0` when open).
    pub public_cidrs: Vec<String>,
    pub vpc_id: Option<String>,
    /// `clusterSecurityGroupId`: the group a private endpoint's ENIs carry; a caller from a
    /// connected VPC needs an ingress rule on TCP 443 there.
    pub cluster_security_group: Option<String>,
}

/// Where cluster-bootstrap runs, as the module declares it (`CELLBRIDGE_VPC_ID`,
/// `CELLBRIDGE_REACHABLE_VPCS`, `CELLBRIDGE_EGRESS_CIDRS`; [`crate::rules::bootstrap::config::network_from_env`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Network {
    /// The VPC of the function's ENIs; `None`: the function runs outside any VPC (its traffic
    /// leaves from AWS's public addresses, which no `publicAccessCidrs` can name reliably).
    pub vpc_id: Option<String>,
    /// VPCs connected to `vpc_id` (peering, transit gateway) whose private endpoints the
    /// function reaches: routes both ways, the cluster security group admitting it on 443.
    pub reachable_vpcs: Vec<String>,
    /// The public addresses the function's traffic leaves from (NAT gateway EIPs as /32).
    /// Empty: unknown.
    pub egress_cidrs: Vec<String>,
}

impl Network {
    fn reaches_privately(&self, vpc: &str) -> bool {
        self.vpc_id.as_deref() == Some(vpc) || self.reachable_vpcs.iter().any(|v| v == vpc)
    }
}

/// `(address, prefix length)` of an IPv4 or IPv6 CIDR, or `None`.
fn parse_cidr(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let (addr, len) = s.trim().split_once('/')?;
    let addr: std::net::IpAddr = addr.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((addr, len))
}

/// Whether every address of `inner` is in `outer`.
pub fn cidr_contains(outer: &str, inner: &str) -> bool {
    use std::net::IpAddr;
    let (Some((o, ol)), Some((i, il))) = (parse_cidr(outer), parse_cidr(inner)) else {
        return false;
    };
    if il < ol {
        return false;
    }
    let (o, i, bits) = match (o, i) {
        (IpAddr::V4(o), IpAddr::V4(i)) => (u128::from(u32::from(o)), u128::from(u32::from(i)), 32u32),
        (IpAddr::V6(o), IpAddr::V6(i)) => (u128::from(o), u128::from(i), 128u32),
        _ => return false,
    };
    let shift = bits - u32::from(ol);
    let mask = if shift >= 128 { 0 } else { u128::MAX << shift };
    (o & mask) == (i & mask)
}

/// Whether a CIDR can be parsed (for checking configuration).
pub fn is_cidr(s: &str) -> bool {
    parse_cidr(s).is_some()
}

impl EndpointAccess {
    fn open_to_all(&self) -> bool {
        // No CIDRs is EKS's default, 0.0.0.0/0.
        self.public_cidrs.is_empty()
            || self
                .public_cidrs
                .iter()
                .any(|c| c.trim() == "0.0.0.0/0" || c.trim() == "::/0")
    }

    /// Whether the function, running in `net`, can reach the endpoint, else why not. From the
    /// cluster's own VPC with private access on, requests use the private endpoint; from a
    /// connected VPC the private endpoint is reachable when public access is off (the
    /// endpoint's name then resolves to the private addresses); else the public endpoint is
    /// used, limited to `publicAccessCidrs`
    /// (<https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html>; with private
    /// access only, "Amazon EKS automatically advertises the endpoints' private IP addresses
    /// through the API server's public DNS name", so a peered VPC resolves them:
    /// <https://repost.aws/knowledge-center/eks-private-cluster-endpoint-vpc>). Egress addresses
    /// left unknown are not refused: the bounded connect decides then.
    pub fn reachable_from(&self, net: &Network) -> Result<(), String> {
        let vpc = self.vpc_id.as_deref().unwrap_or("(unknown VPC)");
        let sg = self
            .cluster_security_group
            .as_deref()
            .unwrap_or("the cluster security group");
        // From the cluster's VPC its private addresses answer; from a connected VPC only when
        // public access is off (the name resolves to the public addresses otherwise).
        let own_vpc = self.vpc_id.is_some() && net.vpc_id == self.vpc_id;
        let connected = self.vpc_id.as_deref().is_some_and(|v| net.reaches_privately(v));
        if self.private && (own_vpc || (connected && !self.public)) {
            return Ok(());
        }
        let here = match &net.vpc_id {
            Some(v) => format!("cluster-bootstrap runs in {v}"),
            None => "cluster-bootstrap runs outside any VPC".to_owned(),
        };
        if !self.public {
            if !self.private {
                return Err("neither the public nor the private endpoint is enabled".into());
            }
            return Err(format!(
                "the endpoint is private only (public access disabled) in {vpc}, and {here}, which is not {vpc} nor a VPC connected to it (CELLBRIDGE_REACHABLE_VPCS): run cluster-bootstrap in {vpc}, or connect its VPC by peering or a transit gateway and list {vpc} in the module's `cluster_bootstrap_reachable_vpc_ids`, and let {sg} admit TCP 443 from its subnets (the module's `cluster_bootstrap_ingress_cidrs` output; `cluster_security_group_ids` adds the rule)"
            ));
        }
        if self.open_to_all() {
            return Ok(());
        }
        let cidrs = self.public_cidrs.join(", ");
        let private_hint = if self.private {
            format!(" or run cluster-bootstrap in {vpc} (private access is on)")
        } else {
            String::new()
        };
        if net.vpc_id.is_none() {
            return Err(format!(
                "the public endpoint admits only {cidrs}, and {here}, from addresses no CIDR can name: run it in a VPC whose NAT addresses are in publicAccessCidrs (set the module's `cluster_bootstrap_egress_cidrs`){private_hint}"
            ));
        }
        if net.egress_cidrs.is_empty() {
            // Not refused: a deployment that works (its NAT addresses in the CIDRs) must not
            // break for want of a setting. If they are not, the connection is dropped and the
            // bounded connect fails once, finally ([`crate::ports::cluster::kube::ApplyError::Unreachable`]).
            tracing::warn!(
                cidrs = %cidrs,
                "the public endpoint is limited to some CIDRs and this function's egress addresses are unknown (CELLBRIDGE_EGRESS_CIDRS): trying"
            );
            return Ok(());
        }
        let outside: Vec<&str> = net
            .egress_cidrs
            .iter()
            .filter(|e| !self.public_cidrs.iter().any(|c| cidr_contains(c, e)))
            .map(String::as_str)
            .collect();
        if outside.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the public endpoint admits only {cidrs}, which excludes {}, the egress addresses of cluster-bootstrap ({here}; CELLBRIDGE_EGRESS_CIDRS): add them to the cluster's publicAccessCidrs{private_hint}",
            outside.join(", ")
        ))
    }
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

    /// Refuses a cluster whose endpoint configuration excludes the function, as `net` says
    /// where it runs; `None` (the command line, unless configured) decides nothing.
    pub fn check_reachable(&self, net: Option<&Network>) -> Result<(), EksError> {
        let (Some(net), Some(access)) = (net, &self.endpoint_access) else {
            return Ok(());
        };
        access.reachable_from(net).map_err(|reason| EksError::Unreachable {
            cluster: self.name.clone(),
            reason,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_contain_what_they_cover_and_nothing_else() {
        assert!(cidr_contains("0.0.0.0/0", "203.0.113.7/32"));
        assert!(cidr_contains("203.0.113.0/24", "203.0.113.7/32"));
        assert!(cidr_contains("203.0.113.0/24", "203.0.113.128/25"));
        assert!(!cidr_contains("203.0.113.0/25", "203.0.113.128/32"));
        assert!(!cidr_contains("203.0.113.7/32", "203.0.113.0/24"));
        assert!(cidr_contains("2001:db8::/32", "2001:db8:1::1/128"));
        assert!(!cidr_contains("2001:db8::/32", "203.0.113.7/32"));
        assert!(!cidr_contains("junk", "203.0.113.7/32"));
        assert!(is_cidr("10.0.0.0/8") && !is_cidr("10.0.0.0") && !is_cidr("10.0.0.0/33"));
    }
}
