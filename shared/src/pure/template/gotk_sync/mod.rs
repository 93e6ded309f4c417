//! A new cell's `flux-system/gotk-sync.yaml`: the template's own text, byte for byte, with only
//! the values that belong to the cell spliced in place — the Kustomization `flux-system`'s
//! `spec.path` — and those cellbridge is configured to set — the GitRepository `flux-system`'s
//! `spec.url` and `spec.ref.branch`. Everything else the template says (comments, `provider:
//! github` for Flux's GitHub App authentication, `decryption` with SOPS, intervals, further
//! documents) reaches the cell's pull request and, through the bootstrap, the cluster unchanged.
//!
//! The file's usual layout is what `flux bootstrap` writes (fluxcd/flux2,
//! `pkg/manifestgen/sync/sync.go`: a comment, then a GitRepository and a Kustomization, both
//! `flux-system`, keys in sorted order, `path: ./<target path>`). The fields are those of
//! source-controller's `api/v1/gitrepository_types.go` (`spec.ref.branch` "defaults to 'master'
//! if no other field is defined"; `tag`, `semver`, `name` and `commit` take precedence over it;
//! `spec.provider` `generic`, `aws`, `azure` or `github`) and kustomize-controller's
//! `api/v1/kustomization_types.go` (`spec.path`, `spec.decryption`).
//!
//! The splicing itself, which writes a value over the scalar that holds it or adds the entry
//! where there is none, keeping the template's quoting and indentation, is `../splice.rs`.

#[cfg(test)]
mod tests;

use super::splice::{Edit, Slot, apply, slot};
use super::{SyncSource, TemplateError, render_gotk_sync};
use crate::pure::yaml::{Node, Scalar, documents};

/// The name of Flux's own GitRepository and Kustomization.
pub const FLUX_SYSTEM: &str = "flux-system";
const SOURCE_API: &str = "source.toolkit.fluxcd.io/";
const KUSTOMIZE_API: &str = "kustomize.toolkit.fluxcd.io/";
/// The `spec.ref` fields that take precedence over `branch` (source-controller's
/// `GitRepositoryRef`): with one of them Flux follows no branch.
const PINS: [&str; 4] = ["tag", "semver", "name", "commit"];

/// What cellbridge is configured to set in a cell's GitRepository `flux-system`, and the branch
/// it falls back to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FluxGit {
    /// `CELLBRIDGE_FLUX_GIT_URL` (the command line's `--flux-git-url`): replaces `spec.url`.
    pub url: Option<String>,
    /// `CELLBRIDGE_FLUX_GIT_BRANCH` (`--flux-branch`): replaces `spec.ref.branch`.
    pub branch: Option<String>,
    /// The fleet repo's base branch, the one the fleet was read from and cells are merged into:
    /// `CELLBRIDGE_BASE_BRANCH`, else the repository's default branch as GitHub reports it (for
    /// a local checkout, as its clone recorded it). Written only where the file names no branch.
    pub base_branch: Option<String>,
}

impl FluxGit {
    /// The one rule for the branch Flux follows: the configured branch; else the one the
    /// `gotk-sync.yaml` names (`named`: the cell's, or the template's); else the base branch.
    /// `None` when none of them is known: never a guessed `main`.
    pub fn branch_for(&self, named: Option<&str>) -> Option<String> {
        self.branch
            .as_deref()
            .or(named)
            .or(self.base_branch.as_deref())
            .map(str::to_owned)
    }
}

/// A branch name as configured (`CELLBRIDGE_FLUX_GIT_BRANCH`, `--flux-branch`): the error says
/// why not.
pub fn check_branch(name: &str) -> Result<(), String> {
    let bad_char = name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if name.is_empty()
        || bad_char
        || name.contains("..")
        || name.contains("@{")
        || name.contains("//")
        || name.starts_with(['/', '-', '.'])
        || name.ends_with(['/', '.'])
        || name.ends_with(".lock")
    {
        return Err("not a branch name".into());
    }
    Ok(())
}

