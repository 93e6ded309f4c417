//! cluster-bootstrap: the pause switch and the outcome metrics. Paused by the environment, no
//! cluster is touched and the fleet is not read; the fleet repo's settings pause bootstrap and a wrong
//! file is named; every cluster outcome is one metric record with the cell as a property.

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::{MemCluster, MemSource};
use cellbridge::shell::error::Class;
use serde_json::json;

fn paused_by_env() -> Option<cellbridge::shell::pause::Pause> {
    Some(cellbridge::shell::pause::Pause {
        by: cellbridge::shell::pause::ENV,
        reason: Some("maintenance".into()),
    })
}

#[tokio::test]
async fn paused_by_the_environment_no_cluster_is_touched_and_the_fleet_is_not_read() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let svc = service(
        bed(),
        MemSource::failing(|| panic!("the fleet repo is not read when paused")),
    );
    let captured = Captured::default();
    let inv = crate::support::handle_with(
        &svc,
        &created(CLUSTER),
        deadline(),
        paused_by_env(),
        &Metrics::new("cluster-bootstrap", &captured),
    )
    .await
    .unwrap();
    assert_eq!(inv.class, None, "paused is a success: {}", inv.response);
    assert_eq!(inv.response["outcome"], "paused");
    assert_eq!(
        inv.response["paused"],
        json!({"by": "CELLBRIDGE_PAUSED", "reason": "maintenance"})
    );
    assert!(
        svc.bootstrapper.accounts().calls().is_empty(),
        "{:?}",
        svc.bootstrapper.accounts().calls()
    );
    assert!(svc.bootstrapper.kube().applied().is_empty());
    assert_eq!(captured.outcomes(), [("paused".to_owned(), None)]);
    assert_eq!(captured.records()[0]["cluster"], CLUSTER);

    // From SQS: nothing to redeliver.
    let svc = service(bed(), MemSource::new(fleet(&[])).on_branch("main"));
    let inv = crate::support::handle_with(
        &svc,
        &sqs(&[created(CLUSTER)]),
        deadline(),
        paused_by_env(),
        &Metrics::new("cluster-bootstrap", &captured),
    )
    .await
    .unwrap();
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    assert!(svc.bootstrapper.kube().applied().is_empty());
}

#[tokio::test]
async fn the_fleet_repos_settings_pause_bootstrap_and_a_wrong_file_is_named() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let svc = service(
        bed(),
        MemSource::new(fleet_with_settings("paused: true\nreason: fleet freeze\n")).on_branch("main"),
    );
    let inv = crate::support::handle_with(&svc, &created(CLUSTER), deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(inv.class, None, "{}", inv.response);
    assert_eq!(
        inv.response["paused"],
        json!({"by": ".cellbridge/settings.yaml", "reason": "fleet freeze"})
    );
    assert!(svc.bootstrapper.accounts().calls().is_empty());
    assert!(svc.bootstrapper.kube().applied().is_empty());

    let svc = service(
        bed(),
        MemSource::new(fleet_with_settings("paused: true\nwhy: x\n")).on_branch("main"),
    );
    let inv = crate::support::handle_with(&svc, &created(CLUSTER), deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(inv.class, Some(Class::Final), "{}", inv.response);
    let error = inv.response["error"].as_str().unwrap();
    assert!(error.contains(".cellbridge/settings.yaml"), "{error}");
    assert!(svc.bootstrapper.kube().applied().is_empty());
    assert_eq!(
        captured.outcomes().into_iter().map(|(o, _)| o).collect::<Vec<_>>(),
        ["paused", "failed_final"]
    );

    // paused: false is the usual run.
    let svc = service(
        bed(),
        MemSource::new(fleet_with_settings("paused: false\n")).on_branch("main"),
    );
    let inv = crate::support::handle_with(&svc, &created(CLUSTER), deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(inv.response["outcome"], "bootstrapped", "{}", inv.response);
}

#[tokio::test]
async fn every_cluster_outcome_is_one_metric_record_with_the_cell_as_a_property() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let svc = service(bed(), MemSource::new(fleet(&[])).on_branch("main"));
    crate::support::handle_with(&svc, &created(CLUSTER), deadline(), None, &metrics)
        .await
        .unwrap();
    crate::support::handle_with(&svc, &created(CLUSTER), deadline(), None, &metrics)
        .await
        .unwrap();
    let b = bed();
    b.accounts().add_cluster(MemCluster::active("other", REGION));
    let svc = service(b, MemSource::new(fleet(&[])).on_branch("main"));
    svc.bootstrapper.kube().fail("apply", "Deployment", 100, 503);
    crate::support::handle_with(&svc, &created(CLUSTER), deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(
        captured.outcomes(),
        [
            ("synced".to_owned(), Some(CELL.to_owned())),
            ("unchanged".to_owned(), Some(CELL.to_owned())),
            ("retried".to_owned(), None),
        ]
    );
    // Each bootstrap that ended its confirmation counts its outcome apart, the alarm's metric
    // (`FluxStuck`) by function only: both runs found Flux ready.
    let flux: Vec<(String, u64)> = captured
        .records()
        .iter()
        .filter_map(|r| Some((r["Flux"].as_str()?.to_owned(), r["FluxStuck"].as_u64()?)))
        .collect();
    assert_eq!(flux, [("ready".to_owned(), 0), ("ready".to_owned(), 0)]);
    for r in captured.records() {
        assert_eq!(r["Function"], "cluster-bootstrap");
        if r.get("Flux").is_some() {
            assert_eq!(
                r["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                json!([["Function", "Flux"]])
            );
            assert_eq!(r["_aws"]["CloudWatchMetrics"][1]["Dimensions"], json!([["Function"]]));
            assert_eq!(r["cell"], CELL);
            continue;
        }
        // Outcome records; the sweep after each run writes its heartbeat, by function only.
        let dimensions = if r.get("Outcome").is_some() {
            json!([["Function", "Outcome"]])
        } else {
            json!([["Function"]])
        };
        assert_eq!(r["_aws"]["CloudWatchMetrics"][0]["Dimensions"], dimensions);
        assert!(!r.to_string().contains(PASSWORD));
    }
}
