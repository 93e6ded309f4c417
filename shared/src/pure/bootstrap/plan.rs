//! What a bootstrap applies, in order: the pure part, no cluster needed. `dry_run` prints it.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use super::gitsecret::{FluxGitRepository, GitCredentials};
use crate::pure::fleet::{FleetError, FleetRead};
use crate::pure::template::{self, FLUX_SYSTEM, FluxGit, GOTK_COMPONENTS, GOTK_SYNC, TEMPLATE_DIR, TemplateError};

pub const FLUX_NAMESPACE: &str = "flux-system";

#[derive(Debug, thiserror::Error)]
pub enum BootstrapPlanError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(
        "cell {cell}: the fleet repo has neither clusters/{cell}/{GOTK_COMPONENTS} nor {TEMPLATE_DIR}/{GOTK_COMPONENTS}"
    )]
    NoComponents { cell: String },
    #[error("{file}: not valid YAML: {reason}")]
    Yaml { file: String, reason: String },
    #[error("{file}, document {doc}: {reason}")]
    Invalid { file: String, doc: usize, reason: String },
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("{file}: no GitRepository `{FLUX_SYSTEM}` with a `spec.url`: Flux would have nothing to sync from")]
    NoGitRepository { file: String },
    #[error(
        "{file}: no Kustomization `{FLUX_SYSTEM}`: Flux would not manage itself, and a later run could not tell that Flux is there"
    )]
    NoKustomization { file: String },
    #[error(
        "{file}: the GitRepository `{FLUX_SYSTEM}` reads its credentials from Secret `{name}`, but the bootstrap writes them to Secret `{FLUX_SYSTEM}`"
    )]
    SecretRef { file: String, name: String },
    #[error(
        "{sync_file}: {kind} `{name}` ({api_version}) needs a CustomResourceDefinition that {components_file} does not define; nothing was applied (is the components file trimmed or from another Flux version?)"
    )]
    NoCrd {
        sync_file: String,
        components_file: String,
        kind: String,
        name: String,
        api_version: String,
    },
    /// A FluxInstance the Flux Operator would reject (its CRD's schema and CEL rules), or one
    /// cellbridge cannot bootstrap ([`super::operator`]).
    #[error("{file}, document {doc}: FluxInstance field `{field}`: {reason}; nothing was applied")]
    Instance {
        file: String,
        doc: usize,
        field: String,
        reason: String,
    },
    #[error(
        "{instance_file} holds a FluxInstance, but no YAML file below {dir}/ defines the CustomResourceDefinition `{crd}`: commit the Flux Operator's install manifest (its release's install.yaml) there; nothing was applied"
    )]
    NoOperatorCrd {
        dir: String,
        instance_file: String,
        crd: &'static str,
    },
    #[error("{file}: {reason}; nothing was applied")]
    OperatorManifest { file: String, reason: String },
    #[error(
        "{dir}: holds both a FluxInstance ({instance_file}) and {gotk_file}: a cell's Flux is installed either by the Flux Operator or from gotk-components.yaml and gotk-sync.yaml, never both; remove one of them; nothing was applied"
    )]
    MixedFlux {
        dir: String,
        instance_file: String,
        gotk_file: String,
    },
}

/// Refuses, before anything is applied, sync objects whose kinds the components do not
/// define: applied in order, the Namespace and the Git secret would reach the cluster before
/// the first sync object failed for want of its CRD.
pub fn check_sync_kinds(
    components: &[(KubeRef, Value)],
    components_file: &str,
    sync: &[(KubeRef, Value)],
    sync_file: &str,
) -> Result<(), BootstrapPlanError> {
    let defined: std::collections::BTreeSet<(&str, &str)> = components
        .iter()
        .filter(|(r, _)| is_crd(r))
        .filter_map(|(_, o)| {
            let spec = o.get("spec")?;
            Some((spec.get("group")?.as_str()?, spec.get("names")?.get("kind")?.as_str()?))
        })
        .collect();
    for (r, _) in sync {
        // Core (`v1`) and built-in groups need no CRD; Flux's own kinds are `*.fluxcd.io`.
        let Some((group, _)) = r.api_version.split_once('/') else {
            continue;
        };
        if group.ends_with(".fluxcd.io") && !defined.contains(&(group, r.kind.as_str())) {
            return Err(BootstrapPlanError::NoCrd {
                sync_file: sync_file.to_owned(),
                components_file: components_file.to_owned(),
                kind: r.kind.clone(),
                name: r.name.clone(),
                api_version: r.api_version.clone(),
            });
        }
    }
    Ok(())
}

