//! A destroyed cell's decommission, over the in-memory ports: the state bucket, GitHub and EKS
//! (`MemAws`, the same accounts and clusters cluster-bootstrap's rules use). Only a state with no
//! outputs and no resources, of a cell the base branch has, whose cluster EKS no longer knows,
//! opens the pull request that removes `clusters/<cell>/`; a person merges it.

use std::collections::BTreeMap;

use cellbridge::doubles::cluster::{MemAws, MemCluster};
use cellbridge::jobs::sync::ClusterAccess;
use serde_json::{Value, json};

use crate::support::sync::{BUCKET, Bed, LINEAGE, apply, bed, branch, state, sync};

const IDENTITY: &str = "arn:aws:iam::123456789012:role/cellbridge";
const CELL: &str = "eu-c1";
/// The example fleet's state names the cell's cluster after the cell, in eu-west-1.
const REGION: &str = "eu-west-1";

/// A bed whose EKS is `aws`.
fn with_eks(aws: &MemAws) -> Bed {
    bed().with_clusters(ClusterAccess {
        probe: aws.clone().into(),
        describe_roles: BTreeMap::new(),
    })
}

/// What `terraform destroy` leaves: no outputs, no resources.
fn destroyed(serial: u64) -> String {
    json!({"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE, "outputs": {}, "resources": []})
        .to_string()
}

fn destroy(bed: &Bed, serial: u64) {
    bed.states
        .put(BUCKET, &format!("cells/{CELL}/terraform.tfstate"), destroyed(serial));
}

/// The cell applied and its pull request merged: the base branch has `clusters/eu-c1/`.
async fn merged_cell(bed: &Bed) {
    apply(bed, CELL, 1, "vpc-1");
    let r = sync(bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    bed.fleet.merge(r["pull_request"]["number"].as_u64().unwrap());
}

fn cell_files(files: &BTreeMap<String, String>) -> Vec<String> {
    files
        .keys()
        .filter(|p| p.starts_with(&format!("clusters/{CELL}/")))
        .cloned()
        .collect()
}

fn number(r: &Value) -> u64 {
    r["pull_request"]["number"]
        .as_u64()
        .unwrap_or_else(|| panic!("no pull request: {r}"))
}

#[tokio::test]
async fn a_destroyed_stack_whose_cluster_is_gone_opens_one_pull_request_removing_exactly_its_directory() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    let before = bed.fleet.files("main");
    let removed = cell_files(&before);
    assert!(removed.len() >= 4, "{removed:?}");
    destroy(&bed, 2);

    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "decommission-opened", "{r}");
    assert_eq!(r["decommission"]["eks"]["presence"], "gone", "{r}");
    assert_eq!(r["decommission"]["removed"], removed.len());
    let pr = bed.fleet.pulls().into_iter().find(|p| p.number == number(&r)).unwrap();
    assert!(pr.open && pr.head == branch(CELL));
    assert_eq!(pr.labels, ["cellbridge", "decommission"]);
    assert!(
        pr.body
            .contains("does not exist in account `123456789012`, region `eu-west-1`"),
        "{}",
        pr.body
    );
    assert!(pr.body.contains("never merges it"), "{}", pr.body);
    assert!(pr.body.contains("The layers the cell ran"), "{}", pr.body);
    assert!(
        !pr.body.contains("Follows #"),
        "a merged metadata pull request is no predecessor: {}",
        pr.body
    );

    // Exactly the cell's directory: every other file of the base is untouched.
    let after = bed.fleet.files(&branch(CELL));
    let mut expected = before.clone();
    expected.retain(|p, _| !p.starts_with(&format!("clusters/{CELL}/")));
    assert_eq!(after, expected);
    let head = bed.fleet.head(&branch(CELL)).unwrap();
    let mut changed = bed.fleet.changed_paths(&head);
    changed.sort();
    assert_eq!(changed, removed, "one commit removing the cell's files");
    assert_eq!(bed.fleet.commits_ahead(&branch(CELL)), 1);
    let statuses = bed.fleet.statuses(&head);
    assert!(statuses.iter().all(|s| s.success), "{statuses:?}");

    // Replayed: nothing written.
    bed.fleet.clear_calls();
    let again = sync(&bed, CELL).await;
    assert_eq!(again["action"], "decommission-unchanged", "{again}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert_eq!(bed.fleet.pulls().iter().filter(|p| p.open).count(), 1);
}

#[tokio::test]
async fn a_cluster_that_still_exists_opens_nothing_and_one_still_deleting_is_asked_again_later() {
    let aws = MemAws::new(IDENTITY);
    aws.add_cluster(MemCluster::active(CELL, REGION));
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    destroy(&bed, 2);
    bed.fleet.clear_calls();

    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "destroyed", "{r}");
    assert_eq!(r["decommission"]["eks"]["status"], "ACTIVE", "{r}");
    assert!(
        r["decommission"]["reason"].as_str().unwrap().contains("still exists"),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert_eq!(r["retryable"], false);

    aws.add_cluster(MemCluster::active(CELL, REGION).status("DELETING"));
    let r = sync(&bed, CELL).await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(true)),
        "{r}"
    );
    assert!(r["error"].as_str().unwrap().contains("still DELETING"), "{r}");
    assert_eq!(bed.fleet.writes(), 0);

    aws.remove_cluster(None, REGION, CELL);
    assert_eq!(sync(&bed, CELL).await["action"], "decommission-opened");
}

