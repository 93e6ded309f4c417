//! state-sync: what is read from GitHub. One snapshot of the base per invocation, read again only
//! after a lost race; the refused issues listed once per invocation; the snapshot keeps only the
//! batch's cells, and a layer read into another cell's directory is read again keeping that cell
//! (never missed); a sync-all without a queue reads the base once per ten cells; a new cell's tree is
//! built on the tree GitHub gives, not one computed from the archive.

use crate::support::sync::*;
use cellbridge::adapters::github::operations as ops;
use serde_json::{Value, json};

fn archive_reads(bed: &Bed) -> usize {
    bed.fleet
        .calls()
        .iter()
        .filter(|c| **c == ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE.id)
        .count()
}

/// Twelve cells in one invocation (two groups of states), each refused, then each in sync: the
/// open `cellbridge-refused` issues are listed once per invocation, not once per cell.
#[tokio::test]
async fn the_refused_issues_are_listed_once_per_invocation_whatever_the_number_of_cells() {
    let bed = bed();
    let cells: Vec<String> = (1..=12).map(|i| format!("eu-c{i}")).collect();
    for c in &cells {
        let mut s: Value = serde_json::from_str(&state(c, 1, "vpc-1")).unwrap();
        s["outputs"]["cell_metadata"]["value"]["api_token"] = json!("ghp_0123456789abcdefghijklmnopqrstuvwxyzAB");
        bed.states
            .put(BUCKET, &format!("cells/{c}/terraform.tfstate"), s.to_string());
    }
    let listings = |bed: &Bed| {
        bed.fleet
            .calls()
            .iter()
            .filter(|c| **c == ops::ISSUES_LIST_FOR_REPO.id)
            .count()
    };
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    let reported = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reported"]["on"] == "issue")
        .count();
    assert_eq!(reported, 12, "{}", inv.response);
    let refused = |bed: &Bed| {
        bed.fleet
            .issues()
            .iter()
            .filter(|i| i.open && i.labels.iter().any(|l| l == "cellbridge-refused"))
            .count()
    };
    assert_eq!(refused(&bed), 12);
    // One listing for the refusals, one for the fleet dashboard a sync-all rebuilds.
    assert_eq!(listings(&bed), 2, "{:?}", bed.fleet.calls());
    // The next states keep the contract: each opens its pull request and closes its issue.
    bed.fleet.clear_calls();
    for c in &cells {
        apply(&bed, c, 2, "vpc-1");
    }
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    assert_eq!(refused(&bed), 0, "{}", inv.response);
    // The cells' own readings gave the refused issues: the dashboard's listing alone.
    assert_eq!(listings(&bed), 1, "{:?}", bed.fleet.calls());
}

/// An SQS batch naming several cells' states.
fn sqs_batch(cells: &[&str]) -> Value {
    let records: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": json!({
                "source": "aws.s3", "detail-type": "Object Created",
                "detail": {"bucket": {"name": BUCKET}, "object": {"key": format!("cells/{cell}/terraform.tfstate")}},
            }).to_string()})
        })
        .collect();
    json!({ "Records": records })
}

