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

use std::ops::Range;

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, StructureStyle};

use super::{SyncSource, TemplateError, render_gotk_sync};

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

/// Where a value goes: over the scalar that holds it, or a new entry before the first key of its
/// block mapping.
#[derive(Debug, Clone)]
enum Slot {
    Value {
        span: Range<usize>,
        style: ScalarStyle,
    },
    Insert {
        at: usize,
        /// The mapping's indentation, and one level of the document's indentation.
        indent: String,
        step: String,
    },
}

type Edit = (Range<usize>, String);

impl Slot {
    fn edit(&self, key: &str, value: &str) -> Edit {
        match self {
            Slot::Value { span, style } => (span.clone(), scalar(value, *style)),
            Slot::Insert { at, indent, .. } => (
                *at..*at,
                format!("{key}: {}\n{indent}", scalar(value, ScalarStyle::Plain)),
            ),
        }
    }

    /// `ref:` with `branch:` below it, as a new entry.
    fn edit_ref(&self, branch: &str) -> Edit {
        match self {
            Slot::Insert { at, indent, step } => (
                *at..*at,
                format!(
                    "ref:\n{indent}{step}branch: {}\n{indent}",
                    scalar(branch, ScalarStyle::Plain)
                ),
            ),
            Slot::Value { .. } => unreachable!("a `ref` slot is always an insertion"),
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

        let url = match (&flux.url, repo.get("url").and_then(Node::non_empty)) {
            (Some(url), _) => {
                let slot = slot(&text, repo_key, repo, "url", "GitRepository").map_err(invalid)?;
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
                        let slot = slot(&text, repo_key, repo, "ref", "GitRepository").map_err(invalid)?;
                        edits.push(slot.edit_ref(&branch));
                    }
                    Some(r) => {
                        let ref_key = repo.key("ref").expect("present");
                        let slot = slot(&text, ref_key, r, "branch", "GitRepository").map_err(invalid)?;
                        edits.push(slot.edit("branch", &branch));
                    }
                }
            }
            Some(branch)
        };

        let path = slot(&text, ks_key, ks, "path", "Kustomization").map_err(invalid)?;
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
        // Stable: two entries inserted at one place keep the order they were made in.
        edits.sort_by_key(|(r, _)| r.start);
        let mut out = String::with_capacity(self.text.len() + 64);
        let mut pos = 0;
        for (range, with) in &edits {
            out.push_str(&self.text[pos..range.start]);
            out.push_str(with);
            pos = range.end;
        }
        out.push_str(&self.text[pos..]);
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

/// `value` as a YAML scalar in (about) the style of the one it replaces: plain when plain reads
/// back as this very string, single-quoted for a single-quoted one, else a double-quoted JSON
/// string (valid YAML).
fn scalar(value: &str, style: ScalarStyle) -> String {
    match style {
        ScalarStyle::Plain if plain_ok(value) => value.to_owned(),
        ScalarStyle::SingleQuoted if !value.chars().any(char::is_control) => {
            format!("'{}'", value.replace('\'', "''"))
        }
        _ => serde_json::to_string(value).expect("a string serializes"),
    }
}

fn plain_ok(value: &str) -> bool {
    let simple = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || "./_".contains(c))
        && !value.ends_with(':')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@~+=".contains(c));
    // `true`, `1.0`, `null`, `0x1f`, `.inf` are plain too, but not strings.
    simple
        && serde_saphyr::from_str::<serde_json::Value>(&format!("v: {value}"))
            .is_ok_and(|v| v["v"].as_str() == Some(value))
}

/// The slot of `key` in `map`, the value of `parent` (whose key scalar is given). `kind` names
/// the object in errors.
fn slot(text: &str, parent: &Scalar, map: &Node, key: &str, kind: &str) -> Result<Slot, String> {
    let field = format!("the {kind} `{FLUX_SYSTEM}`'s `{}.{key}`", parent.value);
    match map.get(key) {
        Some(Node::Scalar(s)) if s.is_null() => Err(format!("{field} is empty: give it a value")),
        Some(Node::Scalar(s)) => match s.style {
            ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => Ok(Slot::Value {
                span: s.span.clone(),
                style: s.style,
            }),
            _ => Err(format!("{field} is a block scalar: write it on one line")),
        },
        Some(_) => Err(format!("{field} is not a string")),
        None => {
            let Node::Map(entries, StructureStyle::Block) = map else {
                return Err(format!(
                    "{field} is missing and `{}` is not a block mapping to add it to",
                    parent.value
                ));
            };
            let Some((Node::Scalar(first), _)) = entries.first() else {
                return Err(format!("{field} is missing and `{}` has no entries", parent.value));
            };
            let indent =
                line_prefix(text, first.span.start).ok_or_else(|| format!("{field} is missing and cannot be added"))?;
            let outer = line_prefix(text, parent.span.start).map_or(0, str::len);
            let step = indent.len().checked_sub(outer).filter(|s| *s > 0).unwrap_or(2);
            Ok(Slot::Insert {
                at: first.span.start,
                indent: indent.to_owned(),
                step: " ".repeat(step),
            })
        }
    }
}

