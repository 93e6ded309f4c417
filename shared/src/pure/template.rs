//! What a new cell starts from: `clusters/_template/` copied to `clusters/<cell>/`, every file
//! with its mode (an executable stays one, a symlink stays a symlink to the same target), with
//! `flux-system/gotk-sync.yaml` the template's own, written for the cell ([`gotk_sync`]).

mod gotk_sync;

pub use gotk_sync::{FLUX_SYSTEM, FluxGit, GotkSync, check_branch};

use super::fleet::{FileMode, FileWrite, FleetError, FleetRead};

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
        "no Git URL for Flux: {TEMPLATE_DIR}/{GOTK_SYNC} has no GitRepository `flux-system` with a `spec.url` and CELLBRIDGE_FLUX_GIT_URL is not set"
    )]
    NoSyncSource,
    #[error(
        "{file}: no branch for Flux: the GitRepository `flux-system` names no `spec.ref.branch` and the fleet repo's default branch is not known; set CELLBRIDGE_FLUX_GIT_BRANCH (the command line: --flux-branch)"
    )]
    NoBranch { file: String },
}

/// Where Flux pulls the fleet repo from, for a template without `gotk-sync.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncSource {
    pub url: String,
    pub branch: String,
}

/// The two objects that make Flux own itself from Git: GitRepository and Kustomization
/// `flux-system`, the Kustomization at `./clusters/<cell>`. What a template without its own
/// `gotk-sync.yaml` gives a new cell.
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

/// A new cell's `gotk-sync.yaml`: the template's, with the URL and branch `flux` sets (and the
/// base branch where it names none; [`FluxGit::branch_for`]); or, for a template without one,
/// [`render_gotk_sync`] with the configured URL. Checked here, written by [`GotkSync::render`].
pub fn sync_source(fleet: &dyn FleetRead, flux: &FluxGit) -> Result<GotkSync, TemplateError> {
    let file = format!("{TEMPLATE_DIR}/{GOTK_SYNC}");
    match fleet.read_text(&file)? {
        Some(text) => GotkSync::from_template(&file, text, flux),
        None => GotkSync::rendered(&file, flux),
    }
}

/// Every file of a new cell's directory, in path order, with the template's modes. A symlink
/// is copied as a symlink with the same target: `clusters/<cell>/` sits where the template
/// does, so a relative target means the same there (and Flux leaves it out all the same).
pub fn new_cell_files(fleet: &dyn FleetRead, cell: &str, sync: &GotkSync) -> Result<Vec<FileWrite>, TemplateError> {
    if !fleet.is_dir(TEMPLATE_DIR)? {
        return Err(TemplateError::NoTemplate);
    }
    let mut files = Vec::new();
    for (path, mode) in fleet.walk(TEMPLATE_DIR)? {
        let rel = &path[TEMPLATE_DIR.len() + 1..];
        if rel == GOTK_SYNC {
            continue;
        }
        let content = match mode {
            FileMode::Symlink => fleet.read_link(&path)?,
            FileMode::Regular | FileMode::Executable => fleet.read_text(&path)?,
        };
        files.push(FileWrite {
            path: format!("clusters/{cell}/{rel}"),
            mode,
            content: content.unwrap_or_default(),
        });
    }
    files.push(FileWrite::regular(
        format!("clusters/{cell}/{GOTK_SYNC}"),
        sync.render(cell)?,
    ));
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::fleet::MemFleet;

    #[test]
    fn gotk_sync_round_trips_and_points_at_the_cell() {
        let src = SyncSource {
            url: "ssh://git@github.com/acme/fleet".into(),
            branch: "main".into(),
        };
        let text = render_gotk_sync("prod-eu-west-1", &src);
        assert!(text.contains("path: ./clusters/prod-eu-west-1\n"));
        // As a template, it is its own rendering for the same cell.
        let mut m = MemFleet::new();
        m.insert(format!("{TEMPLATE_DIR}/{GOTK_SYNC}"), text.clone());
        let sync = sync_source(&m, &FluxGit::default()).unwrap();
        assert_eq!(sync.branch(), Some("main"));
        assert_eq!(sync.render("prod-eu-west-1").unwrap(), text);
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
        let src = sync_source(&m, &FluxGit::default()).unwrap();
        assert_eq!(src.branch(), Some("trunk"));
        m.insert_mode(
            "clusters/_template/scripts/bootstrap.sh",
            FileMode::Executable,
            "#!/bin/sh\n",
        );
        m.insert_symlink("clusters/_template/README.md", "../../docs/cell.md");
        let files = new_cell_files(&m, "c1", &src).unwrap();
        let got: Vec<(&str, FileMode)> = files.iter().map(|f| (f.path.as_str(), f.mode)).collect();
        assert_eq!(
            got,
            [
                ("clusters/c1/README.md", FileMode::Symlink),
                ("clusters/c1/flux-system/gotk-components.yaml", FileMode::Regular),
                ("clusters/c1/flux-system/gotk-sync.yaml", FileMode::Regular),
                ("clusters/c1/kustomization.yaml", FileMode::Regular),
                ("clusters/c1/scripts/bootstrap.sh", FileMode::Executable),
            ]
        );
        assert_eq!(files[0].content, "../../docs/cell.md");
        assert_eq!(files[4].content, "#!/bin/sh\n");
        assert!(files[2].content.contains("./clusters/c1"));
        assert!(matches!(
            new_cell_files(&MemFleet::new(), "c", &src),
            Err(TemplateError::NoTemplate)
        ));
    }
}
