//! The clusters' Kubernetes APIs in memory, authenticating EKS tokens against [`MemAws`]'s
//! access entries.
//!
//! - The Kubernetes API authenticates an EKS token as the IAM principal that signed it: with no
//!   access entry the request is `401 Unauthorized`; with an entry but no access policy it is
//!   `403 Forbidden` (<https://docs.aws.amazon.com/eks/latest/userguide/access-policies.html>).
//! - Kubernetes serves the built-in groups; a custom kind only once a CRD defines its group,
//!   kind and version (<https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/>),
//!   and a namespaced object only in a namespace that exists (`404 NotFound`). Server-side apply
//!   creates or updates; the last applied object is kept
//!   (<https://kubernetes.io/docs/reference/using-api/server-side-apply/>).
//! - An object's status is its controller's to write, never the applier's
//!   (<https://kubernetes.io/docs/concepts/overview/working-with-objects/#object-spec-and-status>):
//!   what the cluster reports ([`Reported`]) is read only for objects that were applied, and a
//!   Deployment's pods exist only once the Deployment does (its ReplicaSet makes them,
//!   <https://kubernetes.io/docs/concepts/workloads/controllers/deployment/>). Nodes are not
//!   applied: they join.
//! - The Flux Operator makes the sync objects of a FluxInstance's `spec.sync` as soon as the
//!   instance is there (flux-operator v0.58.1 `internal/builder/templates.go`, `syncTmpl`).
//! - source-controller reads a GitRepository's Secret only when it reconciles it: when it is
//!   written, or asked to by a new `reconcile.fluxcd.io/requestedAt` annotation, whose value it
//!   then reports as `status.lastHandledReconcileAt` (source-controller v1.9.1
//!   `docs/spec/v1/gitrepositories.md`, "Triggering a reconcile"). With [`MemKube::git_accepts`]
//!   the Git server takes one credential value only, and refuses the others as a refused key.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use aws_credential_types::provider::ProvideCredentials;
use serde_json::Value;

use super::MemAws;
use crate::ports::cluster::kube::{Applied, ApplyError, ClusterAuth, Observe, Tuning};
use crate::ports::cluster::{KubeApi, KubeConnect};
use crate::pure::bootstrap::confirm::fixtures as upstream;
use crate::pure::bootstrap::confirm::{Condition, Deployment, FluxObject, Pod, Snapshot};
use crate::pure::bootstrap::plan::{KubeRef, Step};

/// A fault of the Kubernetes API: the next `times` calls of `operation` (`get`, `apply`,
/// `list`) on objects of `kind` answer HTTP `code`.
#[derive(Debug, Clone)]
struct KubeFault {
    operation: &'static str,
    kind: String,
    times: usize,
    code: u16,
}

type ObjectKey = (String, String, Option<String>, String);

/// A cluster: its region and name.
type ClusterKey = (String, String);

/// A GitRepository's last reconcile: its Secret accepted, the reconcile request it handled.
type Reconciled = (bool, Option<String>);

#[derive(Default)]
struct KubeWorld {
    objects: BTreeMap<(String, String), BTreeMap<ObjectKey, Value>>,
    applied: Vec<String>,
    faults: Vec<KubeFault>,
    kubeconfigs: BTreeMap<PathBuf, (String, String)>,
    stuck_crds: BTreeSet<String>,
    reported: Reported,
    /// The one credential value the Git server accepts; `None`: the reported status decides.
    git_accepts: Option<String>,
    /// Each GitRepository's last reconcile: whether its Secret held the accepted value, and the
    /// reconcile request it handled.
    reconciled: BTreeMap<(ClusterKey, ObjectKey), Reconciled>,
}

/// The revision a working cluster's GitRepository fetched and its Kustomization applied, unless
/// a test says otherwise.
pub const SYNCED_REVISION: &str = "main@sha1:0000000000000000000000000000000000000000";

