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
        let git_repository = self.flux_object(&GIT_REPOSITORY, ns, &what.git_repository).await?;
        let kustomization = self.flux_object(&KUSTOMIZATION, ns, &what.kustomization).await?;
        let flux_instance = match &what.flux_instance {
            Some(name) => self.flux_object(&FLUX_INSTANCE, ns, name).await?,
            None => None,
        };
        Ok(Snapshot {
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
            Ok(o) => Ok(o.map(|o| flux_object(kind, o.metadata.generation, &o.data))),
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
