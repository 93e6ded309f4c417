//! cluster-bootstrap end to end across accounts: a new cell in a second account bootstraps from its
//! cluster's tag before its pull request merges; the sweep finds tagged clusters of unmerged cells in
//! every account (`ListClusters` through moto) and deletes their aged entries, keeping a fresh one.

use crate::support::*;
use cellbridge::pure::fleet::LocalFleet;
use cellbridge::{rules::bootstrap::Bootstrapper, rules::bootstrap::config::Settings};
use cellbridge_tests::kube::http_json;
use cellbridge_tests::{leak, moto};
use serde_json::json;
use std::time::Duration;

const ACCOUNT_B: &str = "210987654321";

const ROLE_B: &str = "arn:aws:iam::210987654321:role/cellbridge-bootstrap";

/// A cluster named `name`, tagged as `cell`'s, in the account of `conf`'s credentials.
async fn create_tagged_cluster(conf: &aws_config::SdkConfig, name: &str, cell: &str) {
    moto::create_cluster(conf, name, &[("cellbridge.dev/cell", cell)]).await;
}

/// Access-entry operations on `cluster` in `account`'s cluster of that name.
fn access_log_in(account: &str, cluster: &str) -> Vec<String> {
    let (_, v) = http_json("GET", &format!("{}/_cellbridge/eks/log", moto::endpoint()), None);
    v.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cluster"] == cluster && e["account"] == account)
        .map(|e| e["op"].as_str().unwrap().to_owned())
        .collect()
}

/// A new cell's cluster in a second account, found by its tag
/// before the cell's pull request merges (no `clusters/<cell>/` on main: the template), is
/// reached through the role `CELLBRIDGE_ACCOUNT_ROLES` gives the event's account, never through
/// the home account's cluster of the same name; an account not in the map is refused, finally,
/// before anything is looked up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_cell_in_a_second_account_bootstraps_from_its_clusters_tag_before_its_pull_request_merges() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    use cellbridge_tests::lambda_handler;
    const NAME: &str = "cross-acct-cell";
    const CELL: &str = "cross-acct";
    // The home account's cluster of the same name, untagged; its API server is the bed's.
    let bed = Bed::new(NAME, &[], None).await;
    // The cell is not merged: the fleet has no clusters/cross-acct/, only the template.
    assert!(!fixture_fleet().join("clusters").join(CELL).exists());
    // Account B's, tagged with the new cell (same endpoint: the override is by region and name).
    let b = moto::assumed(&moto::sdk_config().await, ROLE_B, "test-account-b").await;
    let caller = aws_sdk_sts::Client::new(&b).get_caller_identity().send().await.unwrap();
    assert_eq!(caller.account(), Some(ACCOUNT_B));
    create_tagged_cluster(&b, NAME, CELL).await;
    let home = aws_sdk_eks::Client::new(&bed.aws)
        .describe_cluster()
        .name(NAME)
        .send()
        .await
        .unwrap();
    assert!(
        home.cluster().unwrap().tags().is_none_or(|t| t.is_empty()),
        "two clusters"
    );

    let settings = Settings {
        account_roles: [(ACCOUNT_B.to_owned(), ROLE_B.to_owned())].into(),
        confirm: Default::default(),
        ..settings(&bed.secret)
    };
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
        rechecks: None,
    };
    let from = |account: &str| {
        let mut e = create_cluster_event(NAME);
        e["account"] = json!(account);
        e["detail"]["recipientAccountId"] = json!(account);
        e
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let inv = cellbridge_tests::handle(&service, &from(ACCOUNT_B), deadline)
        .await
        .unwrap();
    let r = &inv.response;
    leak::capture("bootstrap in account B", &r.to_string());
    assert!(!inv.failed(), "{r}");
    assert_eq!(r["outcome"], "bootstrapped", "{r}");
    assert_eq!(r["cell"], CELL);
    assert_eq!(
        r["components_file"],
        "clusters/_template/flux-system/gotk-components.yaml"
    );
    assert_eq!(r["access_entry"]["principal_arn"], ROLE_B, "{r}");
    assert_eq!(r["access_entry"]["removed"], true, "{r}");
    // Access was given and taken back in account B's cluster; the home one was never touched.
    // (Writes only: another test's sweep, run after its own bootstrap, may read this cluster's
    // entry meanwhile; it lists the clusters of every account it is given a role for.)
    let writes: Vec<String> = access_log_in(ACCOUNT_B, NAME)
        .into_iter()
        .filter(|op| op != "DescribeAccessEntry")
        .collect();
    assert_eq!(
        writes,
        ["CreateAccessEntry", "AssociateAccessPolicy", "DeleteAccessEntry"]
    );
    assert!(access_log_in("123456789012", NAME).is_empty());
    assert!(access_entries(&b, NAME).await.is_empty());
    assert!(access_entries(&bed.aws, NAME).await.is_empty());
    assert_eq!(bed.kube.objects(Some("GitRepository")).len(), 1);
    assert_eq!(
        flux_object(&bed.kube, "Kustomization")["spec"]["path"],
        format!("./clusters/{CELL}")
    );

    // An account CELLBRIDGE_ACCOUNT_ROLES does not name: a handled final failure, nothing made.
    let requests = bed.kube.requests().len();
    let ctx = cellbridge_tests::lambda_context(60);
    let event = lambda_runtime::LambdaEvent::new(from("333333333333"), ctx);
    let v = lambda_handler(&service, event).await.unwrap();
    leak::capture("bootstrap from an unmapped account", &v.to_string());
    assert_eq!(v["class"], "final", "{v}");
    let msg = v["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains("333333333333") && msg.contains("CELLBRIDGE_ACCOUNT_ROLES"),
        "{v}"
    );
    assert_eq!(bed.kube.requests().len(), requests);
    let writes_now = access_log_in(ACCOUNT_B, NAME)
        .into_iter()
        .filter(|op| op != "DescribeAccessEntry")
        .count();
    assert_eq!(writes_now, 3, "nothing more written in account B");
    assert!(access_log_in("123456789012", NAME).is_empty());
    assert!(access_log_in("333333333333", NAME).is_empty());
}