/// The stages of a bootstrap; a CRD's kinds exist only once it is Established, so every
/// later stage waits for the CRD stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Namespace,
    Crd,
    Component,
    GitSecret,
    Sync,
    /// A Flux Operator cell's FluxInstance: the operator installs Flux and its sync objects.
    Instance,
}

impl Phase {
    /// What the stage is, in words (a report's line).
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Namespace => "namespace",
            Phase::Crd => "custom resource definition",
            Phase::Component => "Flux component",
            Phase::GitSecret => "Git credentials",
            Phase::Sync => "sync object",
            Phase::Instance => "Flux instance",
        }
    }
}

/// Which object, without its content: what reports and logs show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KubeRef {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for KubeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{} ({})", self.kind, ns, self.name, self.api_version),
            None => write!(f, "{} {} ({})", self.kind, self.name, self.api_version),
        }
    }
}

/// One object to apply. `Debug` leaves the content out: the Git secret's step holds credentials.
#[derive(Clone)]
pub struct Step {
    pub phase: Phase,
    pub target: KubeRef,
    object: Value,
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step")
            .field("phase", &self.phase)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Step {
    pub fn new(phase: Phase, target: KubeRef, object: Value) -> Step {
        Step { phase, target, object }
    }

    pub fn object(&self) -> &Value {
        &self.object
    }
}

/// The object whose presence says Flux owns the cluster, so a bootstrap applies nothing
/// (create-if-missing): the Kustomization `flux-system` of the sync objects, or a Flux Operator
/// cell's FluxInstance. `plural` names its resource, so no discovery is needed to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub target: KubeRef,
    pub plural: &'static str,
}

impl Owner {
    /// The first Kustomization among the sync objects, in the namespace it is applied to.
    pub fn of_sync(steps: &[Step]) -> Option<Owner> {
        let k = steps
            .iter()
            .find(|s| s.phase == Phase::Sync && s.target.kind == "Kustomization")?;
        let namespace = Some(k.target.namespace.clone().unwrap_or_else(|| FLUX_NAMESPACE.into()));
        Some(Owner {
            target: KubeRef {
                namespace,
                ..k.target.clone()
            },
            plural: "kustomizations",
        })
    }
}

/// The name of the Git secret the plan applies in `flux-system`, if it applies one.
pub fn git_secret_of(steps: &[Step]) -> Option<String> {
    steps
        .iter()
        .find(|s| s.phase == Phase::GitSecret)
        .map(|s| s.target.name.clone())
}

/// Where the cell's Flux manifests come from: its own directory once its pull request is
/// merged, the template before that (bootstrap never waits for a human).
pub fn components_file(fleet: &dyn FleetRead, cell: &str) -> Result<(String, String), BootstrapPlanError> {
    for file in [
        format!("clusters/{cell}/{GOTK_COMPONENTS}"),
        format!("{TEMPLATE_DIR}/{GOTK_COMPONENTS}"),
    ] {
        if let Some(text) = fleet.read_text(&file)? {
            return Ok((file, text));
        }
    }
    Err(BootstrapPlanError::NoComponents { cell: cell.into() })
}