/// A new cell's `gotk-sync.yaml`, ready to be written for any cell: the template's, or (a
/// template without one) the two objects cellbridge renders itself.
#[derive(Debug, Clone)]
pub struct GotkSync(Inner);

#[derive(Debug, Clone)]
enum Inner {
    Rendered(SyncSource),
    Template(Box<FromTemplate>),
}

impl GotkSync {
    /// Without a template file: [`render_gotk_sync`] with the configured URL and the branch of
    /// [`FluxGit::branch_for`].
    pub(super) fn rendered(file: &str, flux: &FluxGit) -> Result<Self, TemplateError> {
        let url = flux.url.clone().ok_or(TemplateError::NoSyncSource)?;
        let branch = flux
            .branch_for(None)
            .ok_or_else(|| TemplateError::NoBranch { file: file.to_owned() })?;
        Ok(Self(Inner::Rendered(SyncSource { url, branch })))
    }

    /// The template's `text` (from `file`), checked now: every field cellbridge writes can be
    /// written in place, so that [`Self::render`] fails only on a broken invariant.
    pub(super) fn from_template(file: &str, text: String, flux: &FluxGit) -> Result<Self, TemplateError> {
        let t = FromTemplate::new(file, text, flux)?;
        // Proven once on a stand-in cell: what the splices write reads back as intended.
        t.render("cell")?;
        Ok(Self(Inner::Template(Box::new(t))))
    }

    /// The file for `cell`.
    pub fn render(&self, cell: &str) -> Result<String, TemplateError> {
        match &self.0 {
            Inner::Rendered(source) => Ok(render_gotk_sync(cell, source)),
            Inner::Template(t) => t.render(cell),
        }
    }

    /// The template file it comes from; `None` when cellbridge renders it.
    pub fn template_file(&self) -> Option<&str> {
        match &self.0 {
            Inner::Rendered(_) => None,
            Inner::Template(t) => Some(&t.file),
        }
    }

    /// The branch Flux follows with it; `None` when the template pins a tag, a SemVer range, a
    /// reference name or a commit.
    pub fn branch(&self) -> Option<&str> {
        match &self.0 {
            Inner::Rendered(source) => Some(&source.branch),
            Inner::Template(t) => t.branch.as_deref(),
        }
    }
}

#[derive(Debug, Clone)]
struct FromTemplate {
    file: String,
    text: String,
    /// The URL and branch edits: the same for every cell.
    edits: Vec<Edit>,
    path: Slot,
    url: String,
    branch: Option<String>,
}

impl FromTemplate {
    fn new(file: &str, text: String, flux: &FluxGit) -> Result<Self, TemplateError> {
        let invalid = |reason: String| TemplateError::Invalid {
            file: file.to_owned(),
            reason,
        };
        let docs = documents(&text).map_err(invalid)?;
        let (repo_key, repo) = flux_object(&docs, SOURCE_API, "GitRepository")
            .map_err(invalid)?
            .ok_or(TemplateError::NoSyncSource)?;
        let (ks_key, ks) = flux_object(&docs, KUSTOMIZE_API, "Kustomization")
            .map_err(invalid)?
            .ok_or_else(|| {
                invalid(format!(
                    "has no Kustomization `{FLUX_SYSTEM}` (its `spec.path` is the cell's)"
                ))
            })?;
        let mut edits = Vec::new();
        let repo_name = format!("the GitRepository `{FLUX_SYSTEM}`");
        let repo_field = (repo_name.as_str(), "spec");

        let url = match (&flux.url, repo.get("url").and_then(Node::non_empty)) {
            (Some(url), _) => {
                let slot = slot(&text, repo_key, repo, "url", repo_field).map_err(invalid)?;
                edits.push(slot.edit("url", url));
                url.clone()
            }
            (None, Some(url)) => url.to_owned(),
            (None, None) => return Err(TemplateError::NoSyncSource),
        };

        let git_ref = repo.get("ref");
        let pins: Vec<&str> = PINS
            .into_iter()
            .filter(|k| git_ref.and_then(|r| r.get(k)).and_then(Node::non_empty).is_some())
            .collect();
        let named = git_ref.and_then(|r| r.get("branch")).and_then(Node::non_empty);
        let branch = if let Some(pin) = pins.first() {
            if flux.branch.is_some() {
                return Err(invalid(format!(
                    "the GitRepository `{FLUX_SYSTEM}` pins `spec.ref.{pin}`, which takes precedence over a branch: CELLBRIDGE_FLUX_GIT_BRANCH cannot apply"
                )));
            }
            named.map(str::to_owned)
        } else {
            let branch = flux
                .branch_for(named)
                .ok_or_else(|| TemplateError::NoBranch { file: file.to_owned() })?;
            if named != Some(branch.as_str()) || flux.branch.is_some() {
                match git_ref {
                    None => {
                        let slot = slot(&text, repo_key, repo, "ref", repo_field).map_err(invalid)?;
                        edits.push(slot.edit_ref(&branch));
                    }
                    Some(r) => {
                        let ref_key = repo.key("ref").expect("present");
                        let slot = slot(&text, ref_key, r, "branch", (&repo_name, "spec.ref")).map_err(invalid)?;
                        edits.push(slot.edit("branch", &branch));
                    }
                }
            }
            Some(branch)
        };

        let ks_field = format!("the Kustomization `{FLUX_SYSTEM}`");
        let path = slot(&text, ks_key, ks, "path", (&ks_field, "spec")).map_err(invalid)?;
        Ok(Self {
            file: file.to_owned(),
            text,
            edits,
            path,
            url,
            branch,
        })
    }