/// What the cluster's own controllers report about the objects applied to it (kube-controller-
/// manager, the scheduler, the kubelet, Flux) and how many Nodes joined: one report for every
/// cluster of a [`MemKube`], as each test runs one. Without a test's word the cluster works: two
/// Nodes, every Deployment Available with one Running pod, the GitRepository Ready at
/// [`SYNCED_REVISION`], the Kustomization Ready having applied it, the FluxInstance Ready: upstream's
/// shapes for each ([`upstream`]).
#[derive(Clone)]
struct Reported {
    nodes: usize,
    /// The `Available` condition by Deployment name; absent: Available.
    available: BTreeMap<String, Option<Condition>>,
    /// The pods of a Deployment, by its name; absent: one Running pod.
    pods: BTreeMap<String, Vec<Pod>>,
    git_repository: FluxObject,
    kustomization: FluxObject,
    flux_instance: FluxObject,
}

impl Default for Reported {
    fn default() -> Self {
        Reported {
            nodes: 2,
            available: BTreeMap::new(),
            pods: BTreeMap::new(),
            git_repository: upstream::git_ready(SYNCED_REVISION),
            kustomization: upstream::kustomization_ready(SYNCED_REVISION),
            flux_instance: upstream::flux_instance_ready(),
        }
    }
}

impl Reported {
    fn available(&self, deployment: &str) -> Option<Condition> {
        match self.available.get(deployment) {
            Some(set) => set.clone(),
            None => upstream::deployment_available(deployment).available,
        }
    }

    fn pods(&self, deployment: &str) -> Vec<Pod> {
        match self.pods.get(deployment) {
            Some(set) => set.clone(),
            // A ReplicaSet's pod: `<deployment>-<pod-template-hash>-<suffix>`.
            None => vec![upstream::pod_running(&format!("{deployment}-6d8f7b9c4-x2x7k"))],
        }
    }
}

/// The Kubernetes APIs of [`MemAws`]'s clusters.
#[derive(Clone)]
pub struct MemKube {
    aws: MemAws,
    world: Arc<Mutex<KubeWorld>>,
}

