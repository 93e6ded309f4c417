//! One reading of what a cluster reports about Flux ([`KubeApi::observe`]), mapped into the
//! classifier's [`Snapshot`]: the namespace's Deployments and Pods, the number of Nodes, and the
//! Flux objects by name. GETs only, through the same retries and error classes as every other
//! call (`calls`).
//!
//! [`KubeApi::observe`]: crate::ports::cluster::KubeApi::observe

use k8s_openapi::api::apps::v1::Deployment as KubeDeployment;
use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod as KubePod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::Value;

use super::calls::retry;
use super::{Applier, ApplyError};
use crate::ports::cluster::kube::Observe;
use crate::pure::bootstrap::confirm::{Condition, ConditionStatus, Deployment, FluxObject, Pod, Snapshot, Waiting};

/// A Flux kind read without discovery: the group may not be served at all (no FluxInstance
/// CRD on a components cell), which must read as absent, and discovery would make that a
/// request per group on every check.
pub(super) struct FluxKind {
    pub(super) api_version: &'static str,
    pub(super) kind: &'static str,
    pub(super) plural: &'static str,
    /// Where the object says which revision it holds: the GitRepository's fetched artifact
    /// (source-controller `docs/spec/v1/gitrepositories.md`, "Artifact"), the Kustomization's and
    /// FluxInstance's last applied one (kustomize-controller `docs/spec/v1/kustomizations.md`,
    /// "Last applied revision"; flux-operator `docs/api/v1/fluxinstance.md`).
    pub(super) revision: &'static str,
}

pub(super) const GIT_REPOSITORY: FluxKind = FluxKind {
    api_version: "source.toolkit.fluxcd.io/v1",
    kind: "GitRepository",
    plural: "gitrepositories",
    revision: "/status/artifact/revision",
};

pub(super) const KUSTOMIZATION: FluxKind = FluxKind {
    api_version: "kustomize.toolkit.fluxcd.io/v1",
    kind: "Kustomization",
    plural: "kustomizations",
    revision: "/status/lastAppliedRevision",
};

/// source-controller's other sources a FluxInstance may sync from (flux-operator v0.58.1
/// `api/v1/fluxinstance_types.go`, `Sync.Kind`: `OCIRepository`, `GitRepository`, `Bucket`), each
/// with its fetched artifact's revision (source-controller v1.9.1 `docs/spec/v1/ocirepositories.md`
/// and `buckets.md`, "Artifact").
pub(super) const OCI_REPOSITORY: FluxKind = FluxKind {
    api_version: "source.toolkit.fluxcd.io/v1",
    kind: "OCIRepository",
    plural: "ocirepositories",
    revision: "/status/artifact/revision",
};

pub(super) const BUCKET: FluxKind = FluxKind {
    api_version: "source.toolkit.fluxcd.io/v1",
    kind: "Bucket",
    plural: "buckets",
    revision: "/status/artifact/revision",
};

pub(super) const FLUX_INSTANCE: FluxKind = FluxKind {
    api_version: "fluxcd.controlplane.io/v1",
    kind: "FluxInstance",
    plural: "fluxinstances",
    revision: "/status/lastAppliedRevision",
};

/// Nodes per page: a count needs no more than the list's metadata, and a large cluster's
/// Nodes are not worth holding at once.
const NODE_PAGE: u32 = 100;

impl Applier {
    pub(super) async fn observe_flux(&mut self, what: &Observe) -> Result<Snapshot, ApplyError> {
        let ns = what.namespace.as_str();
        let client = self.session.client().await?;
        let lp = ListParams::default();

        let deployments: Api<KubeDeployment> = Api::namespaced(client.clone(), ns);
        let target = format!("Deployments {ns}");
        let list = retry(&self.session, "list", &target, false, || deployments.list(&lp)).await?;
        let deployments = list.items.iter().map(deployment).collect();

        let pods: Api<KubePod> = Api::namespaced(client.clone(), ns);
        let target = format!("Pods {ns}");
        let list = retry(&self.session, "list", &target, false, || pods.list(&lp)).await?;
        let pods = list.items.iter().map(pod).collect();

        let nodes = self.count_nodes().await?;
        // An operator cell's sync objects are the ones its FluxInstance names, as the operator
        // made them; before the instance is there, the ones the bootstrap applied it with.
        let (flux_instance, sync) = match &what.flux_instance {
            Some(name) => match self.get_dynamic(&FLUX_INSTANCE, ns, name).await? {
                Some(o) => (
                    Some(flux_object(&FLUX_INSTANCE, o.metadata.generation, &o.data)),
                    instance_sync(&o.data, ns),
                ),
                None => (None, None),
            },
            None => (None, None),
        };
        let (source, source_name, ks_name) = match &sync {
            Some((kind, name)) => (*kind, name.as_str(), name.as_str()),
            None => (
                &GIT_REPOSITORY,
                what.git_repository.as_str(),
                what.kustomization.as_str(),
            ),
        };
        let git_repository = self.flux_object(source, ns, source_name).await?;
        let kustomization = self.flux_object(&KUSTOMIZATION, ns, ks_name).await?;
        Ok(Snapshot {
            source_kind: source.kind.to_owned(),
            sync_name: ks_name.to_owned(),
            controllers: what.controllers.clone(),
            deployments,
            pods,
            nodes,
            git_repository,
            kustomization,
            operator: what.flux_instance.is_some(),
            flux_instance,
            secrets: Vec::new(),
        })
    }

