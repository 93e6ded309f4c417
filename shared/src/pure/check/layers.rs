//! The layers of a cell: the Flux Kustomizations of `clusters/<cell>` with a `postBuild`, read
//! from each document of the cell's build, with the sources they substitute from.

use crate::pure::fleet;

use super::yaml;
use super::{CONFIGMAP_NAME, CheckError, invalid};

/// One `spec.postBuild.substituteFrom` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SourceRef {
    /// `ConfigMap` or `Secret` (kustomize-controller knows no other kind).
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) optional: bool,
    /// Where the entry is written.
    pub(super) line: usize,
}

impl SourceRef {
    pub(super) fn is_cell_metadata(&self) -> bool {
        self.kind == "ConfigMap" && self.name == CONFIGMAP_NAME
    }
}

impl std::fmt::Display for SourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

pub(super) struct FluxLayer {
    pub(super) name: String,
    /// `metadata.namespace`: where kustomize-controller looks its sources up.
    pub(super) namespace: Option<String>,
    /// `spec.targetNamespace`: the namespace of every object the layer applies.
    pub(super) target_namespace: Option<String>,
    pub(super) defined_in: String,
    pub(super) path: String,
    pub(super) path_line: usize,
    /// Keys of `spec.postBuild.substitute`, with their lines and values.
    pub(super) inline: Vec<(String, usize, Option<String>)>,
    /// `spec.postBuild.substituteFrom`, in order (later entries override earlier ones).
    pub(super) sources: Vec<SourceRef>,
    /// `spec.postBuild.substituteStrategy: Always`: substituted even when no variable is
    /// defined (the default, `WithVariables`, skips substitution then).
    pub(super) always: bool,
}

/// A Flux Kustomization with a `postBuild` (`substitute` or `substituteFrom`): Flux runs the
/// substitution on everything it builds, so it is checked, whatever its sources.
pub(super) fn flux_layer(doc: &yaml::Node, file: &str) -> Result<Option<FluxLayer>, CheckError> {
    let api = doc.get("apiVersion").and_then(yaml::Node::str).unwrap_or("");
    let kind = doc.get("kind").and_then(yaml::Node::str).unwrap_or("");
    if !api.starts_with("kustomize.toolkit.fluxcd.io/") || kind != "Kustomization" {
        return Ok(None);
    }
    let spec = doc.get("spec");
    let Some(post) = spec.and_then(|s| s.get("postBuild")) else {
        return Ok(None);
    };
    let meta = doc.get("metadata");
    let text = |n: Option<&yaml::Node>, key: &str| {
        n.and_then(|m| m.get(key))
            .and_then(yaml::Node::str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let name = text(meta, "name").unwrap_or_default();
    let mut sources = Vec::new();
    for src in post.get("substituteFrom").map(yaml::Node::items).unwrap_or_default() {
        let optional = src
            .get("optional")
            .and_then(yaml::Node::str)
            .is_some_and(|v| v == "true");
        sources.push(SourceRef {
            kind: text(Some(src), "kind").unwrap_or_default(),
            name: text(Some(src), "name").unwrap_or_default(),
            optional,
            line: src.line(),
        });
    }
    let inline = match post.get("substitute") {
        Some(yaml::Node::Map(entries, ..)) => entries
            .iter()
            .filter_map(|(k, v)| k.str().map(|s| (s.to_owned(), k.line(), v.str().map(str::to_owned))))
            .collect(),
        _ => Vec::new(),
    };
    let spec_path = spec.and_then(|s| s.get("path"));
    let raw = spec_path.and_then(yaml::Node::str).unwrap_or("");
    let path_line = spec_path.map(|p| p.line()).unwrap_or_else(|| doc.line());
    // Flux joins spec.path to the source root, so a leading `/` means the root too.
    let path = fleet::normalize("", raw.trim_start_matches('/')).map_err(|_| {
        invalid(
            file,
            format!("Kustomization `{name}`: spec.path `{raw}` leaves the fleet repo"),
        )
    })?;
    Ok(Some(FluxLayer {
        name,
        namespace: text(meta, "namespace"),
        target_namespace: text(spec, "targetNamespace"),
        defined_in: file.to_owned(),
        path,
        path_line,
        inline,
        sources,
        always: post.get("substituteStrategy").and_then(yaml::Node::str) == Some("Always"),
    }))
}
