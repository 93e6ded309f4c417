//! A read-only view of the fleet repository, whatever holds it: a local directory (the
//! command line, the fleet repo's own CI), an in-memory snapshot of a GitHub tarball (the
//! Lambda functions), or a snapshot with a proposed change laid over it (the check runs
//! against what the pull request *would* contain).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("fleet path {path:?} is not a plain relative path inside the fleet repo")]
    OutsideRepo { path: String },
    #[error("fleet path {path}: symlink points outside the fleet repo or loops")]
    BadSymlink { path: String },
    #[error("fleet path {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("fleet path {path} is not UTF-8 text")]
    NotText { path: String },
    #[error("fleet repo {root}: {reason}")]
    Repo { root: String, reason: String },
}

pub type Result<T, E = FleetError> = std::result::Result<T, E>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
}

/// Read access to a fleet repository. Paths are relative to the repo root, `/`-separated,
/// without `.` or `..` components (use [`normalize`] to build them).
pub trait FleetRead: Send + Sync {
    /// The file's bytes, or `None` when no file is at `path`.
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>>;
    /// The directory's entries sorted by name, or `None` when no directory is at `path`.
    /// `""` is the root.
    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>>;

    /// The file as UTF-8 text.
    fn read_text(&self, path: &str) -> Result<Option<String>> {
        match self.read(path)? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| FleetError::NotText { path: path.to_owned() }),
        }
    }

    fn is_dir(&self, path: &str) -> Result<bool> {
        Ok(self.list(path)?.is_some())
    }

    /// Every file below `dir`, recursively, as full repo paths in sorted order.
    fn walk_files(&self, dir: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut stack = vec![dir.trim_end_matches('/').to_owned()];
        while let Some(d) = stack.pop() {
            let Some(entries) = self.list(&d)? else { continue };
            for e in entries {
                let p = join(&d, &e.name);
                match e.kind {
                    EntryKind::File => out.push(p),
                    EntryKind::Dir => stack.push(p),
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

/// `a/b` joined with `c` → `a/b/c`; the root `""` joined with `c` → `c`.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{}/{}", dir.trim_end_matches('/'), name)
    }
}

/// Resolves `rel` against the repo directory `base` (itself a normalized repo path) the way
/// kustomize resolves a resource path, and refuses anything that climbs out of the repo.
/// `./a/../b` → `b`; `../../x` from `clusters/c` → error.
pub fn normalize(base: &str, rel: &str) -> Result<String> {
    let refuse = || FleetError::OutsideRepo {
        path: if base.is_empty() {
            rel.to_owned()
        } else {
            format!("{base}/{rel}")
        },
    };
    if rel.starts_with('/') || rel.contains('\\') || rel.contains('\0') {
        return Err(refuse());
    }
    let mut parts: Vec<&str> = if rel.starts_with("./") || !base.is_empty() {
        base.split('/').filter(|s| !s.is_empty()).collect()
    } else {
        Vec::new()
    };
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(refuse());
                }
            }
            s => parts.push(s),
        }
    }
    Ok(parts.join("/"))
}

/// A fleet repo checked out in a local directory. Symlinks are followed only while they stay
/// inside the repo; a loop or an escape is an error that names the link.
#[derive(Debug, Clone)]
pub struct LocalFleet {
    root: PathBuf,
    canonical_root: PathBuf,
}

impl LocalFleet {
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let canonical_root = std::fs::canonicalize(&root).map_err(|e| FleetError::Repo {
            root: root.display().to_string(),
            reason: format!("cannot open: {e}"),
        })?;
        if !canonical_root.is_dir() {
            return Err(FleetError::Repo {
                root: root.display().to_string(),
                reason: "not a directory".into(),
            });
        }
        Ok(Self { root, canonical_root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn resolve(&self, path: &str) -> Result<Option<PathBuf>> {
        let p = Path::new(path);
        if p.components().any(|c| !matches!(c, Component::Normal(_))) && !path.is_empty() {
            return Err(FleetError::OutsideRepo { path: path.to_owned() });
        }
        let full = self.root.join(p);
        match std::fs::canonicalize(&full) {
            Ok(c) if c.starts_with(&self.canonical_root) => Ok(Some(c)),
            Ok(_) => Err(FleetError::BadSymlink { path: path.to_owned() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink is reported, a missing file is just missing.
                if std::fs::symlink_metadata(&full).is_ok() {
                    Err(FleetError::BadSymlink { path: path.to_owned() })
                } else {
                    Ok(None)
                }
            }
            // ELOOP surfaces as an I/O error of its own kind on Linux.
            Err(e) if e.raw_os_error() == Some(40) => Err(FleetError::BadSymlink { path: path.to_owned() }),
            Err(e) => Err(FleetError::Io {
                path: path.to_owned(),
                source: e,
            }),
        }
    }
}

impl FleetRead for LocalFleet {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let Some(full) = self.resolve(path)? else {
            return Ok(None);
        };
        if !full.is_file() {
            return Ok(None);
        }
        std::fs::read(&full).map(Some).map_err(|e| FleetError::Io {
            path: path.to_owned(),
            source: e,
        })
    }

    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>> {
        let Some(full) = self.resolve(path)? else {
            return Ok(None);
        };
        if !full.is_dir() {
            return Ok(None);
        }
        let rd = std::fs::read_dir(&full).map_err(|e| FleetError::Io {
            path: path.to_owned(),
            source: e,
        })?;
        let mut out = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| FleetError::Io {
                path: path.to_owned(),
                source: e,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_empty() && name == ".git" {
                continue;
            }
            let child = join(path, &name);
            let Some(target) = self.resolve(&child)? else { continue };
            let kind = if target.is_dir() {
                EntryKind::Dir
            } else {
                EntryKind::File
            };
            if kind == EntryKind::Dir && self.canonical_root.starts_with(&target) {
                // A link back to an ancestor would make every walk infinite.
                return Err(FleetError::BadSymlink { path: child });
            }
            out.push(DirEntry { name, kind });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(out))
    }
}

/// An in-memory fleet: the snapshot of a GitHub tarball, or a test fixture.
#[derive(Debug, Clone, Default)]
pub struct MemFleet {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemFleet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), bytes.into());
    }

    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.files
    }
}