/// Where the cell's sync objects come from, and their text. Once its pull request is merged, its
/// own `gotk-sync.yaml`, as it is: from then on Flux applies that very file itself, so anything
/// else would be undone at its first reconciliation. Before that, the template's written for the
/// cell exactly as the pull request writes it ([`template::sync_source`]: the template's text but
/// for `spec.path` and the URL and branch `flux` sets).
pub fn sync_file(fleet: &dyn FleetRead, cell: &str, flux: &FluxGit) -> Result<(String, String), BootstrapPlanError> {
    let own = format!("clusters/{cell}/{GOTK_SYNC}");
    if let Some(text) = fleet.read_text(&own)? {
        return Ok((own, text));
    }
    let sync = template::sync_source(fleet, flux)?;
    let file = match sync.template_file() {
        Some(t) => format!("{t} (written for {cell})"),
        None => format!("{own} (rendered by cellbridge: {TEMPLATE_DIR}/ has none)"),
    };
    Ok((file, sync.render(cell)?))
}

fn is_flux_system(r: &KubeRef, group: &str, kind: &str) -> bool {
    r.kind == kind && r.name == FLUX_SYSTEM && r.api_version.starts_with(group)
}

/// Checks the sync objects of `file` (a Kustomization `flux-system`, a GitRepository `flux-system`
/// with a URL that reads its credentials from the Secret the bootstrap writes) and returns that
/// GitRepository as the Git credentials must fit it: `spec.url` and `spec.provider`
/// (source-controller: `generic` when unset, `github` for a GitHub App).
pub fn sync_repository(sync: &[(KubeRef, Value)], file: &str) -> Result<FluxGitRepository, BootstrapPlanError> {
    if !sync
        .iter()
        .any(|(r, _)| is_flux_system(r, "kustomize.toolkit.fluxcd.io/", "Kustomization"))
    {
        return Err(BootstrapPlanError::NoKustomization { file: file.into() });
    }
    let s = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    let Some((spec, url)) = sync
        .iter()
        .find(|(r, _)| is_flux_system(r, "source.toolkit.fluxcd.io/", "GitRepository"))
        .and_then(|(_, o)| s(&o["spec"]["url"]).map(|url| (&o["spec"], url)))
    else {
        return Err(BootstrapPlanError::NoGitRepository { file: file.into() });
    };
    if let Some(name) = s(&spec["secretRef"]["name"])
        && name != super::gitsecret::SECRET_NAME
    {
        return Err(BootstrapPlanError::SecretRef {
            file: file.into(),
            name,
        });
    }
    Ok(FluxGitRepository {
        url,
        provider: s(&spec["provider"]),
    })
}

/// Parses a multi-document manifest file into objects (a `List` is unpacked).
pub fn parse_objects(text: &str, file: &str) -> Result<Vec<(KubeRef, Value)>, BootstrapPlanError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| BootstrapPlanError::Yaml {
        file: file.into(),
        reason: e.to_string(),
    })?;
    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let doc_no = i + 1;
        let items = match doc {
            Value::Null => continue,
            Value::Object(ref o)
                if o.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List"))
                    && o.contains_key("items") =>
            {
                o["items"].as_array().cloned().unwrap_or_default()
            }
            other => vec![other],
        };
        for obj in items {
            let bad = |reason: &str| BootstrapPlanError::Invalid {
                file: file.into(),
                doc: doc_no,
                reason: reason.into(),
            };
            let Value::Object(map) = &obj else {
                return Err(bad("not a mapping"));
            };
            let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned).filter(|s| !s.is_empty());
            let api_version = s(map.get("apiVersion")).ok_or_else(|| bad("no apiVersion"))?;
            let kind = s(map.get("kind")).ok_or_else(|| bad("no kind"))?;
            let md = map.get("metadata");
            let name = s(md.and_then(|m| m.get("name"))).ok_or_else(|| bad("no metadata.name"))?;
            let namespace = s(md.and_then(|m| m.get("namespace")));
            out.push((
                KubeRef {
                    api_version,
                    kind,
                    namespace,
                    name,
                },
                obj,
            ));
        }
    }
    Ok(out)
}

