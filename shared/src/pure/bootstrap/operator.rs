//! A Flux Operator cell: Flux installed by the Flux Operator from a `FluxInstance`, in the order
//! upstream's own Terraform bootstrap follows (controlplaneio-fluxcd/terraform-kubernetes-flux-operator-bootstrap
//! v0.8.0, `scripts/bootstrap.sh`: the target namespace, the managed secrets, the operator, a wait
//! until the CRD `fluxinstances.fluxcd.controlplane.io` is Established, then the FluxInstance,
//! created only if missing; from then on the operator installs Flux and syncs from `spec.sync`).
//! Upstream installs the operator from its Helm chart; cellbridge takes it from the fleet repo,
//! as it takes `gotk-components.yaml`: the version a cell runs is a commit.
//!
//! Which cell is one, and where its manifests are ([`read`]), by the rule state-sync and the
//! strict check follow ([`crate::pure::template::find_instance`]):
//! - the cell's own directory `clusters/<cell>/` holds a FluxInstance (in any YAML file below it,
//!   conventionally `flux-system/flux-instance.yaml`): the cell is an operator cell, applied as it
//!   is; a cell with a `flux-system/` of its own and no FluxInstance is `flux bootstrap`'s;
//! - else (a new cell, its pull request still open) the template `clusters/_template/` holds one:
//!   its FluxInstance is written for the cell exactly as the cell's pull request writes it
//!   ([`crate::pure::template::cell_sync`]: `spec.sync.path` and the configured URL and branch);
//! - the operator's install manifest is the YAML file below the same directory that defines the
//!   CRD `fluxinstances.fluxcd.controlplane.io` (the release's `install.yaml`: flux-operator
//!   `config/default/`, which `kubectl kustomize` builds into it). Not a file name: upstream's own
//!   fleet layout calls `flux-operator.yaml` the ResourceSet through which the operator later
//!   upgrades itself (flux-operator `config/terraform/clusters/staging/flux-system/`).
//!
//! Applied in order ([`OperatorCell::build`]): the Namespace `flux-system`, the operator's CRDs
//! (Established before the rest), its other objects in file order, the Git secret named by
//! `spec.sync.pullSecret`, then the FluxInstance. The FluxInstance is the cluster's owner
//! ([`OperatorCell::owner`]): once it exists the operator owns it, and a bootstrap applies nothing.
//!
//! Refused before anything is applied, each naming the file: a FluxInstance the operator would
//! reject (the rules of its CRD, [`check_instance`]); one cellbridge cannot bootstrap (no
//! `spec.sync`, a source other than Git, no `pullSecret`); a second FluxInstance; no manifest
//! defining the CRD, or two; an install manifest without the operator's Deployment; a FluxInstance
//! beside `gotk-components.yaml` or `gotk-sync.yaml` in one `flux-system` directory.

use serde_json::Value;

use super::gitsecret::{FluxGitRepository, GitCredentials};
use super::plan::{BootstrapPlanError, FLUX_NAMESPACE, KubeRef, Owner, Phase, Step, parse_objects};
use crate::pure::fleet::{FileMode, FleetRead};
use crate::pure::template::{
    self, CellSync, FluxGit, GOTK_COMPONENTS, GOTK_SYNC, TEMPLATE_DIR, TemplateError, find_instance,
};

/// The FluxInstance's API (flux-operator `api/v1/fluxinstance_types.go`).
pub const API_VERSION: &str = "fluxcd.controlplane.io/v1";
pub const KIND: &str = "FluxInstance";
/// `DefaultInstanceName`: the CRD's rule accepts no other.
pub const NAME: &str = "flux";
pub const PLURAL: &str = "fluxinstances";
/// The CRD that serves it, in the operator's install manifest.
pub const CRD: &str = "fluxinstances.fluxcd.controlplane.io";

