//! The re-check's share of the matrix: the calls of one re-check of a bootstrap's confirmation
//! (`Bootstrapper::recheck`), as the probe saw the re-check of its clean bootstraps make them,
//! each given the same faults as the bootstrap's.
//!
//! A case bootstraps its own bed cleanly first (with the fewest components a bootstrap confirms
//! with: a re-check reads the same whatever else was applied): the fake's controllers never
//! report Available, so the bootstrap is still confirming and its report holds the re-check it
//! hands on, which is the one made here. Each re-check takes a fresh temporary access entry and
//! deletes it, so the entry's calls are in its share as well as the reads of Flux's state and
//! TagResource.
//!
//! A fault the re-check cannot retry through ends one of two ways: the cluster's state unread,
//! the re-check answers `confirming` (or `timed-out`, past the deadline) with the reason in
//! `flux.sentence` and the next re-check queued; or, before the look (the role, the cluster, the
//! access entry), a retryable error naming the call. Either way no access entry stays behind but
//! the one DeleteAccessEntry could not delete, tagged temporary (the sweep's to delete). A clean
//! re-check after it answers a verdict; finding that entry young (it may be a run's at work), it
//! uses it, reports it adopted and leaves it, and the re-check after the entry is older than a
//! run's longest (its `createdAt` in moto) deletes it and leaves none.

use cellbridge::ports::cluster::access::TEMPORARY_TAG;
use cellbridge::pure::bootstrap::confirm::Outcome;
use cellbridge::pure::events::bootstrap::Recheck;
use cellbridge::rules::bootstrap::follow::FluxReport;

use super::*;

/// The invocation's deadline as the function passes it: far enough that a re-check ends on
/// its attempt bounds, not on it.
const INVOCATION: Duration = Duration::from_secs(120);

/// How a report says the cluster's state was not read (`FluxReport::unread`).
const UNREAD: &str = "the cluster's state could not be read: ";

/// The least of [`components`] a bootstrap confirms with: the namespace, the CRDs of the sync
/// objects and the controllers' Deployments, a quarter of the objects to apply (each case
/// bootstraps its bed first; a few seconds of the suite on 2 cores).
fn slim_components() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let docs: Vec<&str> = components()
            .split("\n---\n")
            .filter(|doc| {
                let o: Value = serde_json::from_str(doc).unwrap();
                match o["kind"].as_str().unwrap_or("") {
                    "Namespace" | "Deployment" => true,
                    "CustomResourceDefinition" => ["gitrepositories.", "kustomizations."]
                        .iter()
                        .any(|p| o["metadata"]["name"].as_str().unwrap_or("").starts_with(p)),
                    _ => false,
                }
            })
            .collect();
        docs.join("\n---\n")
    })
}

impl Bed {
    /// A bed for a re-check: its bootstraps apply [`slim_components`].
    async fn slim(id: &str, role: bool) -> Bed {
        Bed {
            components: slim_components(),
            ..Bed::new(id, role).await
        }
    }

    /// A clean bootstrap, still confirming: the re-check it hands on.
    async fn confirming(&self) -> Result<Recheck, String> {
        let rep = self
            .run(false)
            .await
            .map_err(|e| format!("[{}] the clean bootstrap failed: {e}", self.id))?;
        handed_on(&self.id, &rep)
    }

    async fn recheck(&self, r: &Recheck) -> Result<Report, BootstrapError> {
        let deadline = Instant::now() + INVOCATION;
        let got = Bootstrapper::new(self.aws.clone(), self.settings())
            .recheck(r, Target::Eks, Some(deadline))
            .await;
        let what = format!("re-check of {}", self.cluster);
        match &got {
            Ok(rep) => leak::capture(&what, &serde_json::to_string(rep).unwrap()),
            Err(e) => {
                leak::capture(&what, &format!("error: {e}"));
                leak::capture_debug(&what, &format!("{e:?}"));
            }
        }
        got
    }

    /// The access entries left, each of them cellbridge's temporary one (the sweep's to delete);
    /// an entry without the tag is an error.
    async fn temporary_entries(&self) -> Result<Vec<String>, String> {
        let eks = aws_sdk_eks::Client::new(&self.setup);
        let left = self.access_entries().await;
        for principal in &left {
            let out = eks
                .describe_access_entry()
                .cluster_name(&self.cluster)
                .principal_arn(principal)
                .send()
                .await
                .map_err(|e| format!("[{}] DescribeAccessEntry {principal}: {e:?}", self.id))?;
            let tagged = out
                .access_entry()
                .and_then(|a| a.tags())
                .is_some_and(|t| t.contains_key(TEMPORARY_TAG));
            if !tagged {
                return Err(format!("[{}] an access entry left untagged: {principal}", self.id));
            }
        }
        Ok(left)
    }

