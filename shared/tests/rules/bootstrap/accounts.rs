//! cluster-bootstrap: cells in other accounts. A cell in another account is reached through its
//! role; a new cell's cluster is bootstrapped from its tag through `CELLBRIDGE_ACCOUNT_ROLES` before
//! its pull request merges; an unmapped account is final and touches nothing; a merged role that
//! disagrees with the configuration, or with the role the cluster was reached with, is final. The event's account selects the role; nothing from an unmerged branch selects
//! a role.

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::MemCluster;
use cellbridge::pure::fleet::MemFleet;
use cellbridge::shell::error::{Class, Classify};
use cellbridge::{
    rules::bootstrap::Request, rules::bootstrap::Target, rules::bootstrap::config::Settings,
    rules::bootstrap::report::BootstrapOutcome,
};

#[tokio::test]
async fn a_cell_in_another_account_is_reached_through_its_role() {
    let fleet = fleet(&[("bootstrap_role_arn", CELL_ROLE)]);
    let bed = bed();
    // The role's session sees its own account's clusters: the cell's cluster is there.
    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).in_account(ACCOUNT_B));
    bed.accounts().trust_role(CELL_ROLE);
    let report = run(&bed, &fleet).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.access_entry.unwrap().principal_arn, CELL_ROLE);
    assert!(entries(&bed).is_empty());

    // A role that does not trust cellbridge is final; STS throttling is worth a retry.
    let bed = self::bed();
    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).in_account(ACCOUNT_B));
    let err = run(&bed, &fleet).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains(CELL_ROLE), "{err}");
    bed.accounts().trust_role(CELL_ROLE);
    bed.accounts().fail("AssumeRole", 1, true);
    assert_eq!(run(&bed, &fleet).await.unwrap_err().class(), Class::Retryable);
    assert!(bed.kube().applied().is_empty());
}

/// Cellbridge with account B mapped to `CELL_ROLE`, B's role trusting it, and a cluster named
/// `NEW_CLUSTER` in both accounts: B's tagged with the new cell, home's untagged.
fn two_accounts() -> Bed {
    let bed = bed_with(Settings {
        account_roles: [(ACCOUNT_B.to_owned(), CELL_ROLE.to_owned())].into(),
        confirm: Default::default(),
        ..settings()
    });
    bed.accounts().trust_role(CELL_ROLE);
    bed.accounts().add_cluster(
        MemCluster::active(NEW_CLUSTER, REGION)
            .in_account(ACCOUNT_B)
            .tag("cellbridge.dev/cell", NEW_CELL),
    );
    bed.accounts().add_cluster(MemCluster::active(NEW_CLUSTER, REGION));
    bed
}

/// The fleet's base branch: the template and `CELL`, not the new cell (its pull request is open).
fn base_branch_without_new_cell(extra: &[(&str, &str)]) -> MemFleet {
    fleet(extra)
}

fn new_cell_event(account: &str) -> Request {
    Request {
        cluster: NEW_CLUSTER.into(),
        account: Some(account.into()),
        ..request()
    }
}

#[tokio::test]
async fn a_new_cell_in_another_account_bootstraps_from_its_tag_through_the_mapped_role_before_it_merges() {
    let bed = two_accounts();
    let fleet = base_branch_without_new_cell(&[]);
    let report = bed.run(&fleet, &new_cell_event(ACCOUNT_B), Target::Eks).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.cell.as_deref(), Some(NEW_CELL));
    // The template's sync objects, as the base branch has them, written for the new cell.
    assert!(report.sync_file.as_deref().unwrap().contains("_template"), "{report:?}");
    let access = report.access_entry.unwrap();
    assert_eq!(access.principal_arn, CELL_ROLE);
    assert!(access.temporary && access.removed);
    assert!(bed.accounts().entries_in(ACCOUNT_B, REGION, NEW_CLUSTER).is_empty());
    let in_b = bed.accounts().calls_in(ACCOUNT_B);
    assert!(in_b.contains(&format!("DescribeCluster {NEW_CLUSTER}")), "{in_b:?}");
    assert!(in_b.contains(&format!("CreateAccessEntry {NEW_CLUSTER}")), "{in_b:?}");
    // The home account's cluster of the same name is never touched, not even described.
    let at_home = bed.accounts().calls_in(HOME);
    assert!(!at_home.iter().any(|c| c.contains(NEW_CLUSTER)), "{at_home:?}");
    assert!(bed.accounts().entries(REGION, NEW_CLUSTER).is_empty());
}