impl MemKube {
    /// Authenticates EKS tokens against `aws`'s access entries.
    pub fn new(aws: &MemAws) -> Self {
        Self {
            aws: aws.clone(),
            world: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, KubeWorld> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts an object in the cluster, as another client would (Flux already installed, say).
    pub fn put(&self, region: &str, cluster: &str, object: Value) {
        let key = object_key(&object).expect("an object with apiVersion, kind and metadata.name");
        store(&mut self.lock(), &(region.to_owned(), cluster.to_owned()), key, object);
    }

    /// The object, if the cluster has it.
    pub fn get(&self, region: &str, cluster: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let w = self.lock();
        w.objects
            .get(&(region.to_owned(), cluster.to_owned()))?
            .iter()
            .find(|((_, k, ns, n), _)| k == kind && ns.as_deref() == namespace && n == name)
            .map(|(_, v)| v.clone())
    }

    /// Every apply so far, in order, as `Kind namespace/name`.
    pub fn applied(&self) -> Vec<String> {
        self.lock().applied.clone()
    }

    /// A kubeconfig file that points at a cluster of [`MemAws`] (with admin credentials).
    pub fn kubeconfig(&self, path: &Path, region: &str, cluster: &str) {
        self.lock()
            .kubeconfigs
            .insert(path.to_owned(), (region.to_owned(), cluster.to_owned()));
    }

    pub fn fail(&self, operation: &'static str, kind: &str, times: usize, code: u16) {
        self.lock().faults.push(KubeFault {
            operation,
            kind: kind.to_owned(),
            times,
            code,
        });
    }

    /// The named CRD never becomes Established (its conversion webhook is broken, say).
    pub fn stuck_crd(&self, name: &str) {
        self.lock().stuck_crds.insert(name.to_owned());
    }

    /// The number of Nodes that joined the cluster (default 2).
    pub fn nodes(&self, count: usize) {
        self.lock().reported.nodes = count;
    }

    /// The Deployment `d.name`'s `Available` condition, once it is applied (e.g.
    /// `confirm::fixtures::deployment_unavailable`).
    pub fn deployment_status(&self, d: Deployment) {
        self.lock().reported.available.insert(d.name, d.available);
    }

    /// The pods the Deployment's ReplicaSet made, once the Deployment is applied (e.g.
    /// `confirm::fixtures::pod_image_pull_backoff`); none is a Deployment scaled to zero.
    pub fn pods(&self, deployment: &str, pods: Vec<Pod>) {
        self.lock().reported.pods.insert(deployment.to_owned(), pods);
    }

    /// The GitRepository's status once applied (e.g. `confirm::fixtures::git_key_refused()`);
    /// `generation` stands for the object's `metadata.generation`.
    pub fn git_repository_status(&self, o: FluxObject) {
        self.lock().reported.git_repository = o;
    }

    /// The Kustomization's status once applied (e.g.
    /// `confirm::fixtures::kustomization_strict_unset()`).
    pub fn kustomization_status(&self, o: FluxObject) {
        self.lock().reported.kustomization = o;
    }

    /// The FluxInstance's status once applied.
    pub fn flux_instance_status(&self, o: FluxObject) {
        self.lock().reported.flux_instance = o;
    }

    /// The Git server accepts only this credential value (a Secret's decoded value), each
    /// GitRepository reconciled again at once; a refused one reads as a refused key
    /// (`confirm::fixtures::git_key_refused`). `None`: the reported status decides again.
    pub fn git_accepts(&self, value: Option<&str>) {
        let mut w = self.lock();
        w.git_accepts = value.map(str::to_owned);
        // source-controller's next interval: every GitRepository is reconciled again.
        let repos: Vec<(ClusterKey, ObjectKey)> = w
            .objects
            .iter()
            .flat_map(|(c, objects)| {
                objects
                    .keys()
                    .filter(|k| k.1 == "GitRepository")
                    .map(move |k| (c.clone(), k.clone()))
            })
            .collect();
        for (cluster, key) in repos {
            reconcile_git(&mut w, &cluster, &key);
        }
    }
}

/// source-controller reconciling the GitRepository `key`: whether the Secret its `secretRef`
/// names holds the accepted value, and the reconcile request it handled.
fn reconcile_git(w: &mut KubeWorld, cluster: &(String, String), key: &ObjectKey) {
    let Some(objects) = w.objects.get(cluster) else { return };
    let Some(repo) = objects.get(key) else { return };
    let secret = repo
        .pointer("/spec/secretRef/name")
        .and_then(Value::as_str)
        .and_then(|name| objects.get(&("v1".to_owned(), "Secret".to_owned(), key.2.clone(), name.to_owned())));
    let b64 = base64::engine::general_purpose::STANDARD;
    let accepted = w.git_accepts.as_ref().is_some_and(|want| {
        secret.and_then(|s| s.get("data")?.as_object()).is_some_and(|data| {
            data.values()
                .filter_map(Value::as_str)
                .any(|v| base64::Engine::decode(&b64, v).is_ok_and(|d| d == want.as_bytes()))
        })
    });
    let handled = repo
        .pointer("/metadata/annotations/reconcile.fluxcd.io~1requestedAt")
        .and_then(Value::as_str)
        .map(str::to_owned);
    w.reconciled.insert((cluster.clone(), key.clone()), (accepted, handled));
}

/// The GitRepository and Kustomization the Flux Operator makes from a FluxInstance's `spec.sync`
/// (flux-operator v0.58.1 `internal/builder/templates.go`, `syncTmpl`), once it is there.
fn operator_makes(instance: &Value) -> Vec<Value> {
    let Some(sync) = instance.pointer("/spec/sync") else {
        return Vec::new();
    };
    let s = |k: &str| sync.get(k).and_then(Value::as_str).unwrap_or_default();
    let ns = instance
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("flux-system");
    let name = Some(s("name")).filter(|n| !n.is_empty()).unwrap_or(ns);
    let mut spec = serde_json::json!({"interval": Some(s("interval")).filter(|i| !i.is_empty()).unwrap_or("1m"),
                                      "ref": {"name": s("ref")}, "url": s("url")});
    if !s("pullSecret").is_empty() {
        spec["secretRef"] = serde_json::json!({"name": s("pullSecret")});
    }
    if !s("provider").is_empty() {
        spec["provider"] = serde_json::json!(s("provider"));
    }
    vec![
        serde_json::json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": s("kind"),
                           "metadata": {"name": name, "namespace": ns}, "spec": spec}),
        serde_json::json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                           "metadata": {"name": name, "namespace": ns},
                           "spec": {"interval": "10m0s", "path": s("path"), "prune": true,
                                    "sourceRef": {"kind": s("kind"), "name": name}}}),
    ]
}