/// An operator cell, read and checked: everything its bootstrap applies but the Git secret.
#[derive(Debug)]
pub struct OperatorCell {
    /// The directory it was read from: `clusters/<cell>`, or the template's.
    pub dir: String,
    /// The operator's install manifest.
    pub operator_file: String,
    /// Where the FluxInstance comes from; for the template's, `... (written for <cell>)`.
    pub instance_file: String,
    operator: Vec<(KubeRef, Value)>,
    instance: Value,
    sync: Sync,
}

/// `spec.sync`, as the Git credentials must fit it.
#[derive(Debug, Clone)]
struct Sync {
    url: String,
    provider: Option<String>,
    pull_secret: String,
    /// `spec.sync.name`, else the FluxInstance's namespace.
    name: String,
}

impl OperatorCell {
    /// The GitRepository the operator makes from `spec.sync` (flux-operator
    /// `internal/builder/templates.go`, `syncTmpl`: `url`, `provider`, `secretRef` the
    /// `pullSecret`): what the Git credentials are checked against.
    pub fn repository(&self) -> FluxGitRepository {
        FluxGitRepository {
            url: self.sync.url.clone(),
            provider: self.sync.provider.clone(),
        }
    }

    /// The Secret the operator's GitRepository reads its credentials from.
    pub fn pull_secret(&self) -> &str {
        &self.sync.pull_secret
    }

    /// The name of the GitRepository and Kustomization the operator makes from `spec.sync`
    /// (`spec.sync.name`, else the FluxInstance's namespace, `flux-system`), in `flux-system`.
    pub fn sync_name(&self) -> &str {
        &self.sync.name
    }

    /// The FluxInstance: once it exists, the operator owns the cluster.
    pub fn owner(&self) -> Owner {
        Owner {
            target: instance_ref(),
            plural: PLURAL,
        }
    }

    /// The bootstrap in apply order: the Namespace, the operator's CRDs, its other objects (file
    /// order), the Git secret named by `spec.sync.pullSecret`, the FluxInstance.
    pub fn build(self, credentials: &GitCredentials) -> Vec<Step> {
        let mut steps = Vec::with_capacity(self.operator.len() + 3);
        if !self
            .operator
            .iter()
            .any(|(r, _)| is_namespace(r) && r.name == FLUX_NAMESPACE)
        {
            let target = KubeRef {
                api_version: "v1".into(),
                kind: "Namespace".into(),
                namespace: None,
                name: FLUX_NAMESPACE.into(),
            };
            let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLUX_NAMESPACE}});
            steps.push(Step::new(Phase::Namespace, target, ns));
        }
        for (target, object) in self.operator {
            let phase = if is_namespace(&target) {
                Phase::Namespace
            } else if is_crd(&target) {
                Phase::Crd
            } else {
                Phase::Component
            };
            steps.push(Step::new(phase, target, object));
        }
        let mut secret = credentials.to_secret();
        secret["metadata"]["name"] = Value::String(self.sync.pull_secret.clone());
        secret["metadata"]["namespace"] = Value::String(FLUX_NAMESPACE.into());
        let target = KubeRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some(FLUX_NAMESPACE.into()),
            name: self.sync.pull_secret,
        };
        steps.push(Step::new(Phase::GitSecret, target, secret));
        steps.push(Step::new(Phase::Instance, instance_ref(), self.instance));
        // Stable: file order is kept inside each phase.
        steps.sort_by_key(|s| s.phase);
        steps
    }
}

fn instance_ref() -> KubeRef {
    KubeRef {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        namespace: Some(FLUX_NAMESPACE.into()),
        name: NAME.into(),
    }
}

fn is_crd(r: &KubeRef) -> bool {
    r.kind == "CustomResourceDefinition" && r.api_version.starts_with("apiextensions.k8s.io/")
}

fn is_namespace(r: &KubeRef) -> bool {
    r.kind == "Namespace" && r.api_version == "v1"
}

