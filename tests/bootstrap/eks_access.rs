//! cluster-bootstrap end to end: EKS, STS and the access entry through moto. A creating cluster is
//! waited for or handed back; a cell's bootstrap role is assumed before any EKS or Kubernetes call; an
//! access entry someone else made without a policy is not changed; a private-only endpoint out of
//! reach fails finally before any access entry.

use crate::support::*;
use cellbridge::shell::error::Classify;
use cellbridge::{
    rules::bootstrap::Bootstrapper, rules::bootstrap::Request, rules::bootstrap::Target,
    rules::bootstrap::config::Settings, rules::bootstrap::report::BootstrapOutcome,
};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creating_cluster_is_waited_for_or_handed_back() {
    let bed = Bed::new("eks-creating", &[("cellbridge.dev/cell", "creating")], None).await;
    moto_control(
        "/_cellbridge/eks/clusters/eks-creating",
        json!({"region": REGION, "active_after": 1.0}),
    );
    let report = bed.run(&bed.request()).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);

    let bed2 = Bed::new("eks-creating-long", &[("cellbridge.dev/cell", "creating-long")], None).await;
    moto_control(
        "/_cellbridge/eks/clusters/eks-creating-long",
        json!({"region": REGION, "active_after": 600}),
    );
    let s = Settings {
        cluster_wait: Duration::from_millis(500),
        ..settings(&bed2.secret)
    };
    let report = bed2.run_with(&bed2.request(), s).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::ClusterNotReady);
    assert_eq!(report.cluster_status.as_deref(), Some("CREATING"));
    assert!(calls(&bed2.kube).is_empty());

    moto_control(
        "/_cellbridge/eks/clusters/eks-creating-long",
        json!({"region": REGION, "status": "FAILED"}),
    );
    let err = bed2.run(&bed2.request()).await.unwrap_err();
    assert!(err.to_string().contains("is FAILED"), "{err}");
    let err = bed2
        .run(&Request {
            cluster: "eks-never-made".into(),
            ..bed2.request()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("eks-never-made not found"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cells_bootstrap_role_is_assumed_before_any_eks_or_kubernetes_call() {
    use cellbridge::pure::fleet::Overlay;
    let bed = Bed::new("eks-xacct", &[], None).await;
    // The cell is known only from the fleet (no tag), and names the role to use.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  aws_region: \"eu-west-1\"\n  cell_name: \"xacct\"\n  cluster_name: \"eks-xacct\"\n  bootstrap_role_arn: \"arn:aws:iam::123456789012:role/cells/xacct-bootstrap\"\n  schema: \"1\"\n";
    let fleet = Overlay::new(
        &bed.fleet,
        [("clusters/xacct/cell-metadata.yaml".to_owned(), cm.as_bytes().to_vec())],
    );
    let report = Bootstrapper::new(bed.aws.clone(), settings(&bed.secret))
        .run(&fleet, &bed.request(), Target::Eks)
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some("xacct"));
    assert_eq!(
        report.access_entry.unwrap().principal_arn,
        "arn:aws:iam::123456789012:role/cells/xacct-bootstrap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_entry_someone_else_made_without_a_policy_is_not_changed() {
    let bed = Bed::new("eks-entry-no-policy", &[("cellbridge.dev/cell", "nopolicy")], None).await;
    let eks = aws_sdk_eks::Client::new(&bed.aws);
    eks.create_access_entry()
        .cluster_name(&bed.cluster)
        .principal_arn(ROLE)
        .send()
        .await
        .unwrap();
    let err = bed.run(&bed.request()).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("HTTP 403"),
        "the API server refuses a principal without a policy: {msg}"
    );
    assert!(
        !access_log(&bed.cluster)
            .iter()
            .any(|op| op == "AssociateAccessPolicy" || op == "DeleteAccessEntry")
    );
    assert_eq!(access_entries(&bed.aws, &bed.cluster).await, [ROLE]);
    assert!(bed.writes().is_empty());
}

/// Against moto: moto keeps `resourcesVpcConfig` as given (CreateCluster,
/// UpdateClusterConfig) and answers it in DescribeCluster, without the `vpcId` and
/// `clusterSecurityGroupId` EKS adds. A private-only endpoint, the function outside any VPC:
/// one final failure that says why, before any access entry or Kubernetes request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_only_endpoint_out_of_reach_fails_finally_before_any_access_entry() {
    use cellbridge::ports::cluster::eks::Network;
    let bed = Bed::new("eks-private-only", &[("cellbridge.dev/cell", "private")], None).await;
    let eks = aws_sdk_eks::Client::new(&bed.aws);
    eks.update_cluster_config()
        .name(&bed.cluster)
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-1")
                .endpoint_public_access(false)
                .endpoint_private_access(true)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let outside = Network {
        vpc_id: None,
        reachable_vpcs: vec![],
        egress_cidrs: vec![],
    };
    let err = Bootstrapper::new(bed.aws.clone(), settings(&bed.secret))
        .with_network(Some(outside))
        .run(&bed.fleet, &bed.request(), Target::Eks)
        .await
        .unwrap_err();
    assert_eq!(err.class(), cellbridge::shell::error::Class::Final, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("eks-private-only") && msg.contains("private only") && msg.contains("outside any VPC"),
        "{msg}"
    );
    assert!(access_log(&bed.cluster).is_empty(), "{:?}", access_log(&bed.cluster));
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
    assert!(bed.writes().is_empty());
}