    fn render(&self, cell: &str) -> Result<String, TemplateError> {
        let path = format!("./clusters/{cell}");
        let mut edits = self.edits.clone();
        edits.push(self.path.edit("path", &path));
        let out = apply(&self.text, edits);
        self.verify(&out, &path).map_err(|reason| TemplateError::Invalid {
            file: self.file.clone(),
            reason: format!("cannot be written for cell {cell} in place: {reason}"),
        })?;
        Ok(out)
    }

    /// The written file reads back with the values intended.
    fn verify(&self, out: &str, path: &str) -> Result<(), String> {
        let docs = documents(out)?;
        let (_, repo) = flux_object(&docs, SOURCE_API, "GitRepository")?.ok_or("the GitRepository is lost")?;
        let (_, ks) = flux_object(&docs, KUSTOMIZE_API, "Kustomization")?.ok_or("the Kustomization is lost")?;
        let got = |n: &Node, k: &[&str]| {
            k.iter()
                .try_fold(n, |n, k| n.get(k))
                .and_then(Node::non_empty)
                .map(str::to_owned)
        };
        let checks = [
            ("spec.url", got(repo, &["url"]), Some(self.url.clone())),
            ("spec.ref.branch", got(repo, &["ref", "branch"]), self.branch.clone()),
            ("spec.path", got(ks, &["path"]), Some(path.to_owned())),
        ];
        for (what, got, want) in checks {
            if got != want {
                return Err(format!("{what} reads {got:?}, not {want:?}"));
            }
        }
        Ok(())
    }
}

/// The `spec` (its key, and the mapping) of the one object of `kind` named `flux-system`
/// (apiVersion in `group`); two are an error.
fn flux_object<'a>(docs: &'a [Node], group: &str, kind: &str) -> Result<Option<(&'a Scalar, &'a Node)>, String> {
    let mut found = None;
    for doc in docs {
        let is = doc.get("kind").and_then(Node::non_empty) == Some(kind)
            && doc
                .get("apiVersion")
                .and_then(Node::non_empty)
                .is_some_and(|v| v.starts_with(group))
            && doc
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Node::non_empty)
                == Some(FLUX_SYSTEM);
        if !is {
            continue;
        }
        if found.is_some() {
            return Err(format!("holds two {kind} `{FLUX_SYSTEM}`"));
        }
        match (doc.key("spec"), doc.get("spec")) {
            (Some(key), Some(spec @ Node::Map(..))) => found = Some((key, spec)),
            _ => return Err(format!("the {kind} `{FLUX_SYSTEM}` has no `spec` mapping")),
        }
    }
    Ok(found)
}
