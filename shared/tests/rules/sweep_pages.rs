//! The daily sweep at fleet scale and across accounts: it works in pages within the invocation's
//! deadline, queues each catch-up as it decides it, hands the rest to the next page through the
//! function's own queue and counts what it visited and left; a cell of an account no role
//! reaches is reported unreachable, never looked for at home; every catch-up names its account.

use std::sync::Arc;
use std::time::Duration;

use cellbridge::doubles::cluster::{MemAws, MemCluster, MemKube, MemSource};
use cellbridge::doubles::queue::MemQueue;
use cellbridge::doubles::secrets::MemSecrets;
use cellbridge::jobs::bootstrap::handler::BootstrapService;
use cellbridge::jobs::bootstrap::scheduled::PAGE_MARGIN;
use cellbridge::pure::fleet::MemFleet;
use cellbridge::rules::bootstrap::Bootstrapper;
use cellbridge::shell::metrics::{Captured, Metrics};
use serde_json::{Value, json};

use crate::support::bootstrap::{ACCOUNT_B, FUNCTION_ROLE, HOME, REGION, metadata, settings, sqs};

type Service = BootstrapService<MemAws, MemKube, MemSecrets>;

fn service(aws: &MemAws, fleet: MemFleet, queue: &Arc<MemQueue>) -> Service {
    BootstrapService {
        bootstrapper: Bootstrapper::with_ports(aws.clone(), MemKube::new(aws), MemSecrets::new(), settings()),
        fleets: MemSource::new(fleet).into(),
        rechecks: Some(queue.clone().into()),
    }
}

/// What the queue holds, read back, and emptied.
fn drain(queue: &MemQueue) -> Vec<Value> {
    queue
        .sent
        .lock()
        .unwrap()
        .drain(..)
        .map(|b| serde_json::from_str(&b).unwrap())
        .collect()
}

async fn invoke(svc: &Service, event: &Value, left: Duration, captured: &Captured) -> Value {
    let metrics = Metrics::new("cluster-bootstrap", captured);
    // Tokio's clock, paused in the paging test: its deadline moves with the time the pages take.
    let deadline = tokio::time::Instant::now().into_std() + left;
    let inv = crate::support::handle_with(svc, event, deadline, None, &metrics)
        .await
        .unwrap();
    inv.response
}

/// The reproduction: cluster `main` is tagged for cell `a`; cell `b`'s merged metadata names a
/// cluster `main` too, in an account no role reaches. The sweep visits `main` once, for `a`,
/// queues `a`'s catch-up naming cellbridge's own account, and reports `b` unreachable, once,
/// queuing nothing for it (before: `b` was visited at home and its catch-up queued with
/// `"account": null`, and the run applied `./clusters/b` to `main`).
#[tokio::test]
async fn an_unmapped_accounts_cell_is_reported_unreachable_and_never_caught_up_at_home() {
    const UNMAPPED: &str = "333333333333";
    let aws = MemAws::new(FUNCTION_ROLE);
    aws.add_cluster(MemCluster::active("main", REGION).tag("cellbridge.dev/cell", "a"));
    aws.add_cluster(MemCluster::active("cluster-x", REGION).in_account(ACCOUNT_B));
    let mut fleet = MemFleet::new();
    fleet.insert(
        "clusters/a/cell-metadata.yaml",
        metadata("a", "main", &[("aws_account_id", HOME)]),
    );
    fleet.insert(
        "clusters/b/cell-metadata.yaml",
        metadata("b", "main", &[("aws_account_id", UNMAPPED)]),
    );
    let queue = Arc::new(MemQueue::default());
    let svc = service(&aws, fleet, &queue);
    let captured = Captured::default();
    let r = invoke(&svc, &json!({"action": "sweep"}), Duration::from_secs(120), &captured).await;
    assert_eq!(
        drain(&queue),
        [json!({"action": "bootstrap", "cluster": "main", "region": REGION, "cell": "a", "account": HOME})],
        "{r}"
    );
    let clusters = r["report"]["clusters"].as_array().unwrap();
    let b: Vec<&Value> = clusters.iter().filter(|c| c["cell"] == "b").collect();
    assert_eq!(b.len(), 1, "reported once: {r}");
    assert_eq!(b[0]["result"], "unreachable", "{r}");
    assert!(b[0]["reason"].as_str().unwrap().contains(UNMAPPED), "{r}");
    let describes = aws.calls().iter().filter(|c| *c == "DescribeCluster main").count();
    assert_eq!(describes, 1, "main looked at once, for a: {:?}", aws.calls());
    let heartbeat = captured.records().into_iter().find(|r| r["AccessSweeps"] == 1).unwrap();
    assert_eq!(
        (heartbeat["unreachable"].as_str(), heartbeat["queued"].as_str()),
        (Some("1"), Some("1"))
    );
}