/// Stores `object` in `cluster`, with what the cluster's controllers do about it.
fn store(w: &mut KubeWorld, cluster: &(String, String), key: ObjectKey, object: Value) {
    let made = if key.1 == "FluxInstance" {
        operator_makes(&object)
    } else {
        Vec::new()
    };
    let objects = w.objects.entry(cluster.clone()).or_default();
    let mut repos = Vec::new();
    if key.1 == "GitRepository" {
        repos.push(key.clone());
    }
    objects.insert(key, object);
    for o in made {
        if let Some(k) = object_key(&o) {
            if k.1 == "GitRepository" && !objects.contains_key(&k) {
                repos.push(k.clone());
            }
            objects.entry(k).or_insert(o);
        }
    }
    for k in repos {
        reconcile_git(w, cluster, &k);
    }
}

fn key_of(t: &KubeRef) -> ObjectKey {
    (
        t.api_version.clone(),
        t.kind.clone(),
        t.namespace.clone(),
        t.name.clone(),
    )
}

fn object_key(object: &Value) -> Option<ObjectKey> {
    let s = |p: &str| object.pointer(p).and_then(Value::as_str).map(str::to_owned);
    Some((
        s("/apiVersion")?,
        s("/kind")?,
        s("/metadata/namespace"),
        s("/metadata/name")?,
    ))
}

/// Groups every Kubernetes API server serves without a CRD.
fn built_in(group: &str) -> bool {
    group.is_empty() || group == "apps" || group == "batch" || group == "policy" || group.ends_with(".k8s.io")
}

/// Kinds of the built-in groups that are cluster-scoped.
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "StorageClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
];

impl KubeConnect for MemKube {
    type Api = MemKubeApi;

    async fn connect(&self, auth: ClusterAuth, _tuning: &Tuning, _fresh_entry: bool) -> Result<MemKubeApi, ApplyError> {
        let (region, cluster, principal) = match auth {
            ClusterAuth::Eks {
                credentials,
                region,
                cluster,
                ..
            } => {
                let creds = credentials
                    .provide_credentials()
                    .await
                    .map_err(|e| ApplyError::Connect {
                        reason: format!("no AWS credentials to sign the EKS token: {e}"),
                    })?;
                (region, cluster, Some(creds.access_key_id().to_owned()))
            }
            ClusterAuth::Kubeconfig(path) => {
                let (region, cluster) =
                    self.lock()
                        .kubeconfigs
                        .get(&path)
                        .cloned()
                        .ok_or_else(|| ApplyError::Kubeconfig {
                            path: path.display().to_string(),
                            reason: "No such file or directory (os error 2)".into(),
                        })?;
                (region, cluster, None)
            }
        };
        Ok(MemKubeApi {
            kube: self.clone(),
            cluster: (region, cluster),
            principal,
        })
    }
}

/// One connection to a [`MemKube`] cluster.
pub struct MemKubeApi {
    kube: MemKube,
    cluster: (String, String),
    /// `None`: a kubeconfig's own credentials, always accepted.
    principal: Option<String>,
}

impl MemKubeApi {
    /// Authentication, then a matching fault, for one call.
    fn call(&self, operation: &'static str, target: &KubeRef) -> Result<(), ApplyError> {
        if let Some(p) = &self.principal
            && let Err(code) = self.kube.aws.authorize(&self.cluster.0, &self.cluster.1, p)
        {
            return Err(api_error(operation, target, code));
        }
        let mut w = self.kube.lock();
        if let Some(f) = w
            .faults
            .iter_mut()
            .find(|f| f.operation == operation && f.kind == target.kind && f.times > 0)
        {
            f.times -= 1;
            return Err(api_error(operation, target, f.code));
        }
        Ok(())
    }

    /// The CRD that serves `target`'s kind, if any: (its scope is namespaced).
    fn served(&self, objects: &BTreeMap<ObjectKey, Value>, target: &KubeRef) -> Option<bool> {
        let (group, version) = target.api_version.split_once('/').unwrap_or(("", &target.api_version));
        if built_in(group) {
            return Some(!CLUSTER_SCOPED.contains(&target.kind.as_str()));
        }
        objects.values().find_map(|crd| {
            let spec = crd.get("spec")?;
            let serves = crd.get("kind")? == "CustomResourceDefinition"
                && spec.get("group")? == group
                && spec.pointer("/names/kind")? == target.kind.as_str()
                && spec
                    .get("versions")?
                    .as_array()?
                    .iter()
                    .any(|v| v.get("name").and_then(Value::as_str) == Some(version));
            serves.then(|| spec.get("scope").and_then(Value::as_str) != Some("Cluster"))
        })
    }
}