#[tokio::test]
async fn an_open_decommission_is_withdrawn_when_the_cluster_shows_up_again() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    destroy(&bed, 2);
    let opened = sync(&bed, CELL).await;
    assert_eq!(opened["action"], "decommission-opened", "{opened}");
    // The state was a wrong backend's, say: the cluster runs.
    aws.add_cluster(MemCluster::active(CELL, REGION));
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "destroyed", "{r}");
    assert_eq!(
        r["decommission"]["withdrawn"]["number"], opened["pull_request"]["number"],
        "{r}"
    );
    let pr = bed
        .fleet
        .pulls()
        .into_iter()
        .find(|p| p.number == number(&opened))
        .unwrap();
    assert!(!pr.open && !pr.merged);
    assert_eq!(pr.closed_by.as_deref(), Some("cellbridge"));
    assert!(pr.body.contains("still exists"), "{}", pr.body);
    assert_eq!(bed.fleet.head(&branch(CELL)), None, "its branch is deleted");
}

#[tokio::test]
async fn a_later_apply_that_brings_the_cell_back_closes_the_decommission() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    destroy(&bed, 2);
    let opened = sync(&bed, CELL).await;
    assert_eq!(opened["action"], "decommission-opened");

    // The same values as merged: back in sync, the decommission closed.
    apply(&bed, CELL, 3, "vpc-1");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "closed", "{r}");
    assert_eq!(r["pull_request"]["number"], opened["pull_request"]["number"]);
    let pr = bed
        .fleet
        .pulls()
        .into_iter()
        .find(|p| p.number == number(&opened))
        .unwrap();
    assert!(!pr.open && !pr.merged, "{pr:?}");
    assert_eq!(pr.closed_by.as_deref(), Some("cellbridge"));
    assert!(pr.body.contains("the cell is back"), "{}", pr.body);
    assert!(
        bed.fleet
            .files("main")
            .contains_key(&format!("clusters/{CELL}/cell-metadata.yaml"))
    );

    // Destroyed again, then back with a new value: a metadata pull request, the decommission closed.
    destroy(&bed, 4);
    let second = sync(&bed, CELL).await;
    assert_eq!(second["action"], "decommission-opened", "{second}");
    apply(&bed, CELL, 5, "vpc-5");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    let open: Vec<_> = bed.fleet.pulls().into_iter().filter(|p| p.open).collect();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].labels, ["cellbridge"]);
    assert!(bed.fleet.files(&branch(CELL))[&format!("clusters/{CELL}/cell-metadata.yaml")].contains("vpc-5"));
}

