//! cluster-bootstrap: the temporary access entry. Removed after a failed apply, whatever the
//! failure; a failed delete fails the run and the next run removes it; someone else's entry is used
//! and never deleted; an entry without its policy is refused by Kubernetes as EKS does; an install
//! slower than the invocation stops before the deadline and gives the access back; a run sweeps
//! nothing beyond its own cluster (a dry run neither).

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::{MemAws, MemCluster, MemKube, MemSource};
use cellbridge::doubles::secrets::MemSecrets;
use cellbridge::jobs::bootstrap::handler::BootstrapService;
use cellbridge::shell::error::{Class, Classify};
use cellbridge::{
    ports::cluster::kube::Tuning, rules::bootstrap::Bootstrapper, rules::bootstrap::Target,
    rules::bootstrap::report::BootstrapOutcome,
};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn access_is_removed_after_a_failed_apply_whatever_the_failure() {
    for (code, class) in [(422, Class::Final), (503, Class::Retryable)] {
        let bed = bed();
        // A 503 outlives the adapter's retries in the real client; here it is simply answered
        // more often than any retry budget.
        bed.kube().fail("apply", "Deployment", 100, code);
        let err = run(&bed, &fleet(&[])).await.unwrap_err();
        assert_eq!(err.class(), class, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(CLUSTER) && msg.contains(CELL) && msg.contains("source-controller"),
            "{msg}"
        );
        assert!(
            entries(&bed).is_empty(),
            "HTTP {code}: the access entry outlived the run"
        );
        assert!(bed.accounts().calls().contains(&format!("DeleteAccessEntry {CLUSTER}")));
    }
}

#[tokio::test]
async fn a_failed_delete_fails_the_run_and_the_next_run_removes_the_entry() {
    let bed = bed();
    bed.accounts().fail("DeleteAccessEntry", 1, true);
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Retryable, "{err}");
    assert_eq!(entries(&bed), [FUNCTION_ROLE], "left behind by the failed delete");

    // The event comes back at once: Flux is there, but the entry is young, and another run may
    // be holding it: used, and left.
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::AlreadyBootstrapped);
    let access = report.access_entry.unwrap();
    assert!(access.adopted && !access.removed, "{access:?}");
    assert_eq!(entries(&bed), [FUNCTION_ROLE]);

    // Older than a run's longest, the run that made it is over: the next run deletes it.
    let older = Some(std::time::SystemTime::now() - Duration::from_secs(1000));
    bed.accounts()
        .add_entry_in(HOME, REGION, CLUSTER, FUNCTION_ROLE, true, older);
    let report = run(&bed, &fleet(&[])).await.unwrap();
    let access = report.access_entry.unwrap();
    assert!(!access.adopted && access.removed, "{access:?}");
    assert!(entries(&bed).is_empty());
}

/// Two runs on one cluster (a `CreateCluster` event and the sweep's catch-up, say): the second
/// finds the first's young temporary entry, uses it and leaves it; only the run that made it
/// deletes it, so it is never deleted under the run at work.
#[tokio::test]
async fn two_runs_on_one_cluster_never_delete_the_access_under_each_other() {
    use cellbridge::ports::cluster::Accounts;
    use cellbridge::rules::bootstrap::access;
    let bed = bed();
    let api = bed.accounts().open(REGION, None).await.unwrap();
    // The first run takes its access.
    let first = access::ensure(&api, CLUSTER, FUNCTION_ROLE).await.unwrap();
    assert!(first.temporary && !first.adopted);
    // The second run, meanwhile, completes a whole bootstrap with it.
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let access = report.access_entry.unwrap();
    assert!(access.adopted && !access.removed, "{access:?}");
    assert_eq!(entries(&bed), [FUNCTION_ROLE], "still the first run's");
    // The first run ends: it deletes its own.
    assert!(access::release(&api, CLUSTER, &first).await.unwrap());
    assert!(entries(&bed).is_empty());
}

