//! Reading one object, and asking a controller to reconcile one: what a check does when the
//! source refuses the Git credentials ([`crate::rules::bootstrap::rekey`]). Reads through the
//! same retries and error classes as every other call (`calls`); the one write is a JSON merge
//! patch of `metadata.annotations` alone, as `flux reconcile` sends it (flux-operator v0.58.1
//! `cmd/cli/client.go`, `annotateResourceWithMap`: `client.MergeFrom` on the object's metadata),
//! so no field of the object is taken over by cellbridge's field manager.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::calls::retry;
use super::{Applier, ApplyError, split_api_version};
use crate::pure::bootstrap::plan::KubeRef;

impl Applier {
    fn api_for(&self, client: kube::Client, target: &KubeRef, plural: &str) -> Api<DynamicObject> {
        let (group, version) = split_api_version(&target.api_version);
        let ar = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: target.api_version.clone(),
            kind: target.kind.clone(),
            plural: plural.into(),
        };
        match &target.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &ar),
            None => Api::all_with(client, &ar),
        }
    }

    /// The object as the API server answers it; `None` when it is not there or its kind is not
    /// served. A Secret's read is quiet: its errors never carry the answer.
    pub(super) async fn get_object(&mut self, target: &KubeRef, plural: &str) -> Result<Option<Value>, ApplyError> {
        let client = self.session.client().await?;
        let api = self.api_for(client, target, plural);
        let tstr = target.to_string();
        let quiet = target.kind == "Secret";
        match retry(&self.session, "get", &tstr, quiet, || api.get_opt(&target.name)).await {
            Ok(o) => Ok(o.map(|o| serde_json::to_value(o).unwrap_or_default())),
            Err(ApplyError::Api { code: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn annotate_object(
        &mut self,
        target: &KubeRef,
        plural: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), ApplyError> {
        let client = self.session.client().await?;
        let api = self.api_for(client, target, plural);
        let tstr = target.to_string();
        let patch = Patch::Merge(json!({"metadata": {"annotations": annotations}}));
        let pp = PatchParams {
            field_manager: Some(self.manager.clone()),
            ..PatchParams::default()
        };
        retry(&self.session, "annotate", &tstr, false, || {
            api.patch(&target.name, &pp, &patch)
        })
        .await?;
        tracing::info!(object = %tstr, "annotated: {}", annotations.keys().cloned().collect::<Vec<_>>().join(", "));
        Ok(())
    }
}