#[tokio::test]
async fn an_open_metadata_pull_request_is_closed_and_the_decommission_takes_its_branch() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    apply(&bed, CELL, 2, "vpc-2");
    let meta = sync(&bed, CELL).await;
    assert_eq!(meta["action"], "opened", "{meta}");
    destroy(&bed, 3);
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "decommission-opened", "{r}");
    assert_eq!(r["decommission"]["superseded"], meta["pull_request"]["number"], "{r}");
    let pulls = bed.fleet.pulls();
    let old = pulls.iter().find(|p| p.number == number(&meta)).unwrap();
    assert!(!old.open && !old.merged);
    assert_eq!(old.closed_by.as_deref(), Some("cellbridge"));
    assert!(
        old.body.contains("decommission pull request takes this branch"),
        "{}",
        old.body
    );
    let new = pulls.iter().find(|p| p.number == number(&r)).unwrap();
    assert!(
        new.body.contains(&format!("Supersedes #{}", number(&meta))),
        "{}",
        new.body
    );
    let files = bed.fleet.files(&branch(CELL));
    assert!(cell_files(&files).is_empty(), "{:?}", cell_files(&files));
    assert_eq!(
        bed.fleet.commits_ahead(&branch(CELL)),
        1,
        "built on the base, not on the old branch"
    );
}

#[tokio::test]
async fn a_decommission_a_person_closed_stays_closed() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    destroy(&bed, 2);
    let opened = sync(&bed, CELL).await;
    bed.fleet.close(number(&opened));
    bed.fleet.clear_calls();
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "declined", "{r}");
    assert_eq!(bed.fleet.writes(), 0, "{:?}", bed.fleet.calls());
    assert_eq!(bed.fleet.pulls().iter().filter(|p| p.open).count(), 0);
}

#[tokio::test]
async fn files_added_to_the_cell_on_the_base_are_removed_too_and_the_base_is_merged_in() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    destroy(&bed, 2);
    let opened = sync(&bed, CELL).await;
    bed.fleet.commit(
        "main",
        &[
            (&format!("clusters/{CELL}/extra.yaml"), "kind: ConfigMap\n"),
            ("apps/new.yaml", "kind: ConfigMap\n"),
        ],
        "people keep working on main",
    );
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "decommission-updated", "{r}");
    assert_eq!(r["pull_request"]["number"], opened["pull_request"]["number"]);
    let files = bed.fleet.files(&branch(CELL));
    assert!(cell_files(&files).is_empty(), "{:?}", cell_files(&files));
    assert!(files.contains_key("apps/new.yaml"), "the base is merged in");
    let head = bed.fleet.head(&branch(CELL)).unwrap();
    let main = bed.fleet.head("main").unwrap();
    assert!(bed.fleet.is_ancestor(&main, &head), "merged, never reset");
}

#[tokio::test]
async fn nothing_is_proposed_without_a_cluster_to_ask_about_or_without_eks() {
    // No EKS: nobody can confirm.
    let bed = bed();
    merged_cell(&bed).await;
    destroy(&bed, 2);
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "destroyed", "{r}");
    assert_eq!(r["decommission"]["proposed"], false);
    assert!(r["decommission"]["reason"].as_str().unwrap().contains("EKS"), "{r}");

    // A cell whose metadata names no cluster.
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    let text = state(CELL, 1, "vpc-1").replace("\"cluster_name\":\"eu-c1\",", "");
    assert!(!text.contains("cluster_name"), "{text}");
    bed.states.put(BUCKET, &format!("cells/{CELL}/terraform.tfstate"), text);
    let r = sync(&bed, CELL).await;
    bed.fleet.merge(number(&r));
    destroy(&bed, 2);
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "destroyed", "{r}");
    assert!(
        r["decommission"]["reason"]
            .as_str()
            .unwrap()
            .contains("names no cluster_name"),
        "{r}"
    );

    // A destroyed stack the fleet never had (or whose decommission merged): nothing to remove.
    destroy(&bed, 3);
    let r = sync(&bed, "eu-c9").await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "a cell named with no state: {r}"
    );
    bed.states.put(BUCKET, "cells/eu-c9/terraform.tfstate", destroyed(1));
    let r = sync(&bed, "eu-c9").await;
    assert_eq!(r["action"], "destroyed", "{r}");
    assert!(
        r["decommission"]["reason"]
            .as_str()
            .unwrap()
            .contains("no clusters/eu-c9/"),
        "{r}"
    );
}

