//! The strict substitution check: what kustomize-controller would do to every layer of a cell
//! (every Flux Kustomization with a `postBuild`), without a cluster.
//!
//! What is checked, and why it matches Flux:
//!
//! - The layers are the Flux Kustomizations (`kustomize.toolkit.fluxcd.io/*`, kind
//!   `Kustomization`) that `kustomize build clusters/<cell>` would produce (the cell's
//!   `kustomization.yaml`, or every YAML file when it has none; `flux-system/gotk-components.yaml`
//!   is never read) and that have a `spec.postBuild`: Flux substitutes whatever the sources. For
//!   a cell whose Flux the Flux Operator runs, the tree starts where its `FluxInstance`'s
//!   `spec.sync.path` says (`root.rs`).
//!   Their `spec.path` is followed in the fleet repo itself (a `sourceRef` to another repository
//!   is not followed).
//! - At each layer path the files kustomize would read are collected: a kustomization file's
//!   `resources`/`bases`/`components` (files, or directories built recursively), `patches`,
//!   `patchesStrategicMerge`, `patchesJson6902` (files and inline patches), `configMapGenerator`
//!   `files`/`envs`/`literals`; without a kustomization file, every `.yaml`/`.yml` file below
//!   it, a subdirectory with its own kustomization file being built as one (what
//!   kustomize-controller generates). `secretGenerator` output is base64, which substitution
//!   never sees, so it is skipped. Remote resources are listed as not checked (no network).
//! - Flux substitutes the resource as kustomize re-serialises it (through JSON), so comments
//!   are gone and only keys and values remain. The check therefore parses each YAML document
//!   and scans the *values of its scalars* (keys included), which skips comments the way Flux
//!   does and handles quoting, and maps every `${` back to its line in the original file. A
//!   document labelled or annotated `kustomize.toolkit.fluxcd.io/substitute: disabled` is
//!   skipped. Each scalar is scanned on its own: an expression cannot span two values here,
//!   while in Flux an unclosed `${x:=` could swallow text up to a later `}`; both are mistakes,
//!   and the check reports the unclosed one.
//! - A variable is set when one of the layer's `substituteFrom` sources has the key or its
//!   `spec.postBuild.substitute` has it; `sources.rs` resolves the sources as
//!   kustomize-controller does (the layer's namespace, `optional`, generators' hashed names,
//!   ConfigMaps and Secrets applied from Git, keys declared in [`IN_CLUSTER_SOURCES`]). A
//!   default operator (`:=`, `=`, `:-`, ...) makes a reference fine when unset; every other
//!   reference to an unset variable is a finding (with "did you mean" when a known key is
//!   within two edits), as is every malformed expression (Flux's parser refuses the whole
//!   resource), unless only an undeclared in-cluster source could supply it: then it is
//!   *unverified*, reported but not failed. Keys of `cell-metadata` that no layer reading it
//!   references (in any form) are reported as unused.
//!
//! Where each part lives: `root.rs` says where the cell's tree starts, `layers.rs` says which Flux Kustomizations of the cell are layers,
//! `build.rs` collects the files kustomize would read to build one, `sources.rs` resolves what
//! each layer substitutes from (`in_cluster.rs` reads the declarations), `scan.rs` walks the
//! files value by value and makes every finding with its file and line, `report.rs` holds the
//! report and finding types; they all read the crate's YAML tree with source positions
//! (`yaml.rs`, which a new cell's `gotk-sync.yaml` is written with too).

mod build;
mod in_cluster;
mod layers;
mod naming;
mod release;
mod report;
mod reserialise;
mod root;
mod scan;
mod sources;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use super::configmap::{self, ConfigMapError};
use super::envsubst;
use super::fleet::{EntryKind, FleetError, FleetRead};
use super::secrets;
use super::yaml;

use build::{Build, Role, Unit};
pub use in_cluster::IN_CLUSTER_SOURCES;
use layers::flux_layer;
pub use release::{FLEET_SETTING, FluxRelease, Version};
pub use report::{CheckReport, Finding, FindingKind, Layer, Unverified};
use scan::scan_unit;

/// The ConfigMap the layers substitute from.
pub const CONFIGMAP_NAME: &str = "cell-metadata";
/// The label or annotation that turns substitution off for one resource.
pub const SUBSTITUTE_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";
/// kustomize's recognised kustomization file names, in its order of preference.
pub const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
/// The Flux Kustomization that applies `clusters/<cell>` itself (from `gotk-sync.yaml`, or
/// created by the Flux Operator from a FluxInstance's `spec.sync`, `root.rs`).
const CELL_LAYER: &str = "flux-system";

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("{file}: {reason}")]
    Invalid { file: String, reason: String },
    #[error(transparent)]
    ConfigMap(#[from] ConfigMapError),
}

