//! The sweep of temporary access entries over the in-memory accounts: only cellbridge's own
//! (its principal and the temporary tag) and expired ones go; one cluster's failure does not
//! stop the others; the oldest remaining age is reported.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use cellbridge::doubles::cluster::{MemAws, MemCluster};
use cellbridge::doubles::queue::MemQueue;
use cellbridge::jobs::bootstrap::sweep::{self, Swept};
use cellbridge::pure::fleet::MemFleet;

const REGION: &str = "eu-west-1";
const HOME: &str = "111111111111";
const ACCOUNT_B: &str = "222222222222";
const FUNCTION_ROLE: &str = "arn:aws:iam::111111111111:role/cellbridge-bootstrap";
const CELL_ROLE: &str = "arn:aws:iam::222222222222:role/cellbridge-cell";
const SOMEONE: &str = "arn:aws:iam::111111111111:role/platform-admin";
const TTL: Duration = Duration::from_secs(1800);
/// The access alone: no catch-up decided, no queue.
const NO_CATCH_UP: Option<sweep::CatchUps<'static, MemQueue>> = None;

fn metadata(cell: &str, cluster: &str, extra: &[(&str, &str)]) -> String {
    let mut data = format!("  cell_name: \"{cell}\"\n  cluster_name: \"{cluster}\"\n  aws_region: \"{REGION}\"\n");
    for (k, v) in extra {
        data.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n{data}"
    )
}

/// Cells `a`, `b`, `c` in cellbridge's own account (clusters `cluster-a`...), and `x` in
/// account B reached through its bootstrap role.
fn fleet() -> MemFleet {
    let mut f = MemFleet::new();
    f.insert("clusters/_template/flux-system/gotk-sync.yaml", "x");
    for c in ["a", "b", "c"] {
        f.insert(
            format!("clusters/{c}/cell-metadata.yaml"),
            metadata(c, &format!("cluster-{c}"), &[]),
        );
    }
    f.insert(
        "clusters/x/cell-metadata.yaml",
        metadata("x", "cluster-x", &[("bootstrap_role_arn", CELL_ROLE)]),
    );
    f
}

fn aws() -> MemAws {
    let aws = MemAws::new(FUNCTION_ROLE);
    for c in ["a", "b", "c"] {
        aws.add_cluster(MemCluster::active(&format!("cluster-{c}"), REGION));
    }
    aws.add_cluster(MemCluster::active("cluster-x", REGION).in_account(ACCOUNT_B));
    aws.trust_role(CELL_ROLE);
    aws
}

fn ago(secs: u64) -> Option<SystemTime> {
    Some(SystemTime::now() - Duration::from_secs(secs))
}

async fn run(aws: &MemAws, fleet: &MemFleet) -> sweep::SweepReport {
    let targets = sweep::targets(fleet, &BTreeMap::new(), Ok(HOME)).unwrap();
    sweep::sweep(
        aws,
        targets,
        None,
        SystemTime::now(),
        TTL,
        NO_CATCH_UP,
        sweep::Page::default(),
    )
    .await
}

fn result_of<'a>(report: &'a sweep::SweepReport, cluster: &str) -> &'a Swept {
    &report
        .clusters
        .iter()
        .find(|c| c.target.cluster == cluster)
        .unwrap_or_else(|| panic!("{cluster} not swept: {report:?}"))
        .swept
}

fn principals(aws: &MemAws, account: &str, cluster: &str) -> Vec<String> {
    aws.entries_in(account, REGION, cluster)
        .into_iter()
        .map(|e| e.principal)
        .collect()
}

