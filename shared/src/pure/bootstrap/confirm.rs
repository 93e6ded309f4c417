//! Whether Flux took over a cluster after the bootstrap applied it: what the cluster reports
//! ([`Snapshot`], filled by the caller on each check) and how long ago the apply was
//! ([`Timing`]) make one [`Verdict`]: `ready`, one named reason, or `confirming` while neither is
//! known yet.
//!
//! # Ready
//!
//! On a cell that applies gotk-components: every controller Deployment Available, and the
//! `flux-system` GitRepository and Kustomization both Ready=True for their current generation
//! (`status.observedGeneration == metadata.generation`, as `flux bootstrap` waits for in
//! flux2's `pkg/bootstrap/bootstrap.go`, `objectReconciled`) **at the same revision**: the
//! GitRepository's `status.artifact.revision` is the Kustomization's `status.lastAppliedRevision`.
//! A Kustomization still Ready at the old revision while the GitRepository fetched a new one has
//! not applied what is in Git yet.
//!
//! On a Flux Operator cell, first the FluxInstance as the operator reports it: its status has no
//! `observedGeneration` of its own (flux-operator v0.58.1 `api/v1/fluxinstance_types.go`,
//! `FluxInstanceStatus`), so the Ready condition's own `observedGeneration` must be the object's
//! generation, as the operator's CLI tests it (`cmd/cli/client.go`, `isReady`), with a
//! `lastAppliedRevision`. Then the sync objects the instance made from `spec.sync` (its source,
//! a GitRepository or OCIRepository, and the Kustomization, both named `spec.sync.name`), read as
//! for a plain cell: with `spec.wait: false` the operator reports Ready right after applying,
//! whatever the source does, so the instance alone would hide a refused key.
//!
//! # Reasons, in the order they cause each other
//!
//! Nodes before pods before images before Git before the build: a controller that never ran
//! leaves the GitRepository without a status, so the first cause found is the one reported.
//!
//! - `no-nodes`: zero Nodes, or a controller pod Pending with the scheduler saying there is no
//!   node at all (`no nodes available to schedule pods`, kube-scheduler's `ErrNoNodesAvailable`).
//! - `unschedulable`: a controller pod Pending, PodScheduled=False reason `Unschedulable`: the
//!   scheduler's message names what it cannot satisfy (a taint, a selector).
//! - `image-pull`: a container waiting with `ImagePullBackOff`, `ErrImagePull` or
//!   `InvalidImageName` (kubelet's `pkg/kubelet/images/types.go`).
//! - `git-auth`: the GitRepository not Ready because the credentials were refused or missing.
//!   source-controller says so in two ways: reason `AuthenticationFailed` when it cannot build
//!   credentials (the secret missing or invalid), and reason `GitOperationFailed` when the server
//!   refuses them during the clone, with go-git's words in the message (`authentication
//!   required`, `authorization failed`, ssh's `unable to authenticate`). A `repository not found`
//!   counts here too: GitHub answers a private repository as not found to credentials that may
//!   not read it, and the URL was checked before the apply.
//! - `git-unreachable`: the GitRepository not Ready because the remote could not be reached:
//!   resolution, connection, timeout or TLS failures, whatever the reason beside them (a GitHub
//!   App token fetched over a broken network is reported `AuthenticationFailed`, yet it is the
//!   network).
//! - `build-failed`: the Kustomization Ready=False with `BuildFailed` (kustomize build, post-build
//!   substitution, decryption), or `ArtifactFailed` because its path is not in the artifact: the
//!   content in Git is wrong. A substitution whose ConfigMap or Secret is not found is not this:
//!   that object may still be on its way.
//! - `timed-out`: the deadline passed and none of the above explains it.
//!
//! # Final now, or only at the deadline
//!
//! Flux and the kubelet retry everything, so a failure seen once may heal. Two clocks decide:
//!
//! - **After the grace period** (`elapsed >= grace`): `git-auth`, `image-pull` and
//!   `build-failed`. They do not heal by waiting: a refused credential, an image name or a
//!   manifest change only when someone changes them. The grace covers the races of a fresh
//!   apply: source-controller reconciling before the Git secret exists (`failed to get secret`),
//!   a registry or pull-through cache answering late, a fix merged right after the apply.
//! - **Only at the deadline** (`elapsed >= deadline`): `no-nodes`, `unschedulable` and
//!   `git-unreachable`. On EKS Auto Mode and Karpenter every pod is Pending until a node is
//!   launched for it, and a network path (NAT, VPC endpoints, DNS) being built alongside the
//!   cluster fails until it is there: before the deadline these are the normal look of a cluster
//!   still coming up.
//! - `ready` is final at once; at the deadline every reason is final, and with none,
//!   `timed-out` carries the last thing seen.
//!
//! Before that, the verdict is `confirming`, with what is still awaited in words and the reason
//! it would become ([`Verdict::suspect`]).
//!
//! Every message is Kubernetes' or Flux's own text, redacted: the URLs in it lose their
//! credentials ([`redact::userinfo`]), the values the caller knows to be secret are cut, and a
//! value the API server quotes back (`Invalid value: "…"`) is not repeated.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pure::redact::{self, Secret};