/// The cell's operator manifest and FluxInstance, checked; `None` when neither the cell's
/// directory nor (for a cell with no `flux-system/` of its own) the template holds a FluxInstance:
/// Flux from `gotk-components.yaml` and `gotk-sync.yaml`.
pub fn read(fleet: &dyn FleetRead, cell: &str, flux: &FluxGit) -> Result<Option<OperatorCell>, BootstrapPlanError> {
    let own = format!("clusters/{cell}");
    let (dir, found) = match find_instance(fleet, &own).map_err(TemplateError::from)? {
        Some(found) => (own, found),
        // The cell's own `flux-system/` decides: `flux bootstrap`'s.
        None if fleet.is_dir(&format!("{own}/flux-system"))? => return Ok(None),
        None => match find_instance(fleet, TEMPLATE_DIR).map_err(TemplateError::from)? {
            Some(found) => (TEMPLATE_DIR.to_owned(), found),
            None => return Ok(None),
        },
    };
    let file = found.file;
    for gotk in [GOTK_COMPONENTS, GOTK_SYNC] {
        let path = format!("{dir}/{gotk}");
        if fleet.mode(&path)?.is_some() {
            return Err(BootstrapPlanError::MixedFlux {
                dir: format!("{dir}/flux-system"),
                instance_file: file,
                gotk_file: path,
            });
        }
    }
    let (text, instance_file) = if dir == TEMPLATE_DIR {
        let CellSync::Instance(t) = template::cell_sync(fleet, flux)? else {
            return Ok(None);
        };
        (t.render(cell)?, format!("{file} (written for {cell})"))
    } else {
        (fleet.read_text(&file)?.unwrap_or_default(), file.clone())
    };
    let (doc, instance) = documents(&text, &file)?
        .into_iter()
        .find(|(_, v)| is_instance(v))
        .ok_or_else(|| BootstrapPlanError::Invalid {
            file: instance_file.clone(),
            doc: 1,
            reason: "the FluxInstance is gone".into(),
        })?;
    let sync = check_instance(&instance, &file, doc)?;
    let (operator_file, operator) = operator_manifest(fleet, &dir, &file)?;
    Ok(Some(OperatorCell {
        dir,
        operator_file,
        instance_file,
        operator,
        instance,
        sync,
    }))
}

/// A FluxInstance document, of any version of the operator's group (the version is checked by
/// [`check_instance`]).
fn is_instance(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some(KIND)
        && v.get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|a| a.starts_with("fluxcd.controlplane.io/"))
}

/// Every document of `text`, numbered from 1 as [`parse_objects`] numbers them.
fn documents(text: &str, file: &str) -> Result<Vec<(usize, Value)>, BootstrapPlanError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| BootstrapPlanError::Yaml {
        file: file.into(),
        reason: e.to_string(),
    })?;
    Ok(docs.into_iter().enumerate().map(|(i, d)| (i + 1, d)).collect())
}