#[tokio::test]
async fn expired_entry_of_cellbridge_is_deleted_and_a_fresh_one_kept() {
    let aws = aws();
    aws.add_entry_in(HOME, REGION, "cluster-a", FUNCTION_ROLE, true, ago(7200));
    aws.add_entry_in(HOME, REGION, "cluster-b", FUNCTION_ROLE, true, ago(60));
    // Account B: the entry is the cell role's (the principal a run there uses).
    aws.add_entry_in(ACCOUNT_B, REGION, "cluster-x", CELL_ROLE, true, ago(3600));

    let report = run(&aws, &fleet()).await;

    assert_eq!(
        result_of(&report, "cluster-a"),
        &Swept::Deleted { age_secs: Some(7200) }
    );
    assert!(matches!(result_of(&report, "cluster-b"), Swept::Kept { age_secs } if (60..70).contains(age_secs)));
    assert_eq!(result_of(&report, "cluster-c"), &Swept::None);
    assert_eq!(
        result_of(&report, "cluster-x"),
        &Swept::Deleted { age_secs: Some(3600) }
    );
    assert!(principals(&aws, HOME, "cluster-a").is_empty());
    assert_eq!(principals(&aws, HOME, "cluster-b"), vec![FUNCTION_ROLE]);
    assert!(principals(&aws, ACCOUNT_B, "cluster-x").is_empty());
    assert!((60..70).contains(&report.oldest_remaining_secs), "{report:?}");
    assert!(
        aws.calls_in(ACCOUNT_B)
            .contains(&"DeleteAccessEntry cluster-x".to_owned())
    );
}

#[tokio::test]
async fn someone_elses_entries_are_never_touched() {
    let aws = aws();
    // Another principal's entry, however old and even tagged: not cellbridge's principal.
    aws.add_entry_in(HOME, REGION, "cluster-a", SOMEONE, true, ago(86_400));
    // cellbridge's principal, but made on purpose by someone (no temporary tag).
    aws.add_entry_in(HOME, REGION, "cluster-b", FUNCTION_ROLE, false, ago(86_400));
    aws.add_entry_in(HOME, REGION, "cluster-c", FUNCTION_ROLE, false, None);

    let report = run(&aws, &fleet()).await;

    for c in ["cluster-a", "cluster-b", "cluster-c"] {
        assert_eq!(result_of(&report, c), &Swept::None, "{c}");
    }
    assert_eq!(principals(&aws, HOME, "cluster-a"), vec![SOMEONE]);
    assert_eq!(principals(&aws, HOME, "cluster-b"), vec![FUNCTION_ROLE]);
    assert_eq!(principals(&aws, HOME, "cluster-c"), vec![FUNCTION_ROLE]);
    assert!(
        !aws.calls().iter().any(|c| c.starts_with("DeleteAccessEntry")),
        "{:?}",
        aws.calls()
    );
    assert_eq!(report.oldest_remaining_secs, 0);
}

#[tokio::test]
async fn a_tagged_entry_without_a_time_counts_as_expired() {
    let aws = aws();
    aws.add_entry_in(HOME, REGION, "cluster-a", FUNCTION_ROLE, true, None);
    let report = run(&aws, &fleet()).await;
    assert_eq!(result_of(&report, "cluster-a"), &Swept::Deleted { age_secs: None });
    assert!(principals(&aws, HOME, "cluster-a").is_empty());
}

#[tokio::test]
async fn one_clusters_failure_does_not_stop_the_others() {
    let aws = aws();
    for c in ["a", "b", "c"] {
        aws.add_entry_in(HOME, REGION, &format!("cluster-{c}"), FUNCTION_ROLE, true, ago(7200));
    }
    // The first delete (cluster-a, visited first) is refused.
    aws.fail("DeleteAccessEntry", 1, false);
    // Cell `y`'s role is not trusted: AssumeRole refused, nothing looked up there.
    let mut fleet = fleet();
    fleet.insert(
        "clusters/y/cell-metadata.yaml",
        metadata(
            "y",
            "cluster-y",
            &[("bootstrap_role_arn", "arn:aws:iam::333333333333:role/untrusted")],
        ),
    );

    let report = run(&aws, &fleet).await;

    assert!(
        matches!(
            result_of(&report, "cluster-a"),
            Swept::Failed {
                remaining_secs: Some(7200),
                ..
            }
        ),
        "{report:?}"
    );
    assert!(matches!(
        result_of(&report, "cluster-y"),
        Swept::Failed {
            remaining_secs: None,
            ..
        }
    ));
    assert_eq!(
        result_of(&report, "cluster-b"),
        &Swept::Deleted { age_secs: Some(7200) }
    );
    assert_eq!(
        result_of(&report, "cluster-c"),
        &Swept::Deleted { age_secs: Some(7200) }
    );
    assert_eq!(report.failed(), 2);
    // The entry left on cluster-a is the oldest remaining one.
    assert_eq!(report.oldest_remaining_secs, 7200);
    assert_eq!(principals(&aws, HOME, "cluster-a"), vec![FUNCTION_ROLE]);
}