/// How one bootstrap ends, in the product's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Ready,
    NoNodes,
    Unschedulable,
    ImagePull,
    GitAuth,
    GitUnreachable,
    BuildFailed,
    TimedOut,
    /// Not an end: the check is to be made again.
    Confirming,
}

impl Outcome {
    /// Every outcome, `confirming` last.
    pub const ALL: [Outcome; 9] = [
        Outcome::Ready,
        Outcome::NoNodes,
        Outcome::Unschedulable,
        Outcome::ImagePull,
        Outcome::GitAuth,
        Outcome::GitUnreachable,
        Outcome::BuildFailed,
        Outcome::TimedOut,
        Outcome::Confirming,
    ];

    /// The outcome named `name` ([`Self::as_str`]'s words).
    pub fn parse(name: &str) -> Option<Outcome> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ready => "ready",
            Outcome::NoNodes => "no-nodes",
            Outcome::Unschedulable => "unschedulable",
            Outcome::ImagePull => "image-pull",
            Outcome::GitAuth => "git-auth",
            Outcome::GitUnreachable => "git-unreachable",
            Outcome::BuildFailed => "build-failed",
            Outcome::TimedOut => "timed-out",
            Outcome::Confirming => "confirming",
        }
    }

    /// The CLI's exit code: 0 ready; 1 the content is wrong; 2 refused or invalid input;
    /// 3 retry later.
    ///
    /// `build-failed` is 1: Flux refused to build what is in Git, which is the verdict the
    /// strict check gives before a merge (1, "the strict check failed / content wrong"). The fix
    /// is a commit to the fleet repository, not other arguments to the CLI (2), and retrying
    /// without one builds the same content again (3). Keeping both on one code is what lets a
    /// caller compare them: a strict-substitution failure Flux reports while the check passed
    /// is the two disagreeing ([`Verdict::strict_substitution`]).
    ///
    /// `git-auth` is 2: the credentials given were refused. The node, image, network and
    /// deadline reasons are 3, and so is `confirming`, which is not an end.
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Ready => 0,
            Outcome::BuildFailed => 1,
            Outcome::GitAuth => 2,
            Outcome::NoNodes
            | Outcome::Unschedulable
            | Outcome::ImagePull
            | Outcome::GitUnreachable
            | Outcome::TimedOut
            | Outcome::Confirming => 3,
        }
    }

    /// Whether the outcome may be reported once the grace period is over, or only at the
    /// deadline (see the module's rules).
    fn final_after_grace(self) -> bool {
        matches!(self, Outcome::GitAuth | Outcome::ImagePull | Outcome::BuildFailed)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// As Kubernetes writes it; anything else is `Unknown`.
    pub fn parse(s: &str) -> ConditionStatus {
        match s {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        }
    }
}

/// One status condition, as `metav1.Condition` (Flux) or a Pod or Deployment condition carries
/// it. `observed_generation` is the condition's own, which Flux sets on every write (fluxcd/pkg
/// `runtime/conditions/setter.go`); Pod and Deployment conditions have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub status: ConditionStatus,
    pub reason: String,
    pub message: String,
    pub observed_generation: Option<i64>,
}