impl FromIterator<(String, Vec<u8>)> for MemFleet {
    fn from_iter<I: IntoIterator<Item = (String, Vec<u8>)>>(iter: I) -> Self {
        Self {
            files: iter.into_iter().collect(),
        }
    }
}

fn list_paths<'a>(paths: impl Iterator<Item = &'a str>, dir: &str) -> Option<Vec<DirEntry>> {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{}/", dir.trim_end_matches('/'))
    };
    let mut seen: BTreeMap<String, EntryKind> = BTreeMap::new();
    let mut any = false;
    for p in paths {
        let Some(rest) = p.strip_prefix(prefix.as_str()) else {
            continue;
        };
        any = true;
        match rest.split_once('/') {
            Some((d, _)) => {
                seen.insert(d.to_owned(), EntryKind::Dir);
            }
            None => {
                seen.entry(rest.to_owned()).or_insert(EntryKind::File);
            }
        }
    }
    any.then(|| seen.into_iter().map(|(name, kind)| DirEntry { name, kind }).collect())
}

impl FleetRead for MemFleet {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.files.get(path).cloned())
    }

    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>> {
        Ok(list_paths(self.files.keys().map(String::as_str), path))
    }
}

/// A base fleet with whole files replaced or added: what the branch of a pull request holds.
pub struct Overlay<'a> {
    base: &'a dyn FleetRead,
    files: BTreeMap<String, Vec<u8>>,
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a dyn FleetRead, files: impl IntoIterator<Item = (String, Vec<u8>)>) -> Self {
        Self {
            base,
            files: files.into_iter().collect(),
        }
    }
}

impl FleetRead for Overlay<'_> {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        match self.files.get(path) {
            Some(b) => Ok(Some(b.clone())),
            None => self.base.read(path),
        }
    }

    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>> {
        let base = self.base.list(path)?;
        let extra = list_paths(self.files.keys().map(String::as_str), path);
        match (base, extra) {
            (None, None) => Ok(None),
            (a, b) => {
                let mut map: BTreeMap<String, EntryKind> = BTreeMap::new();
                for e in a.into_iter().flatten().chain(b.into_iter().flatten()) {
                    map.insert(e.name, e.kind);
                }
                Ok(Some(
                    map.into_iter().map(|(name, kind)| DirEntry { name, kind }).collect(),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_and_refuses_escapes() {
        assert_eq!(
            normalize("clusters/a", "../../infrastructure/x").unwrap(),
            "infrastructure/x"
        );
        assert_eq!(normalize("", "./clusters/a").unwrap(), "clusters/a");
        assert_eq!(
            normalize("clusters/a", "./layers.yaml").unwrap(),
            "clusters/a/layers.yaml"
        );
        assert!(matches!(
            normalize("clusters/a", "../../../etc"),
            Err(FleetError::OutsideRepo { .. })
        ));
        assert!(normalize("", "/etc/passwd").is_err());
    }

    #[test]
    fn mem_fleet_lists_dirs_and_files() {
        let mut m = MemFleet::new();
        m.insert("clusters/a/x.yaml", "x");
        m.insert("clusters/a/flux-system/y.yaml", "y");
        let l = m.list("clusters/a").unwrap().unwrap();
        assert_eq!(
            l,
            vec![
                DirEntry {
                    name: "flux-system".into(),
                    kind: EntryKind::Dir
                },
                DirEntry {
                    name: "x.yaml".into(),
                    kind: EntryKind::File
                }
            ]
        );
        assert_eq!(m.list("nope").unwrap(), None);
        assert_eq!(
            m.walk_files("clusters").unwrap(),
            vec!["clusters/a/flux-system/y.yaml", "clusters/a/x.yaml"]
        );
    }

    #[test]
    fn local_fleet_refuses_symlink_loops_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        std::os::unix::fs::symlink("..", dir.path().join("apps/loop")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("apps/passwd")).unwrap();
        let f = LocalFleet::open(dir.path()).unwrap();
        assert!(matches!(f.list("apps"), Err(FleetError::BadSymlink { .. })));
        assert!(matches!(f.read("apps/passwd"), Err(FleetError::BadSymlink { .. })));
    }
}