#[tokio::test]
async fn a_merged_role_disagreeing_with_the_account_map_is_refused_not_assumed() {
    let aws = aws();
    let roles = BTreeMap::from([(ACCOUNT_B.to_owned(), "arn:aws:iam::222222222222:role/other".to_owned())]);
    let targets = sweep::targets(&fleet(), &roles, Ok(HOME)).unwrap();
    let report = sweep::sweep(
        &aws,
        targets,
        None,
        SystemTime::now(),
        TTL,
        NO_CATCH_UP,
        sweep::Page::default(),
    )
    .await;
    assert!(matches!(result_of(&report, "cluster-x"), Swept::Failed { .. }));
    assert!(
        !aws.calls().iter().any(|c| c.starts_with("AssumeRole")),
        "{:?}",
        aws.calls()
    );
}

mod handler {
    use std::time::Instant;

    use cellbridge::doubles::cluster::{MemKube, MemSource};
    use cellbridge::doubles::secrets::MemSecrets;
    use cellbridge::jobs::bootstrap::handler::BootstrapService;
    use cellbridge::ports::cluster::kube::Tuning;
    use cellbridge::shell::metrics::{Captured, Metrics};
    use cellbridge::{rules::bootstrap::Bootstrapper, rules::bootstrap::config::Settings};
    use serde_json::json;

    use super::*;

    fn settings() -> Settings {
        Settings {
            flux_git_url: None,
            flux_git_branch: None,
            flux_git_secret: None,
            cluster_wait: Duration::from_secs(5),
            cluster_poll: Duration::from_millis(1),
            access_principal_arn: None,
            account_roles: Default::default(),
            confirm: Default::default(),
            tuning: Tuning::default(),
        }
    }

    #[tokio::test]
    async fn the_sweep_event_sweeps_and_records_the_heartbeat_and_the_oldest_age() {
        let aws = aws();
        aws.add_entry_in(HOME, REGION, "cluster-a", FUNCTION_ROLE, true, ago(7200));
        aws.add_entry_in(HOME, REGION, "cluster-b", FUNCTION_ROLE, true, ago(100));
        let svc = BootstrapService {
            bootstrapper: Bootstrapper::with_ports(aws.clone(), MemKube::new(&aws), MemSecrets::new(), settings()),
            fleets: MemSource::new(fleet()).into(),
            rechecks: None,
        };
        let captured = Captured::default();
        let inv = crate::support::handle_with(
            &svc,
            &json!({"action": "sweep"}),
            Instant::now() + Duration::from_secs(60),
            None,
            &Metrics::new("cluster-bootstrap", &captured),
        )
        .await
        .unwrap();
        assert_eq!(inv.class, None, "{}", inv.response);
        assert!(principals(&aws, HOME, "cluster-a").is_empty());
        assert_eq!(principals(&aws, HOME, "cluster-b"), vec![FUNCTION_ROLE]);
        let records = captured.records();
        assert_eq!(records.len(), 1, "{records:?}");
        let r = &records[0];
        assert_eq!(r["AccessSweeps"], 1);
        let oldest = r["OldestTemporaryAccessSeconds"].as_u64().unwrap();
        assert!((100..110).contains(&oldest), "{r}");
        assert_eq!(r["deleted"], "1");
        assert_eq!(r["failed"], "0");
        assert_eq!(
            r["_aws"]["CloudWatchMetrics"][0]["Metrics"][1]["Name"],
            "OldestTemporaryAccessSeconds"
        );
    }