/// The spaces before `at` on its line; `None` when anything else is there.
fn line_prefix(text: &str, at: usize) -> Option<&str> {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let prefix = &text[start..at];
    prefix.bytes().all(|b| b == b' ').then_some(prefix)
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

// ---- a YAML tree with the source position of every scalar ----------------------------------

#[derive(Debug, Clone)]
struct Scalar {
    value: String,
    style: ScalarStyle,
    /// Byte range of the scalar's source text, quotes included.
    span: Range<usize>,
}

#[derive(Debug, Clone)]
enum Node {
    Scalar(Scalar),
    Map(Vec<(Node, Node)>, StructureStyle),
    /// A sequence or an alias: nothing cellbridge writes is in one, so only its place is kept.
    Other,
}

impl Node {
    fn entry(&self, key: &str) -> Option<&(Node, Node)> {
        match self {
            Node::Map(entries, _) => entries
                .iter()
                .find(|(k, _)| matches!(k, Node::Scalar(s) if s.value == key)),
            _ => None,
        }
    }

    fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key scalar of `key`'s entry.
    fn key(&self, key: &str) -> Option<&Scalar> {
        match self.entry(key) {
            Some((Node::Scalar(s), _)) => Some(s),
            _ => None,
        }
    }

    fn non_empty(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) if !s.is_null() => Some(&s.value),
            _ => None,
        }
    }
}

impl Scalar {
    /// Empty, or a plain null (the parser reports an empty value as `~` with no source text).
    fn is_null(&self) -> bool {
        self.value.is_empty()
            || (self.style == ScalarStyle::Plain
                && (self.span.is_empty() || matches!(self.value.as_str(), "~" | "null" | "Null" | "NULL")))
    }
}

enum Frame {
    Seq,
    Map(Vec<(Node, Node)>, Option<Node>, StructureStyle),
}

fn attach(stack: &mut [Frame], doc: &mut Option<Node>, n: Node) {
    match stack.last_mut() {
        None => *doc = Some(n),
        Some(Frame::Seq) => {}
        Some(Frame::Map(entries, pending, _)) => match pending.take() {
            Some(k) => entries.push((k, n)),
            None => *pending = Some(n),
        },
    }
}

