//! Where a cell's Flux tree starts: the directory its own Flux Kustomization applies.
//!
//! A cell bootstrapped by `flux bootstrap` has that Kustomization in
//! `flux-system/gotk-sync.yaml`, at `./clusters/<cell>`: the check starts there. A cell whose
//! Flux the Flux Operator runs has a `FluxInstance` in its directory instead (conventionally
//! `flux-system/flux-instance.yaml`), and the operator creates the Kustomization from its
//! `spec.sync`: named `spec.sync.name` (else the FluxInstance's namespace, `flux-system`), with
//! `spec.path` the FluxInstance's `spec.sync.path` as written (controlplaneio-fluxcd/flux-operator
//! v0.58.1, `internal/builder/templates.go`, `syncTmpl`; `internal/controller/
//! fluxinstance_controller.go` fills it from `obj.Spec.Sync`). The check starts at that path, and
//! the release it applies is that FluxInstance's (`release.rs`: `spec.distribution.version`, and
//! `spec.kustomize.patches` that reach kustomize-controller, such as
//! `--feature-gates=StrictPostBuildSubstitutions=false`).

use crate::pure::fleet::{self, FleetRead};
use crate::pure::template::{FindError, FoundInstance, find_instance};

use super::{CELL_LAYER, CheckError, Finding, FindingKind, build, invalid, yaml};

impl From<FindError> for CheckError {
    fn from(e: FindError) -> Self {
        match e {
            FindError::Fleet(e) => CheckError::Fleet(e),
            FindError::Invalid { file, reason } => invalid(&file, reason),
        }
    }
}

/// The root of a cell's tree.
pub(super) struct Root {
    /// The directory to build; `None` when Flux finds nothing there (a finding says why).
    pub(super) dir: Option<String>,
    /// The name of the Flux Kustomization that applies it.
    pub(super) name: String,
    /// The cell's FluxInstance, when it has one.
    pub(super) instance: Option<FoundInstance>,
}

/// The root of `clusters/<cell>`'s tree; what the check cannot follow is added to `findings` or
/// `not_checked`.
pub(super) fn cell_root(
    fleet: &dyn FleetRead,
    cell: &str,
    findings: &mut Vec<Finding>,
    not_checked: &mut Vec<String>,
) -> Result<Root, CheckError> {
    let cell_dir = format!("clusters/{cell}");
    let Some(instance) = find_instance(fleet, &cell_dir)? else {
        return Ok(Root {
            dir: Some(cell_dir),
            name: CELL_LAYER.to_owned(),
            instance: None,
        });
    };
    let name = instance.sync_name();
    let file = instance.file.clone();
    let mut root = Root {
        dir: Some(cell_dir.clone()),
        name: name.clone(),
        instance: None,
    };
    let Some(sync) = instance.sync() else {
        // No `spec.sync`: the operator syncs nothing, and whatever applies the cell directory
        // applies it as written.
        root.instance = Some(instance);
        return Ok(root);
    };
    let sync_line = sync.line();
    for patch in instance
        .doc
        .get("spec")
        .and_then(|s| s.get("kustomize"))
        .and_then(|k| k.get("patches"))
        .map(yaml::Node::items)
        .unwrap_or_default()
    {
        let target_kind = patch
            .get("target")
            .and_then(|t| t.get("kind"))
            .and_then(yaml::Node::str);
        if target_kind == Some("Kustomization") {
            not_checked.push(format!(
                "{file}:{}: a `spec.kustomize.patches` entry patches the Kustomization `{name}` the Flux Operator creates (a `postBuild`, say), which the check does not evaluate: the tree at its path is checked as written",
                patch.line()
            ));
        }
    }
    let finding = |line: usize, message: String| Finding {
        file: file.clone(),
        line,
        variable: String::new(),
        layer: name.clone(),
        message,
        kind: FindingKind::Layer,
    };
    let Some(raw) = instance.sync_field("path").map(str::to_owned) else {
        findings.push(finding(
            sync_line,
            format!(
                "the FluxInstance's `spec.sync` has no `path`, which the Flux Operator requires: no Kustomization `{name}` applies {cell_dir}"
            ),
        ));
        root.dir = None;
        root.instance = Some(instance);
        return Ok(root);
    };
    let path_line = sync.get("path").map_or(sync_line, yaml::Node::line);
    // Flux joins the path to the source's root, so a leading `/` is the root too.
    let dir = fleet::normalize("", raw.trim_start_matches('/')).map_err(|_| {
        invalid(
            &file,
            format!("the FluxInstance's `spec.sync.path` `{raw}` leaves the fleet repo"),
        )
    })?;
    let kind = instance.sync_field("kind").unwrap_or("").to_owned();
    if fleet.is_dir(&dir)? {
        root.dir = Some(dir);
    } else if kind != "GitRepository" {
        // An OCI artifact or a bucket holds what CI put there, not necessarily the fleet repo.
        not_checked.push(format!(
            "{file}:{path_line}: the FluxInstance syncs `spec.sync.path` `{raw}` from a{} {kind}, not a directory of the fleet repo: {cell_dir} is checked as written",
            if kind.starts_with(['A', 'E', 'I', 'O', 'U']) { "n" } else { "" }
        ));
    } else {
        let message = match fleet.symlink_on(&dir)? {
            Some(link) => format!(
                "{}, so kustomize-controller fails with 'kustomization path not found'",
                build::dropped_symlink(&format!("the FluxInstance's `spec.sync.path` `{raw}`"), &dir, &link)
            ),
            None => format!(
                "the FluxInstance's `spec.sync.path` `{raw}` is not a directory of the fleet repo: the Kustomization `{name}` the Flux Operator creates fails with 'kustomization path not found'"
            ),
        };
        findings.push(finding(path_line, message));
        root.dir = None;
    }
    root.instance = Some(instance);
    Ok(root)
}
