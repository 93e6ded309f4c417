//! A changed Git credential applied without `force`: a check of a cluster Flux already owns that
//! finds the source refusing the credentials (`git-auth`, or suspected) compares the Flux Git
//! secret in Secrets Manager with the Secret the cluster holds. When they differ (someone put
//! corrected credentials in Secrets Manager since the apply), that Secret alone is applied again,
//! the GitRepository is asked to reconcile (`reconcile.fluxcd.io/requestedAt`, a merge patch of
//! that annotation only, as `flux reconcile` does it), and once its
//! `status.lastHandledReconcileAt` shows the request the cluster is judged again
//! (source-controller v1.9.1 `docs/spec/v1/gitrepositories.md`, "Triggering a reconcile";
//! flux-operator v0.58.1 `cmd/cli/client.go`, `isResourceReconciledFunc`). source-controller
//! reads the Secret only when it reconciles, so a Secret changed without the request would wait
//! for the source's interval.
//!
//! Fail closed, saying why in the report: nothing is applied when the Git secret the bootstrap
//! applied is not known, when the GitRepository reads another Secret than that one, when
//! Secrets Manager's value cannot be read or is not valid credentials for the GitRepository, or
//! when the cluster's Secret cannot be read. Only that Secret is written; Flux's own objects get
//! the annotation and nothing else. The values are compared in memory, never logged or reported.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_eks::primitives::{DateTime, DateTimeFormat};
use serde::Serialize;
use serde_json::Value;

use super::follow::{FluxReport, Start, watch};
use super::{Bootstrapper, gitsecret};
use crate::ports::cluster::kube::{ApplyError, Observe};
use crate::ports::cluster::{Accounts, KubeApi, KubeConnect};
use crate::ports::secrets::SecretStore;
use crate::pure::bootstrap::confirm::Outcome;
use crate::pure::bootstrap::gitsecret::FluxGitRepository;
use crate::pure::bootstrap::plan::{KubeRef, Phase, Step};
use crate::pure::redact::Secret;

/// The annotation Flux's controllers take as a request to reconcile now (fluxcd/pkg
/// `apis/meta`, `ReconcileRequestAnnotation`).
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// What a check did about credentials the source refused (`flux.git_secret` in the report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitSecretCheck {
    pub action: GitSecretAction,
    /// `flux-system/<name>`: the Secret compared.
    pub secret: String,
    /// Why, in words.
    pub why: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GitSecretAction {
    /// Secrets Manager held other credentials: the Secret was applied again and the source
    /// asked to reconcile.
    Reapplied,
    /// The cluster holds what Secrets Manager holds: nothing applied.
    Unchanged,
    /// Nothing compared, nothing applied (see `why`).
    NotCompared,
}

/// The GitRepository's `spec.url`, `spec.provider` and `spec.secretRef.name`.
fn repository(o: &Value) -> (FluxGitRepository, Option<String>) {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_owned);
    (
        FluxGitRepository {
            url: s("/spec/url").unwrap_or_default(),
            provider: s("/spec/provider"),
        },
        s("/spec/secretRef/name"),
    )
}

