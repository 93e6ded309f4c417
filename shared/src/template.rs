//! What a new cell starts from: `clusters/_template/` copied to `clusters/<cell>/`, with
//! `flux-system/gotk-sync.yaml` rendered for the cell's own path.

use serde::Deserialize;

use crate::fleet::{FleetError, FleetRead};

pub const TEMPLATE_DIR: &str = "clusters/_template";
pub const GOTK_SYNC: &str = "flux-system/gotk-sync.yaml";
pub const GOTK_COMPONENTS: &str = "flux-system/gotk-components.yaml";

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("the fleet repo has no {TEMPLATE_DIR}/ to start a new cell from")]
    NoTemplate,
    #[error("{file}: {reason}")]
    Invalid { file: String, reason: String },
    #[error(
        "no Git URL for Flux: {TEMPLATE_DIR}/{GOTK_SYNC} has no GitRepository `flux-system` and CELLBRIDGE_FLUX_GIT_URL is not set"
    )]
    NoSyncSource,
}

/// Where Flux pulls the fleet repo from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncSource {
    pub url: String,
    pub branch: String,
}

/// The two objects that make Flux own itself from Git: GitRepository and Kustomization
/// `flux-system`, the Kustomization at `./clusters/<cell>`.
pub fn render_gotk_sync(cell: &str, source: &SyncSource) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("string");
    format!(
        "# Flux's own sync objects for cell {cell}, written by cellbridge.\n\
---\n\
apiVersion: source.toolkit.fluxcd.io/v1\n\
kind: GitRepository\n\
metadata:\n  name: flux-system\n  namespace: flux-system\n\
spec:\n  interval: 1m0s\n  ref:\n    branch: {branch}\n  secretRef:\n    name: flux-system\n  url: {url}\n\
---\n\
apiVersion: kustomize.toolkit.fluxcd.io/v1\n\
kind: Kustomization\n\
metadata:\n  name: flux-system\n  namespace: flux-system\n\
spec:\n  interval: 10m0s\n  path: ./clusters/{cell}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
        branch = q(&source.branch),
        url = q(&source.url),
    )
}

#[derive(Deserialize)]
struct Obj {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: ObjMeta,
    #[serde(default)]
    spec: Option<GitSpec>,
}

#[derive(Deserialize, Default)]
struct ObjMeta {
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct GitSpec {
    #[serde(default)]
    url: Option<String>,
    #[serde(rename = "ref", default)]
    git_ref: Option<GitRef>,
}

#[derive(Deserialize)]
struct GitRef {
    #[serde(default)]
    branch: Option<String>,
}

/// Reads the GitRepository `flux-system` of a gotk-sync.yaml.
pub fn read_sync_source(text: &str, file: &str) -> Result<Option<SyncSource>, TemplateError> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text).map_err(|e| TemplateError::Invalid {
        file: file.to_owned(),
        reason: e.to_string(),
    })?;
    for doc in docs {
        let Ok(obj) = serde_json::from_value::<Obj>(doc) else {
            continue;
        };
        if obj.kind == "GitRepository"
            && obj.metadata.name == "flux-system"
            && let Some(spec) = obj.spec
            && let Some(url) = spec.url
        {
            let branch = spec.git_ref.and_then(|r| r.branch).unwrap_or_else(|| "main".to_owned());
            return Ok(Some(SyncSource { url, branch }));
        }
    }
    Ok(None)
}

/// The sync source for a new cell: an explicit one (configuration) wins over the template's.
pub fn sync_source(fleet: &dyn FleetRead, explicit: Option<&SyncSource>) -> Result<SyncSource, TemplateError> {
    if let Some(s) = explicit {
        return Ok(s.clone());
    }
    let file = format!("{TEMPLATE_DIR}/{GOTK_SYNC}");
    match fleet.read_text(&file)? {
        Some(text) => read_sync_source(&text, &file)?.ok_or(TemplateError::NoSyncSource),
        None => Err(TemplateError::NoSyncSource),
    }
}

/// Every file of a new cell's directory, in path order.
pub fn new_cell_files(
    fleet: &dyn FleetRead,
    cell: &str,
    source: &SyncSource,
) -> Result<Vec<(String, String)>, TemplateError> {
    if !fleet.is_dir(TEMPLATE_DIR)? {
        return Err(TemplateError::NoTemplate);
    }
    let mut files = Vec::new();
    for path in fleet.walk_files(TEMPLATE_DIR)? {
        let rel = &path[TEMPLATE_DIR.len() + 1..];
        if rel == GOTK_SYNC {
            continue;
        }
        let text = fleet.read_text(&path)?.unwrap_or_default();
        files.push((format!("clusters/{cell}/{rel}"), text));
    }
    files.push((format!("clusters/{cell}/{GOTK_SYNC}"), render_gotk_sync(cell, source)));
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::MemFleet;

    #[test]
    fn gotk_sync_round_trips_and_points_at_the_cell() {
        let src = SyncSource {
            url: "ssh://git@github.com/acme/fleet".into(),
            branch: "main".into(),
        };
        let text = render_gotk_sync("prod-eu-west-1", &src);
        assert!(text.contains("path: ./clusters/prod-eu-west-1\n"));
        assert_eq!(read_sync_source(&text, "f").unwrap(), Some(src));
    }

    #[test]
    fn new_cell_copies_the_template() {
        let mut m = MemFleet::new();
        m.insert("clusters/_template/kustomization.yaml", "resources: [layers.yaml]\n");
        m.insert("clusters/_template/flux-system/gotk-components.yaml", "# gotk\n");
        m.insert(
            "clusters/_template/flux-system/gotk-sync.yaml",
            render_gotk_sync(
                "_template",
                &SyncSource {
                    url: "https://x/fleet".into(),
                    branch: "trunk".into(),
                },
            ),
        );
        let src = sync_source(&m, None).unwrap();
        assert_eq!(src.branch, "trunk");
        let files = new_cell_files(&m, "c1", &src).unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "clusters/c1/flux-system/gotk-components.yaml",
                "clusters/c1/flux-system/gotk-sync.yaml",
                "clusters/c1/kustomization.yaml"
            ]
        );
        assert!(files[1].1.contains("./clusters/c1"));
        assert!(matches!(
            new_cell_files(&MemFleet::new(), "c", &src),
            Err(TemplateError::NoTemplate)
        ));
    }
}