#[tokio::test]
async fn someone_elses_access_entry_is_used_and_never_deleted() {
    let bed = bed();
    bed.accounts().add_entry(REGION, CLUSTER, FUNCTION_ROLE, false);
    let report = run(&bed, &fleet(&[])).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    let access = report.access_entry.unwrap();
    assert!(!access.temporary && !access.removed);
    assert_eq!(entries(&bed), [FUNCTION_ROLE]);
    let calls = bed.accounts().calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("CreateAccessEntry") || c.starts_with("DeleteAccessEntry")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn an_entry_without_its_policy_is_refused_by_kubernetes_as_eks_does() {
    // The double's authorization rule, checked through the sequence: an entry created but whose
    // policy association failed gives no access, and is not left behind.
    let bed = bed();
    bed.accounts().fail("AssociateAccessPolicy", 1, false);
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains("AssociateAccessPolicy"), "{err}");
    assert!(entries(&bed).is_empty(), "a useless entry was left behind");
    assert!(bed.kube().applied().is_empty());
}

/// [`MemKube`] whose every apply and every check takes `delay`: an API server slower than the
/// invocation.
struct SlowKube(MemKube, Duration);

struct SlowKubeApi(<MemKube as cellbridge::ports::cluster::KubeConnect>::Api, Duration);

impl cellbridge::ports::cluster::KubeConnect for SlowKube {
    type Api = SlowKubeApi;
    async fn connect(
        &self,
        auth: cellbridge::ports::cluster::kube::ClusterAuth,
        tuning: &Tuning,
        fresh_entry: bool,
    ) -> Result<SlowKubeApi, cellbridge::ports::cluster::kube::ApplyError> {
        Ok(SlowKubeApi(self.0.connect(auth, tuning, fresh_entry).await?, self.1))
    }
}

impl cellbridge::ports::cluster::KubeApi for SlowKubeApi {
    async fn exists(
        &mut self,
        target: &cellbridge::rules::bootstrap::KubeRef,
        plural: &str,
    ) -> Result<bool, cellbridge::ports::cluster::kube::ApplyError> {
        self.0.exists(target, plural).await
    }
    async fn apply(
        &mut self,
        step: &cellbridge::pure::bootstrap::plan::Step,
    ) -> Result<cellbridge::ports::cluster::kube::Applied, cellbridge::ports::cluster::kube::ApplyError> {
        tokio::time::sleep(self.1).await;
        self.0.apply(step).await
    }
    async fn wait_established(&mut self, crds: &[String]) -> Result<(), cellbridge::ports::cluster::kube::ApplyError> {
        self.0.wait_established(crds).await
    }
    async fn observe(
        &mut self,
        what: &cellbridge::ports::cluster::kube::Observe,
    ) -> Result<cellbridge::pure::bootstrap::confirm::Snapshot, cellbridge::ports::cluster::kube::ApplyError> {
        tokio::time::sleep(self.1).await;
        self.0.observe(what).await
    }
    async fn get(
        &mut self,
        target: &cellbridge::rules::bootstrap::KubeRef,
        plural: &str,
    ) -> Result<Option<serde_json::Value>, cellbridge::ports::cluster::kube::ApplyError> {
        self.0.get(target, plural).await
    }
    async fn annotate(
        &mut self,
        target: &cellbridge::rules::bootstrap::KubeRef,
        plural: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), cellbridge::ports::cluster::kube::ApplyError> {
        self.0.annotate(target, plural, annotations).await
    }
}

