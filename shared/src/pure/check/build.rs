//! Building a layer as kustomize would: the files (and inline strings) it reads from a
//! directory, following kustomization files.

use std::collections::BTreeSet;

use crate::pure::fleet::{self, EntryKind, FleetRead, Symlink};

use super::naming::{self, Naming};
use super::yaml;
use super::{CheckError, Finding, FindingKind, KUSTOMIZATION_FILES, invalid, read};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Kubernetes objects (resources, and patches, which merge into them).
    Manifest,
    /// A configMapGenerator file: its whole text becomes a value.
    Raw,
    /// A configMapGenerator env file: `KEY=value` lines, `#` lines dropped.
    Env,
}

#[derive(Debug, Clone)]
pub(super) enum Unit {
    File {
        path: String,
        role: Role,
    },
    /// A string inside a kustomization file that ends up in a resource (inline patch, literal).
    Inline {
        path: String,
        scalar: yaml::Scalar,
    },
}

impl Unit {
    pub(super) fn path(&self) -> &str {
        match self {
            Unit::File { path, .. } | Unit::Inline { path, .. } => path,
        }
    }
}

/// A key of a generated ConfigMap or Secret, and where a person writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GeneratedKey {
    pub(super) key: String,
    pub(super) file: String,
    pub(super) line: usize,
    /// The value, where the check may read it (a ConfigMap's `data` in Git; never a Secret's).
    pub(super) value: Option<String>,
}

/// A ConfigMap or Secret made by a `configMapGenerator` / `secretGenerator`.
#[derive(Debug, Clone)]
pub(super) struct Generated {
    pub(super) kind: &'static str,
    /// The generator's `name`, before the transformers.
    pub(super) name: String,
    pub(super) namespace: Option<String>,
    /// kustomize appends `-<hash of the content>` unless `disableNameSuffixHash` is set.
    pub(super) hashed: bool,
    pub(super) naming: Naming,
    pub(super) keys: Vec<GeneratedKey>,
    /// The kustomization file and the line of the generator.
    pub(super) file: String,
    pub(super) line: usize,
}

pub(super) struct Build<'f> {
    fleet: &'f dyn FleetRead,
    layer: String,
    pub(super) units: Vec<Unit>,
    /// The transformers applying to each manifest file, when any do.
    pub(super) naming: std::collections::BTreeMap<String, Naming>,
    pub(super) generated: Vec<Generated>,
    seen: BTreeSet<(String, bool)>,
    /// Directories being built, to refuse a cycle instead of recursing forever.
    stack: Vec<String>,
    pub(super) findings: Vec<Finding>,
    pub(super) not_checked: Vec<String>,
}

fn is_remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("github.com/")
        || entry.starts_with("gitlab.com/")
        || entry.contains("?ref=")
}

/// Why a reference to `p` (written as `reference`) finds nothing in Flux: `link` is, or is on
/// the way to, `p`, and Flux's source artifact holds no symlinks (see [`crate::pure::fleet`]).
pub(super) fn dropped_symlink(reference: &str, p: &str, link: &Symlink) -> String {
    let what = if link.path == p {
        format!("{reference} is a symlink (→ {})", link.target)
    } else {
        format!(
            "{reference} goes through the symlink `{}` (→ {})",
            link.path, link.target
        )
    };
    format!("{what}: Flux leaves symlinks out of its source artifact")
}

fn is_yaml_name(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml")
}

impl<'f> Build<'f> {
    pub(super) fn new(fleet: &'f dyn FleetRead, layer: &str) -> Self {
        Build {
            fleet,
            layer: layer.to_owned(),
            units: Vec::new(),
            naming: Default::default(),
            generated: Vec::new(),
            seen: BTreeSet::new(),
            stack: Vec::new(),
            findings: Vec::new(),
            not_checked: Vec::new(),
        }
    }

    fn add(&mut self, path: String, role: Role) {
        if self.seen.insert((path.clone(), role == Role::Manifest)) {
            self.units.push(Unit::File { path, role });
        }
    }