#[tokio::test]
async fn an_event_from_an_unmapped_account_is_final_names_the_account_and_touches_nothing() {
    let bed = two_accounts();
    let fleet = base_branch_without_new_cell(&[]);
    let err = bed
        .run(&fleet, &new_cell_event("333333333333"), Target::Eks)
        .await
        .unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    let text = err.to_string();
    for says in ["333333333333", "CELLBRIDGE_ACCOUNT_ROLES", HOME, NEW_CLUSTER] {
        assert!(text.contains(says), "{says:?} not in {text}");
    }
    // Only the home account was asked who it is; no cluster was looked up anywhere.
    assert_eq!(bed.accounts().calls(), ["GetCallerIdentity"]);
    assert!(bed.kube().applied().is_empty());

    // The home account's own events need no mapping; no account at all means home.
    for account in [Some(HOME), None] {
        let bed = two_accounts();
        let req = Request {
            account: account.map(str::to_owned),
            ..new_cell_event(HOME)
        };
        let report = bed.run(&fleet, &req, Target::Eks).await.unwrap();
        assert_eq!(
            report.outcome,
            BootstrapOutcome::NotACell,
            "home's {NEW_CLUSTER} is untagged"
        );
        assert!(bed.accounts().calls_in(ACCOUNT_B).is_empty());
    }
    // An account id that is not one is refused before any call.
    let bed = two_accounts();
    let err = bed
        .run(&fleet, &new_cell_event("22222"), Target::Eks)
        .await
        .unwrap_err();
    assert_eq!(err.class(), Class::InvalidInput, "{err}");
    assert!(bed.accounts().calls().is_empty());
}

#[tokio::test]
async fn a_merged_role_that_disagrees_with_the_configuration_is_final_and_nothing_is_touched() {
    // The cell is merged, its metadata names B's cluster and a role other than the map's.
    let other = "arn:aws:iam::222222222222:role/someone-else";
    let bed = two_accounts();
    bed.accounts().trust_role(other);
    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).in_account(ACCOUNT_B));
    let fleet = fleet(&[("bootstrap_role_arn", other)]);
    let req = Request {
        account: Some(ACCOUNT_B.into()),
        ..request()
    };
    let err = bed.run(&fleet, &req, Target::Eks).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    let text = err.to_string();
    for says in [other, CELL_ROLE, "CELLBRIDGE_ACCOUNT_ROLES", ACCOUNT_B] {
        assert!(text.contains(says), "{says:?} not in {text}");
    }
    assert!(bed.accounts().calls().is_empty(), "{:?}", bed.accounts().calls());

    // Agreeing, the merged cell bootstraps through the configured role.
    let bed = two_accounts();
    bed.accounts()
        .add_cluster(MemCluster::active(CLUSTER, REGION).in_account(ACCOUNT_B));
    let fleet = self::fleet(&[("bootstrap_role_arn", CELL_ROLE)]);
    let report = bed.run(&fleet, &req, Target::Eks).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(report.access_entry.unwrap().principal_arn, CELL_ROLE);

    // A merged role of another account than the event's is refused too, with no map entry.
    let bed = self::bed();
    let req = Request {
        account: Some(HOME.into()),
        ..request()
    };
    let err = bed.run(&fleet, &req, Target::Eks).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains("not a role of that account"), "{err}");
    assert!(bed.accounts().calls().is_empty());
}

#[tokio::test]
async fn a_tagged_cells_merged_role_must_be_the_role_the_cluster_was_reached_with() {
    // B's cluster is tagged with CELL, whose merged metadata names another cluster and a role
    // other than the map's: the role is not switched after the fact.
    let other = "arn:aws:iam::222222222222:role/someone-else";
    let bed = two_accounts();
    bed.accounts().add_cluster(
        MemCluster::active("renamed", REGION)
            .in_account(ACCOUNT_B)
            .tag("cellbridge.dev/cell", CELL),
    );
    let fleet = fleet(&[("bootstrap_role_arn", other)]);
    let req = Request {
        cluster: "renamed".into(),
        account: Some(ACCOUNT_B.into()),
        ..request()
    };
    let err = bed.run(&fleet, &req, Target::Eks).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains(other), "{err}");
    assert!(
        !bed.accounts().calls().iter().any(|c| c.contains("AccessEntry")),
        "{:?}",
        bed.accounts().calls()
    );
}
