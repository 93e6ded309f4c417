//! The layers of a cell: the Flux Kustomizations of `clusters/<cell>` that substitute from
//! `cell-metadata`, read from each document of the cell's build.

use std::collections::BTreeSet;

use crate::fleet;

use super::yaml;
use super::{CONFIGMAP_NAME, CheckError, invalid};

pub(super) struct FluxLayer {
    pub(super) name: String,
    pub(super) defined_in: String,
    pub(super) path: String,
    pub(super) path_line: usize,
    /// Keys of `spec.postBuild.substitute`.
    pub(super) inline: BTreeSet<String>,
    /// Other `substituteFrom` sources, whose keys the check cannot know (`Secret/x`).
    pub(super) other_sources: Vec<String>,
}

pub(super) fn flux_layer(doc: &yaml::Node, file: &str) -> Result<Option<FluxLayer>, CheckError> {
    let api = doc.get("apiVersion").and_then(yaml::Node::str).unwrap_or("");
    let kind = doc.get("kind").and_then(yaml::Node::str).unwrap_or("");
    if !api.starts_with("kustomize.toolkit.fluxcd.io/") || kind != "Kustomization" {
        return Ok(None);
    }
    let Some(post) = doc.get("spec").and_then(|s| s.get("postBuild")) else {
        return Ok(None);
    };
    let mut from_cm = false;
    let mut other_sources = Vec::new();
    for src in post.get("substituteFrom").map(yaml::Node::items).unwrap_or_default() {
        let k = src.get("kind").and_then(yaml::Node::str).unwrap_or("");
        let n = src.get("name").and_then(yaml::Node::str).unwrap_or("");
        if k == "ConfigMap" && n == CONFIGMAP_NAME {
            from_cm = true;
        } else {
            other_sources.push(format!("{k}/{n}"));
        }
    }
    if !from_cm {
        return Ok(None);
    }
    let inline = match post.get("substitute") {
        Some(yaml::Node::Map(entries, _)) => entries.iter().filter_map(|(k, _)| k.str().map(str::to_owned)).collect(),
        _ => BTreeSet::new(),
    };
    let name = doc
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(yaml::Node::str)
        .unwrap_or("")
        .to_owned();
    let spec_path = doc.get("spec").and_then(|s| s.get("path"));
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
        defined_in: file.to_owned(),
        path,
        path_line,
        inline,
        other_sources,
    }))
}
