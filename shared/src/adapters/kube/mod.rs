//! The Kubernetes side: a client that trusts the cluster's CA and renews its EKS token, and
//! server-side apply of any kind through discovery, with bounded retries.
//!
//! Files: `session` (the client: CA, EKS token, renewal, timeouts), `calls` (one Kubernetes call
//! with retries, and what its failures mean), this file (discovery and server-side apply),
//! `wait` (CRDs Established, the GitRepository Ready), `observe` (what the cluster reports about
//! Flux, for the confirmation), `objects` (one object read, a reconcile asked for).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde::Serialize;
use serde_json::Value;

use crate::ports::cluster::kube::{Applied, ApplyError, ClusterAuth, Observe, Tuning};
use crate::ports::cluster::{KubeApi, KubeConnect};
use crate::pure::bootstrap::confirm::Snapshot;
use crate::pure::bootstrap::plan::{KubeRef, Phase, Step};

mod calls;
mod objects;
mod observe;
mod session;
pub mod token;
mod wait;

pub use session::{Session, pem_to_der};

use calls::retry;

pub const FIELD_MANAGER: &str = "cellbridge";

/// Applies steps with server-side apply, resolving each kind through discovery once per
/// group/version.
pub struct Applier {
    pub(super) session: Session,
    pub(super) manager: String,
    pub(super) discovered: HashMap<String, Vec<(ApiResource, ApiCapabilities)>>,
}

pub(super) fn crd_resource() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

pub(super) fn split_api_version(av: &str) -> (&str, &str) {
    match av.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", av),
    }
}

/// How long a kind a CRD just brought is looked for in discovery before it is called unknown.
const DISCOVERY_WAIT: Duration = Duration::from_secs(10);

impl Applier {
    pub fn new(session: Session) -> Self {
        Self {
            session,
            manager: FIELD_MANAGER.into(),
            discovered: HashMap::new(),
        }
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub(super) async fn resolve(
        &mut self,
        target: &KubeRef,
        after_crds: bool,
    ) -> Result<(ApiResource, ApiCapabilities), ApplyError> {
        let (group, version) = split_api_version(&target.api_version);
        let key = target.api_version.clone();
        let find =
            |list: &Vec<(ApiResource, ApiCapabilities)>| list.iter().find(|(ar, _)| ar.kind == target.kind).cloned();
        if let Some(hit) = self.discovered.get(&key).and_then(find) {
            return Ok(hit);
        }
        // A CRD's kinds can reach discovery a moment after it is Established: look again for a
        // while before calling the kind unknown. A while in time, not a number of looks: a fast
        // API server answers thirty looks long before a slow aggregator has caught up.
        let until = after_crds.then(|| std::time::Instant::now() + DISCOVERY_WAIT);
        let gv = kube::core::GroupVersion::gv(group, version);
        loop {
            let client = self.session.client().await?;
            let tstr = target.to_string();
            let res = retry(&self.session, "discover", &tstr, false, || {
                kube::discovery::pinned_group(&client, &gv)
            })
            .await;
            match res {
                Ok(g) => {
                    let list = g.versioned_resources(version);
                    let hit = find(&list);
                    self.discovered.insert(key.clone(), list);
                    if let Some(hit) = hit {
                        return Ok(hit);
                    }
                }
                Err(ApplyError::Api { code: 404, .. }) => {}
                Err(e) => return Err(e),
            }
            let pause = self.session.tuning.poll.min(Duration::from_millis(300));
            match until {
                Some(until) if std::time::Instant::now() + pause < until => tokio::time::sleep(pause).await,
                _ => break,
            }
        }
        Err(ApplyError::UnknownKind {
            target: target.to_string(),
            api_version: target.api_version.clone(),
            kind: target.kind.clone(),
            hint: if group.ends_with(".k8s.io") || group.is_empty() || group == "apps" {
                ""
            } else {
                " (is its CRD in the cell's Flux manifests, gotk-components.yaml or the Flux Operator's install manifest?)"
            },
        })
    }
}

/// The real [`KubeConnect`]: kube-rs clients ([`Session`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Kubes;

impl KubeConnect for Kubes {
    type Api = Applier;

    async fn connect(&self, auth: ClusterAuth, tuning: &Tuning, fresh_entry: bool) -> Result<Applier, ApplyError> {
        Ok(Applier::new(Session::connect(auth, tuning.clone(), fresh_entry).await?))
    }
}

impl KubeApi for Applier {
    async fn exists(&mut self, target: &KubeRef, plural: &str) -> Result<bool, ApplyError> {
        let (group, version) = split_api_version(&target.api_version);
        let ar = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: target.api_version.clone(),
            kind: target.kind.clone(),
            plural: plural.into(),
        };
        let client = self.session.client().await?;
        let api: Api<DynamicObject> = match &target.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &ar),
            None => Api::all_with(client, &ar),
        };
        let tstr = target.to_string();
        let found = retry(&self.session, "get", &tstr, false, || api.get_opt(&target.name)).await;
        match found {
            Ok(o) => Ok(o.is_some()),
            // A group that does not exist yet answers 404 with a plain-text page.
            Err(ApplyError::Api { code: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn apply(&mut self, step: &Step) -> Result<Applied, ApplyError> {
        let after_crds = step.phase > Phase::Crd;
        let (ar, caps) = self.resolve(&step.target, after_crds).await?;
        let client = self.session.client().await?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client, &ar),
            Scope::Namespaced => {
                let ns = step
                    .target
                    .namespace
                    .clone()
                    .unwrap_or_else(|| self.session.default_namespace.clone());
                Api::namespaced_with(client, &ns, &ar)
            }
        };
        let pp = PatchParams::apply(&self.manager).force();
        let target = step.target.to_string();
        let quiet = step.phase == Phase::GitSecret;
        let patch = Patch::Apply(Opaque(step.object()));
        retry(&self.session, "apply", &target, quiet, || {
            api.patch(&step.target.name, &pp, &patch)
        })
        .await?;
        tracing::info!(phase = step.phase.describe(), object = %target, "applied");
        Ok(Applied {
            phase: step.phase,
            target: step.target.clone(),
        })
    }

    async fn wait_established(&mut self, crds: &[String]) -> Result<(), ApplyError> {
        self.established(crds).await
    }

    async fn observe(&mut self, what: &Observe) -> Result<Snapshot, ApplyError> {
        self.observe_flux(what).await
    }

    async fn get(&mut self, target: &KubeRef, plural: &str) -> Result<Option<Value>, ApplyError> {
        self.get_object(target, plural).await
    }

    async fn annotate(
        &mut self,
        target: &KubeRef,
        plural: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), ApplyError> {
        self.annotate_object(target, plural, annotations).await
    }
}

/// Serializes as the JSON it holds; `Debug` never shows it (a Step may carry credentials).
pub(super) struct Opaque<'a>(&'a Value);

impl Serialize for Opaque<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl fmt::Debug for Opaque<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<object>")
    }
}