fn api_error(operation: &'static str, target: &KubeRef, code: u16) -> ApplyError {
    let reason = match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        _ => "Unknown",
    };
    ApplyError::Api {
        operation,
        target: target.to_string(),
        code,
        reason: reason.into(),
        message: format!("{reason} (in memory)"),
    }
}

impl KubeApi for MemKubeApi {
    async fn exists(&mut self, target: &KubeRef, _plural: &str) -> Result<bool, ApplyError> {
        self.call("get", target)?;
        let w = self.kube.lock();
        let Some(objects) = w.objects.get(&self.cluster) else {
            return Ok(false);
        };
        let key = (
            target.api_version.clone(),
            target.kind.clone(),
            target.namespace.clone(),
            target.name.clone(),
        );
        Ok(objects.contains_key(&key))
    }

    async fn apply(&mut self, step: &Step) -> Result<Applied, ApplyError> {
        let target = &step.target;
        self.call("apply", target)?;
        let mut w = self.kube.lock();
        let objects = w.objects.entry(self.cluster.clone()).or_default();
        let Some(namespaced) = self.served(objects, target) else {
            let group = target.api_version.split_once('/').map_or("", |(g, _)| g);
            return Err(ApplyError::UnknownKind {
                target: target.to_string(),
                api_version: target.api_version.clone(),
                kind: target.kind.clone(),
                hint: if built_in(group) {
                    ""
                } else {
                    " (is its CRD in the cell's Flux manifests, gotk-components.yaml or the Flux Operator's install manifest?)"
                },
            });
        };
        let namespace = if namespaced {
            let ns = target.namespace.clone().unwrap_or_else(|| "default".into());
            let ns_exists = objects
                .keys()
                .any(|(av, k, _, n)| av == "v1" && k == "Namespace" && *n == ns);
            if !ns_exists {
                return Err(ApplyError::Api {
                    operation: "apply",
                    target: target.to_string(),
                    code: 404,
                    reason: "NotFound".into(),
                    message: format!("namespaces \"{ns}\" not found"),
                });
            }
            Some(ns)
        } else {
            None
        };
        let key = (
            target.api_version.clone(),
            target.kind.clone(),
            namespace,
            target.name.clone(),
        );
        store(&mut w, &self.cluster, key, step.object().clone());
        w.applied.push(match &target.namespace {
            Some(ns) => format!("{} {ns}/{}", target.kind, target.name),
            None => format!("{} {}", target.kind, target.name),
        });
        Ok(Applied {
            phase: step.phase,
            target: target.clone(),
        })
    }

