//! A new cell's `FluxInstance`, for a template whose Flux is run by the Flux Operator instead of
//! `flux bootstrap`'s `gotk-components.yaml` and `gotk-sync.yaml`: the template's own file, byte
//! for byte, with only `spec.sync.path` written for the cell and, where cellbridge is configured
//! to set them ([`FluxGit`]), `spec.sync.url` and `spec.sync.ref` — so the distribution, the
//! components, `spec.kustomize.patches`, `provider: github`, comments, key order and quoting
//! reach the cell as the template has them. The values are spliced in place as `gotk_sync/` does
//! (`splice.rs`), and the result is read back before it is used.
//!
//! What the fields mean is controlplaneio-fluxcd/flux-operator's (tag v0.58.1):
//! `api/v1/fluxinstance_types.go`, `Sync` (`kind` GitRepository, OCIRepository or Bucket; `url`;
//! `ref` "a Git ref name e.g. 'refs/heads/main', an OCI tag e.g. 'latest' or a bucket name";
//! `path` "the path to the source directory containing the kustomize overlay"; all four
//! required when `spec.sync` is set), and `internal/builder/templates.go`, `syncTmpl`: the
//! operator creates a source and a Flux Kustomization named `spec.sync.name` (else the
//! FluxInstance's namespace, `flux-system`) with `spec.path: {{.Sync.Path}}` as written, and a
//! GitRepository's `spec.ref.name: {{.Sync.Ref}}`. `docs/api/v1/fluxinstance.md`, "Sync
//! configuration", says the same in words.

use super::splice::{Edit, Slot, apply, slot};
use super::{FluxGit, TEMPLATE_DIR, TemplateError};
use crate::pure::fleet::{self, FileMode, FleetError, FleetRead};
use crate::pure::yaml::{Node, documents};

#[cfg(test)]
mod tests;

/// The API group of the Flux Operator's objects (`fluxcd.controlplane.io/v1`).
const INSTANCE_API: &str = "fluxcd.controlplane.io/";
const INSTANCE_KIND: &str = "FluxInstance";
/// The sync kind whose `url` and `ref` are a Git repository's, and so cellbridge's to set.
const GIT: &str = "GitRepository";
/// The prefix of a branch's ref name: `refs/heads/main` follows `main`.
const HEADS: &str = "refs/heads/";

/// A `FluxInstance` document of a directory, with the file that holds it.
#[derive(Debug, Clone)]
pub struct FoundInstance {
    pub file: String,
    pub doc: Node,
    text: String,
}

impl FoundInstance {
    /// `spec.sync`, when it is there.
    pub fn sync(&self) -> Option<&Node> {
        self.doc.get("spec").and_then(|s| s.get("sync"))
    }

    /// A string field of `spec.sync` (`path`, `kind`, `name`), unless empty.
    pub fn sync_field(&self, key: &str) -> Option<&str> {
        self.sync().and_then(|s| s.get(key)).and_then(Node::non_empty)
    }

    /// The name of the source and Kustomization the operator creates for `spec.sync`:
    /// `spec.sync.name`, else the FluxInstance's namespace (`flux-system` when it names none,
    /// the namespace the operator's own chart installs it in).
    pub fn sync_name(&self) -> String {
        self.sync_field("name")
            .or_else(|| {
                self.doc
                    .get("metadata")
                    .and_then(|m| m.get("namespace"))
                    .and_then(Node::non_empty)
            })
            .unwrap_or(super::FLUX_SYSTEM)
            .to_owned()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("{file}: {reason}")]
    Invalid { file: String, reason: String },
}

/// A Flux Operator `FluxInstance` (any version of `fluxcd.controlplane.io`).
fn is_instance(doc: &Node) -> bool {
    doc.get("kind").and_then(Node::str) == Some(INSTANCE_KIND)
        && doc
            .get("apiVersion")
            .and_then(Node::str)
            .is_some_and(|v| v.starts_with(INSTANCE_API))
}