/// The one YAML file below `dir` that defines the FluxInstance CRD (symlinks left out, as Flux's
/// artifact leaves them out; `gotk-components.yaml` never), its objects without the FluxInstance,
/// and the checks that it installs the operator: the CRD serves `v1`, a Deployment runs it.
fn operator_manifest(
    fleet: &dyn FleetRead,
    dir: &str,
    instance_file: &str,
) -> Result<(String, Vec<(KubeRef, Value)>), BootstrapPlanError> {
    let mut found: Option<(String, Vec<(KubeRef, Value)>)> = None;
    for (file, mode) in fleet.walk(dir)? {
        let yaml = file.ends_with(".yaml") || file.ends_with(".yml");
        if mode == FileMode::Symlink || !yaml || file.ends_with("/gotk-components.yaml") {
            continue;
        }
        let Some(text) = fleet.read_text(&file)? else {
            continue;
        };
        if !text.contains(CRD) {
            continue;
        }
        let objects = parse_objects(&text, &file)?;
        if !objects.iter().any(|(r, _)| is_crd(r) && r.name == CRD) {
            continue;
        }
        if let Some((first, _)) = &found {
            return Err(BootstrapPlanError::OperatorManifest {
                file,
                reason: format!(
                    "defines the CustomResourceDefinition `{CRD}`, and so does {first}: keep one install manifest of the Flux Operator in {dir}/"
                ),
            });
        }
        found = Some((file, objects));
    }
    let Some((file, objects)) = found else {
        return Err(BootstrapPlanError::NoOperatorCrd {
            dir: dir.to_owned(),
            instance_file: instance_file.to_owned(),
            crd: CRD,
        });
    };
    let objects: Vec<(KubeRef, Value)> = objects.into_iter().filter(|(r, _)| r.kind != KIND).collect();
    let serves_v1 = objects
        .iter()
        .filter(|(r, _)| is_crd(r) && r.name == CRD)
        .flat_map(|(_, o)| {
            o.pointer("/spec/versions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .any(|v| v.get("name").and_then(Value::as_str) == Some("v1"));
    if !serves_v1 {
        return Err(BootstrapPlanError::OperatorManifest {
            file,
            reason: format!(
                "the CustomResourceDefinition `{CRD}` defines no version `v1`, the FluxInstance's ({API_VERSION})"
            ),
        });
    }
    if !objects
        .iter()
        .any(|(r, _)| r.kind == "Deployment" && r.api_version == "apps/v1")
    {
        return Err(BootstrapPlanError::OperatorManifest {
            file,
            reason: format!(
                "defines the CustomResourceDefinition `{CRD}` but no Deployment: nothing would run the Flux Operator (is it the release's whole install.yaml?)"
            ),
        });
    }
    Ok((file, objects))
}

/// flux-operator's `Distribution.Variant` enum.
const VARIANTS: [&str; 4] = [
    "upstream-alpine",
    "enterprise-alpine",
    "enterprise-distroless",
    "enterprise-distroless-fips",
];
/// flux-operator's `Component` enum.
const COMPONENTS: [&str; 7] = [
    "source-controller",
    "kustomize-controller",
    "helm-controller",
    "notification-controller",
    "image-reflector-controller",
    "image-automation-controller",
    "source-watcher",
];
/// `Sync.Kind` and `Sync.Provider` enums.
const SYNC_KINDS: [&str; 3] = ["OCIRepository", "GitRepository", "Bucket"];
const PROVIDERS: [&str; 5] = ["generic", "aws", "azure", "gcp", "github"];

/// Checks a FluxInstance against what the API server would refuse, with the rules of its CRD
/// (flux-operator v0.58.1, `api/v1/fluxinstance_types.go` and the CRD it generates,
/// `config/crd/bases/fluxcd.controlplane.io_fluxinstances.yaml`): `metadata.name` `flux` (the
/// type's CEL rule); `spec.distribution` with `version` and `registry` (required), `variant` and
/// `artifact` (enum, `^oci://`); `spec.components` (enum); `spec.sync` with `kind` (enum), `url`,
/// `ref` and `path` (required), `provider` (enum; `github` only for a GitRepository, `gcp` never
/// for one: the CEL rules of `Sync`), `name` (at most 63 characters), `interval` (a Go duration,
/// the type's pattern). Then what cellbridge needs to bootstrap it: the namespace `flux-system`
/// (where it creates the Namespace and writes the Git secret, upstream's `DefaultNamespace`), a
/// `spec.sync` from Git (the credentials it writes are Git credentials) and a `pullSecret`
/// naming the Secret they go to.
fn check_instance(instance: &Value, file: &str, doc: usize) -> Result<Sync, BootstrapPlanError> {
    let bad = |field: &str, reason: String| BootstrapPlanError::Instance {
        file: file.into(),
        doc,
        field: field.into(),
        reason,
    };
    let api = string(instance, "apiVersion").map_err(|r| bad("apiVersion", r))?;
    if api != Some(API_VERSION) {
        return Err(bad(
            "apiVersion",
            format!(
                "{}: the Flux Operator serves FluxInstance as `{API_VERSION}`",
                shown(api)
            ),
        ));
    }
    let md = instance.get("metadata").unwrap_or(&Value::Null);
    let name = string(md, "name").map_err(|r| bad("metadata.name", r))?;
    if name != Some(NAME) {
        return Err(bad(
            "metadata.name",
            format!(
                "{}: the only accepted name for a FluxInstance is '{NAME}' (the CRD's validation rule)",
                shown(name)
            ),
        ));
    }
    match string(md, "namespace").map_err(|r| bad("metadata.namespace", r))? {
        Some(FLUX_NAMESPACE) => {}
        ns => {
            return Err(bad(
                "metadata.namespace",
                format!(
                    "{}: cellbridge creates the Namespace `{FLUX_NAMESPACE}` and writes the Git secret there, where the operator runs; set `namespace: {FLUX_NAMESPACE}`",
                    shown(ns)
                ),
            ));
        }
    }
    let spec = mapping(instance, "spec")
        .map_err(|r| bad("spec", r))?
        .unwrap_or(&Value::Null);
    let dist = mapping(spec, "distribution")
        .map_err(|r| bad("spec.distribution", r))?
        .ok_or_else(|| bad("spec.distribution", "missing: the CRD requires it".into()))?;
    required(
        dist,
        "version",
        "spec.distribution.version",
        "a version range such as `2.x`",
    )
    .map_err(|(f, r)| bad(f, r))?;
    required(dist, "registry", "spec.distribution.registry", "e.g. `ghcr.io/fluxcd`").map_err(|(f, r)| bad(f, r))?;
    if let Some(v) = string(dist, "variant").map_err(|r| bad("spec.distribution.variant", r))?
        && !VARIANTS.contains(&v)
    {
        return Err(bad("spec.distribution.variant", one_of(v, &VARIANTS)));
    }
    if let Some(a) = string(dist, "artifact").map_err(|r| bad("spec.distribution.artifact", r))?
        && !a.starts_with("oci://")
    {
        return Err(bad(
            "spec.distribution.artifact",
            format!("`{a}` does not match the CRD's pattern `^oci://.*$`"),
        ));
    }
    if let Some(list) = spec.get("components") {
        let Some(items) = list.as_array() else {
            return Err(bad("spec.components", "must be a list".into()));
        };
        for (i, c) in items.iter().enumerate() {
            match c.as_str() {
                Some(c) if COMPONENTS.contains(&c) => {}
                Some(c) => return Err(bad(&format!("spec.components[{i}]"), one_of(c, &COMPONENTS))),
                None => return Err(bad(&format!("spec.components[{i}]"), "must be a string".into())),
            }
        }
    }
    let sync = mapping(spec, "sync")
        .map_err(|r| bad("spec.sync", r))?
        .ok_or_else(|| {
            bad(
                "spec.sync",
                "unset: the operator would install Flux and sync nothing, so Flux would never own the cluster from Git; set it to the fleet repo's `clusters/<cell>`".into(),
            )
        })?;
    check_sync(sync).map_err(|(f, r)| bad(f, r))
}

/// `spec.sync`: the operator's rules, then cellbridge's.
fn check_sync(sync: &Value) -> Result<Sync, (&'static str, String)> {
    let kind = required(sync, "kind", "spec.sync.kind", "GitRepository")?;
    if !SYNC_KINDS.contains(&kind) {
        return Err(("spec.sync.kind", one_of(kind, &SYNC_KINDS)));
    }
    let url = required(sync, "url", "spec.sync.url", "the fleet repo's URL")?;
    required(sync, "ref", "spec.sync.ref", "e.g. `refs/heads/main`")?;
    required(
        sync,
        "path",
        "spec.sync.path",
        "the cell's directory, `clusters/<cell>`",
    )?;
    let provider = string(sync, "provider").map_err(|r| ("spec.sync.provider", r))?;
    if let Some(p) = provider {
        if !PROVIDERS.contains(&p) {
            return Err(("spec.sync.provider", one_of(p, &PROVIDERS)));
        }
        if p == "github" && kind != "GitRepository" {
            return Err((
                "spec.sync.provider",
                "sync.provider 'github' is only supported for GitRepository (the CRD's validation rule)".into(),
            ));
        }
        if p == "gcp" && kind == "GitRepository" {
            return Err((
                "spec.sync.provider",
                "sync.provider 'gcp' is only supported for OCIRepository and Bucket (the CRD's validation rule)".into(),
            ));
        }
    }
    let sync_name = string(sync, "name")
        .map_err(|r| ("spec.sync.name", r))?
        .filter(|n| !n.is_empty());
    if let Some(n) = sync_name
        && n.chars().count() > 63
    {
        return Err((
            "spec.sync.name",
            format!("{} characters, more than the CRD's 63", n.chars().count()),
        ));
    }
    if let Some(i) = string(sync, "interval").map_err(|r| ("spec.sync.interval", r))?
        && !is_duration(i)
    {
        return Err((
            "spec.sync.interval",
            format!("`{i}` does not match the CRD's pattern `^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$`"),
        ));
    }
    if kind != "GitRepository" {
        return Err((
            "spec.sync.kind",
            format!(
                "{kind}: cellbridge bootstraps Flux with Git credentials from the fleet repo; sync from a GitRepository"
            ),
        ));
    }
    let pull_secret = string(sync, "pullSecret")
        .map_err(|r| ("spec.sync.pullSecret", r))?
        .filter(|s| !s.is_empty())
        .ok_or((
            "spec.sync.pullSecret",
            "unset: the operator's GitRepository would read the fleet repo without the credentials cellbridge writes (CELLBRIDGE_FLUX_GIT_SECRET); name the Secret, e.g. `pullSecret: flux-system`".to_owned(),
        ))?;
    Ok(Sync {
        url: url.to_owned(),
        provider: provider.map(str::to_owned),
        pull_secret: pull_secret.to_owned(),
        name: sync_name.unwrap_or(FLUX_NAMESPACE).to_owned(),
    })
}

/// `obj[key]` as a string; absent (or null) is `None`; another type is the API server's refusal.
fn string<'a>(obj: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("must be a string, not {}", type_of(other))),
    }
}

fn mapping<'a>(obj: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v)),
        Some(other) => Err(format!("must be a mapping, not {}", type_of(other))),
    }
}

/// A required string field, not empty.
fn required<'a>(obj: &'a Value, key: &str, field: &'static str, hint: &str) -> Result<&'a str, (&'static str, String)> {
    match string(obj, key).map_err(|r| (field, r))? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err((field, format!("empty: the CRD requires it ({hint})"))),
        None => Err((field, format!("missing: the CRD requires it ({hint})"))),
    }
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn shown(v: Option<&str>) -> String {
    v.map_or_else(|| "unset".to_owned(), |s| format!("`{s}`"))
}

fn one_of(v: &str, allowed: &[&str]) -> String {
    format!("`{v}` is not one of {}", allowed.join(", "))
}

/// `^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`.
fn is_duration(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    while i < b.len() {
        if !digits(&mut i) {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            if !digits(&mut i) {
                return false;
            }
        }
        match b.get(i..i + 2) {
            Some(b"ms") => i += 2,
            _ => match b.get(i) {
                Some(b's' | b'm' | b'h') => i += 1,
                _ => return false,
            },
        }
    }
    !s.is_empty()
}

#[cfg(test)]
mod tests;
