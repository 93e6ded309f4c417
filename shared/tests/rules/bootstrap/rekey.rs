//! cluster-bootstrap: a Git credential changed in Secrets Manager is applied by the next check,
//! without `force`. The double's Git server accepts one password only, and source-controller
//! reads the GitRepository's Secret only when it reconciles (`MemKube::git_accepts`). A check
//! that finds the key refused compares Secrets Manager's credentials with the cluster's Secret:
//! unchanged, nothing is written and the outcome says where to put corrected ones; changed,
//! that Secret alone is applied again and the GitRepository asked to reconcile, and the cluster
//! reads `ready`. On a cluster Flux already owns, as the sweep's catch-up finds it, and on an
//! operator cell; a GitRepository reading another Secret is never written to.

use super::operator::{INSTANCE, operator_fleet};
use crate::support::bootstrap::*;
use cellbridge::pure::bootstrap::confirm::Outcome;
use cellbridge::rules::bootstrap::rekey::GitSecretAction;
use cellbridge::rules::bootstrap::report::BootstrapOutcome;
use cellbridge::rules::bootstrap::{Request, Target};
use serde_json::json;

const NEW_PASSWORD: &str = "corrected-token-do-not-log";

fn now_final() -> Bed {
    let mut s = settings();
    s.confirm.grace = std::time::Duration::ZERO;
    bed_with(s)
}

fn corrected(bed: &Bed) {
    bed.secrets().put(
        GIT_SECRET,
        json!({"username": "git", "password": NEW_PASSWORD}).to_string(),
    );
}

#[tokio::test]
async fn a_changed_git_secret_is_applied_by_the_next_run_and_an_unchanged_one_is_not() {
    let bed = now_final();
    bed.kube().git_accepts(Some(NEW_PASSWORD));
    let fleet = fleet(&[]);
    let first = run(&bed, &fleet).await.unwrap();
    assert_eq!(first.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(first.flux.as_ref().unwrap().outcome, Outcome::GitAuth);
    let applied = bed.kube().applied();

    // Unchanged: the sweep's catch-up runs the bootstrap again; nothing is written.
    let again = run(&bed, &fleet).await.unwrap();
    assert_eq!(again.outcome, BootstrapOutcome::AlreadyBootstrapped);
    let flux = again.flux.as_ref().unwrap();
    assert_eq!(flux.outcome, Outcome::GitAuth, "{flux:?}");
    let check = flux.git_secret.as_ref().unwrap();
    assert_eq!(check.action, GitSecretAction::Unchanged, "{check:?}");
    assert!(flux.sentence.contains(GIT_SECRET), "{}", flux.sentence);
    assert_eq!(bed.kube().applied(), applied, "nothing applied");

    // Changed: that Secret alone applied, the source asked to reconcile; ready, no `force`.
    corrected(&bed);
    let fixed = run(&bed, &fleet).await.unwrap();
    assert_eq!(fixed.outcome, BootstrapOutcome::AlreadyBootstrapped);
    let flux = fixed.flux.as_ref().unwrap();
    assert_eq!(flux.outcome, Outcome::Ready, "{flux:?}");
    let check = flux.git_secret.as_ref().unwrap();
    assert_eq!(
        (check.action, check.secret.as_str()),
        (GitSecretAction::Reapplied, "flux-system/flux-system")
    );
    let after = bed.kube().applied();
    assert_eq!(
        after[applied.len()..],
        [
            "Secret flux-system/flux-system",
            "annotate GitRepository flux-system/flux-system"
        ]
    );
    let text = serde_json::to_string(&fixed).unwrap();
    assert!(
        !text.contains(NEW_PASSWORD) && !text.contains(PASSWORD),
        "no value reported"
    );
    assert!(entries(&bed).is_empty());
}

#[tokio::test]
async fn a_re_check_applies_a_changed_secret_while_the_refusal_is_only_suspected() {
    // Within the grace: the refusal is suspected, the re-checks go on; one finds the change.
    let bed = bed();
    bed.kube().git_accepts(Some(NEW_PASSWORD));
    let first = run(&bed, &fleet(&[])).await.unwrap();
    let (r, _) = first.recheck.clone().expect("confirming");
    assert_eq!(first.flux.as_ref().unwrap().suspect, Some(Outcome::GitAuth));
    corrected(&bed);
    let rep = bed.recheck(&r, Target::Eks, None).await.unwrap();
    let flux = rep.flux.unwrap();
    assert_eq!(flux.outcome, Outcome::Ready, "{flux:?}");
    assert_eq!(flux.git_secret.unwrap().action, GitSecretAction::Reapplied);
    assert!(rep.recheck.is_none());
}

#[tokio::test]
async fn an_operator_cells_pull_secret_is_applied_again_when_it_changed() {
    let bed = now_final();
    bed.kube().git_accepts(Some(NEW_PASSWORD));
    let instance = INSTANCE.replace("pullSecret: flux-system", "pullSecret: fleet-git");
    let fleet = operator_fleet(&instance);
    let first = run(&bed, &fleet).await.unwrap();
    assert_eq!(first.flux.as_ref().unwrap().outcome, Outcome::GitAuth);
    corrected(&bed);
    let fixed = run(&bed, &fleet).await.unwrap();
    let flux = fixed.flux.as_ref().unwrap();
    assert_eq!(flux.outcome, Outcome::Ready, "{flux:?}");
    assert_eq!(flux.git_secret.as_ref().unwrap().secret, "flux-system/fleet-git");
    let applied = bed.kube().applied();
    let instances = applied.iter().filter(|a| a.starts_with("FluxInstance")).count();
    assert_eq!(instances, 1, "the FluxInstance is applied once: {applied:?}");
}

#[tokio::test]
async fn a_git_repository_reading_another_secret_is_never_written_to() {
    let bed = now_final();
    bed.kube().git_accepts(Some(NEW_PASSWORD));
    let fleet = fleet(&[]);
    run(&bed, &fleet).await.unwrap();
    // Someone pointed the GitRepository at a Secret of theirs (say, external-secrets').
    let mut repo = bed
        .kube()
        .get(REGION, CLUSTER, "GitRepository", Some("flux-system"), "flux-system")
        .unwrap();
    repo["spec"]["secretRef"]["name"] = json!("theirs");
    bed.kube().put(REGION, CLUSTER, repo);
    corrected(&bed);
    let applied = bed.kube().applied();
    let rep = bed
        .run(
            &fleet,
            &Request {
                force: false,
                ..request()
            },
            Target::Eks,
        )
        .await
        .unwrap();
    let flux = rep.flux.unwrap();
    assert_eq!(flux.outcome, Outcome::GitAuth, "{flux:?}");
    let check = flux.git_secret.unwrap();
    assert_eq!(check.action, GitSecretAction::NotCompared);
    assert!(check.why.contains("reads Secret flux-system/theirs"), "{}", check.why);
    assert_eq!(bed.kube().applied(), applied, "nothing applied");
}