    /// A clean re-check after whatever happened: a verdict read from the cluster, and its access
    /// given back; or, when it found the young entry a failed re-check could not delete, that
    /// entry used and left (it may be a run's at work), and deleted by the re-check after it
    /// is older than a run's longest.
    async fn rechecks_cleanly(&self, r: &Recheck) -> Result<Outcome, String> {
        let id = &self.id;
        let before = self.entries_with_age().await?;
        let rep = self
            .recheck(r)
            .await
            .map_err(|e| format!("[{id}] the clean re-check failed: {e}"))?;
        let flux = verdict(id, &rep)?;
        if self.left_to_its_run(&before, rep.access_entry.as_ref()).await? {
            self.age_past_a_run(&before);
            let rep = self
                .recheck(r)
                .await
                .map_err(|e| format!("[{id}] the re-check after the window failed: {e}"))?;
            read(id, &rep)?;
            self.gave_back(rep.access_entry.as_ref(), "the re-check after the window")
                .await?;
        }
        Ok(flux.outcome)
    }
}

/// The re-check a clean bootstrap hands on: the fake's controllers never report Available, so
/// it is still confirming.
fn handed_on(id: &str, rep: &Report) -> Result<Recheck, String> {
    let flux = rep.flux.as_ref().map(|f| f.outcome);
    match &rep.recheck {
        Some((r, _)) if rep.outcome == BootstrapOutcome::Bootstrapped && flux == Some(Outcome::Confirming) => {
            Ok(r.clone())
        }
        _ => Err(format!(
            "[{id}] a clean bootstrap should be confirming with a re-check to hand on: {:?}, flux {flux:?}",
            rep.outcome
        )),
    }
}

/// The report's verdict, read from the cluster, with the entry given back.
fn read<'r>(id: &str, rep: &'r Report) -> Result<&'r FluxReport, String> {
    given_back(id, rep)?;
    verdict(id, rep)
}

/// The report's verdict, read from the cluster and recorded.
fn verdict<'r>(id: &str, rep: &'r Report) -> Result<&'r FluxReport, String> {
    let flux = answered(id, rep)?;
    if flux.sentence.starts_with(UNREAD) || !flux.recorded {
        return Err(format!(
            "[{id}] no verdict read and recorded: {} (recorded: {})",
            flux.sentence, flux.recorded
        ));
    }
    Ok(flux)
}

/// A re-check's report: its verdict, the next re-check while confirming, the entry given back.
fn checked<'r>(id: &str, rep: &'r Report) -> Result<&'r FluxReport, String> {
    given_back(id, rep)?;
    answered(id, rep)
}

/// The re-check deleted the temporary entry it took.
fn given_back(id: &str, rep: &Report) -> Result<(), String> {
    if !rep
        .access_entry
        .as_ref()
        .is_some_and(|a| a.temporary && a.removed && !a.adopted)
    {
        return Err(format!("[{id}] access not given back: {:?}", rep.access_entry));
    }
    Ok(())
}

/// A re-check's report: its verdict, the next re-check while confirming.
fn answered<'r>(id: &str, rep: &'r Report) -> Result<&'r FluxReport, String> {
    let Some(flux) = rep.flux.as_ref().filter(|_| rep.outcome == BootstrapOutcome::Checked) else {
        return Err(format!(
            "[{id}] a re-check answered {:?} without a verdict",
            rep.outcome
        ));
    };
    if (flux.outcome == Outcome::Confirming) != rep.recheck.is_some() {
        return Err(format!(
            "[{id}] {:?} with next re-check {:?}",
            flux.outcome,
            rep.recheck.as_ref().map(|(r, _)| r.check)
        ));
    }
    Ok(flux)
}

/// The probe's share (`super::probe`): the calls of the re-check `bed`'s clean bootstrap handed
/// on (`rep`), made cleanly, added to `calls`; a call made either way is the run without a
/// role's.
pub(super) async fn probe(bed: &Bed, rep: &Report, role: bool, calls: &mut Vec<Call>) {
    let r = handed_on(&bed.id, rep).unwrap();
    let before = bed.aws_seen().len();
    let requests = bed.kube.requests().len();
    let got = bed.recheck(&r).await.expect("a clean re-check");
    read(&bed.id, &got).unwrap();
    add_calls(calls, bed.aws_calls(&bed.aws_seen()[before..], role));
    if !role {
        add_calls(calls, kube_calls(&bed.kube.requests()[requests..]));
    }
}

/// What the probe must have found a re-check make, and nothing it must not.
pub(super) fn check_probe(calls: &[Call]) {
    let names: Vec<String> = calls.iter().map(Call::name).collect();
    for needed in [
        "AssumeRole",
        "DescribeCluster",
        "DescribeAccessEntry",
        "CreateAccessEntry",
        "AssociateAccessPolicy",
        "DeleteAccessEntry",
        "TagResource",
        "GET /apis/apps/v1/namespaces/flux-system/deployments",
        "GET /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/*",
    ] {
        assert!(
            names.iter().any(|n| n == needed),
            "a clean re-check makes {needed}: {names:?}"
        );
    }
    for c in calls {
        if let Call::Kube { kind, needles } = c {
            assert!(!needles.is_empty(), "a Kubernetes request of unknown shape: {kind}");
            assert!(kind.starts_with("GET "), "a re-check only reads: {kind}");
        }
        assert!(
            !matches!(c, Call::Aws { operation, .. } if operation == "GetSecretValue"),
            "a re-check reads no Git secret"
        );
    }
    say(&format!("re-check calls ({}): {names:?}", names.len()));
}