#[tokio::test]
async fn a_state_with_resources_but_no_cell_metadata_is_still_a_broken_contract() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    let broken = json!({"version": 4, "terraform_version": "1.11.4", "serial": 2, "lineage": LINEAGE, "outputs": {},
        "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "provider": "provider[\"terraform.io/builtin/terraform\"]", "instances": []}]});
    bed.states
        .put(BUCKET, &format!("cells/{CELL}/terraform.tfstate"), broken.to_string());
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "refused", "{r}");
    assert!(r["error"].as_str().unwrap().contains("cell_metadata"), "{r}");
    assert!(bed.fleet.pulls().iter().all(|p| !p.open));
}

/// A bed whose EKS is `aws`, with state-sync's describe-only role in account `account`.
fn with_describe_role(aws: &MemAws, account: &str, role: &str) -> Bed {
    bed().with_clusters(ClusterAccess {
        probe: aws.clone().into(),
        describe_roles: BTreeMap::from([(account.to_owned(), role.to_owned())]),
    })
}

/// The cell's state with `bootstrap_role_arn` (cluster-bootstrap's role in the cell's account).
fn state_with_bootstrap_role(role: &str) -> String {
    let text = state(CELL, 1, "vpc-1").replace(
        "\"cell_name\":\"eu-c1\",",
        &format!("\"cell_name\":\"eu-c1\",\"bootstrap_role_arn\":\"{role}\","),
    );
    assert!(text.contains(role), "{text}");
    text
}

