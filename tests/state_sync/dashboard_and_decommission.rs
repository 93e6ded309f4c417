//! state-sync end to end: the fleet dashboard after a sync-all over cells of every kind (a real
//! `terraform destroy` included), and a destroyed stack decommissioned once its cluster is gone (its
//! `DeleteCluster` as CloudTrail delivers it through EventBridge and SQS), a re-apply closing it.

use crate::support::*;
use cellbridge::pure::status::RUNBOOK_URL;
use cellbridge_tests::{leak, moto, process};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// End to end: after a sync-all over a fleet with a cell in sync, one with its
/// pull request open, a refused one (a planted secret), two destroyed by a real `terraform
/// destroy` (one's cluster gone from moto's EKS, so decommissioned; one's still there) and a
/// fleet cell no state names, the fleet dashboard lists exactly the cells that
/// need attention, the cell in sync in its compact list, and never the secret; a second sync-all
/// with nothing changed writes nothing; a racing run's duplicate is closed; thousands of cells
/// needing attention stay within GitHub's 65,536 characters and are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fleet_dashboard_after_a_sync_all_lists_every_cell_needing_attention() {
    const SECRET: &str = "D4shb0ard-pl4nted-Zx8q";
    leak::secret("state-sync dashboard: a secret planted in cell_metadata", SECRET);
    let bed = Bed::new("dashboard", false).await;
    let merge = |number: u64| {
        let (status, out) = bed
            .gh
            .call("PUT", &format!("/repos/{REPO}/pulls/{number}/merge"), Some(&json!({})));
        assert_eq!(status, 200, "{out}");
    };
    // One destroyed stack's cluster still runs in moto's EKS, its bootstrap recorded on it as
    // stuck; the other's was never there.
    let conf = moto::sdk_config().await;
    moto::create_cluster(
        &conf,
        "eu-dash-kept",
        &[
            ("cellbridge.dev/flux", "build-failed"),
            ("cellbridge.dev/flux-since", "2026-12-05T20:31:42Z"),
        ],
    )
    .await;
    // In sync: proposed and merged. Destroyed: merged, then `terraform destroy`.
    for cell in ["eu-in-sync", "eu-dash-gone", "eu-dash-kept"] {
        bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
        let c = only_cell(&bed.invoke(json!({"action": "sync", "cell": cell})).await);
        merge(c["pull_request"]["number"].as_u64().unwrap());
    }
    bed.destroy("eu-dash-gone").await;
    bed.destroy("eu-dash-kept").await;
    // Pending: a new cell whose pull request is open.
    bed.apply("eu-pending", &base_data("eu-pending", "vpc-1"), false).await;
    // Refused: a value that looks like a credential.
    let mut secret = base_data("eu-refused", "vpc-1");
    secret.push(("db_password".into(), SECRET.into()));
    bed.apply("eu-refused", &secret, false).await;
    let _ = bed.receive().await;

    let resp = bed.invoke(json!({"action": "sync-all"})).await;
    let d = &resp["dashboard"];
    assert_eq!(d["action"], "created", "{resp}");
    assert!(!resp.to_string().contains(SECRET), "{resp}");
    let issues: Vec<Value> = bed
        .gh
        .issues(REPO)
        .into_iter()
        .filter(|i| {
            i["labels"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l == "cellbridge-dashboard")
        })
        .collect();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(d["issue"]["number"], issues[0]["number"]);
    let body = issues[0]["body"].as_str().unwrap().to_owned();
    assert!(!body.contains(SECRET), "a value reached the dashboard:\n{body}");
    // EKS was asked about the cells' clusters: the table has a Flux column.
    assert!(body.contains("\n| cell | what | flux | detail |\n"), "{body}");
    let mut flux = BTreeMap::new();
    let rows: BTreeMap<String, (String, String)> = body
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cols: Vec<&str> = l.split(" | ").collect();
            let cell = cols[0].trim_start_matches("| `").trim_end_matches('`').to_owned();
            flux.insert(cell.clone(), cols[2].to_owned());
            (cell, (cols[1].to_owned(), cols[3].to_owned()))
        })
        .collect();
    assert_eq!(
        rows.iter()
            .map(|(c, (what, _))| (c.as_str(), what.as_str()))
            .collect::<Vec<_>>(),
        [
            ("eu-dash-gone", "destroyed"),
            ("eu-dash-kept", "destroyed"),
            ("eu-pending", "pending"),
            ("eu-refused", "refused"),
            ("prod-eu-west-1", "state missing"),
        ],
        "exactly the cells needing attention:\n{body}"
    );
    let pull = bed
        .pulls()
        .into_iter()
        .find(|p| p["head"]["ref"] == "cellbridge/eu-pending" && p["state"] == "open")
        .expect("the sync-all opened the pending cell's pull request");
    assert!(
        rows["eu-pending"].1.starts_with(&format!(
            "new cell (12 keys); pull request #{} opened today; strict check passes",
            pull["number"]
        )),
        "{body}"
    );
    assert!(rows["eu-refused"].1.contains("`db_password`"), "{body}");
    // Its cluster gone, the sync-all proposed the cell's decommission; the other's runs.
    let decommission = bed
        .pulls()
        .into_iter()
        .find(|p| {
            p["head"]["ref"] == "cellbridge/eu-dash-gone"
                && p["state"] == "open"
                && p["labels"].as_array().unwrap().iter().any(|l| l == "decommission")
        })
        .expect("the sync-all opened the decommission");
    assert!(
        rows["eu-dash-gone"].1.starts_with(&format!(
            "decommission pending (#{}, opened today)",
            decommission["number"]
        )),
        "{body}"
    );
    assert!(rows["eu-dash-kept"].1.contains("nothing is proposed"), "{body}");
    // The record DescribeCluster answered with the cluster's tags; a cluster EKS does not know
    // shows nothing.
    // A stuck cluster's Flux cell links to the runbook's entry for its outcome.
    assert_eq!(
        flux["eu-dash-kept"],
        format!("[build-failed]({RUNBOOK_URL}#flux-build-failed)"),
        "{body}"
    );
    assert!(
        rows["eu-dash-kept"]
            .1
            .contains("Flux did not take over: build-failed (bootstrapped 2026-12-05T20:31:42Z)"),
        "{body}"
    );
    assert_eq!(flux["eu-dash-gone"], "", "{body}");
    assert_eq!(
        (&d["summary"]["flux_stuck"], &d["clusters"]["described"]),
        (&json!(1), &json!(4)),
        "{resp}"
    );
    assert!(body.contains("\n**In sync** (1): `eu-in-sync`\n"), "{body}");

    // A second sync-all, nothing changed: nothing written, the dashboard included.
    bed.gh.clear_requests();
    let resp = bed.invoke(json!({"action": "sync-all"})).await;
    assert_eq!(resp["dashboard"]["action"], "unchanged", "{resp}");
    assert_eq!(bed.counts().2, 0, "writes: {}", bed.gh.requests());

    // A run that raced this one opened a second dashboard: closed as a duplicate of the first.
    let (status, dup) = bed.gh.call(
        "POST",
        &format!("/repos/{REPO}/issues"),
        Some(&json!({"title": issues[0]["title"], "body": body, "labels": ["cellbridge-dashboard"]})),
    );
    assert_eq!(status, 201, "{dup}");
    let resp = bed.invoke(json!({"action": "dashboard"})).await;
    assert_eq!(resp["dashboard"]["closed_duplicates"], json!([dup["number"]]), "{resp}");
    let closed = bed
        .gh
        .issues(REPO)
        .into_iter()
        .find(|i| i["number"] == dup["number"])
        .unwrap();
    assert_eq!(
        (&closed["state"], &closed["state_reason"]),
        (&json!("closed"), &json!("duplicate"))
    );

    // Thousands of cells needing attention: within the limit, what does not fit counted.
    // The refused cell's state as Terraform wrote it, once per cell.
    let obj = bed
        .s3
        .get_object()
        .bucket(&bed.bucket)
        .key(Bed::key("eu-refused"))
        .send()
        .await
        .unwrap();
    let template = String::from_utf8(obj.body.collect().await.unwrap().into_bytes().to_vec()).unwrap();
    // Not this part's subject, and moto is slow to notify 2,000 times.
    bed.s3
        .put_bucket_notification_configuration()
        .bucket(&bed.bucket)
        .notification_configuration(aws_sdk_s3::types::NotificationConfiguration::builder().build())
        .send()
        .await
        .unwrap();
    let many = 2000;
    use futures::StreamExt as _;
    futures::stream::iter((0..many).map(|i| {
        let cell = format!("eu-many-{i:04}");
        let text = template.replace("eu-refused", &cell);
        let (s3, bucket) = (bed.s3.clone(), bed.bucket.clone());
        async move {
            s3.put_object()
                .bucket(bucket)
                .key(Bed::key(&cell))
                .body(text.into_bytes().into())
                .send()
                .await
                .unwrap();
        }
    }))
    .buffer_unordered(16)
    .collect::<Vec<_>>()
    .await;
    let resp = bed.invoke_with(json!({"action": "dashboard"}), 120).await.unwrap();
    assert_eq!(resp["dashboard"]["action"], "updated", "{}", resp["dashboard"]);
    assert_eq!(
        resp["dashboard"]["summary"]["refused"],
        many + 1,
        "{}",
        resp["dashboard"]
    );
    let body = bed
        .gh
        .issues(REPO)
        .into_iter()
        .find(|i| i["number"] == issues[0]["number"])
        .unwrap()["body"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(body.chars().count() <= 65_536, "{}", body.chars().count());
    let shown = body.lines().filter(|l| l.starts_with("| `")).count();
    assert!(
        body.contains(&format!(
            "… and {} more cells needing attention not shown",
            many + 5 - shown
        )),
        "{}",
        &body[body.len() - 300..]
    );
    assert!(!body.contains(SECRET));
}