    fn kustomization_file(&self, dir: &str) -> Result<Option<String>, CheckError> {
        let entries = self.fleet.list(dir)?.unwrap_or_default();
        Ok(KUSTOMIZATION_FILES
            .iter()
            .find(|n| entries.iter().any(|e| e.kind == EntryKind::File && e.name == **n))
            .map(|n| fleet::join(dir, n)))
    }

    pub(super) fn dir(&mut self, dir: &str) -> Result<(), CheckError> {
        if self.stack.iter().any(|d| d == dir) {
            return Err(invalid(
                dir,
                format!("kustomization cycle: {} → {dir}", self.stack.join(" → ")),
            ));
        }
        self.stack.push(dir.to_owned());
        let r = match self.kustomization_file(dir)? {
            Some(k) => self.kustomization(dir, &k),
            None => self.generated(dir),
        };
        self.stack.pop();
        r
    }

    /// kustomize-controller's generated kustomization: every YAML file, recursively; a
    /// subdirectory with its own kustomization file is built as a whole.
    fn generated(&mut self, dir: &str) -> Result<(), CheckError> {
        for e in self.fleet.list(dir)?.unwrap_or_default() {
            let p = fleet::join(dir, &e.name);
            match e.kind {
                EntryKind::File if is_yaml_name(&e.name) => self.add(p, Role::Manifest),
                EntryKind::File => {}
                // Not in Flux's artifact, so not built: no failure, but what the link points at
                // is not applied, which its author hardly meant when it is YAML or a directory.
                EntryKind::Symlink => {
                    let Some(link) = self.fleet.symlink_on(&p)? else {
                        continue;
                    };
                    let to_dir = match link.resolved() {
                        Some(t) => self.fleet.is_dir(&t)?,
                        None => false,
                    };
                    if is_yaml_name(&e.name) || KUSTOMIZATION_FILES.contains(&e.name.as_str()) || to_dir {
                        self.not_checked.push(format!(
                            "{}, so kustomize-controller builds `{dir}` without it",
                            dropped_symlink(&format!("`{p}`"), &p, &link)
                        ));
                    }
                }
                EntryKind::Dir => {
                    if self.kustomization_file(&p)?.is_some() {
                        self.dir(&p)?;
                    } else {
                        self.generated(&p)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn build_problem(&mut self, file: &str, line: usize, message: String) {
        self.findings.push(Finding {
            file: file.to_owned(),
            line,
            variable: String::new(),
            layer: self.layer.clone(),
            message,
            kind: FindingKind::Layer,
        });
    }

    /// What to say of a reference `entry` to `p` that finds nothing: `plain`, unless a symlink
    /// is why.
    fn not_found(&self, entry: &str, p: &str, plain: String) -> Result<String, CheckError> {
        Ok(match self.fleet.symlink_on(p)? {
            Some(link) => format!(
                "kustomize build fails: {}, so it is not there",
                dropped_symlink(&format!("`{entry}`"), p, &link)
            ),
            None => plain,
        })
    }

    /// Resolves an entry of `kfile` (in `dir`) to a repo path; refusing any escape.
    fn resolve(&self, kfile: &str, dir: &str, field: &str, entry: &str) -> Result<String, CheckError> {
        fleet::normalize(dir, entry)
            .map_err(|_| invalid(kfile, format!("`{field}` entry `{entry}` leaves the fleet repo")))
    }

    fn kustomization(&mut self, dir: &str, kfile: &str) -> Result<(), CheckError> {
        let text = read(self.fleet, kfile)?;
        let docs = yaml::documents(&text).map_err(|r| invalid(kfile, r))?;
        let Some(root) = docs.into_iter().next() else {
            return Ok(());
        };
        let (first_unit, first_generated) = (self.units.len(), self.generated.len());

        for field in ["resources", "bases", "components"] {
            for item in root.get(field).map(yaml::Node::items).unwrap_or_default() {
                let Some(entry) = item.str() else { continue };
                if is_remote(entry) {
                    self.not_checked.push(format!(
                        "{kfile}:{}: remote {field} entry `{entry}` (not fetched)",
                        item.line()
                    ));
                    continue;
                }
                let p = self.resolve(kfile, dir, field, entry)?;
                if self.fleet.is_dir(&p)? {
                    if self.kustomization_file(&p)?.is_some() {
                        self.dir(&p)?;
                    } else {
                        let mut message = format!("kustomize build fails: directory `{p}` has no kustomization.yaml");
                        for name in KUSTOMIZATION_FILES {
                            let k = fleet::join(&p, name);
                            if let Some(link) = self.fleet.symlink_on(&k)? {
                                message = format!("{message} ({})", dropped_symlink(&format!("`{k}`"), &k, &link));
                                break;
                            }
                        }
                        self.build_problem(kfile, item.line(), message);
                    }
                } else if self.fleet.read(&p)?.is_some() {
                    self.add(p, Role::Manifest);
                } else {
                    let message = self.not_found(entry, &p, format!("kustomize build fails: `{entry}` not found"))?;
                    self.build_problem(kfile, item.line(), message);
                }
            }
        }

        // Each patch's target and body, for the renames among them.
        let mut patch_bodies: [Vec<(Option<&yaml::Node>, String)>; 2] = Default::default();
        for (i, field) in ["patches", "patchesJson6902"].into_iter().enumerate() {
            for item in root.get(field).map(yaml::Node::items).unwrap_or_default() {
                if let Some(p) = self.patch_file(kfile, dir, field, item.get("path"))? {
                    patch_bodies[i].push((item.get("target"), read(self.fleet, &p)?));
                }
                if let Some(yaml::Node::Scalar(s)) = item.get("patch") {
                    patch_bodies[i].push((item.get("target"), s.value.clone()));
                    self.units.push(Unit::Inline {
                        path: kfile.to_owned(),
                        scalar: s.clone(),
                    });
                }
            }
        }
        for item in root
            .get("patchesStrategicMerge")
            .map(yaml::Node::items)
            .unwrap_or_default()
        {
            if let yaml::Node::Scalar(s) = item {
                // An entry is either a file path or an inline patch document.
                if s.value.contains('\n') || s.value.contains(": ") {
                    self.units.push(Unit::Inline {
                        path: kfile.to_owned(),
                        scalar: s.clone(),
                    });
                } else {
                    self.patch_file(kfile, dir, "patchesStrategicMerge", Some(item))?;
                }
            }
        }

        for generator in root
            .get("configMapGenerator")
            .map(yaml::Node::items)
            .unwrap_or_default()
        {
            for item in generator.get("files").map(yaml::Node::items).unwrap_or_default() {
                if let Some(entry) = item.str() {
                    // `key=path` or `path`.
                    let file = entry.split_once('=').map_or(entry, |(_, f)| f);
                    self.generator_file(kfile, dir, item, file, Role::Raw)?;
                }
            }
            let envs = generator.get("envs").map(yaml::Node::items).unwrap_or_default();
            for item in envs.into_iter().chain(generator.get("env")) {
                if let Some(entry) = item.str() {
                    self.generator_file(kfile, dir, item, entry, Role::Env)?;
                }
            }
            for item in generator.get("literals").map(yaml::Node::items).unwrap_or_default() {
                if let yaml::Node::Scalar(s) = item {
                    self.units.push(Unit::Inline {
                        path: kfile.to_owned(),
                        scalar: s.clone(),
                    });
                }
            }
        }
        for (field, kind) in [("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")] {
            for generator in root.get(field).map(yaml::Node::items).unwrap_or_default() {
                self.generator(kfile, dir, &root, generator, kind)?;
            }
        }

        for (line, what) in naming::renaming_replacements(&root) {
            self.not_checked.push(format!(
                "{kfile}:{line}: `replacements` write the name or namespace of {what}, from another object's field, which the check does not evaluate: a layer finds that source by the name written in its file"
            ));
        }
        let outer = Naming::of_kustomization(&root, &patch_bodies[0], &patch_bodies[1]);
        if !outer.is_empty() {
            for unit in &self.units[first_unit..] {
                if let Unit::File {
                    path,
                    role: Role::Manifest,
                } = unit
                {
                    self.naming.entry(path.clone()).or_default().wrap(&outer);
                }
            }
            for g in &mut self.generated[first_generated..] {
                g.naming.wrap(&outer);
            }
        }
        Ok(())
    }

    /// A generated ConfigMap or Secret, with its keys as kustomize derives them: `literals`
    /// `KEY=value`, `files` `key=path` or the file's base name, `envs` `KEY=value` lines.
    fn generator(
        &mut self,
        kfile: &str,
        dir: &str,
        root: &yaml::Node,
        generator: &yaml::Node,
        kind: &'static str,
    ) -> Result<(), CheckError> {
        let flag = |n: Option<&yaml::Node>| {
            n.and_then(|o| o.get("disableNameSuffixHash")).and_then(yaml::Node::str) == Some("true")
        };
        let unhashed = flag(generator.get("options")) || flag(root.get("generatorOptions"));
        let mut keys = Vec::new();
        let mut key = |key: &str, file: &str, line: usize| {
            keys.push(GeneratedKey {
                key: key.to_owned(),
                file: file.to_owned(),
                line,
                value: None,
            })
        };
        for item in generator.get("literals").map(yaml::Node::items).unwrap_or_default() {
            if let Some((k, _)) = item.str().and_then(|l| l.split_once('=')) {
                key(k.trim(), kfile, item.line());
            }
        }
        for item in generator.get("files").map(yaml::Node::items).unwrap_or_default() {
            if let Some(entry) = item.str() {
                let k = match entry.split_once('=') {
                    Some((k, _)) => k,
                    None => entry.rsplit('/').next().unwrap_or(entry),
                };
                key(k.trim(), kfile, item.line());
            }
        }
        let envs = generator.get("envs").map(yaml::Node::items).unwrap_or_default();
        for item in envs.into_iter().chain(generator.get("env")) {
            let Some(entry) = item.str() else { continue };
            let Ok(p) = fleet::normalize(dir, entry) else { continue };
            let Some(text) = self.fleet.read_text(&p)? else {
                continue;
            };
            for (i, l) in text.lines().enumerate() {
                let l = l.trim();
                if l.is_empty() || l.starts_with('#') {
                    continue;
                }
                // `KEY` alone takes its value from the environment of `kustomize build`.
                key(l.split_once('=').map_or(l, |(k, _)| k).trim(), &p, i + 1);
            }
        }
        self.generated.push(Generated {
            kind,
            name: generator
                .get("name")
                .and_then(yaml::Node::str)
                .unwrap_or_default()
                .to_owned(),
            namespace: generator
                .get("namespace")
                .and_then(yaml::Node::str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            hashed: !unhashed,
            naming: Naming::default(),
            keys,
            file: kfile.to_owned(),
            line: generator.line(),
        });
        Ok(())
    }

    /// Adds a patch file; its path when it exists.
    fn patch_file(
        &mut self,
        kfile: &str,
        dir: &str,
        field: &str,
        item: Option<&yaml::Node>,
    ) -> Result<Option<String>, CheckError> {
        let Some(item) = item else { return Ok(None) };
        let Some(entry) = item.str() else { return Ok(None) };
        let p = self.resolve(kfile, dir, field, entry)?;
        if self.fleet.read(&p)?.is_some() {
            self.add(p.clone(), Role::Manifest);
            Ok(Some(p))
        } else {
            let message = self.not_found(entry, &p, format!("kustomize build fails: patch `{entry}` not found"))?;
            self.build_problem(kfile, item.line(), message);
            Ok(None)
        }
    }

    fn generator_file(
        &mut self,
        kfile: &str,
        dir: &str,
        item: &yaml::Node,
        entry: &str,
        role: Role,
    ) -> Result<(), CheckError> {
        let p = self.resolve(kfile, dir, "configMapGenerator", entry)?;
        if self.fleet.read(&p)?.is_some() {
            self.add(p, role);
        } else {
            let message = self.not_found(entry, &p, format!("kustomize build fails: `{entry}` not found"))?;
            self.build_problem(kfile, item.line(), message);
        }
        Ok(())
    }
}