/// The `FluxInstance` of `dir` (a cell's directory, or the template), in any of its YAML files
/// below it (conventionally `flux-system/flux-instance.yaml`); symlinks are not followed (Flux's
/// artifact has none) and `gotk-components.yaml`, `flux install`'s thousands of lines, is never
/// parsed. Two are an error naming both: the operator runs one per cluster ("A single custom
/// resource of this kind can exist in a Kubernetes cluster", `docs/api/v1/fluxinstance.md`).
pub fn find_instance(fleet: &dyn FleetRead, dir: &str) -> Result<Option<FoundInstance>, FindError> {
    let mut found: Vec<FoundInstance> = Vec::new();
    for (path, mode) in fleet.walk(dir)? {
        let yaml = path.ends_with(".yaml") || path.ends_with(".yml");
        if mode == FileMode::Symlink || !yaml || path.ends_with("/gotk-components.yaml") {
            continue;
        }
        let Some(text) = fleet.read_text(&path)? else { continue };
        if !text.contains(INSTANCE_KIND) {
            continue;
        }
        let docs = documents(&text).map_err(|reason| FindError::Invalid {
            file: path.clone(),
            reason,
        })?;
        for doc in docs.into_iter().filter(is_instance) {
            if let Some(first) = found.first() {
                return Err(FindError::Invalid {
                    file: path,
                    reason: format!(
                        "a second FluxInstance in {dir}/ (the first is in {}): the Flux Operator runs one per cluster",
                        first.file
                    ),
                });
            }
            found.push(FoundInstance {
                file: path.clone(),
                doc,
                text: text.clone(),
            });
        }
    }
    Ok(found.pop())
}

/// The template's `FluxInstance`, checked and ready to be written for any cell.
#[derive(Debug, Clone)]
pub struct InstanceTemplate {
    file: String,
    text: String,
    /// The URL and ref edits: the same for every cell.
    edits: Vec<Edit>,
    path: Slot,
    /// How the template writes its path around `clusters/_template`: `./` before, `/` after.
    path_form: (&'static str, &'static str),
    url: Option<String>,
    git_ref: Option<String>,
}

impl InstanceTemplate {
    /// Checks `found` (the template's FluxInstance) against `flux`, and proves on a stand-in cell
    /// that what the splices write reads back as intended, so that [`Self::render`] fails only on
    /// a broken invariant.
    pub(super) fn new(found: FoundInstance, flux: &FluxGit) -> Result<Self, TemplateError> {
        let file = found.file.clone();
        let invalid = |reason: String| TemplateError::Invalid {
            file: file.clone(),
            reason,
        };
        let want_path = format!("it must be `{TEMPLATE_DIR}`, which cellbridge writes as the cell's directory");
        let (sync_key, sync) = match (found.doc.get("spec"), found.sync()) {
            (Some(spec), Some(sync @ Node::Map(..))) => (spec.key("sync").expect("present"), sync),
            _ => {
                return Err(invalid(format!(
                    "the FluxInstance has no `spec.sync`, so no `spec.sync.path`: {want_path}"
                )));
            }
        };
        let raw_path = sync.get("path").and_then(Node::non_empty).unwrap_or("");
        let normalized = fleet::normalize("", raw_path.trim_start_matches('/')).unwrap_or_default();
        if raw_path.is_empty() || normalized != TEMPLATE_DIR {
            let is = if raw_path.is_empty() {
                "is missing".to_owned()
            } else {
                format!("is `{raw_path}`")
            };
            return Err(invalid(format!(
                "the FluxInstance's `spec.sync.path` {is}: {want_path}"
            )));
        }
        let path_form = (
            if raw_path.starts_with("./") {
                "./"
            } else if raw_path.starts_with('/') {
                "/"
            } else {
                ""
            },
            if raw_path.ends_with('/') { "/" } else { "" },
        );

        let text = &found.text;
        let field = ("the FluxInstance", "spec.sync");
        let kind = sync.get("kind").and_then(Node::non_empty);
        let named_url = sync.get("url").and_then(Node::non_empty);
        let named_ref = sync.get("ref").and_then(Node::non_empty);
        let mut edits = Vec::new();
        let (url, git_ref) = if kind != Some(GIT) {
            // An OCI tag or a bucket name: nothing of cellbridge's to set.
            if flux.url.is_some() || flux.branch.is_some() {
                return Err(invalid(format!(
                    "the FluxInstance's `spec.sync.kind` is {}, not {GIT}: CELLBRIDGE_FLUX_GIT_URL and CELLBRIDGE_FLUX_GIT_BRANCH set a Git repository and cannot apply",
                    kind.map_or("missing".to_owned(), |k| format!("`{k}`"))
                )));
            }
            (named_url.map(str::to_owned), named_ref.map(str::to_owned))
        } else {
            let url = match (&flux.url, named_url) {
                (Some(url), _) => {
                    let slot = slot(text, sync_key, sync, "url", field).map_err(invalid)?;
                    edits.push(slot.edit("url", url));
                    url.clone()
                }
                (None, Some(url)) => url.to_owned(),
                (None, None) => {
                    return Err(invalid(
                        "the FluxInstance's `spec.sync.url` is missing and CELLBRIDGE_FLUX_GIT_URL is not set: no Git URL for Flux".to_owned(),
                    ));
                }
            };
            let git_ref = match named_ref.map(|r| (r, r.strip_prefix(HEADS))) {
                // A tag, a pull request's head, a short name: not a branch cellbridge can move.
                Some((pin, None)) => {
                    if flux.branch.is_some() {
                        return Err(invalid(format!(
                            "the FluxInstance's `spec.sync.ref` is `{pin}`, not a branch (`{HEADS}<branch>`): CELLBRIDGE_FLUX_GIT_BRANCH cannot apply"
                        )));
                    }
                    pin.to_owned()
                }
                Some((_, Some(named))) => {
                    let branch = flux.branch_for(Some(named)).expect("a named branch");
                    if flux.branch.is_some() {
                        let slot = slot(text, sync_key, sync, "ref", field).map_err(invalid)?;
                        edits.push(slot.edit("ref", &format!("{HEADS}{branch}")));
                    }
                    format!("{HEADS}{branch}")
                }
                None => {
                    let branch = flux.branch_for(None).ok_or_else(|| {
                        invalid(
                            "no branch for Flux: the FluxInstance's `spec.sync.ref` is missing and the fleet repo's default branch is not known; set CELLBRIDGE_FLUX_GIT_BRANCH (the command line: --flux-branch)".to_owned(),
                        )
                    })?;
                    let slot = slot(text, sync_key, sync, "ref", field).map_err(invalid)?;
                    edits.push(slot.edit("ref", &format!("{HEADS}{branch}")));
                    format!("{HEADS}{branch}")
                }
            };
            (Some(url), Some(git_ref))
        };
        let path = slot(text, sync_key, sync, "path", field).map_err(invalid)?;
        let t = Self {
            file: found.file,
            text: found.text,
            edits,
            path,
            path_form,
            url,
            git_ref,
        };
        t.render("cell")?;
        Ok(t)
    }