/// A real `terraform destroy` of a cell's stack leads through
/// moto (S3, its notification to SQS, EKS) and the fake GitHub to one decommission pull request
/// removing exactly `clusters/<cell>/`, but only once EKS no longer knows the cluster (its
/// DeleteCluster, as CloudTrail reports it through EventBridge, brings the cell back); a re-apply
/// closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroyed_stack_is_decommissioned_once_its_cluster_is_gone_and_a_reapply_closes_it() {
    let bed = Bed::new("decommission", false).await;
    let cell = "eu-dc1";
    let conf = moto::sdk_config().await;
    moto::create_cluster(&conf, cell, &[]).await;
    let eks = aws_sdk_eks::Client::new(&conf);

    // The cell, merged.
    bed.apply(cell, &base_data(cell, "vpc-111"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "opened", "{c}");
    let number = c["pull_request"]["number"].as_u64().unwrap();
    let (status, merged) = bed
        .gh
        .call("PUT", &format!("/repos/{REPO}/pulls/{number}/merge"), Some(&json!({})));
    assert_eq!(status, 200, "{merged}");
    let main_before: BTreeMap<String, Value> =
        serde_json::from_value(bed.gh.state(REPO)["files"]["main"].clone()).unwrap();
    let cell_dir: Vec<&String> = main_before
        .keys()
        .filter(|p| p.starts_with(&format!("clusters/{cell}/")))
        .collect();
    assert!(cell_dir.len() >= 6, "{cell_dir:?}");

    // `terraform destroy` while the cluster still runs (a state that looks destroyed is no proof).
    bed.destroy(cell).await;
    let destroyed_event = bed.receive().await;
    bed.gh.clear_requests();
    let c = only_cell(&bed.invoke(destroyed_event.clone()).await);
    assert_eq!(c["action"], "destroyed", "{c}");
    assert_eq!(c["decommission"]["eks"]["presence"], "exists", "{c}");
    assert_eq!(bed.counts().2, 0, "nothing written while the cluster exists");
    assert!(bed.pulls().iter().all(|p| p["state"] != "open"));

    // The cluster is deleted: CloudTrail's DeleteCluster, through EventBridge and SQS.
    eks.delete_cluster().name(cell).send().await.unwrap();
    let sample =
        std::fs::read_to_string(process::repo_root().join("events/sqs-cloudtrail-delete-cluster.json")).unwrap();
    let event: Value = serde_json::from_str(&sample.replace("prod-eu-west-1", cell)).unwrap();
    let resp = bed.invoke(event).await;
    assert_eq!(resp["batchItemFailures"], json!([]), "{resp}");
    let c = only_cell(&resp);
    assert_eq!(c["action"], "decommission-opened", "{c}");
    assert_eq!(c["decommission"]["eks"]["presence"], "gone", "{c}");
    let state = bed.gh.state(REPO);
    let pr = state["pulls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["number"] == c["pull_request"]["number"])
        .unwrap()
        .clone();
    assert_eq!(pr["state"], "open");
    assert_eq!(pr["head"]["ref"], format!("cellbridge/{cell}"));
    let labels: Vec<&str> = pr["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        labels.contains(&"decommission") && labels.contains(&"cellbridge"),
        "{labels:?}"
    );
    assert_eq!(pr["commits"].as_array().unwrap().len(), 1, "{pr}");
    let branch: BTreeMap<String, Value> =
        serde_json::from_value(state["files"][format!("cellbridge/{cell}")].clone()).unwrap();
    let mut expected = main_before.clone();
    expected.retain(|p, _| !p.starts_with(&format!("clusters/{cell}/")));
    assert_eq!(branch, expected, "exactly clusters/{cell}/ is removed");
    let body = pr["body"].as_str().unwrap();
    assert!(
        body.contains("region `eu-west-1`") && body.contains("never merges it"),
        "{body}"
    );

    // The state event replayed: the same single pull request, nothing written.
    bed.gh.clear_requests();
    let c = only_cell(&bed.invoke(destroyed_event).await);
    assert_eq!(c["action"], "decommission-unchanged", "{c}");
    assert_eq!(bed.counts().2, 0);

    // A re-apply brings the cell back with the values main holds: the decommission is closed.
    bed.apply(cell, &base_data(cell, "vpc-111"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "closed", "{c}");
    let state = bed.gh.state(REPO);
    let pr = state["pulls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["number"] == c["pull_request"]["number"])
        .unwrap();
    assert_eq!(
        (pr["state"].as_str(), pr["merged"].as_bool()),
        (Some("closed"), Some(false)),
        "{pr}"
    );
    assert!(state["pulls"].as_array().unwrap().iter().all(|p| p["state"] != "open"));
    assert!(state["files"]["main"][format!("clusters/{cell}/cell-metadata.yaml")].is_string());
}