#[tokio::test]
async fn a_cell_of_another_account_is_asked_about_through_state_syncs_describe_only_role() {
    let bootstrap = "arn:aws:iam::210987654321:role/cellbridge-bootstrap";
    let describe = "arn:aws:iam::210987654321:role/cellbridge-state-sync-describe";
    let aws = MemAws::new(IDENTITY);
    aws.add_cluster(MemCluster::active(CELL, REGION).in_account("210987654321"));
    // The cell's bootstrap role would let anyone it trusts in: state-sync must not choose it.
    aws.trust_role(bootstrap);
    let bed = with_describe_role(&aws, "210987654321", describe);
    bed.states.put(
        BUCKET,
        &format!("cells/{CELL}/terraform.tfstate"),
        state_with_bootstrap_role(bootstrap),
    );
    let r = sync(&bed, CELL).await;
    bed.fleet.merge(number(&r));
    destroy(&bed, 2);

    // The describe-only role does not trust state-sync yet: a refusal naming that role, nothing
    // proposed, and the bootstrap role (which would have answered) never used instead.
    let r = sync(&bed, CELL).await;
    assert_eq!(
        (r["action"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    let error = r["error"].as_str().unwrap();
    assert!(error.contains(describe) && !error.contains(bootstrap), "{r}");

    // Trusted: the cluster is found in its own account (the home account has none), so nothing.
    aws.trust_role(describe);
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "destroyed", "{r}");
    assert_eq!(r["decommission"]["eks"]["presence"], "exists", "{r}");
    aws.remove_cluster(Some("210987654321"), REGION, CELL);
    assert_eq!(sync(&bed, CELL).await["action"], "decommission-opened");
}

#[tokio::test]
async fn a_cells_bootstrap_role_is_never_state_syncs_way_into_its_account() {
    let bootstrap = "arn:aws:iam::210987654321:role/cellbridge-bootstrap";
    let aws = MemAws::new(IDENTITY);
    aws.add_cluster(MemCluster::active(CELL, REGION).in_account("210987654321"));
    aws.trust_role(bootstrap);
    // No describe-only role for that account (another account's is no way in either).
    let bed = with_describe_role(
        &aws,
        "333333333333",
        "arn:aws:iam::333333333333:role/cellbridge-state-sync-describe",
    );
    bed.states.put(
        BUCKET,
        &format!("cells/{CELL}/terraform.tfstate"),
        state_with_bootstrap_role(bootstrap),
    );
    let r = sync(&bed, CELL).await;
    bed.fleet.merge(number(&r));
    destroy(&bed, 2);
    // Its cluster is gone, yet nothing may confirm it from here: unreachable, never proposed.
    aws.remove_cluster(Some("210987654321"), REGION, CELL);
    let r = sync(&bed, CELL).await;
    assert_eq!(
        (r["action"].as_str(), r["decommission"]["proposed"].as_bool()),
        (Some("destroyed"), Some(false)),
        "{r}"
    );
    let reason = r["decommission"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("210987654321") && reason.contains("CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES"),
        "{r}"
    );
    assert!(bed.fleet.pulls().iter().all(|p| !p.open));
}

/// `events/sqs-cloudtrail-delete-cluster.json` (cluster `prod-eu-west-1` in eu-west-1), its body
/// naming `cluster` instead.
fn delete_cluster_record(cluster: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/sqs-cloudtrail-delete-cluster.json");
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text.replace("prod-eu-west-1", cluster)).unwrap()
}

#[tokio::test]
async fn an_eks_delete_cluster_syncs_the_cell_again_until_the_cluster_is_gone() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    // Someone deletes the cluster by hand after `terraform state rm` left the state destroyed.
    destroy(&bed, 2);
    aws.add_cluster(MemCluster::active(CELL, REGION).status("DELETING"));
    let event = delete_cluster_record(CELL);
    let inv = crate::support::handle(&bed, &event, crate::support::sync::deadline())
        .await
        .unwrap();
    let id = event["Records"][0]["messageId"].as_str().unwrap();
    assert_eq!(
        inv.response["batchItemFailures"],
        json!([{"itemIdentifier": id}]),
        "still DELETING: redelivered later: {}",
        inv.response
    );
    assert_eq!(inv.response["cells"][0]["cell"], CELL);
    assert!(bed.fleet.pulls().iter().all(|p| !p.open));

    // The redelivery, once EKS no longer knows the cluster.
    aws.remove_cluster(None, REGION, CELL);
    let inv = crate::support::handle(&bed, &event, crate::support::sync::deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert_eq!(
        inv.response["cells"][0]["action"], "decommission-opened",
        "{}",
        inv.response
    );

    // A cluster no cell names: nothing read of the states, nothing written.
    bed.fleet.clear_calls();
    let inv = crate::support::handle(
        &bed,
        &delete_cluster_record("someone-elses"),
        crate::support::sync::deadline(),
    )
    .await
    .unwrap();
    assert_eq!(inv.response["cells"], json!([]), "{}", inv.response);
    assert_eq!(inv.response["batchItemFailures"], json!([]));
    assert_eq!(bed.fleet.writes(), 0);
}

#[tokio::test]
async fn each_decommission_outcome_is_one_metric_record_the_alarms_do_not_take_for_a_failure() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let aws = MemAws::new(IDENTITY);
    aws.add_cluster(MemCluster::active(CELL, REGION));
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    destroy(&bed, 2);
    let captured = Captured::default();
    let metrics = Metrics::new("state-sync", &captured);
    let event = json!({"action": "sync", "cell": CELL});
    let run = || crate::support::handle_with(&bed, &event, crate::support::sync::deadline(), None, &metrics);
    run().await.unwrap();
    aws.add_cluster(MemCluster::active(CELL, REGION).status("DELETING"));
    run().await.unwrap();
    aws.remove_cluster(None, REGION, CELL);
    run().await.unwrap();
    run().await.unwrap();
    let cell = Some(CELL.to_owned());
    assert_eq!(
        captured.outcomes(),
        [
            ("destroyed".to_owned(), cell.clone()),
            ("retried".to_owned(), cell.clone()),
            ("synced".to_owned(), cell.clone()),
            ("unchanged".to_owned(), cell),
        ]
    );
}