/// A Deployment of the flux-system namespace and its `Available` condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub name: String,
    pub available: Option<Condition>,
}

/// A container's `state.waiting`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    pub container: String,
    pub reason: String,
    pub message: String,
}

/// A pod of the flux-system namespace: `status.phase`, its `PodScheduled` condition and its
/// waiting containers (init containers too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    pub name: String,
    pub phase: String,
    pub scheduled: Option<Condition>,
    pub waiting: Vec<Waiting>,
}

/// A Flux object: GitRepository, Kustomization or FluxInstance. `revision` is the
/// GitRepository's `status.artifact.revision` or the Kustomization's `status.lastAppliedRevision`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FluxObject {
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub ready: Option<Condition>,
    pub revision: Option<String>,
}

/// What one check read from the cluster. An object `None` was not found (yet).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The kind of `git_repository`: `GitRepository` (empty: that) or, on an operator cell
    /// syncing from one, `OCIRepository` or `Bucket`.
    pub source_kind: String,
    /// The name of the source and the Kustomization (empty: `flux-system`): an operator cell's
    /// `spec.sync.name`.
    pub sync_name: String,
    /// The Deployments gotk-components applies to flux-system (or the operator's), by name.
    pub controllers: Vec<String>,
    pub deployments: Vec<Deployment>,
    pub pods: Vec<Pod>,
    pub nodes: usize,
    pub git_repository: Option<FluxObject>,
    pub kustomization: Option<FluxObject>,
    /// A Flux Operator cell: its FluxInstance decides `ready`.
    pub operator: bool,
    pub flux_instance: Option<FluxObject>,
    /// Values that must never appear in a sentence, such as the Git credentials written to the
    /// cluster: Flux may echo them in a message.
    pub secrets: Vec<Secret<String>>,
}

/// Where the check stands in time, counted from the apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `now - applied_at`.
    pub elapsed: Duration,
    pub grace: Duration,
    pub deadline: Duration,
}

/// The classifier's answer: the outcome and one redacted sentence saying why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub outcome: Outcome,
    pub sentence: String,
    /// While confirming: the reason seen that is not final yet.
    pub suspect: Option<Outcome>,
    /// What is still awaited, in words (empty once ready).
    pub awaited: Vec<String>,
    /// A `build-failed` that is Flux's strict post-build substitution refusing an unset
    /// variable: the strict check should have caught it, so the caller can say they disagree.
    pub strict_substitution: bool,
}

impl Verdict {
    /// Whether this ends the bootstrap: anything but `confirming`.
    pub fn is_final(&self) -> bool {
        self.outcome != Outcome::Confirming
    }
}

/// A reason seen on this check, with Flux's or Kubernetes' words.
struct Seen {
    outcome: Outcome,
    what: String,
    strict: bool,
}

/// The verdict for one check.
pub fn classify(snapshot: &Snapshot, timing: &Timing) -> Verdict {
    let clean = |s: &str| scrub(s, &snapshot.secrets);
    if let Some(sentence) = ready(snapshot) {
        return Verdict {
            outcome: Outcome::Ready,
            sentence: clean(&sentence),
            suspect: None,
            awaited: Vec::new(),
            strict_substitution: false,
        };
    }
    let awaited: Vec<String> = awaited(snapshot).iter().map(|a| clean(a)).collect();
    let seen = reason(snapshot);
    let at_deadline = timing.elapsed >= timing.deadline;
    let after_grace = timing.elapsed >= timing.grace;
    match seen {
        Some(seen) if at_deadline || (after_grace && seen.outcome.final_after_grace()) => Verdict {
            outcome: seen.outcome,
            sentence: clean(&seen.what),
            suspect: None,
            awaited,
            strict_substitution: seen.strict,
        },
        _ if at_deadline => Verdict {
            outcome: Outcome::TimedOut,
            sentence: clean(&format!(
                "The deadline passed before Flux took over; last seen: {}.",
                said(&awaited)
            )),
            suspect: None,
            awaited,
            strict_substitution: false,
        },
        seen => {
            let mut sentence = format!("Still confirming: waiting for {}.", said(&awaited));
            if let Some(seen) = &seen {
                sentence.push_str(&format!(" Seen, not final yet ({}): {}", seen.outcome, seen.what));
            }
            Verdict {
                outcome: Outcome::Confirming,
                sentence: clean(&sentence),
                suspect: seen.as_ref().map(|s| s.outcome),
                awaited,
                strict_substitution: seen.is_some_and(|s| s.strict),
            }
        }
    }
}