    async fn wait_established(&mut self, crds: &[String]) -> Result<(), ApplyError> {
        let list = KubeRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: None,
            name: String::new(),
        };
        self.call("list", &list)?;
        let w = self.kube.lock();
        let objects = w.objects.get(&self.cluster);
        let pending: Vec<&str> = crds
            .iter()
            .filter(|name| {
                w.stuck_crds.contains(*name)
                    || !objects.is_some_and(|o| {
                        o.keys()
                            .any(|(_, k, _, n)| k == "CustomResourceDefinition" && n == *name)
                    })
            })
            .map(String::as_str)
            .collect();
        if pending.is_empty() {
            Ok(())
        } else {
            Err(ApplyError::CrdTimeout {
                pending: pending.join(", "),
                waited_secs: 0,
            })
        }
    }

    async fn get(&mut self, target: &KubeRef, _plural: &str) -> Result<Option<Value>, ApplyError> {
        self.call("get", target)?;
        let w = self.kube.lock();
        let key = key_of(target);
        let Some(mut o) = w.objects.get(&self.cluster).and_then(|o| o.get(&key)).cloned() else {
            return Ok(None);
        };
        if let Some((_, Some(handled))) = w.reconciled.get(&(self.cluster.clone(), key)) {
            o["status"]["lastHandledReconcileAt"] = Value::String(handled.clone());
        }
        Ok(Some(o))
    }

    async fn annotate(
        &mut self,
        target: &KubeRef,
        _plural: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), ApplyError> {
        self.call("patch", target)?;
        let mut w = self.kube.lock();
        let key = key_of(target);
        let Some(o) = w.objects.get_mut(&self.cluster).and_then(|o| o.get_mut(&key)) else {
            return Err(api_error("patch", target, 404));
        };
        for (k, v) in annotations {
            o["metadata"]["annotations"][k.as_str()] = Value::String(v.clone());
        }
        w.applied.push(format!(
            "annotate {} {}/{}",
            target.kind,
            target.namespace.as_deref().unwrap_or_default(),
            target.name
        ));
        if target.kind == "GitRepository" {
            let cluster = self.cluster.clone();
            reconcile_git(&mut w, &cluster, &key);
        }
        Ok(())
    }

    async fn observe(&mut self, what: &Observe) -> Result<Snapshot, ApplyError> {
        let ns = what.namespace.as_str();
        let at = |api_version: &str, kind: &str, name: &str| KubeRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: (kind != "Node").then(|| ns.to_owned()),
            name: name.into(),
        };
        for (api_version, kind) in [("apps/v1", "Deployment"), ("v1", "Pod"), ("v1", "Node")] {
            self.call("list", &at(api_version, kind, ""))?;
        }
        let instance = what
            .flux_instance
            .as_ref()
            .map(|name| at("fluxcd.controlplane.io/v1", "FluxInstance", name));
        if let Some(target) = &instance {
            self.call("get", target)?;
        }
        // The Flux Operator makes the sync objects its FluxInstance's `spec.sync` names (kind,
        // `name` else the instance's namespace: flux-operator v0.58.1 `api/v1/fluxinstance_types.go`).
        let sync = instance.as_ref().and_then(|t| {
            let w = self.kube.lock();
            let o = w.objects.get(&self.cluster)?.get(&key_of(t))?;
            let sync = o.pointer("/spec/sync")?;
            let kind = sync.get("kind").and_then(Value::as_str)?.to_owned();
            let name = sync
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .unwrap_or(ns);
            Some((kind, name.to_owned()))
        });
        let (source_kind, source_name, ks_name) = match &sync {
            Some((kind, name)) => (kind.as_str(), name.as_str(), name.as_str()),
            None => (
                "GitRepository",
                what.git_repository.as_str(),
                what.kustomization.as_str(),
            ),
        };
        let flux = [
            at("source.toolkit.fluxcd.io/v1", source_kind, source_name),
            at("kustomize.toolkit.fluxcd.io/v1", "Kustomization", ks_name),
        ];
        for target in &flux {
            self.call("get", target)?;
        }
        let w = self.kube.lock();
        let empty = BTreeMap::new();
        let objects = w.objects.get(&self.cluster).unwrap_or(&empty);
        let applied = |t: &KubeRef| objects.contains_key(&key_of(t));
        let names: Vec<&str> = objects
            .keys()
            .filter(|(av, k, n, _)| av == "apps/v1" && k == "Deployment" && n.as_deref() == Some(ns))
            .map(|(_, _, _, name)| name.as_str())
            .collect();
        let r = &w.reported;
        let reported = |t: &KubeRef, o: &FluxObject| applied(t).then(|| o.clone());
        let source = match w.reconciled.get(&(self.cluster.clone(), key_of(&flux[0]))) {
            Some((false, _)) if w.git_accepts.is_some() => applied(&flux[0]).then(upstream::git_key_refused),
            _ => reported(&flux[0], &r.git_repository),
        };
        Ok(Snapshot {
            source_kind: source_kind.to_owned(),
            sync_name: ks_name.to_owned(),
            controllers: what.controllers.clone(),
            deployments: names
                .iter()
                .map(|name| Deployment {
                    name: (*name).to_owned(),
                    available: r.available(name),
                })
                .collect(),
            pods: names.iter().flat_map(|name| r.pods(name)).collect(),
            nodes: r.nodes,
            git_repository: source,
            kustomization: reported(&flux[1], &r.kustomization),
            operator: what.flux_instance.is_some(),
            flux_instance: instance.as_ref().and_then(|t| reported(t, &r.flux_instance)),
            secrets: Vec::new(),
        })
    }
}