    /// The Nodes, counted from their metadata only, page by page; the API server's
    /// `remainingItemCount` saves the other pages when it gives one. A continue token that
    /// expired mid-list (410 Gone) means starting the list again without it
    /// (<https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks>);
    /// once, so that a cluster compacting faster than it can be listed is an error, not a loop.
    async fn count_nodes(&mut self) -> Result<usize, ApplyError> {
        let client = self.session.client().await?;
        let api: Api<Node> = Api::all(client);
        let mut restarted = false;
        let mut count = 0usize;
        let mut lp = ListParams::default().limit(NODE_PAGE);
        loop {
            let page = match retry(&self.session, "list", "Nodes", false, || api.list_metadata(&lp)).await {
                Err(ApplyError::Api { code: 410, .. }) if lp.continue_token.is_some() && !restarted => {
                    restarted = true;
                    count = 0;
                    lp = ListParams::default().limit(NODE_PAGE);
                    continue;
                }
                page => page?,
            };
            count += page.items.len();
            match (page.metadata.continue_.as_deref(), page.metadata.remaining_item_count) {
                (Some(token), None) if !token.is_empty() => lp = lp.continue_token(token),
                (_, Some(rest)) => return Ok(count + usize::try_from(rest).unwrap_or(0)),
                _ => return Ok(count),
            }
        }
    }

    /// The named object, `None` when it is not there or its kind is not served: an API group
    /// no CRD defines answers 404 like an absent object.
    async fn flux_object(&mut self, kind: &FluxKind, ns: &str, name: &str) -> Result<Option<FluxObject>, ApplyError> {
        Ok(self
            .get_dynamic(kind, ns, name)
            .await?
            .map(|o| flux_object(kind, o.metadata.generation, &o.data)))
    }

    async fn get_dynamic(
        &mut self,
        kind: &FluxKind,
        ns: &str,
        name: &str,
    ) -> Result<Option<DynamicObject>, ApplyError> {
        let (group, version) = super::split_api_version(kind.api_version);
        let ar = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: kind.api_version.into(),
            kind: kind.kind.into(),
            plural: kind.plural.into(),
        };
        let client = self.session.client().await?;
        let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &ar);
        let target = format!("{} {ns}/{name}", kind.kind);
        match retry(&self.session, "get", &target, false, || api.get_opt(name)).await {
            Ok(o) => Ok(o),
            Err(ApplyError::Api { code: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn status(s: Option<&str>) -> ConditionStatus {
    ConditionStatus::parse(s.unwrap_or_default())
}

/// The Deployment's `Available` condition (apps/v1 `DeploymentCondition`).
pub(super) fn deployment(d: &KubeDeployment) -> Deployment {
    let available = d
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_.as_deref() == Some("Available")))
        .map(|c| Condition {
            status: status(c.status.as_deref()),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            observed_generation: None,
        });
    Deployment {
        name: d.metadata.name.clone().unwrap_or_default(),
        available,
    }
}

/// The pod's phase, `PodScheduled` condition and waiting containers, init containers first as
/// the kubelet runs them.
pub(super) fn pod(p: &KubePod) -> Pod {
    let st = p.status.as_ref();
    let scheduled = st
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .map(|c| Condition {
            status: status(Some(&c.status)),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            observed_generation: c.observed_generation,
        });
    let containers = st
        .into_iter()
        .flat_map(|s| s.init_container_statuses.iter().chain(s.container_statuses.iter()))
        .flatten();
    Pod {
        name: p.metadata.name.clone().unwrap_or_default(),
        phase: st.and_then(|s| s.phase.clone()).unwrap_or_default(),
        scheduled,
        waiting: containers.filter_map(waiting).collect(),
    }
}

fn waiting(c: &ContainerStatus) -> Option<Waiting> {
    let w = c.state.as_ref()?.waiting.as_ref()?;
    Some(Waiting {
        container: c.name.clone(),
        reason: w.reason.clone().unwrap_or_default(),
        message: w.message.clone().unwrap_or_default(),
    })
}

/// The source kind and name of the sync objects a FluxInstance makes from its `spec.sync`
/// (flux-operator v0.58.1 `api/v1/fluxinstance_types.go`, `Sync`: `kind`; `name`, "When not
/// specified, the name is set to the namespace name of the FluxInstance"); `None` without a
/// `spec.sync` or with a kind the operator does not sync from.
pub(super) fn instance_sync(data: &Value, ns: &str) -> Option<(&'static FluxKind, String)> {
    let sync = data.pointer("/spec/sync")?;
    let kind = match sync.get("kind").and_then(Value::as_str)? {
        "GitRepository" => &GIT_REPOSITORY,
        "OCIRepository" => &OCI_REPOSITORY,
        "Bucket" => &BUCKET,
        _ => return None,
    };
    let name = sync
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(ns);
    Some((kind, name.to_owned()))
}

/// A Flux object's generation, `status.observedGeneration`, `Ready` condition (a
/// `metav1.Condition`, with its own `observedGeneration`) and revision.
pub(super) fn flux_object(kind: &FluxKind, generation: Option<i64>, data: &Value) -> FluxObject {
    let ready = data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            Condition {
                status: ConditionStatus::parse(&s("status")),
                reason: s("reason"),
                message: s("message"),
                observed_generation: c.get("observedGeneration").and_then(Value::as_i64),
            }
        });
    FluxObject {
        generation,
        observed_generation: data.pointer("/status/observedGeneration").and_then(Value::as_i64),
        ready,
        revision: data.pointer(kind.revision).and_then(Value::as_str).map(str::to_owned),
    }
}

#[cfg(test)]
mod tests;