impl Snapshot {
    fn sync(&self) -> &str {
        if self.sync_name.is_empty() {
            "flux-system"
        } else {
            &self.sync_name
        }
    }

    /// `GitRepository flux-system`, or the operator's source.
    fn source(&self) -> String {
        let kind = if self.source_kind.is_empty() {
            "GitRepository"
        } else {
            &self.source_kind
        };
        format!("{kind} {}", self.sync())
    }

    fn kustomization_name(&self) -> String {
        format!("Kustomization {}", self.sync())
    }

    fn syncs_from_git(&self) -> bool {
        self.source_kind.is_empty() || self.source_kind == "GitRepository"
    }
}

fn said(awaited: &[String]) -> String {
    if awaited.is_empty() {
        "nothing reported".to_owned()
    } else {
        awaited.join("; ")
    }
}

/// `Some(sentence)` when Flux took over.
fn ready(s: &Snapshot) -> Option<String> {
    let instance = match s.operator {
        true => Some(s.flux_instance.as_ref().filter(|fi| instance_ready(fi))?),
        false => None,
    };
    let controllers = s.controllers.iter().all(|name| available(s, name));
    let (gr, ks) = (s.git_repository.as_ref()?, s.kustomization.as_ref()?);
    let revision = gr.revision.as_deref().filter(|r| !r.is_empty())?;
    let ks_name = s.kustomization_name();
    (controllers && ready_now(gr) && ready_now(ks) && ks.revision.as_deref() == Some(revision)).then(
        || match instance {
            Some(fi) => format!(
                "Flux took over: the FluxInstance is Ready at {} and {ks_name} applied revision {revision}.",
                fi.revision.as_deref().unwrap_or_default()
            ),
            None => format!("Flux took over: the controllers are available and {ks_name} applied revision {revision}."),
        },
    )
}

/// The FluxInstance Ready as flux-operator's own CLI tests it (v0.58.1 `cmd/cli/client.go`,
/// `isReady`): the Ready condition's `observedGeneration` is the object's `metadata.generation`
/// and its status `True`; and a `lastAppliedRevision`, the distribution it applied. An instance
/// without a generation or a condition generation is not Ready: nothing says it saw its spec.
fn instance_ready(fi: &FluxObject) -> bool {
    let Some(c) = fi.ready.as_ref() else { return false };
    let current = matches!((fi.generation, c.observed_generation), (Some(g), Some(seen)) if seen == g);
    current && c.status == ConditionStatus::True && fi.revision.as_deref().is_some_and(|r| !r.is_empty())
}

fn available(s: &Snapshot, name: &str) -> bool {
    s.deployments
        .iter()
        .find(|d| d.name == name)
        .and_then(|d| d.available.as_ref())
        .is_some_and(|c| c.status == ConditionStatus::True)
}

/// Ready=True for the object's current spec: flux2's bootstrap trusts no condition before
/// `status.observedGeneration` reached `metadata.generation`.
fn ready_now(o: &FluxObject) -> bool {
    let observed = match (o.generation, o.observed_generation) {
        (Some(g), Some(seen)) => seen >= g,
        (Some(_), None) => false,
        (None, _) => true,
    };
    observed && o.ready.as_ref().is_some_and(|c| c.status == ConditionStatus::True)
}

/// Ready=False about the current spec. On failure source-controller moves the condition's own
/// `observedGeneration`, not always the object's (docs/spec/v1/gitrepositories.md shows a
/// failing GitRepository with condition generation 2 and status generation 1), so the
/// condition's is the one to compare.
fn failing_now(o: &FluxObject) -> Option<&Condition> {
    let c = o.ready.as_ref().filter(|c| c.status == ConditionStatus::False)?;
    match (o.generation, c.observed_generation) {
        (Some(g), Some(seen)) if seen < g => None,
        _ => Some(c),
    }
}