#[tokio::test]
async fn the_dashboard_shows_a_pending_decommission_and_once_merged_the_cell_as_decommissioned() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    destroy(&bed, 2);
    let opened = sync(&bed, CELL).await;
    assert_eq!(opened["action"], "decommission-opened");
    let body = |bed: &Bed| {
        let open: Vec<_> = bed
            .fleet
            .issues()
            .into_iter()
            .filter(|i| i.open && i.labels.iter().any(|l| l == "cellbridge-dashboard"))
            .collect();
        assert_eq!(open.len(), 1, "{open:?}");
        open[0].body.clone()
    };
    let dashboard = json!({"action": "dashboard"});
    crate::support::handle(&bed, &dashboard, crate::support::sync::deadline())
        .await
        .unwrap();
    let pending = body(&bed);
    let row = pending
        .lines()
        .find(|l| l.starts_with(&format!("| `{CELL}` |")))
        .unwrap_or_else(|| panic!("no row of {CELL}:\n{pending}"));
    assert!(
        row.contains("destroyed") && row.contains(&format!("#{}", number(&opened))),
        "{row}"
    );

    // A person merges the decommission: the cell is done, listed but needing no attention.
    bed.fleet.merge(number(&opened));
    assert_eq!(sync(&bed, CELL).await["action"], "destroyed");
    crate::support::handle(&bed, &dashboard, crate::support::sync::deadline())
        .await
        .unwrap();
    let done = body(&bed);
    assert!(!done.lines().any(|l| l.starts_with(&format!("| `{CELL}` |"))), "{done}");
    assert!(done.contains(&format!("(1): `{CELL}`")), "{done}");
    assert!(done.contains("Decommissioned"), "{done}");
    // The example fleet's other cell has no state: the one row needing attention.
    assert!(done.contains("1 decommissioned; 1 needs attention"), "{done}");
}

#[tokio::test]
async fn a_decommission_of_an_opted_in_cell_never_gets_auto_merge() {
    let aws = MemAws::new(IDENTITY);
    let bed = with_eks(&aws);
    merged_cell(&bed).await;
    // The cell's value-only changes may merge without a person, and nothing protects main.
    bed.fleet.commit(
        "main",
        &[(".cellbridge/auto-merge.yaml", "cells: [eu-c1]\n")],
        "opt eu-c1 in",
    );
    bed.fleet.allow_auto_merge(true);
    destroy(&bed, 2);
    bed.fleet.clear_calls();
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "decommission-opened", "{r}");
    let calls = bed.fleet.calls();
    assert!(
        !calls.iter().any(|c| (c.starts_with("graphql/")
            && !["graphql/updateRefs", "graphql/cellReading", "graphql/labelledIssues"].contains(c))
            || *c == "pulls/merge"),
        "no auto-merge request for a decommission: {calls:?}"
    );
    let pr = bed.fleet.pulls().into_iter().find(|p| p.number == number(&r)).unwrap();
    assert!(pr.open && !pr.merged && pr.auto_merge.is_none(), "{pr:?}");
    assert_eq!(sync(&bed, CELL).await["action"], "decommission-unchanged");
    assert!(bed.fleet.pulls().into_iter().any(|p| p.number == number(&r) && p.open));
}