    /// The daily sweep's catch-up, decided from each cluster's record: no record is bootstrapped
    /// through the queue, a stuck outcome or an abandoned `confirming` too (finding Flux, the
    /// run only checks), `ready` is left, an opted-out cluster is never touched, a cluster a run
    /// holds right now is left to it; paused, nothing is queued.
    #[tokio::test]
    async fn the_daily_sweep_bootstraps_through_the_queue_every_cluster_without_a_completed_bootstrap() {
        use cellbridge::pure::bootstrap::record::{
            CATCH_UP_TAG, FLUX_SINCE_TAG, FLUX_TAG, OPT_OUT_TAG, OPT_OUT_VALUE, format_time,
        };
        let since = |secs: u64| format_time(SystemTime::now() - Duration::from_secs(secs));
        let aws = MemAws::new(FUNCTION_ROLE);
        aws.add_cluster(MemCluster::active("cluster-a", REGION));
        aws.add_cluster(
            MemCluster::active("cluster-b", REGION)
                .tag(FLUX_TAG, "git-auth")
                .tag(FLUX_SINCE_TAG, &since(7200)),
        );
        aws.add_cluster(
            MemCluster::active("cluster-c", REGION)
                .tag(FLUX_TAG, "confirming")
                .tag(FLUX_SINCE_TAG, &since(3 * 3600)),
        );
        aws.add_cluster(
            MemCluster::active("cluster-x", REGION)
                .in_account(ACCOUNT_B)
                .tag(OPT_OUT_TAG, OPT_OUT_VALUE),
        );
        aws.trust_role(CELL_ROLE);
        let queue = std::sync::Arc::new(cellbridge::doubles::queue::MemQueue::default());
        let svc = BootstrapService {
            bootstrapper: Bootstrapper::with_ports(aws.clone(), MemKube::new(&aws), MemSecrets::new(), settings()),
            fleets: MemSource::new(fleet()).into(),
            rechecks: Some(queue.clone().into()),
        };
        let sweep = |pause| {
            let svc = &svc;
            async move {
                let captured = Captured::default();
                crate::support::handle_with(
                    svc,
                    &json!({"action": "sweep"}),
                    Instant::now() + Duration::from_secs(60),
                    pause,
                    &Metrics::new("cluster-bootstrap", &captured),
                )
                .await
                .unwrap()
            }
        };
        let inv = sweep(None).await;
        let sent: Vec<serde_json::Value> = queue
            .sent
            .lock()
            .unwrap()
            .iter()
            .map(|b| serde_json::from_str(b).unwrap())
            .collect();
        assert_eq!(
            sent,
            [
                json!({"action": "bootstrap", "cluster": "cluster-a", "region": REGION, "cell": "a", "account": HOME}),
                json!({"action": "bootstrap", "cluster": "cluster-b", "region": REGION, "cell": "b", "account": HOME}),
                json!({"action": "bootstrap", "cluster": "cluster-c", "region": REGION, "cell": "c", "account": HOME}),
            ]
        );
        let caught: Vec<(&str, &str)> = inv.response["report"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| Some((c["cell"].as_str()?, c["catch_up"].as_str()?)))
            .collect();
        assert_eq!(caught, [("a", "bootstrap"), ("b", "recheck"), ("c", "recheck")]);
        // Each bootstrap went through the queue: the sweep itself entered no cluster.
        assert!(!aws.calls().iter().any(|c| c.starts_with("CreateAccessEntry")));

        // Each queued catch-up is marked on its cluster: a retried sweep queues none twice.
        assert!(aws.cluster_tags(REGION, "cluster-b").contains_key(CATCH_UP_TAG));
        sweep(None).await;
        assert_eq!(queue.sent.lock().unwrap().len(), 3, "pending: not queued again");
        // Long after (the catch-up's run never came), the sweep queues it again; a run holding
        // cluster-a's access right now is left to it; paused, nothing is queued.
        for c in ["cluster-a", "cluster-b", "cluster-c"] {
            aws.add_cluster_tags(None, REGION, c, &[(CATCH_UP_TAG, &since(6 * 3600))]);
        }
        aws.add_entry_in(HOME, REGION, "cluster-a", FUNCTION_ROLE, true, ago(60));
        sweep(crate::support::sync::paused_by_env()).await;
        assert_eq!(queue.sent.lock().unwrap().len(), 3);
        sweep(None).await;
        assert_eq!(
            queue.sent.lock().unwrap().len(),
            5,
            "cluster-b and -c again, not cluster-a"
        );
    }
}