#[tokio::test]
async fn an_install_slower_than_the_invocation_stops_before_the_deadline_and_gives_access_back() {
    use cellbridge::rules::bootstrap::RELEASE_RESERVE;
    let secrets = || {
        let s = MemSecrets::new();
        s.put(GIT_SECRET, json!({"username": "git", "password": PASSWORD}).to_string());
        s
    };
    let aws = MemAws::new(FUNCTION_ROLE);
    aws.add_cluster(MemCluster::active(CLUSTER, REGION));
    let kube = MemKube::new(&aws);
    let slow = Bootstrapper::with_ports(
        aws.clone(),
        SlowKube(kube.clone(), Duration::from_millis(100)),
        secrets(),
        settings(),
    );
    let start = Instant::now();
    // 350 ms for the install, then the reserve for the access entry.
    let deadline = start + RELEASE_RESERVE + Duration::from_millis(350);
    let err = slow
        .run_before(&fleet(&[]), Some("main"), &request(), Target::Eks, None, Some(deadline))
        .await
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "ran {:?}",
        start.elapsed()
    );
    assert_eq!(err.class(), Class::Retryable, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("deadline") && msg.contains("left: "), "{msg}");
    assert!(msg.contains(CLUSTER), "{msg}");
    let applied = slow.kube().0.applied();
    assert!(!applied.is_empty() && applied.len() < 8, "{applied:?}");
    assert!(
        aws.entries(REGION, CLUSTER).is_empty(),
        "the temporary access entry is deleted before the deadline"
    );
    assert!(
        slow.accounts()
            .calls()
            .iter()
            .any(|c| c.starts_with("DeleteAccessEntry"))
    );

    // The next delivery, with time enough, completes it.
    let report = Bootstrapper::with_ports(aws.clone(), kube, secrets(), settings())
        .run(&fleet(&[]), &request(), Target::Eks)
        .await
        .unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
}

#[tokio::test]
async fn a_check_of_a_flux_already_there_cut_by_the_deadline_is_checked_not_finished() {
    use cellbridge::rules::bootstrap::RELEASE_RESERVE;
    let aws = MemAws::new(FUNCTION_ROLE);
    aws.add_cluster(MemCluster::active(CLUSTER, REGION));
    let kube = MemKube::new(&aws);
    let secrets = MemSecrets::new();
    secrets.put(GIT_SECRET, json!({"username": "git", "password": PASSWORD}).to_string());
    let done = Bootstrapper::with_ports(aws.clone(), kube.clone(), secrets, settings())
        .run(&fleet(&[]), &request(), Target::Eks)
        .await
        .unwrap();
    assert_eq!(done.outcome, BootstrapOutcome::Bootstrapped);
    let applied = kube.applied();

    // Flux is there; the check is slower than what is left of the invocation.
    let secrets = MemSecrets::new();
    secrets.put(GIT_SECRET, json!({"username": "git", "password": PASSWORD}).to_string());
    let slow = Bootstrapper::with_ports(
        aws.clone(),
        SlowKube(kube.clone(), Duration::from_millis(600)),
        secrets,
        settings(),
    );
    let deadline = Instant::now() + RELEASE_RESERVE + Duration::from_millis(200);
    let report = slow
        .run_before(&fleet(&[]), Some("main"), &request(), Target::Eks, None, Some(deadline))
        .await
        .expect("a check cut short is no failed apply");
    assert_eq!(report.outcome, BootstrapOutcome::AlreadyBootstrapped);
    let flux = report.flux.as_ref().unwrap();
    assert!(flux.sentence.starts_with("Checked, not finished"), "{}", flux.sentence);
    assert!(!flux.sentence.contains("applied 0 of"), "{}", flux.sentence);
    assert_eq!(flux.outcome.as_str(), "confirming");
    assert!(report.recheck.is_some(), "the next check is queued");
    assert_eq!(kube.applied(), applied, "nothing applied");
    assert!(aws.entries(REGION, CLUSTER).is_empty());
}

/// The service over a fleet where another cluster, tagged with a cell whose pull request is still
/// open, has an hour-old temporary access entry of this function's (what a run killed elsewhere
/// left).
fn with_an_expired_entry_elsewhere() -> BootstrapService<MemAws, MemKube, MemSecrets> {
    let b = bed();
    let hour_ago = Some(std::time::SystemTime::now() - Duration::from_secs(3600));
    b.accounts()
        .add_cluster(MemCluster::active("left-behind", REGION).tag("cellbridge.dev/cell", "new-cell"));
    b.accounts()
        .add_entry_in(HOME, REGION, "left-behind", FUNCTION_ROLE, true, hour_ago);
    service(b, MemSource::new(fleet(&[])).on_branch("main"))
}

