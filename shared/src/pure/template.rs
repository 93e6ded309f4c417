//! What a new cell starts from: `clusters/_template/` copied to `clusters/<cell>/`, every file
//! with its mode (an executable stays one, a symlink stays a symlink to the same target), with
//! Flux's sync written for the cell: `flux-system/gotk-sync.yaml` the template's own
//! ([`gotk_sync`]), or, for a template whose Flux the Flux Operator runs, its `FluxInstance`
//! ([`flux_instance`]). A template holds one kind or the other, never both.

mod flux_instance;
mod gotk_sync;
mod splice;

pub use flux_instance::{FindError, FoundInstance, InstanceTemplate, find_instance};
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
    #[error(
        "both kinds in one cell: {instance} holds a FluxInstance (the Flux Operator installs and syncs Flux) and {gotk} is flux bootstrap's; a new cell gets one kind: remove the other from {TEMPLATE_DIR}/"
    )]
    BothKinds { instance: String, gotk: String },
    #[error(
        "{file}: a FluxInstance template: the Flux Operator syncs its cells from `spec.sync`, so there is no gotk-sync.yaml to apply"
    )]
    OperatorTemplate { file: String },
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

/// How a new cell's Flux syncs: the template's `gotk-sync.yaml` (or one cellbridge renders), or
/// the template's `FluxInstance`; each written for the cell.
#[derive(Debug, Clone)]
pub enum CellSync {
    Gotk(GotkSync),
    Instance(Box<InstanceTemplate>),
}

impl From<GotkSync> for CellSync {
    fn from(g: GotkSync) -> Self {
        CellSync::Gotk(g)
    }
}

impl CellSync {
    /// The file of the new cell that holds it, relative to the cell's directory.
    fn cell_file(&self) -> &str {
        match self {
            CellSync::Gotk(_) => GOTK_SYNC,
            CellSync::Instance(t) => &t.template_file()[TEMPLATE_DIR.len() + 1..],
        }
    }

    /// The file's text for `cell`.
    pub fn render(&self, cell: &str) -> Result<String, TemplateError> {
        match self {
            CellSync::Gotk(g) => g.render(cell),
            CellSync::Instance(t) => t.render(cell),
        }
    }
}

impl From<FindError> for TemplateError {
    fn from(e: FindError) -> Self {
        match e {
            FindError::Fleet(e) => TemplateError::Fleet(e),
            FindError::Invalid { file, reason } => TemplateError::Invalid { file, reason },
        }
    }
}

/// How a new cell's Flux will sync, checked here and written by [`CellSync::render`]: for a
/// template with a `FluxInstance`, that file with `spec.sync.path` (and what `flux` sets) written
/// for the cell; else [`sync_source`]. A template with a FluxInstance and `flux bootstrap`'s
/// `gotk-components.yaml` or `gotk-sync.yaml` is refused: both would own Flux's `flux-system`
/// objects.
pub fn cell_sync(fleet: &dyn FleetRead, flux: &FluxGit) -> Result<CellSync, TemplateError> {
    let Some(found) = find_instance(fleet, TEMPLATE_DIR)? else {
        return gotk_sync_source(fleet, flux).map(CellSync::Gotk);
    };
    let mut gotk = Vec::new();
    for f in [GOTK_COMPONENTS, GOTK_SYNC] {
        let path = format!("{TEMPLATE_DIR}/{f}");
        if fleet.mode(&path)?.is_some() {
            gotk.push(path);
        }
    }
    if !gotk.is_empty() {
        return Err(TemplateError::BothKinds {
            instance: found.file,
            gotk: gotk.join(" and "),
        });
    }
    Ok(CellSync::Instance(Box::new(InstanceTemplate::new(found, flux)?)))
}

/// A new cell's `gotk-sync.yaml`: the template's, with the URL and branch `flux` sets (and the
/// base branch where it names none; [`FluxGit::branch_for`]); or, for a template without one,
/// [`render_gotk_sync`] with the configured URL. Checked here, written by [`GotkSync::render`].
/// A template whose Flux the Flux Operator runs has none: refused, naming its FluxInstance.
pub fn sync_source(fleet: &dyn FleetRead, flux: &FluxGit) -> Result<GotkSync, TemplateError> {
    match cell_sync(fleet, flux)? {
        CellSync::Gotk(g) => Ok(g),
        CellSync::Instance(t) => Err(TemplateError::OperatorTemplate {
            file: t.template_file().to_owned(),
        }),
    }
}

fn gotk_sync_source(fleet: &dyn FleetRead, flux: &FluxGit) -> Result<GotkSync, TemplateError> {
    let file = format!("{TEMPLATE_DIR}/{GOTK_SYNC}");
    match fleet.read_text(&file)? {
        Some(text) => GotkSync::from_template(&file, text, flux),
        None => GotkSync::rendered(&file, flux),
    }
}

/// Every file of a new cell's directory, in path order, with the template's modes. A symlink
/// is copied as a symlink with the same target: `clusters/<cell>/` sits where the template
/// does, so a relative target means the same there (and Flux leaves it out all the same).
pub fn new_cell_files(fleet: &dyn FleetRead, cell: &str, sync: &CellSync) -> Result<Vec<FileWrite>, TemplateError> {
    if !fleet.is_dir(TEMPLATE_DIR)? {
        return Err(TemplateError::NoTemplate);
    }
    let sync_file = sync.cell_file();
    let mut files = Vec::new();
    for (path, mode) in fleet.walk(TEMPLATE_DIR)? {
        let rel = &path[TEMPLATE_DIR.len() + 1..];
        if rel == sync_file {
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
        format!("clusters/{cell}/{sync_file}"),
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
        let src = CellSync::from(src);
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