#[tokio::test]
async fn a_run_deletes_an_expired_leftover_before_creating_a_fresh_entry() {
    use cellbridge::ports::cluster::Accounts;
    use cellbridge::rules::bootstrap::access;

    let aws = aws();
    aws.add_entry_in(HOME, REGION, "cluster-a", FUNCTION_ROLE, true, ago(7200));
    let api = aws.open(REGION, None).await.unwrap();
    let grant = access::ensure(&api, "cluster-a", FUNCTION_ROLE).await.unwrap();
    assert!(grant.temporary);
    let calls = aws.calls();
    let delete = calls.iter().position(|c| c == "DeleteAccessEntry cluster-a");
    let create = calls.iter().position(|c| c == "CreateAccessEntry cluster-a");
    assert!(delete.is_some() && delete < create, "{calls:?}");
    let entries = aws.entries(REGION, "cluster-a");
    let age = SystemTime::now()
        .duration_since(entries[0].created_at.unwrap())
        .unwrap();
    assert!(age < Duration::from_secs(60), "a fresh entry: {age:?}");

    // A young one (a run using it) is reused, not recreated.
    aws.add_entry_in(HOME, REGION, "cluster-b", FUNCTION_ROLE, true, ago(60));
    access::ensure(&api, "cluster-b", FUNCTION_ROLE).await.unwrap();
    assert!(
        !aws.calls()
            .iter()
            .any(|c| c.ends_with("AccessEntry cluster-b") && !c.starts_with("Describe"))
    );
}

/// A new cell's cluster is bootstrapped from its `cellbridge.dev/cell` tag before the cell's
/// pull request merges: its entry is found by the tag (in cellbridge's own account and, through
/// its role, in account B), a cluster with no tag is not visited, and a merged cell's cluster is
/// visited once.
#[tokio::test]
async fn tagged_clusters_of_cells_not_merged_yet_are_swept_too() {
    let aws = aws();
    aws.add_cluster(MemCluster::active("cluster-new", REGION).tag("cellbridge.dev/cell", "new"));
    aws.add_cluster(
        MemCluster::active("cluster-new-b", REGION)
            .in_account(ACCOUNT_B)
            .tag("cellbridge.dev/cell", "new-b"),
    );
    aws.add_cluster(MemCluster::active("someone-elses", REGION));
    aws.add_entry_in(HOME, REGION, "cluster-new", FUNCTION_ROLE, true, ago(7200));
    aws.add_entry_in(ACCOUNT_B, REGION, "cluster-new-b", CELL_ROLE, true, ago(7200));
    aws.add_entry_in(HOME, REGION, "someone-elses", FUNCTION_ROLE, true, ago(7200));
    let roles: BTreeMap<String, String> = [(ACCOUNT_B.to_owned(), CELL_ROLE.to_owned())].into();

    let known = sweep::targets(&fleet(), &roles, Ok(HOME)).unwrap();
    let (found, errors) = sweep::discover(&aws, &known, &roles, Some(REGION), Some(HOME)).await;
    assert!(errors.is_empty(), "{errors:?}");
    let mut names: Vec<(String, Option<String>)> = found
        .iter()
        .map(|t| {
            let t = t.target();
            (t.cluster.clone(), t.role.clone())
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("cluster-new".to_owned(), None),
            ("cluster-new-b".to_owned(), Some(CELL_ROLE.to_owned()))
        ]
    );
    let report = sweep::sweep(
        &aws,
        known.into_iter().chain(found).collect(),
        None,
        SystemTime::now(),
        TTL,
        NO_CATCH_UP,
        sweep::Page::default(),
    )
    .await;
    assert_eq!(
        result_of(&report, "cluster-new"),
        &Swept::Deleted { age_secs: Some(7200) }
    );
    assert_eq!(
        result_of(&report, "cluster-new-b"),
        &Swept::Deleted { age_secs: Some(7200) }
    );
    assert!(report.clusters.iter().all(|c| c.target.cluster != "someone-elses"));
    assert_eq!(
        principals(&aws, HOME, "someone-elses"),
        vec![FUNCTION_ROLE],
        "not a cell's: untouched"
    );
    assert_eq!(
        report
            .clusters
            .iter()
            .filter(|c| c.target.cluster == "cluster-x")
            .count(),
        1
    );

    // A listing that fails is reported, and the rest is still found.
    // (The own account is listed first.)
    aws.fail("ListClusters", 1, false);
    let known = sweep::targets(&fleet(), &roles, Ok(HOME)).unwrap();
    let (found, errors) = sweep::discover(&aws, &known, &roles, Some(REGION), Some(HOME)).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("own account") && errors[0].contains("ListClusters"),
        "{errors:?}"
    );
    assert_eq!(
        found.iter().map(|t| t.target().cluster.as_str()).collect::<Vec<_>>(),
        ["cluster-new-b"]
    );
}