/// The first cause, in causal order (see the module's list).
fn reason(s: &Snapshot) -> Option<Seen> {
    nodes(s)
        .or_else(|| images(s))
        .or_else(|| {
            s.git_repository
                .as_ref()
                .filter(|_| s.syncs_from_git())
                .and_then(|gr| git(gr, &s.source()))
        })
        .or_else(|| {
            s.kustomization
                .as_ref()
                .and_then(|ks| build(ks, &s.kustomization_name()))
        })
        .or_else(|| s.flux_instance.as_ref().filter(|_| s.operator).and_then(instance))
}

fn seen(outcome: Outcome, what: String) -> Option<Seen> {
    Some(Seen {
        outcome,
        what,
        strict: false,
    })
}

fn nodes(s: &Snapshot) -> Option<Seen> {
    if s.nodes == 0 {
        return seen(Outcome::NoNodes, "The cluster has no nodes.".to_owned());
    }
    let pending = s.pods.iter().filter(|p| p.phase == "Pending").find_map(|p| {
        let c = p.scheduled.as_ref()?;
        (c.status == ConditionStatus::False && c.reason == "Unschedulable").then_some((p, c))
    })?;
    let (pod, c) = pending;
    let none = c.message.contains("no nodes available to schedule pods") || c.message.starts_with("0/0 nodes");
    let outcome = if none { Outcome::NoNodes } else { Outcome::Unschedulable };
    seen(
        outcome,
        format!("Pod {} cannot be scheduled: {}", pod.name, one_line(&c.message)),
    )
}

const IMAGE_PULL: [&str; 3] = ["ImagePullBackOff", "ErrImagePull", "InvalidImageName"];

fn images(s: &Snapshot) -> Option<Seen> {
    s.pods.iter().find_map(|p| {
        let w = p.waiting.iter().find(|w| IMAGE_PULL.contains(&w.reason.as_str()))?;
        seen(
            Outcome::ImagePull,
            format!(
                "Container {} of pod {} cannot pull its image ({}): {}",
                w.container,
                p.name,
                w.reason,
                one_line(&w.message)
            ),
        )
    })
}

/// Words of a failure to reach the remote: Go's net and crypto/tls errors, which
/// source-controller wraps whatever reason it sets.
const UNREACHABLE: [&str; 12] = [
    "no such host",
    "i/o timeout",
    "connection refused",
    "connection reset",
    "network is unreachable",
    "no route to host",
    "context deadline exceeded",
    "tls handshake timeout",
    "temporary failure in name resolution",
    "server misbehaving",
    "dial tcp",
    "x509:",
];

/// go-git's transport errors (`plumbing/transport/common.go`), the ssh package's refusal, and
/// the messages Git hosts add to a 401/403.
const REFUSED: [&str; 7] = [
    "authentication required",
    "authorization failed",
    "unable to authenticate",
    "invalid auth method",
    "invalid username or password",
    "permission denied",
    "repository not found",
];

fn git(gr: &FluxObject, name: &str) -> Option<Seen> {
    let c = failing_now(gr)?;
    let lower = c.message.to_ascii_lowercase();
    let what = format!("{name} is not Ready ({}): {}", c.reason, one_line(&c.message));
    if UNREACHABLE.iter().any(|w| lower.contains(w)) {
        seen(Outcome::GitUnreachable, what)
    } else if c.reason == "AuthenticationFailed" || REFUSED.iter().any(|w| lower.contains(w)) {
        seen(Outcome::GitAuth, what)
    } else {
        None
    }
}

/// fluxcd/pkg `envsubst/template.go`: `errVarNotSet`.
const STRICT: &str = "variable not set (strict mode)";

fn build(ks: &FluxObject, name: &str) -> Option<Seen> {
    let c = failing_now(ks)?;
    let wrong = match c.reason.as_str() {
        // kustomize_varsub.go: a substituteFrom object not found yet is not the content.
        "BuildFailed" => !(c.message.contains("substitute from '") && c.message.contains("not found")),
        "ArtifactFailed" => c.message.starts_with("kustomization path not found"),
        _ => false,
    };
    wrong.then(|| Seen {
        outcome: Outcome::BuildFailed,
        what: format!("{name} failed ({}): {}", c.reason, one_line(&c.message)),
        strict: c.message.contains(STRICT),
    })
}

