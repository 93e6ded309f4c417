//! One cell per cluster, end to end through moto's EKS, STS and SQS and the fake API server: the
//! reproduction of a home-account cluster tagged for cell `a` while cell `b`'s merged metadata
//! names a cluster of the same name in an account no role reaches. The daily sweep reports `b`
//! unreachable and queues only `a`'s catch-up, naming the account; the catch-up the sweep used
//! to queue for `b` (`"account": null`) is refused naming both cells, with the cluster untouched;
//! `a`'s own catch-up, delivered from the queue, bootstraps `./clusters/a`.

use crate::support::*;
use cellbridge::jobs::bootstrap::handler::{BootstrapService, LocalSource};
use cellbridge::pure::fleet::LocalFleet;
use cellbridge::rules::bootstrap::Bootstrapper;
use cellbridge::rules::bootstrap::config::Settings;
use cellbridge_tests::{leak, moto};
use serde_json::{Value, json};
use std::time::Duration;

const CLUSTER: &str = "one-cell-main";
const CELL_A: &str = "one-cell-a";
const CELL_B: &str = "one-cell-b";
const UNMAPPED: &str = "333333333333";

fn cell_metadata(cell: &str, account: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  aws_region: \"{REGION}\"\n  cell_name: \"{cell}\"\n  cluster_name: \"{CLUSTER}\"\n  aws_account_id: \"{account}\"\n  schema: \"1\"\n"
    )
}

/// The fixture fleet's template, with cells `a` (cellbridge's own account) and `b` (an account
/// no role reaches) both naming `CLUSTER` in `REGION`.
fn fleet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let clusters = dir.path().join("clusters");
    std::fs::create_dir_all(&clusters).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixture_fleet().join("clusters/_template"))
        .arg(&clusters)
        .status()
        .unwrap();
    assert!(status.success());
    for (cell, account) in [(CELL_A, "123456789012"), (CELL_B, UNMAPPED)] {
        std::fs::create_dir_all(clusters.join(cell)).unwrap();
        std::fs::write(
            clusters.join(cell).join("cell-metadata.yaml"),
            cell_metadata(cell, account),
        )
        .unwrap();
    }
    dir
}

fn sqs_event(body: &str) -> Value {
    json!({"Records": [{"messageId": "m-one-cell", "receiptHandle": "h", "body": body, "attributes": {},
        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:cellbridge-one-cell", "awsRegion": REGION}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_never_bootstraps_another_accounts_cell_onto_a_home_cluster() {
    let bed = Bed::new(CLUSTER, &[("cellbridge.dev/cell", CELL_A)], None).await;
    let fleet = fleet();
    let sqs = aws_sdk_sqs::Client::new(&bed.aws);
    let (url, _) = moto::queue(&sqs, "cellbridge-one-cell", &[]).await;
    let service = BootstrapService {
        bootstrapper: Bootstrapper::new(
            bed.aws.clone(),
            Settings {
                confirm: Default::default(),
                ..settings(&bed.secret)
            },
        ),
        fleets: LocalSource(LocalFleet::open(fleet.path()).unwrap()).into(),
        rechecks: Some(cellbridge::jobs::queue::SqsQueue::new(&bed.aws, url.clone()).into()),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let inv = cellbridge_tests::handle(&service, &json!({"action": "sweep"}), deadline)
        .await
        .unwrap();
    let r = &inv.response;
    leak::capture("the one-cell sweep", &r.to_string());
    let ours: Vec<&Value> = r["report"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["cluster"] == CLUSTER)
        .collect();
    let b: Vec<&&Value> = ours.iter().filter(|c| c["cell"] == CELL_B).collect();
    assert_eq!(b.len(), 1, "{r}");
    assert_eq!(b[0]["result"], "unreachable", "{r}");
    // What the sweep queued for this cluster: `a`'s catch-up alone, naming the account.
    let mut bodies = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        if got.messages().is_empty() {
            break;
        }
        bodies.extend(got.messages().iter().map(|m| m.body().unwrap().to_owned()));
    }
    let mine: Vec<Value> = bodies
        .iter()
        .map(|b| serde_json::from_str::<Value>(b).unwrap())
        .filter(|b| b["cluster"] == CLUSTER)
        .collect();
    assert_eq!(
        mine,
        [
            json!({"action": "bootstrap", "cluster": CLUSTER, "region": REGION, "cell": CELL_A, "account": "123456789012"})
        ],
        "{r}"
    );
    assert!(
        cluster_tags(&bed.aws, CLUSTER)
            .await
            .contains_key("cellbridge.dev/catch-up"),
        "the queued catch-up is marked"
    );

    // The catch-up the sweep used to queue for `b`: refused, naming both, nothing written.
    let wrong = json!({"action": "bootstrap", "cluster": CLUSTER, "region": REGION, "cell": CELL_B, "account": null});
    let inv = cellbridge_tests::handle(&service, &sqs_event(&wrong.to_string()), deadline)
        .await
        .unwrap();
    leak::capture("the wrong cell's catch-up", &inv.response.to_string());
    let logs = String::from_utf8(logs().0.lock().unwrap().clone()).unwrap();
    let refusal = logs
        .lines()
        .find(|l| l.contains(&format!("the request names cell {CELL_B}")))
        .unwrap_or_else(|| panic!("no refusal logged: {}", inv.response));
    assert!(refusal.contains(&format!("names cell {CELL_A}")), "{refusal}");
    assert!(bed.writes().is_empty(), "the cluster was written: {:?}", bed.writes());
    assert!(access_entries(&bed.aws, CLUSTER).await.is_empty());

    // `a`'s catch-up, from the queue: `./clusters/a` on the cluster tagged `a`.
    let inv = cellbridge_tests::handle(
        &service,
        &sqs_event(&serde_json::to_string(&mine[0]).unwrap()),
        deadline,
    )
    .await
    .unwrap();
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(
        flux_object(&bed.kube, "Kustomization")["spec"]["path"],
        format!("./clusters/{CELL_A}")
    );
}