#[tokio::test]
async fn a_batch_of_states_reads_the_base_once_and_again_only_after_a_lost_race() {
    let bed = bed();
    let cells = ["eu-c1", "eu-c2", "eu-c3", "eu-c4", "eu-c5", "eu-c6"];
    for c in cells {
        apply(&bed, c, 1, "vpc-1");
    }
    let inv = crate::support::handle(&bed, &sqs_batch(&cells), deadline())
        .await
        .unwrap();
    let actions: Vec<&str> = inv.response["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["opened"; 6], "{}", inv.response);
    assert_eq!(
        archive_reads(&bed),
        1,
        "one snapshot for the batch: {:?}",
        bed.fleet.calls()
    );

    // A lost race shows the snapshot old: the state that lost reads a fresh one, once.
    bed.fleet.clear_calls();
    for c in cells {
        apply(&bed, c, 2, "vpc-2");
    }
    // (One cell: which state's branch update the race hits is then certain.)
    bed.fleet.race(
        &ops::GIT_UPDATE_REF,
        &branch("eu-c3"),
        &[("NOTES.md", "someone else\n")],
    );
    let inv = crate::support::handle(&bed, &sqs_batch(&["eu-c3"]), deadline())
        .await
        .unwrap();
    let r = &inv.response["cells"][0];
    assert_eq!(
        (r["action"].as_str(), r["attempts"].as_u64()),
        (Some("updated"), Some(2)),
        "{r}"
    );
    assert_eq!(archive_reads(&bed), 2, "{:?}", bed.fleet.calls());
    // The rest of the batch, on one snapshot again.
    bed.fleet.clear_calls();
    let inv = crate::support::handle(&bed, &sqs_batch(&cells), deadline())
        .await
        .unwrap();
    let results = inv.response["cells"].as_array().unwrap();
    assert_eq!(
        results.iter().filter(|c| c["action"] == "updated").count(),
        5,
        "{}",
        inv.response
    );
    assert_eq!(archive_reads(&bed), 1, "{:?}", bed.fleet.calls());
}

#[tokio::test]
async fn a_state_keeps_only_its_cell_and_a_layer_in_another_cells_directory_is_read_again_not_missed() {
    let bed = bed();
    // Merged cells whose directories the sync of eu-c1 must not need, and one (eu-shared) whose
    // directory holds a layer eu-c1 will build.
    for c in ["eu-c8", "eu-c9"] {
        apply(&bed, c, 1, "vpc-1");
        assert_eq!(sync(&bed, c).await["action"], "opened");
    }
    let open: Vec<u64> = bed.fleet.pulls().iter().filter(|p| p.open).map(|p| p.number).collect();
    for number in open {
        bed.fleet.merge(number);
    }
    bed.fleet.commit(
        "main",
        &[(
            "clusters/eu-shared/extra/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: default\ndata:\n  vpc: ${vpc_id}\n  typo: ${vcp_id}\n",
        )],
        "a layer kept in another cell's directory",
    );
    bed.fleet.clear_calls();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(archive_reads(&bed), 1, "nothing else needed: {:?}", bed.fleet.calls());

    // The template gains a layer in eu-shared/: eu-c2's plan needs that directory, which the
    // first read kept out. It is read again keeping it, and the check sees the typo there.
    let template = bed.fleet.files("main")["clusters/_template/layers.yaml"].clone();
    bed.fleet.commit(
        "main",
        &[(
            "clusters/_template/layers.yaml",
            &format!("{template}{}", layer("extra", "./clusters/eu-shared/extra")),
        )],
        "every new cell builds the shared extra layer",
    );
    bed.fleet.clear_calls();
    apply(&bed, "eu-c2", 1, "vpc-1");
    let r = sync(&bed, "eu-c2").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(
        archive_reads(&bed),
        2,
        "read again keeping eu-shared: {:?}",
        bed.fleet.calls()
    );
    let pull = bed
        .fleet
        .pulls()
        .into_iter()
        .find(|p| p.open && p.head == branch("eu-c2"))
        .unwrap();
    assert!(
        pull.body.contains("vcp_id") && pull.body.contains("clusters/eu-shared/extra/configmap.yaml"),
        "the check ran on the layer in the other cell's directory: {}",
        pull.body
    );
}

#[tokio::test]
async fn a_sync_all_without_a_queue_reads_the_base_once_per_ten_cells_keeping_only_those() {
    let bed = bed();
    let cells: Vec<String> = (1..=12).map(|i| format!("eu-c{i:02}")).collect();
    for c in &cells {
        apply(&bed, c, 1, "vpc-1");
    }
    let inv = crate::support::handle(&bed, &json!({"action": "sync-all"}), deadline())
        .await
        .unwrap();
    let results = inv.response["cells"].as_array().unwrap();
    assert_eq!(
        results.iter().filter(|c| c["action"] == "opened").count(),
        12,
        "{}",
        inv.response
    );
    // Two for the twelve cells; one more for the fleet dashboard rebuilt after them, which
    // sees the pull requests just opened.
    assert_eq!(archive_reads(&bed), 3, "{:?}", bed.fleet.calls());
    assert_eq!(inv.response["dashboard"]["action"], "created", "{}", inv.response);
    assert_eq!(inv.response["dashboard"]["summary"]["pending"], 12, "{}", inv.response);
}

#[tokio::test]
async fn a_new_cell_builds_its_tree_on_the_tree_github_gives_not_one_computed_from_the_archive() {
    let bed = bed();
    apply(&bed, "eu-c1", 1, "vpc-1");
    let r = sync(&bed, "eu-c1").await;
    assert_eq!(r["action"], "opened", "{r}");
    let calls = bed.fleet.calls();
    let read_commit = calls.iter().position(|c| *c == ops::GRAPHQL_CELL_READING.id);
    let create_tree = calls.iter().position(|c| *c == ops::GIT_CREATE_TREE.id);
    assert!(
        matches!((read_commit, create_tree), (Some(a), Some(b)) if a < b),
        "the base commit's tree is read from GitHub before the tree is built on it: {calls:?}"
    );
    // Every file of the base is still on the pull request's branch.
    let base = bed.fleet.files("main");
    let head = bed.fleet.files(&branch("eu-c1"));
    assert!(base.keys().all(|p| head.contains_key(p)), "nothing of the base deleted");
}
