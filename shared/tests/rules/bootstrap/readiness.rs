//! cluster-bootstrap: which clusters are bootstrapped, and when. A cluster still creating is handed
//! back and bootstrapped once active; a CONFIG_MAP-only or FAILED cluster is refused before anything
//! is touched; a cluster of no cell is skipped and a tag names the cell; an endpoint the function
//! cannot reach (private-only out of its VPCs, public CIDRs excluding it) fails once, finally, before
//! any access entry, and one it can reach proceeds. The function's network is what the module
//! declares (`CELLBRIDGE_VPC_ID`, `CELLBRIDGE_REACHABLE_VPCS`, `CELLBRIDGE_EGRESS_CIDRS`).

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::{MemAws, MemCluster, MemKube};
use cellbridge::doubles::secrets::MemSecrets;
use cellbridge::ports::cluster::eks::{EndpointAccess, Network};
use cellbridge::shell::error::{Class, Classify};
use cellbridge::{
    rules::bootstrap::Bootstrapper, rules::bootstrap::Request, rules::bootstrap::Target,
    rules::bootstrap::report::BootstrapOutcome,
};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_cluster_still_creating_is_handed_back_and_one_that_becomes_active_is_bootstrapped() {
    let bed = bed();
    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).creating_for(1_000_000));
    let report = bed
        .run_until(
            &fleet(&[]),
            None,
            &request(),
            Target::Eks,
            Some(Duration::from_millis(20)),
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::ClusterNotReady);
    assert_eq!(report.cluster_status.as_deref(), Some("CREATING"));
    assert!(bed.kube().applied().is_empty());
    assert!(
        !bed.accounts()
            .calls()
            .iter()
            .any(|c| c.starts_with("CreateAccessEntry"))
    );

    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).creating_for(3));
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
}