/// A bootstrap run sweeps nothing beyond its own cluster: an expired temporary entry a run
/// killed elsewhere (here on a cluster tagged with a cell whose pull request is still open) is
/// not even looked at; the schedule's sweep deletes it. With a whole fleet lacking records on
/// the first day after an upgrade, a sweep after every run (the catch-ups' runs included) made
/// the calls grow as the square of the fleet.
#[tokio::test]
async fn a_bootstrap_run_sweeps_nothing_beyond_its_own_cluster() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let svc = with_an_expired_entry_elsewhere();
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let inv = crate::support::handle_with(&svc, &created(CLUSTER), deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(inv.response["outcome"], "bootstrapped", "{}", inv.response);
    assert!(inv.response.get("sweep").is_none(), "{}", inv.response);
    let calls = svc.bootstrapper.accounts().calls();
    assert!(
        !calls.iter().any(|c| c.ends_with(" left-behind") || c == "ListClusters"),
        "{calls:?}"
    );
    assert_eq!(
        svc.bootstrapper
            .accounts()
            .entries_in(HOME, REGION, "left-behind")
            .len(),
        1
    );
    assert!(
        !captured.records().iter().any(|r| r["AccessSweeps"] == 1),
        "no sweep heartbeat from a run: {:?}",
        captured.records()
    );
}

/// A settings file people got wrong fails the run's cluster, naming the file; paused from the
/// file, nothing is touched. Neither sweeps another cluster.
#[tokio::test]
async fn a_wrong_settings_file_fails_the_cluster_and_a_pause_stops_it() {
    let expired_entries = |svc: &BootstrapService<MemAws, MemKube, MemSecrets>| {
        svc.bootstrapper
            .accounts()
            .entries_in(HOME, REGION, "left-behind")
            .len()
    };
    let with_settings = |settings: &str| {
        let svc = with_an_expired_entry_elsewhere();
        BootstrapService {
            fleets: MemSource::new(fleet_with_settings(settings)).on_branch("main").into(),
            rechecks: None,
            ..svc
        }
    };
    let svc = with_settings("paused: true\nwhy: x\n");
    let inv = crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    assert_eq!(inv.class, Some(Class::Final), "{}", inv.response);
    assert!(
        inv.response["error"]
            .as_str()
            .unwrap()
            .contains(".cellbridge/settings.yaml"),
        "{}",
        inv.response
    );
    assert!(svc.bootstrapper.kube().applied().is_empty());
    assert_eq!(expired_entries(&svc), 1, "not swept: {}", inv.response);

    let svc = with_settings("paused: true\n");
    let inv = crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    assert_eq!(inv.response["outcome"], "paused", "{}", inv.response);
    assert!(inv.response.get("sweep").is_none(), "{}", inv.response);
    assert_eq!(expired_entries(&svc), 1, "nothing swept while paused");
}

/// A dry run writes nothing, so it does not sweep either: an expired temporary entry elsewhere
/// stays for the next real run or the schedule, and the answer has no sweep.
#[tokio::test]
async fn a_dry_run_never_sweeps() {
    use cellbridge::shell::metrics::{Captured, Metrics};
    let svc = with_an_expired_entry_elsewhere();
    let captured = Captured::default();
    let metrics = Metrics::new("cluster-bootstrap", &captured);
    let dry = json!({"action": "bootstrap", "cluster": CLUSTER, "region": REGION, "dry_run": true});
    let inv = crate::support::handle_with(&svc, &dry, deadline(), None, &metrics)
        .await
        .unwrap();
    assert_eq!(inv.response["outcome"], "planned", "{}", inv.response);
    assert!(inv.response.get("sweep").is_none(), "{}", inv.response);
    assert_eq!(
        svc.bootstrapper
            .accounts()
            .entries_in(HOME, REGION, "left-behind")
            .len(),
        1,
        "the expired entry stays"
    );
}
