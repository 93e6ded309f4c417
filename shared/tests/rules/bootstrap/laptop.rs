//! A laptop's `--kubeconfig` bootstrap leaves a record: its outcome is written on the EKS
//! cluster's tags when the AWS credentials allow; otherwise the report says which tag to set
//! (the record, or the sweep's opt-out), so that the daily sweep does not drive it again daily.

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::MemCluster;
use cellbridge::rules::bootstrap::Request;

#[tokio::test]
async fn a_kubeconfig_run_records_its_outcome_on_the_cluster_or_says_which_tag_to_set() {
    let bed = bed();
    // A run's report with Flux's outcome (the kubeconfig run's is the same report).
    let done = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(done.flux.as_ref().unwrap().outcome.as_str(), "ready");
    bed.accounts().add_cluster(MemCluster::active("laptop", REGION));
    let req = Request {
        cluster: "laptop".into(),
        ..request()
    };
    let unrecorded = || {
        let mut r = done.clone();
        r.flux.as_mut().unwrap().recorded = false;
        r
    };

    // Credentials that may not tag: the report names the tags to set, and the opt-out.
    bed.accounts().fail("TagResource", 1, false);
    let mut report = unrecorded();
    bed.record_after_kubeconfig(&req, &mut report).await;
    let hint = report.record_hint.clone().expect("a hint");
    assert!(
        hint.contains("--name laptop --region eu-west-1")
            && hint.contains("cellbridge.dev/flux=ready,cellbridge.dev/flux-since=")
            && hint.contains("cellbridge.dev/sweep=skip"),
        "{hint}"
    );
    assert!(
        !bed.accounts()
            .cluster_tags(REGION, "laptop")
            .contains_key("cellbridge.dev/flux")
    );

    // Credentials that may: recorded, no hint.
    let mut report = unrecorded();
    bed.record_after_kubeconfig(&req, &mut report).await;
    assert_eq!(report.record_hint, None);
    assert!(report.flux.unwrap().recorded);
    let tags = bed.accounts().cluster_tags(REGION, "laptop");
    assert_eq!(tags.get("cellbridge.dev/flux").map(String::as_str), Some("ready"));

    // No outcome (--no-wait): the opt-out, and what records it.
    let mut report = done.clone();
    report.flux = None;
    bed.record_after_kubeconfig(&req, &mut report).await;
    let hint = report.record_hint.expect("a hint");
    assert!(
        hint.contains("--no-wait") && hint.contains("cellbridge.dev/sweep=skip"),
        "{hint}"
    );
}