/// Every document of a multi-document YAML text.
fn documents(text: &str) -> Result<Vec<Node>, String> {
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut doc: Option<Node> = None;
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| format!("not valid YAML: {e}"))?;
        match ev {
            Event::DocumentStart(..) => doc = None,
            Event::DocumentEnd => docs.extend(doc.take()),
            Event::MappingStart(style, ..) => stack.push(Frame::Map(Vec::new(), None, style)),
            Event::SequenceStart(..) => stack.push(Frame::Seq),
            Event::MappingEnd | Event::SequenceEnd => {
                let n = match stack.pop() {
                    Some(Frame::Map(entries, _, style)) => Node::Map(entries, style),
                    Some(Frame::Seq) => Node::Other,
                    None => return Err("not valid YAML: unbalanced collection".into()),
                };
                attach(&mut stack, &mut doc, n);
            }
            Event::Scalar(value, style, ..) => {
                let (Some(start), Some(end)) = (span.start.byte_offset(), span.end.byte_offset()) else {
                    return Err("not valid YAML: a scalar without a source position".into());
                };
                let s = Scalar {
                    value: value.into_owned(),
                    style,
                    span: start..end.max(start),
                };
                attach(&mut stack, &mut doc, Node::Scalar(s));
            }
            Event::Alias(_) => attach(&mut stack, &mut doc, Node::Other),
            _ => {}
        }
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `flux bootstrap github --token-auth=false` with a GitHub App: fluxcd/flux2
    /// `pkg/manifestgen/sync/sync.go`'s layout, plus `provider: github`, SOPS decryption and a
    /// team's comments and extra document.
    const TEMPLATE: &str = "# This manifest was generated by flux. DO NOT EDIT.
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  provider: github   # GitHub App authentication
  ref:
    branch: trunk
  secretRef:
    name: flux-system
  url: https://github.com/acme/fleet.git
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  decryption:
    provider: sops
    secretRef:
      name: sops-age
  interval: 10m0s
  path: ./clusters/_template   # the cell's own directory
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
---
# kept as it is
apiVersion: v1
kind: ConfigMap
metadata: {name: fleet-notes, namespace: flux-system}
data: {path: ./clusters/_template}
";

    fn prepared(text: &str, flux: &FluxGit) -> Result<GotkSync, TemplateError> {
        GotkSync::from_template("clusters/_template/flux-system/gotk-sync.yaml", text.to_owned(), flux)
    }

    #[test]
    fn only_the_path_changes_when_nothing_is_configured() {
        let flux = FluxGit {
            base_branch: Some("main".into()),
            ..FluxGit::default()
        };
        let g = prepared(TEMPLATE, &flux).unwrap();
        let out = g.render("prod-eu-west-1").unwrap();
        assert_eq!(
            out,
            TEMPLATE.replacen(
                "path: ./clusters/_template   #",
                "path: ./clusters/prod-eu-west-1   #",
                1
            )
        );
        // The template's branch wins over the base branch.
        assert_eq!(g.branch(), Some("trunk"));
        assert_eq!(g.template_file(), Some("clusters/_template/flux-system/gotk-sync.yaml"));
    }

    #[test]
    fn a_configured_url_and_branch_replace_only_their_values() {
        let flux = FluxGit {
            url: Some("ssh://git@github.com/acme/fleet".into()),
            branch: Some("release/2026".into()),
            base_branch: Some("main".into()),
        };
        let out = prepared(TEMPLATE, &flux).unwrap().render("c1").unwrap();
        let want = TEMPLATE
            .replacen("branch: trunk", "branch: release/2026", 1)
            .replacen(
                "url: https://github.com/acme/fleet.git",
                "url: ssh://git@github.com/acme/fleet",
                1,
            )
            .replacen("path: ./clusters/_template ", "path: ./clusters/c1 ", 1);
        assert_eq!(out, want);
    }

    #[test]
    fn quoting_is_kept_valid() {
        let text = TEMPLATE
            .replace("branch: trunk", "branch: \"trunk\"")
            .replace(
                "url: https://github.com/acme/fleet.git",
                "url: 'https://github.com/acme/fleet.git'",
            )
            .replace("path: ./clusters/_template   #", "path: \"./clusters/_template\"   #");
        let flux = FluxGit {
            url: Some("https://github.com/acme/it's.git".into()),
            branch: Some("true".into()),
            base_branch: None,
        };
        let out = prepared(&text, &flux).unwrap().render("c1").unwrap();
        assert!(out.contains("  url: 'https://github.com/acme/it''s.git'\n"), "{out}");
        assert!(out.contains("    branch: \"true\"\n"), "{out}");
        assert!(out.contains("  path: \"./clusters/c1\"   #"), "{out}");
        // A plain scalar that would not read back as a string is quoted.
        let plain = prepared(TEMPLATE, &flux).unwrap().render("c1").unwrap();
        assert!(plain.contains("    branch: \"true\"\n"), "{plain}");
        assert!(
            plain.contains("  url: \"https://github.com/acme/it's.git\"\n"),
            "{plain}"
        );
    }

    #[test]
    fn a_missing_branch_is_the_base_branch_written_with_the_documents_indentation() {
        let text = "apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
    name: flux-system
    namespace: flux-system
spec:
    # pulled every minute
    interval: 1m0s
    url: ssh://git@github.com/acme/fleet
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
    name: flux-system
    namespace: flux-system
spec:
    interval: 10m0s
    sourceRef:
        kind: GitRepository
        name: flux-system
";
        let flux = FluxGit {
            base_branch: Some("develop".into()),
            ..FluxGit::default()
        };
        let g = prepared(text, &flux).unwrap();
        assert_eq!(g.branch(), Some("develop"));
        let out = g.render("c1").unwrap();
        let want = text
            .replacen(
                "    interval: 1m0s\n",
                "    ref:\n        branch: develop\n    interval: 1m0s\n",
                1,
            )
            .replacen(
                "    interval: 10m0s\n",
                "    path: ./clusters/c1\n    interval: 10m0s\n",
                1,
            );
        assert_eq!(out, want);

        // `ref` present without a branch: the branch goes into it.
        let with_ref = text.replace(
            "    interval: 1m0s\n",
            "    interval: 1m0s\n    ref:\n        # follow\n        commit: \"\"\n",
        );
        let out = prepared(&with_ref, &flux).unwrap().render("c1").unwrap();
        assert!(
            out.contains("    ref:\n        # follow\n        branch: develop\n        commit: \"\"\n"),
            "{out}"
        );

        // No branch anywhere and none known: an error that says what to set.
        let e = prepared(text, &FluxGit::default()).unwrap_err().to_string();
        assert!(e.contains("clusters/_template/flux-system/gotk-sync.yaml"), "{e}");
        assert!(e.contains("CELLBRIDGE_FLUX_GIT_BRANCH"), "{e}");
    }

    #[test]
    fn a_pinned_ref_is_left_alone_and_refuses_a_branch() {
        let text = TEMPLATE.replace("    branch: trunk\n", "    tag: v1.2.3\n");
        let flux = FluxGit {
            base_branch: Some("main".into()),
            ..FluxGit::default()
        };
        let g = prepared(&text, &flux).unwrap();
        assert_eq!(g.branch(), None);
        assert!(g.render("c1").unwrap().contains("    tag: v1.2.3\n"));
        let e = prepared(
            &text,
            &FluxGit {
                branch: Some("main".into()),
                ..flux
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("spec.ref.tag") && e.contains("CELLBRIDGE_FLUX_GIT_BRANCH"),
            "{e}"
        );
    }

    #[test]
    fn what_cannot_be_written_in_place_is_an_error_naming_the_file() {
        let flux = FluxGit {
            base_branch: Some("main".into()),
            ..FluxGit::default()
        };
        let cases = [
            (
                TEMPLATE.replace("kind: Kustomization", "kind: Other"),
                "no Kustomization",
            ),
            (
                TEMPLATE.replace("kind: ConfigMap", "kind: [ConfigMap"),
                "not valid YAML",
            ),
            (
                TEMPLATE.replace("path: ./clusters/_template   #", "path: |\n    ./clusters/x\n  #"),
                "block scalar",
            ),
            (TEMPLATE.replace("path: ./clusters/_template", "path:"), "is empty"),
            (
                format!("{TEMPLATE}{}", TEMPLATE.split_once('\n').unwrap().1),
                "two GitRepository",
            ),
        ];
        for (text, want) in cases {
            let e = prepared(&text, &flux).unwrap_err().to_string();
            assert!(e.starts_with("clusters/_template/flux-system/gotk-sync.yaml: "), "{e}");
            assert!(e.contains(want), "{want}: {e}");
        }
        let flow = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system}\nspec: {url: 'ssh://x/y', ref: {branch: main}}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system}\nspec: {interval: 10m}\n";
        let e = prepared(flow, &flux).unwrap_err().to_string();
        assert!(
            e.contains("`spec.path` is missing and `spec` is not a block mapping"),
            "{e}"
        );
        // ... but a flow mapping's values are replaced in place.
        let flow = flow.replace("spec: {interval: 10m}", "spec: {interval: 10m, path: ./x}");
        let out = prepared(&flow, &flux).unwrap().render("c1").unwrap();
        assert!(out.ends_with("spec: {interval: 10m, path: ./clusters/c1}\n"), "{out}");
        // No GitRepository and no URL configured: nothing to sync from.
        let no_repo = TEMPLATE.replace("kind: GitRepository\n", "kind: Bucket\n");
        assert!(matches!(prepared(&no_repo, &flux), Err(TemplateError::NoSyncSource)));
    }

    #[test]
    fn without_a_template_file_the_rendering_is_todays() {
        let flux = FluxGit {
            url: Some("ssh://git@github.com/acme/fleet".into()),
            branch: None,
            base_branch: Some("main".into()),
        };
        let g = GotkSync::rendered("f", &flux).unwrap();
        let source = SyncSource {
            url: "ssh://git@github.com/acme/fleet".into(),
            branch: "main".into(),
        };
        assert_eq!(g.render("c1").unwrap(), render_gotk_sync("c1", &source));
        assert_eq!(g.template_file(), None);
        assert!(matches!(
            GotkSync::rendered("f", &FluxGit::default()),
            Err(TemplateError::NoSyncSource)
        ));
        let no_branch = FluxGit {
            base_branch: None,
            ..flux
        };
        assert!(matches!(
            GotkSync::rendered("f", &no_branch),
            Err(TemplateError::NoBranch { .. })
        ));
    }

    #[test]
    fn the_branch_rule_and_branch_names() {
        let f = FluxGit {
            url: None,
            branch: None,
            base_branch: Some("main".into()),
        };
        assert_eq!(f.branch_for(Some("trunk")).as_deref(), Some("trunk"));
        assert_eq!(f.branch_for(None).as_deref(), Some("main"));
        let over = FluxGit {
            branch: Some("prod".into()),
            ..f
        };
        assert_eq!(over.branch_for(Some("trunk")).as_deref(), Some("prod"));
        assert_eq!(FluxGit::default().branch_for(None), None);
        for ok in ["main", "release/2026", "feature-x.y"] {
            assert!(check_branch(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "../x", "/x", "x/", "-x", "x.lock", "a..b", "a:b", "a@{1}"] {
            assert!(check_branch(bad).is_err(), "{bad}");
        }
    }
}