/// 200 cells whose clusters take 20 ms each to reach, and pages with a few seconds each (time
/// is tokio's, paused: the test counts, it does not time): the first page queues the catch-ups
/// of the clusters it reached, reports how many it left and hands them on with one message; the
/// pages that message starts go on from where the last one stopped until the fleet is done.
/// Every cell is caught up exactly once, and every page's heartbeat says what it visited and left.
#[tokio::test(start_paused = true)]
async fn a_sweep_over_200_cells_works_in_pages_within_its_deadline() {
    let aws = MemAws::new(FUNCTION_ROLE);
    aws.latency(Duration::from_millis(20));
    let mut fleet = MemFleet::new();
    let cells: Vec<String> = (0..200).map(|i| format!("cell-{i:03}")).collect();
    for c in &cells {
        aws.add_cluster(MemCluster::active(c, REGION));
        fleet.insert(format!("clusters/{c}/cell-metadata.yaml"), metadata(c, c, &[]));
    }
    let queue = Arc::new(MemQueue::default());
    let svc = service(&aws, fleet, &queue);
    let page_time = PAGE_MARGIN + Duration::from_secs(2);
    let captured = Captured::default();

    let first = invoke(&svc, &json!({"action": "sweep"}), page_time, &captured).await;
    let report = &first["report"];
    let (visited, left) = (report["visited"].as_u64().unwrap(), report["left"].as_u64().unwrap());
    assert!(visited > 0 && left > 0, "{report}");
    assert_eq!(visited + left, 200, "{report}");
    let sent = drain(&queue);
    let (catch_ups, mut pages): (Vec<Value>, Vec<Value>) = sent.into_iter().partition(|m| m["action"] == "bootstrap");
    assert_eq!(catch_ups.len() as u64, visited, "each cluster reached is queued");
    assert!(catch_ups.iter().all(|m| m["account"] == HOME));
    assert_eq!(pages, [json!({"action": "sweep", "from": report["next"]})]);
    let mut caught: Vec<String> = catch_ups
        .iter()
        .map(|m| m["cell"].as_str().unwrap().to_owned())
        .collect();

    let mut rounds = 1;
    while let Some(page) = pages.pop() {
        rounds += 1;
        assert!(rounds < 20, "the pages end");
        let answer = invoke(&svc, &sqs(&[page]), page_time, &captured).await;
        assert_eq!(
            answer,
            json!({"batchItemFailures": []}),
            "the handed-on page's message is answered"
        );
        for m in drain(&queue) {
            match m["action"].as_str() {
                Some("bootstrap") => caught.push(m["cell"].as_str().unwrap().to_owned()),
                _ => pages.push(m),
            }
        }
    }
    assert!(rounds > 2, "a few pages: {rounds}");
    caught.sort();
    assert_eq!(caught, cells, "every cell caught up exactly once");
    let beats: Vec<(u64, u64)> = captured
        .records()
        .iter()
        .filter(|r| r["AccessSweeps"] == 1)
        .map(|r| {
            let n = |k: &str| r[k].as_str().unwrap().parse::<u64>().unwrap();
            (n("visited"), n("left"))
        })
        .collect();
    assert_eq!(beats.len(), rounds);
    assert_eq!(beats.iter().map(|b| b.0).sum::<u64>(), 200, "{beats:?}");
    assert_eq!(beats.last().unwrap().1, 0, "{beats:?}");
    assert!(beats.iter().all(|(v, l)| v + l <= 200));
}