/// The operator's Ready=False `BuildFailed`: the FluxInstance's own manifests do not build
/// (flux-operator docs/api/v1/fluxinstance.md, "Stalled FluxInstance").
fn instance(fi: &FluxObject) -> Option<Seen> {
    let c = failing_now(fi).filter(|c| c.reason == "BuildFailed")?;
    seen(
        Outcome::BuildFailed,
        format!("FluxInstance failed (BuildFailed): {}", one_line(&c.message)),
    )
}

/// What keeps the check from `ready`, each in words.
fn awaited(s: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    if s.nodes == 0 {
        out.push("a node to join the cluster".to_owned());
    }
    for name in &s.controllers {
        match s.deployments.iter().find(|d| &d.name == name) {
            None => out.push(format!("Deployment {name} to exist")),
            Some(d) if !available(s, name) => {
                let why = d.available.as_ref().map(|c| one_line(&c.message)).unwrap_or_default();
                out.push(with(format!("Deployment {name} to be Available"), &why));
            }
            Some(_) => {}
        }
    }
    if s.operator && !s.flux_instance.as_ref().is_some_and(instance_ready) {
        out.push(object("FluxInstance", s.flux_instance.as_ref()));
    }
    let (gr, ks) = (s.git_repository.as_ref(), s.kustomization.as_ref());
    let ks_name = s.kustomization_name();
    if !gr.is_some_and(ready_now) {
        out.push(object(&s.source(), gr));
    }
    if !ks.is_some_and(ready_now) {
        out.push(object(&ks_name, ks));
    }
    if let (Some(gr), Some(ks)) = (gr, ks)
        && ready_now(gr)
        && ready_now(ks)
        && gr.revision != ks.revision
    {
        out.push(format!(
            "{ks_name} to apply revision {} (it last applied {})",
            gr.revision.as_deref().unwrap_or("none"),
            ks.revision.as_deref().unwrap_or("none")
        ));
    }
    out
}

fn object(name: &str, o: Option<&FluxObject>) -> String {
    let Some(o) = o else { return format!("{name} to exist") };
    let wanted = format!("{name} to be Ready");
    match (o.generation, o.observed_generation, o.ready.as_ref()) {
        (Some(g), seen, _) if seen.is_none_or(|s| s < g) && o.ready.is_none() => {
            format!("{wanted} (generation {g} not reconciled yet)")
        }
        (_, _, Some(c)) => with(wanted, &format!("{}: {}", c.reason, one_line(&c.message))),
        (_, _, None) => format!("{wanted} (no status yet)"),
    }
}

fn with(what: String, why: &str) -> String {
    if why.trim().is_empty() {
        what
    } else {
        format!("{what} ({why})")
    }
}

/// Kubernetes and Flux messages may span lines (a dry-run error per object); the sentence is
/// one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The sentence without secrets: URL credentials, the caller's known secret values, and values
/// the API server quotes back (apimachinery `field.Error`: `Invalid value: "…"`), which may be a
/// manifest's secret.
fn scrub(s: &str, secrets: &[Secret<String>]) -> String {
    let mut out = redact::userinfo(s);
    // A value of a few characters (a user name such as `git`) would blank common words.
    for secret in secrets.iter().map(|s| s.expose()).filter(|v| v.len() >= 4) {
        out = out.replace(secret.as_str(), "[redacted]");
    }
    quoted_values(&out)
}

fn quoted_values(s: &str) -> String {
    const MARK: &str = "Invalid value: \"";
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        out.push_str("Invalid value: [redacted]");
        let after = &rest[at + MARK.len()..];
        rest = closing_quote(after).map_or("", |end| &after[end + 1..]);
    }
    out.push_str(rest);
    out
}

/// The index of the quote closing a Go `%q` string, past its escapes.
fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// Upstream's status shapes, for the doubles and the rule tests too (feature `test-support`).
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