    /// The template file it comes from.
    pub fn template_file(&self) -> &str {
        &self.file
    }

    /// The branch Flux follows with it; `None` for a ref that names no branch (a tag, an OCI
    /// tag, a bucket).
    pub fn branch(&self) -> Option<&str> {
        self.git_ref.as_deref().and_then(|r| r.strip_prefix(HEADS))
    }

    /// The file for `cell`.
    pub fn render(&self, cell: &str) -> Result<String, TemplateError> {
        let (before, after) = self.path_form;
        let path = format!("{before}clusters/{cell}{after}");
        let mut edits = self.edits.clone();
        edits.push(self.path.edit("path", &path));
        let out = apply(&self.text, edits);
        self.verify(&out, &path).map_err(|reason| TemplateError::Invalid {
            file: self.file.clone(),
            reason: format!("cannot be written for cell {cell} in place: {reason}"),
        })?;
        Ok(out)
    }

    /// The written file reads back with the values intended, in its one FluxInstance.
    fn verify(&self, out: &str, path: &str) -> Result<(), String> {
        let docs = documents(out)?;
        let mut instances = docs.iter().filter(|d| is_instance(d));
        let (Some(doc), None) = (instances.next(), instances.next()) else {
            return Err("the FluxInstance is lost".into());
        };
        let got = |k: &str| {
            doc.get("spec")
                .and_then(|s| s.get("sync"))
                .and_then(|s| s.get(k))
                .and_then(Node::non_empty)
                .map(str::to_owned)
        };
        let checks = [
            ("spec.sync.path", got("path"), Some(path.to_owned())),
            ("spec.sync.url", got("url"), self.url.clone()),
            ("spec.sync.ref", got("ref"), self.git_ref.clone()),
        ];
        for (what, got, want) in checks {
            if got != want {
                return Err(format!("{what} reads {got:?}, not {want:?}"));
            }
        }
        Ok(())
    }
}