/// A fault at every call in `calls` that lasts one attempt: the re-check succeeds through its
/// retries, each fault met once, with a verdict read and recorded and no entry left.
async fn transient(id: String, calls: Vec<Call>, fault: Fault) -> Result<String, String> {
    let _permit = permits().acquire().await.unwrap();
    let bed = Bed::slim(&id, calls.iter().any(Call::role)).await;
    let r = bed.confirming().await?;
    let (got, took, missed) = super::once_at_each(&bed, &calls, fault, &id, bed.recheck(&r)).await;
    let rep = got.map_err(|e| format!("[{id}] one failed attempt at each call was not retried through: {e}"))?;
    if !missed.is_empty() {
        return Err(format!("[{id}] faults not met exactly once: {missed:?}"));
    }
    let flux = read(&id, &rep)?;
    let left = bed.access_entries().await;
    if !left.is_empty() {
        return Err(format!("[{id}] access entries left: {left:?}"));
    }
    Ok(format!(
        "{id}: {} calls of a re-check each failed once, retried through in {took:.1?}: {:?}",
        calls.len(),
        flux.outcome
    ))
}

/// A fault at `call` that does not go away: the re-check answers with the state unread and
/// why, or fails retryably naming the call, within the bootstrap's bounds; no entry left but
/// a temporary one DeleteAccessEntry could not delete; a clean re-check after it is clean.
async fn persistent(id: String, call: Call, fault: Fault) -> Result<String, String> {
    let _permit = permits().acquire().await.unwrap();
    let bed = Bed::slim(&id, call.role()).await;
    let r = bed.confirming().await?;
    let injected = inject(&bed, &call, fault, 1000, &id);
    let t = Instant::now();
    let got = bed.recheck(&r).await;
    let took = t.elapsed();
    let n = hits(&bed, &injected);
    // Let hung requests the client gave up on land before looking at what is left.
    if fault == Fault::Hang {
        tokio::time::sleep(Duration::from_secs(HANG_SECS + 1)).await;
    }
    clear(&bed, std::slice::from_ref(&injected));
    super::within_bounds(&id, &call, n, took, "re-check", &got)?;
    let outcome = match &got {
        Ok(rep) => {
            let flux = checked(&id, rep)?;
            match flux.sentence.strip_prefix(UNREAD) {
                Some(why) => {
                    let missing = unnamed(&bed, &call, why);
                    if !missing.is_empty() || !matches!(flux.outcome, Outcome::Confirming | Outcome::TimedOut) {
                        return Err(format!(
                            "[{id}] the state unread, but {:?} does not name the call ({missing:?}): {}",
                            flux.outcome, flux.sentence
                        ));
                    }
                    format!("answered {:?}, the state unread", flux.outcome)
                }
                // The look needs every read: a Kubernetes call that keeps failing leaves the
                // state unread.
                None if matches!(call, Call::Kube { .. }) => {
                    return Err(format!("[{id}] a verdict without {}: {}", call.name(), flux.sentence));
                }
                None => format!("answered {:?}, recorded: {}", flux.outcome, flux.recorded),
            }
        }
        Err(e) => {
            let msg = e.to_string();
            if !e.retryable() {
                return Err(format!("[{id}] failed without being retryable: {msg}"));
            }
            let missing = unnamed(&bed, &call, &msg);
            if !missing.is_empty() {
                return Err(format!("[{id}] the error does not name the call ({missing:?}): {msg}"));
            }
            format!("failed retryably ({msg})")
        }
    };
    let left = bed.temporary_entries().await?;
    let deleting = matches!(&call, Call::Aws { operation, .. } if operation == "DeleteAccessEntry");
    if !left.is_empty() && !deleting {
        return Err(format!("[{id}] access entries left behind: {left:?}"));
    }
    let end = bed.rechecks_cleanly(&r).await?;
    Ok(format!(
        "{id}: {n} attempt(s), {outcome} in {took:.1?}; {} temporary access entr(y/ies) left; clean re-check: {end:?}",
        left.len()
    ))
}

/// The re-check's cases of the matrix of `fault`.
pub(super) async fn cases(fault: Fault) -> Vec<tokio::task::JoinHandle<Result<String, String>>> {
    let tag = fault_tag(fault);
    let calls = super::probe().await.rechecks.clone();
    let mut handles = Vec::new();
    let super::Cases { once, each } = super::cases_of(&calls, fault, &format!("{tag}-rc"));
    for (id, group) in once {
        handles.push(tokio::spawn(transient(id, group, fault)));
    }
    for (id, call) in each {
        handles.push(tokio::spawn(persistent(id, call, fault)));
    }
    handles
}