#[tokio::test]
async fn a_config_map_only_or_failed_cluster_is_refused_before_anything_is_touched() {
    for (cluster, says) in [
        (
            MemCluster::active(CLUSTER, REGION).authentication_mode("CONFIG_MAP"),
            "authenticationMode=API_AND_CONFIG_MAP",
        ),
        (MemCluster::active(CLUSTER, REGION).status("FAILED"), "is FAILED"),
    ] {
        let bed = bed();
        bed.accounts().add_cluster(cluster);
        let err = run(&bed, &fleet(&[])).await.unwrap_err();
        assert_eq!(err.class(), Class::Final);
        assert!(err.to_string().contains(says), "{err}");
        assert!(!bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")));
        assert!(bed.kube().applied().is_empty());
    }
}

#[tokio::test]
async fn a_cluster_of_no_cell_is_skipped_and_a_tag_names_the_cell() {
    let bed = bed();
    bed.accounts().add_cluster(MemCluster::active("scratch", REGION));
    let report = bed
        .run(
            &fleet(&[]),
            &Request {
                cluster: "scratch".into(),
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::NotACell);
    assert!(bed.kube().applied().is_empty());

    // The tag wins over the lookup by cluster name (a renamed cluster).
    bed.accounts()
        .add_cluster(MemCluster::active("renamed", REGION).tag("cellbridge.dev/cell", CELL));
    let report = bed
        .run(
            &fleet(&[]),
            &Request {
                cluster: "renamed".into(),
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some(CELL));
}

const HUB_VPC: &str = "vpc-0hub";

fn private_only() -> EndpointAccess {
    EndpointAccess {
        public: false,
        private: true,
        public_cidrs: vec![],
        vpc_id: Some(CLUSTER_VPC.into()),
        cluster_security_group: Some("sg-0cluster".into()),
    }
}

fn public_from(cidrs: &[&str]) -> EndpointAccess {
    EndpointAccess {
        public: true,
        private: false,
        public_cidrs: cidrs.iter().map(|c| c.to_string()).collect(),
        vpc_id: Some(CLUSTER_VPC.into()),
        cluster_security_group: Some("sg-0cluster".into()),
    }
}

fn net(vpc: Option<&str>, reachable: &[&str], egress: &[&str]) -> Network {
    Network {
        vpc_id: vpc.map(str::to_owned),
        reachable_vpcs: reachable.iter().map(|v| v.to_string()).collect(),
        egress_cidrs: egress.iter().map(|c| c.to_string()).collect(),
    }
}

fn bed_on(access: EndpointAccess, network: Option<Network>) -> Bed {
    let aws = MemAws::new(FUNCTION_ROLE);
    aws.add_cluster(MemCluster::active(CLUSTER, REGION).endpoint_access(access));
    let kube = MemKube::new(&aws);
    let secrets = MemSecrets::new();
    secrets.put(GIT_SECRET, json!({"username": "git", "password": PASSWORD}).to_string());
    Bootstrapper::with_ports(aws, kube, secrets, settings()).with_network(network)
}

async fn refused_untouched(bed: &Bed, says: &[&str]) {
    let err = run(bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    let text = err.to_string();
    for s in says {
        assert!(text.contains(s), "{s:?} not in {text}");
    }
    assert!(
        !bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")),
        "{:?}",
        bed.accounts().calls()
    );
    assert!(bed.kube().applied().is_empty());
}

#[tokio::test]
async fn a_private_only_endpoint_out_of_reach_fails_once_finally_and_nothing_is_created() {
    // Outside any VPC, and in a VPC not connected to the cluster's.
    for network in [net(None, &[], &[]), net(Some(HUB_VPC), &["vpc-0other"], &[])] {
        let bed = bed_on(private_only(), Some(network));
        refused_untouched(&bed, &[CLUSTER, "private only", CLUSTER_VPC, "sg-0cluster", "443"]).await;
    }
}

#[tokio::test]
async fn a_private_only_endpoint_is_reached_from_its_vpc_or_a_connected_one() {
    for network in [
        net(Some(CLUSTER_VPC), &[], &[]),
        net(Some(HUB_VPC), &[CLUSTER_VPC], &[]),
    ] {
        let bed = bed_on(private_only(), Some(network));
        let report = run(&bed, &fleet(&[])).await.unwrap();
        assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    }
}

#[tokio::test]
async fn a_public_endpoint_whose_cidrs_exclude_the_function_fails_finally_saying_which() {
    let restricted = || public_from(&["198.51.100.0/24"]);
    // Egress outside the CIDRs; outside any VPC (AWS's addresses, which no CIDR names).
    let cases = [
        (net(Some(HUB_VPC), &[], &["203.0.113.7/32"]), "203.0.113.7/32"),
        (net(None, &[], &[]), "outside any VPC"),
    ];
    for (network, says) in cases {
        let bed = bed_on(restricted(), Some(network));
        refused_untouched(&bed, &[CLUSTER, "198.51.100.0/24", says]).await;
    }
    // A connected VPC does not help while public access is on: the name resolves publicly.
    let mut both = restricted();
    both.private = true;
    let bed = bed_on(
        both.clone(),
        Some(net(Some(HUB_VPC), &[CLUSTER_VPC], &["203.0.113.7/32"])),
    );
    refused_untouched(&bed, &["publicAccessCidrs"]).await;
    // From the cluster's own VPC, private access is used whatever the CIDRs.
    let bed = bed_on(both, Some(net(Some(CLUSTER_VPC), &[], &[])));
    assert_eq!(
        run(&bed, &fleet(&[])).await.unwrap().outcome,
        BootstrapOutcome::Bootstrapped
    );
}

#[tokio::test]
async fn an_open_or_admitting_public_endpoint_proceeds_and_no_network_means_no_decision() {
    let cases = [
        (public_from(&["0.0.0.0/0"]), Some(net(None, &[], &[]))),
        (public_from(&[]), Some(net(None, &[], &[]))),
        (
            public_from(&["198.51.100.0/24", "203.0.113.0/28"]),
            Some(net(Some(HUB_VPC), &[], &["203.0.113.7/32", "198.51.100.9/32"])),
        ),
        // Egress addresses unknown in a VPC: tried (a working NAT must not be refused for want
        // of a setting); the bounded connect decides.
        (public_from(&["198.51.100.0/24"]), Some(net(Some(HUB_VPC), &[], &[]))),
        // The command line without CELLBRIDGE_VPC_ID: only the bounded connect decides.
        (private_only(), None),
    ];
    for (access, network) in cases {
        let bed = bed_on(access, network);
        let report = run(&bed, &fleet(&[])).await.unwrap();
        assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    }
}