/// Through moto's EKS and STS: the daily sweep finds the clusters tagged with a
/// cell that is not merged yet (ListClusters and DescribeCluster, in cellbridge's own account and,
/// through `CELLBRIDGE_ACCOUNT_ROLES`, in account B) and deletes the temporary access entries a
/// killed run left there once they are older than the TTL; a fresh one is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_finds_tagged_clusters_of_unmerged_cells_in_every_account() {
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
    use cellbridge::ports::cluster::access::{CREATED_AT_TAG, TEMPORARY_TAG};
    let home = role_config().await;
    let b = moto::assumed(&moto::sdk_config().await, ROLE_B, "test-account-b").await;
    let entry = |conf: &aws_config::SdkConfig, cluster: &'static str, principal: &'static str| {
        let eks = aws_sdk_eks::Client::new(conf);
        async move {
            eks.create_access_entry()
                .cluster_name(cluster)
                .principal_arn(principal)
                .tags(TEMPORARY_TAG, "true")
                .tags(CREATED_AT_TAG, "2026-01-01T00:00:00Z")
                .send()
                .await
                .unwrap();
        }
    };
    let age = |account: &str, cluster: &str, principal: &str, secs: u64| {
        let (status, v) = http_json(
            "POST",
            &format!("{}/_cellbridge/eks/entries/{cluster}", moto::endpoint()),
            Some(json!({"region": REGION, "account": account, "principal": principal, "age_secs": secs})),
        );
        assert_eq!(status, 200, "{v}");
    };
    create_tagged_cluster(&home, "sweep-home", "sweep-new-home").await;
    create_tagged_cluster(&b, "sweep-b", "sweep-new-b").await;
    create_tagged_cluster(&home, "sweep-fresh", "sweep-new-fresh").await;
    entry(&home, "sweep-home", ROLE).await;
    entry(&b, "sweep-b", ROLE_B).await;
    entry(&home, "sweep-fresh", ROLE).await;
    age("123456789012", "sweep-home", ROLE, 7200);
    age(ACCOUNT_B, "sweep-b", ROLE_B, 7200);

    let settings = Settings {
        account_roles: [(ACCOUNT_B.to_owned(), ROLE_B.to_owned())].into(),
        confirm: Default::default(),
        ..settings("unused")
    };
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(home.clone(), settings),
        fleets: LocalSource(LocalFleet::open(fixture_fleet()).unwrap()).into(),
        rechecks: None,
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let inv = cellbridge_tests::handle(&service, &json!({"action": "sweep"}), deadline)
        .await
        .unwrap();
    let r = &inv.response;
    leak::capture("the sweep's report", &r.to_string());
    let result_of = |cluster: &str| {
        r["report"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cluster"] == cluster)
            .unwrap_or_else(|| panic!("{cluster} not swept: {r}"))
            .clone()
    };
    // Every bootstrap run ends with a sweep, and the other tests' runs share this moto account:
    // one of them may have deleted the expired home entry first. Gone is what matters; only
    // account B (reached through the role only this test maps) is this sweep's alone.
    let home_result = result_of("sweep-home")["result"].clone();
    assert!(home_result == "deleted" || home_result == "none", "{r}");
    assert_eq!(result_of("sweep-home")["cell"], "sweep-new-home");
    assert_eq!(result_of("sweep-b")["result"], "deleted", "{r}");
    assert_eq!(result_of("sweep-b")["role"], ROLE_B);
    assert_eq!(result_of("sweep-fresh")["result"], "kept", "{r}");
    assert!(access_entries(&home, "sweep-home").await.is_empty());
    assert!(access_entries(&b, "sweep-b").await.is_empty());
    assert_eq!(access_entries(&home, "sweep-fresh").await, [ROLE]);
}