fn invalid(file: &str, reason: impl Into<String>) -> CheckError {
    CheckError::Invalid {
        file: file.to_owned(),
        reason: reason.into(),
    }
}

/// Checks every layer of `clusters/<cell>` against the ConfigMap data `vars`.
pub fn check_cell(
    fleet: &dyn FleetRead,
    cell: &str,
    vars: &BTreeMap<String, String>,
) -> Result<CheckReport, CheckError> {
    let cell_dir = format!("clusters/{cell}");
    if let Some(report) = symlinked_cell(fleet, cell)? {
        return Ok(report);
    }
    if !fleet.is_dir(&cell_dir)? {
        return Err(invalid(&cell_dir, "no such cell directory in the fleet repo"));
    }
    let mut report = CheckReport {
        cell: cell.to_owned(),
        ..Default::default()
    };

    // What Flux applies from the cell directory itself (or from where its FluxInstance syncs).
    let root = root::cell_root(fleet, cell, &mut report.findings, &mut report.not_checked)?;
    let mut cell_build = Build::new(fleet, &root.name);
    if let Some(dir) = &root.dir {
        cell_build.dir(dir)?;
    }
    let mut layers = Vec::new();
    for unit in &cell_build.units {
        if let Unit::File {
            path,
            role: Role::Manifest,
        } = unit
        {
            if path.ends_with("/gotk-components.yaml") {
                continue;
            }
            let text = read(fleet, path)?;
            for doc in yaml::documents(&text).map_err(|r| invalid(path, r))? {
                if let Some(l) = flux_layer(&doc, path)? {
                    layers.push(l);
                }
            }
        }
    }
    report.findings.append(&mut cell_build.findings);
    report.not_checked.append(&mut cell_build.not_checked);
    let manifests: Vec<&str> = cell_build
        .units
        .iter()
        .filter_map(|u| match u {
            Unit::File {
                path,
                role: Role::Manifest,
            } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    report.flux = release::read_release(fleet, cell, &manifests, root.instance.as_ref())?;
    let rules = report.flux.clone();

    // Every layer is built before any is scanned: a layer may substitute from a ConfigMap
    // that the cell directory or another layer applies.
    let mut git_sources = Vec::new();
    sources::collect(fleet, &cell_build, None, &mut git_sources)?;
    let mut builds = Vec::with_capacity(layers.len());
    for l in &layers {
        let mut build = Build::new(fleet, &l.name);
        let found = if l.path.is_empty() {
            true
        } else {
            fleet.is_dir(&l.path)?
        };
        if found {
            build.dir(&l.path)?;
        } else {
            report.findings.push(Finding {
                file: l.defined_in.clone(),
                line: l.path_line,
                variable: String::new(),
                layer: l.name.clone(),
                message: match fleet.symlink_on(&l.path)? {
                    Some(link) => format!(
                        "{}, so kustomize-controller fails with 'kustomization path not found'",
                        build::dropped_symlink(&format!("spec.path `{}`", l.path), &l.path, &link)
                    ),
                    None => format!("spec.path `{}` is not a directory of the fleet repo", l.path),
                },
                kind: FindingKind::Layer,
            });
        }
        sources::collect(fleet, &build, l.target_namespace.as_deref(), &mut git_sources)?;
        builds.push(build);
    }
    let declared = in_cluster::read(fleet)?;
    let invalid_keys = invalid_metadata_keys(fleet, cell, vars)?;

    let mut used: BTreeSet<String> = BTreeSet::new();
    for (l, mut build) in layers.into_iter().zip(builds) {
        let layer_vars = sources::resolve(&l, vars, &git_sources, &declared, &mut report.findings);
        let mut layer_used = BTreeSet::new();
        let mut files = BTreeSet::new();
        // kustomize-controller substitutes only when a variable is defined or the strategy is
        // Always (fluxcd/pkg kustomize_varsub.go, `len(vars) > 0 || options.Always`, the
        // strategy from v1.9.0): a layer with neither is applied as written. A source whose
        // keys are unknown may define some.
        let always = l.always && rules.has_substitute_strategy();
        let substituted = always || !layer_vars.known.is_empty() || !layer_vars.unknown.is_empty();
        for unit in &build.units {
            files.insert(unit.path().to_owned());
            if !substituted {
                continue;
            }
            scan_unit(fleet, unit, (&l, &rules), &layer_vars, &mut layer_used, &mut report)?;
        }
        if !substituted && let Some((file, line, variable, expr)) = scan::first_reference(fleet, &build.units)? {
            report.findings.push(skipped(&l, &rules, file, line, variable, &expr));
        }
        if layer_vars.reads_cell_metadata {
            used.append(&mut layer_used);
            for (key, file, line) in &invalid_keys {
                report.findings.push(Finding {
                    file: file.clone(),
                    line: *line,
                    variable: key.clone(),
                    layer: l.name.clone(),
                    message: format!(
                        "`{key}` (a key of ConfigMap/{CONFIGMAP_NAME}) is not a valid variable name ({}): Flux fails the whole layer with \"'{key}' var name is invalid\"",
                        envsubst::NAME_PATTERN
                    ),
                    kind: FindingKind::Layer,
                });
            }
        }
        report.findings.append(&mut build.findings);
        report.not_checked.append(&mut build.not_checked);
        report.layers.push(Layer {
            name: l.name,
            defined_in: l.defined_in,
            path: l.path,
            files: files.len(),
        });
    }

    report.findings.sort();
    report.findings.dedup();
    report.warnings.sort();
    report.warnings.dedup();
    // An empty value is said once, where it is first used.
    let mut said = BTreeSet::new();
    report
        .warnings
        .retain(|w| w.kind != FindingKind::Empty || said.insert(w.variable.clone()));
    report.not_checked.sort();
    report.not_checked.dedup();
    report.unverified.sort();
    report.unverified.dedup();
    report.unused_keys = vars.keys().filter(|k| !used.contains(*k)).cloned().collect();
    Ok(report)
}

/// A layer with `${...}` whose substitution kustomize-controller skips: no variable resolves,
/// and fluxcd/pkg `kustomize/kustomize_varsub.go` substitutes only when `len(vars) > 0` or the
/// strategy is `Always` (kustomize-controller v1.9.0's `spec.postBuild.substituteStrategy`;
/// its `docs/spec/v1/kustomizations.md`: "a `substituteFrom` reference to an empty ConfigMap or
/// Secret yields no variables, so the substitution is still skipped"). The literal text is
/// applied to the cluster without a word, so it is a finding; the way out depends on the release.
fn skipped(
    l: &layers::FluxLayer,
    rules: &FluxRelease,
    file: String,
    line: usize,
    variable: String,
    expr: &str,
) -> Finding {
    let sources = sources::LayerVars::describe(l);
    let why = if sources.is_empty() && l.inline.is_empty() {
        "it substitutes from nothing".to_owned()
    } else if sources.is_empty() {
        "its `substitute` is empty".to_owned()
    } else {
        format!("none of its sources ({sources}) holds a key")
    };
    let hint = if rules.has_substitute_strategy() {
        format!(
            "set `spec.postBuild.substituteStrategy: Always` on the layer ({}) so Flux substitutes it anyway, or give it a source that resolves",
            rules.describe()
        )
    } else if l.always {
        format!(
            "its `substituteStrategy: Always` is unknown to {} (it came with v1.9.0): give it a source that resolves (a key in a ConfigMap or Secret it substitutes from, or a `spec.postBuild.substitute` entry)",
            rules.describe()
        )
    } else {
        format!(
            "{} has no `substituteStrategy` (it came with v1.9.0): give the layer a source that resolves (a key in a ConfigMap or Secret it substitutes from, or a `spec.postBuild.substitute` entry)",
            rules.describe()
        )
    };
    Finding {
        file,
        line,
        variable,
        layer: l.name.clone(),
        message: format!(
            "layer `{}` has `{expr}` but {why}: kustomize-controller skips the layer's substitution when no variable resolves, and applies `{expr}` to the cluster as written; {hint}",
            l.name
        ),
        kind: FindingKind::Skipped,
    }
}

/// `cellbridge check`: every cell of the fleet repo (each directory under `clusters/` but
/// `_template`), or only `cell`, against the cell's own `cell-metadata.yaml`.
pub fn check_fleet(fleet: &dyn FleetRead, cell: Option<&str>) -> Result<Vec<CheckReport>, CheckError> {
    let cells: Vec<String> = match cell {
        Some(c) => vec![c.to_owned()],
        None => fleet
            .list("clusters")?
            .ok_or_else(|| invalid("clusters", "the fleet repo has no clusters/ directory"))?
            .into_iter()
            .filter(|e| {
                // A symlinked cell is listed so that it is reported, not silently skipped.
                matches!(e.kind, EntryKind::Dir | EntryKind::Symlink)
                    && e.name != "_template"
                    && !e.name.starts_with('.')
            })
            .map(|e| e.name)
            .collect(),
    };
    let mut reports = Vec::with_capacity(cells.len());
    for c in cells {
        if c.is_empty() || c.contains('/') || c == "." || c == ".." {
            return Err(invalid(&c, "not a cell name"));
        }
        if let Some(report) = symlinked_cell(fleet, &c)? {
            reports.push(report);
            continue;
        }
        let path = configmap::path_for(&c);
        if !fleet.is_dir(&format!("clusters/{c}"))? {
            return Err(invalid(
                &format!("clusters/{c}"),
                "no such cell directory in the fleet repo",
            ));
        }
        let text = fleet
            .read_text(&path)?
            .ok_or_else(|| invalid(&path, "missing: the check needs the cell's ConfigMap `cell-metadata`"))?;
        let existing = configmap::parse(&text, &path)?;
        let mut report = check_cell(fleet, &c, &existing.data)?;
        report.warnings.extend(secrets_in_git(&text, &path, &existing.data));
        reports.push(report);
    }
    Ok(reports)
}

/// Keys of a fleet's `cell-metadata.yaml` that look like secrets, one warning each (naming the
/// key and its kind, never the value). The check reads what is in Git, so it cannot refuse: the
/// secret is there already, to be rotated.
fn secrets_in_git(text: &str, path: &str, data: &BTreeMap<String, String>) -> Vec<Finding> {
    let keys = yaml::documents(text)
        .ok()
        .and_then(|docs| docs.into_iter().find_map(|d| d.get("data").cloned()));
    data.iter()
        .filter_map(|(k, v)| {
            let why = secrets::shape(k, v)?;
            Some(Finding {
                file: path.to_owned(),
                line: keys.as_ref().and_then(|d| d.key(k)).map(|s| s.line).unwrap_or(1),
                variable: k.clone(),
                layer: String::new(),
                message: format!(
                    "`{k}` of ConfigMap/{CONFIGMAP_NAME} looks like a secret ({why}) and is in Git already: rotate that secret, then {}",
                    secrets::HINT
                ),
                kind: FindingKind::Secret,
            })
        })
        .collect()
}

/// A cell directory that is (or lies behind) a symlink: Flux's artifact has no such directory,
/// so the cell's own `flux-system` Kustomization fails; one finding says so.
/// The keys of the cell's ConfigMap Flux refuses as variable names, with the file and line that
/// hold each: Flux validates every variable before substituting, the cell's own ConfigMap's
/// included (fluxcd/pkg `kustomize/kustomize_varsub.go`, `varSubstitution`), so one such key
/// fails every layer that substitutes from it. cellbridge never writes one (the contract refuses
/// it); a hand edit can.
fn invalid_metadata_keys(
    fleet: &dyn FleetRead,
    cell: &str,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<(String, String, usize)>, CheckError> {
    let bad: Vec<&String> = vars.keys().filter(|k| !envsubst::valid_name(k)).collect();
    if bad.is_empty() {
        return Ok(Vec::new());
    }
    let path = configmap::path_for(cell);
    let data = match fleet.read_text(&path)? {
        Some(text) => yaml::documents(&text)
            .ok()
            .and_then(|docs| docs.into_iter().find_map(|d| d.get("data").cloned())),
        None => None,
    };
    Ok(bad
        .into_iter()
        .map(|k| {
            let line = data.as_ref().and_then(|d| d.key(k)).map(|s| s.line).unwrap_or(1);
            (k.clone(), path.clone(), line)
        })
        .collect())
}

fn symlinked_cell(fleet: &dyn FleetRead, cell: &str) -> Result<Option<CheckReport>, CheckError> {
    let Some(link) = fleet.symlink_on(&format!("clusters/{cell}"))? else {
        return Ok(None);
    };
    Ok(Some(CheckReport {
        cell: cell.to_owned(),
        findings: vec![Finding {
            file: link.path.clone(),
            line: 1,
            variable: String::new(),
            layer: CELL_LAYER.to_owned(),
            message: format!(
                "`{}` is a symlink (→ {}): Flux leaves symlinks out of its source artifact, so the `{CELL_LAYER}` Kustomization's path `./clusters/{cell}` is not found; make it a directory",
                link.path, link.target
            ),
            kind: FindingKind::Layer,
        }],
        ..Default::default()
    }))
}

fn read(fleet: &dyn FleetRead, path: &str) -> Result<String, CheckError> {
    fleet
        .read_text(path)?
        .ok_or_else(|| invalid(path, "file disappeared while checking"))
}