/// A reconcile request's value: the time, to the nanosecond, as `flux reconcile` writes it
/// (RFC 3339), so that two requests never read as one.
fn request_value() -> String {
    DateTime::from(SystemTime::now())
        .fmt(DateTimeFormat::DateTime)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

fn refused(flux: &FluxReport) -> bool {
    flux.outcome == Outcome::GitAuth || flux.suspect == Some(Outcome::GitAuth)
}

impl<A: Accounts, K: KubeConnect, S: SecretStore> Bootstrapper<A, K, S> {
    /// `flux` as it is when the source does not refuse the credentials; otherwise compared, and
    /// when Secrets Manager changed, re-applied and judged again within `wait`.
    pub(super) async fn rekey<C: KubeApi>(
        &self,
        kube: &mut C,
        what: &Observe,
        from: Start,
        flux: FluxReport,
        wait: Duration,
    ) -> Result<FluxReport, ApplyError> {
        if !refused(&flux) {
            return Ok(flux);
        }
        let ns = what.namespace.clone();
        let Some(name) = what.git_secret.clone() else {
            let why = "the Git secret the bootstrap applied is not known to this check: nothing applied; run the bootstrap with `force` to apply corrected credentials";
            return Ok(with_check(flux, GitSecretAction::NotCompared, "", why.to_owned()));
        };
        let secret = format!("{ns}/{name}");
        let not_compared = |flux, why: String| Ok(with_check(flux, GitSecretAction::NotCompared, &secret, why));
        let repo_ref = KubeRef {
            api_version: "source.toolkit.fluxcd.io/v1".into(),
            kind: "GitRepository".into(),
            namespace: Some(ns.clone()),
            name: what.git_repository.clone(),
        };
        let Some(repo) = kube.get(&repo_ref, "gitrepositories").await? else {
            return not_compared(flux, format!("{repo_ref} is not there: nothing applied"));
        };
        let (repository, reads) = repository(&repo);
        if reads.as_deref() != Some(name.as_str()) {
            let reads = reads.map_or_else(|| "no Secret".to_owned(), |r| format!("Secret {ns}/{r}"));
            return not_compared(
                flux,
                format!("{repo_ref} reads {reads}, not {secret} that cellbridge applied: nothing applied"),
            );
        }
        let Some(secret_name) = self.settings.flux_git_secret.as_deref() else {
            return not_compared(flux, "CELLBRIDGE_FLUX_GIT_SECRET is not set: nothing compared".into());
        };
        let credentials = match self.secrets.secret_string(secret_name).await {
            Ok(text) => gitsecret::parse(secret_name, text.expose(), &repository).map_err(|e| e.to_string()),
            Err(e) => Err(format!("Secrets Manager: {e}")),
        };
        let credentials = match credentials {
            Ok(c) => c,
            Err(e) => {
                return not_compared(
                    flux,
                    format!("the Flux Git secret could not be used ({e}): nothing applied"),
                );
            }
        };
        let secret_ref = KubeRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some(ns.clone()),
            name: name.clone(),
        };
        let held = kube.get(&secret_ref, "secrets").await?;
        if held.as_ref().is_some_and(|h| credentials.held_by(h)) {
            let why = format!(
                "the Flux Git secret in Secrets Manager ({secret_name}) is what Secret {secret} holds: nothing applied; put corrected credentials there and the next check applies them"
            );
            return Ok(with_check(flux, GitSecretAction::Unchanged, &secret, why));
        }
        let mut object = credentials.to_secret();
        object["metadata"]["name"] = Value::String(name.clone());
        object["metadata"]["namespace"] = Value::String(ns.clone());
        kube.apply(&Step::new(Phase::GitSecret, secret_ref, object)).await?;
        let requested = request_value();
        let annotation = BTreeMap::from([(REQUESTED_AT.to_owned(), requested.clone())]);
        kube.annotate(&repo_ref, "gitrepositories", &annotation).await?;
        tracing::warn!(secret = %secret, source = %repo_ref, "the Flux Git secret changed in Secrets Manager since it was applied: applied again, and the source asked to reconcile");
        let values: Vec<Secret<String>> = credentials.values().map(|v| Secret::new(v.to_owned())).collect();
        let handled = self.handled(kube, &repo_ref, &requested, wait).await?;
        let what_changed = format!(
            "the Flux Git secret in Secrets Manager ({secret_name}) changed since it was applied: Secret {secret} applied again and {repo_ref} asked to reconcile ({REQUESTED_AT} {requested})"
        );
        if !handled {
            let mut flux = watch(kube, what, from, &self.settings.confirm, Duration::ZERO, &values).await?;
            if flux.outcome == Outcome::GitAuth {
                // What is seen is the answer to the old credentials: not final yet.
                flux.outcome = Outcome::Confirming;
                flux.suspect = Some(Outcome::GitAuth);
            }
            let why = format!("{what_changed}; source-controller has not handled the request yet");
            return Ok(with_check(flux, GitSecretAction::Reapplied, &secret, why));
        }
        let flux = watch(kube, what, from, &self.settings.confirm, Duration::ZERO, &values).await?;
        let why = format!("{what_changed}, handled");
        Ok(with_check(flux, GitSecretAction::Reapplied, &secret, why))
    }

    /// Until the source's `status.lastHandledReconcileAt` is `requested`, for at most `wait`
    /// (one look at least).
    async fn handled<C: KubeApi>(
        &self,
        kube: &mut C,
        repo: &KubeRef,
        requested: &str,
        wait: Duration,
    ) -> Result<bool, ApplyError> {
        let start = Instant::now();
        loop {
            let seen = kube.get(repo, "gitrepositories").await?;
            let at = seen
                .as_ref()
                .and_then(|o| o.pointer("/status/lastHandledReconcileAt"))
                .and_then(Value::as_str);
            if at == Some(requested) {
                return Ok(true);
            }
            let poll = self.settings.confirm.poll.min(Duration::from_millis(500));
            if start.elapsed() + poll > wait {
                return Ok(false);
            }
            tokio::time::sleep(poll).await;
        }
    }
}

/// The report with what was done about the credentials, said first in its sentence.
fn with_check(mut flux: FluxReport, action: GitSecretAction, secret: &str, why: String) -> FluxReport {
    flux.sentence = format!("{} {}", capitalized(&why), flux.sentence);
    flux.git_secret = Some(GitSecretCheck {
        action,
        secret: secret.to_owned(),
        why,
    });
    flux
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), c.as_str()),
        None => String::new(),
    }
}