fn is_crd(r: &KubeRef) -> bool {
    r.kind == "CustomResourceDefinition" && r.api_version.starts_with("apiextensions.k8s.io/")
}

fn is_namespace(r: &KubeRef) -> bool {
    r.kind == "Namespace" && r.api_version == "v1"
}

/// The whole bootstrap in apply order: Namespaces, CRDs, the other components (file order),
/// the Git secret, the sync objects.
pub fn build(
    components: Vec<(KubeRef, Value)>,
    credentials: Option<&GitCredentials>,
    sync: Vec<(KubeRef, Value)>,
) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::with_capacity(components.len() + sync.len() + 2);
    if !components
        .iter()
        .any(|(r, _)| is_namespace(r) && r.name == FLUX_NAMESPACE)
    {
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLUX_NAMESPACE}});
        let target = KubeRef {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: FLUX_NAMESPACE.into(),
        };
        steps.push(Step {
            phase: Phase::Namespace,
            target,
            object: ns,
        });
    }
    for (target, object) in components {
        let phase = if is_namespace(&target) {
            Phase::Namespace
        } else if is_crd(&target) {
            Phase::Crd
        } else {
            Phase::Component
        };
        steps.push(Step { phase, target, object });
    }
    if let Some(c) = credentials {
        let object = c.to_secret();
        let target = KubeRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some(super::gitsecret::NAMESPACE.into()),
            name: super::gitsecret::SECRET_NAME.into(),
        };
        steps.push(Step {
            phase: Phase::GitSecret,
            target,
            object,
        });
    }
    for (target, object) in sync {
        steps.push(Step {
            phase: Phase::Sync,
            target,
            object,
        });
    }
    // Stable: file order is kept inside each phase.
    steps.sort_by_key(|s| s.phase);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: source-controller\n  namespace: flux-system\n---\n\
apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gitrepositories.source.toolkit.fluxcd.io\n---\n\
apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n---\n";

    #[test]
    fn orders_namespace_crds_components_secret_sync() {
        let comps = parse_objects(FILE, "f").unwrap();
        let sync = parse_objects("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\n", "s").unwrap();
        let steps = build(comps, None, sync);
        let kinds: Vec<_> = steps.iter().map(|s| s.target.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["Namespace", "CustomResourceDefinition", "Deployment", "Kustomization"]
        );
    }

    #[test]
    fn sync_kinds_without_their_crd_are_refused_before_anything_is_applied() {
        let sync = parse_objects(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
            "gotk-sync.yaml",
        )
        .unwrap();
        let trimmed = parse_objects(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n",
            "c.yaml",
        )
        .unwrap();
        let e = check_sync_kinds(&trimmed, "c.yaml", &sync, "gotk-sync.yaml").unwrap_err();
        assert!(
            e.to_string().starts_with("gotk-sync.yaml: GitRepository `flux-system` (source.toolkit.fluxcd.io/v1) needs a CustomResourceDefinition that c.yaml does not define"),
            "{e}"
        );
        let full = parse_objects(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gitrepositories.source.toolkit.fluxcd.io\nspec:\n  group: source.toolkit.fluxcd.io\n  names:\n    kind: GitRepository\n",
            "c.yaml",
        )
        .unwrap();
        check_sync_kinds(&full, "c.yaml", &sync, "gotk-sync.yaml").unwrap();
    }

    #[test]
    fn adds_the_namespace_when_the_file_has_none_and_names_bad_documents() {
        let steps = build(vec![], None, vec![]);
        assert_eq!(steps[0].target.to_string(), "Namespace flux-system (v1)");
        let e = parse_objects("apiVersion: v1\nkind: ConfigMap\n---\nkind: X\n", "x.yaml").unwrap_err();
        assert_eq!(e.to_string(), "x.yaml, document 1: no metadata.name");
        assert!(matches!(
            parse_objects("a: [", "y.yaml"),
            Err(BootstrapPlanError::Yaml { .. })
        ));
    }
}
