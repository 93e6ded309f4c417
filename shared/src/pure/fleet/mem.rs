//! The fleet repo held in memory: a GitHub tarball's snapshot (the Lambda functions) or a test's
//! fixture.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use super::{DirEntry, EntryKind, FileMode, FleetError, FleetRead, Keep, Result, parents};

/// An in-memory fleet: the snapshot of a GitHub tarball, or a test fixture. Each path holds a
/// file's bytes with its mode (a symlink's bytes are its target).
#[derive(Debug, Clone, Default)]
pub struct MemFleet {
    pub(super) files: BTreeMap<String, (FileMode, Vec<u8>)>,
    /// Cell directories read past ([`Keep`]): what lies in them is unknown, not absent, but for
    /// the files kept there (the index's `cell-metadata.yaml`).
    read_past: BTreeSet<String>,
    /// The read-past directories something asked for.
    misses: Arc<Mutex<BTreeSet<String>>>,
    /// What the read kept (`None`: everything).
    keep: Option<Keep>,
}

impl MemFleet {
    pub fn new() -> Self {
        Self::default()
    }

    /// A regular file.
    pub fn insert(&mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.insert_mode(path, FileMode::Regular, bytes);
    }

    /// A file of the given mode; for [`FileMode::Symlink`], `bytes` is the link's target.
    pub fn insert_mode(&mut self, path: impl Into<String>, mode: FileMode, bytes: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), (mode, bytes.into()));
    }

    /// A symbolic link to `target`.
    pub fn insert_symlink(&mut self, path: impl Into<String>, target: impl Into<String>) {
        self.insert_mode(path, FileMode::Symlink, target.into().into_bytes());
    }

    /// Every file and symlink: path → (mode, bytes, a link's target for a symlink).
    pub fn files(&self) -> &BTreeMap<String, (FileMode, Vec<u8>)> {
        &self.files
    }

    /// An empty fleet to be filled by a read that keeps only what `keep` keeps.
    pub fn kept(keep: &Keep) -> Self {
        Self {
            keep: Some(keep.clone()),
            ..Self::default()
        }
    }

    /// Marks `dir` (a cell's directory, which [`MemFleet::kept`]'s `keep` reads past) as present
    /// in the repo: what lies in it, but for what `keep` keeps, is unknown here.
    pub fn insert_read_past(&mut self, dir: impl Into<String>) {
        self.read_past.insert(dir.into());
    }

    /// The read-past directory holding `path`, when the read did not keep `path`.
    fn unknown<'p>(&self, path: &'p str) -> Option<&'p str> {
        let dir = self.keep.as_ref()?.read_past(path)?;
        self.read_past.contains(dir).then_some(dir)
    }

    fn not_kept_error(&self, path: &str, dir: &str) -> FleetError {
        if let Ok(mut m) = self.misses.lock() {
            m.insert(dir.rsplit('/').next().unwrap_or(dir).to_owned());
        }
        FleetError::NotKept {
            path: path.to_owned(),
            dir: dir.to_owned(),
        }
    }

    /// The entry at exactly `path`, unless something on the way to it is a file or a link.
    fn entry(&self, path: &str) -> Option<&(FileMode, Vec<u8>)> {
        if parents(path).any(|d| self.files.contains_key(d)) {
            return None;
        }
        self.files.get(path)
    }
}

impl FromIterator<(String, Vec<u8>)> for MemFleet {
    fn from_iter<I: IntoIterator<Item = (String, Vec<u8>)>>(iter: I) -> Self {
        Self {
            files: iter.into_iter().map(|(p, b)| (p, (FileMode::Regular, b))).collect(),
            ..Self::default()
        }
    }
}

impl FromIterator<(String, FileMode, Vec<u8>)> for MemFleet {
    fn from_iter<I: IntoIterator<Item = (String, FileMode, Vec<u8>)>>(iter: I) -> Self {
        Self {
            files: iter.into_iter().map(|(p, m, b)| (p, (m, b))).collect(),
            ..Self::default()
        }
    }
}

/// The entries of `dir` among `files` (path → mode), or `None` when none lies below it.
fn list_paths<'a>(files: impl Iterator<Item = (&'a str, FileMode)>, dir: &str) -> Option<Vec<DirEntry>> {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{}/", dir.trim_end_matches('/'))
    };
    let mut seen: BTreeMap<String, EntryKind> = BTreeMap::new();
    let mut any = false;
    for (p, mode) in files {
        let Some(rest) = p.strip_prefix(prefix.as_str()) else {
            continue;
        };
        any = true;
        match rest.split_once('/') {
            Some((d, _)) => {
                seen.insert(d.to_owned(), EntryKind::Dir);
            }
            None => {
                let kind = if mode == FileMode::Symlink {
                    EntryKind::Symlink
                } else {
                    EntryKind::File
                };
                seen.entry(rest.to_owned()).or_insert(kind);
            }
        }
    }
    any.then(|| seen.into_iter().map(|(name, kind)| DirEntry { name, kind }).collect())
}

impl MemFleet {
    /// Whether `dir` is, or lies below, a file or a link: then it is no directory.
    pub(super) fn blocked(&self, dir: &str) -> bool {
        !dir.is_empty() && (self.files.contains_key(dir) || parents(dir).any(|d| self.files.contains_key(d)))
    }
}

impl FleetRead for MemFleet {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        if let Some(dir) = self.unknown(path) {
            return Err(self.not_kept_error(path, dir));
        }
        Ok(self
            .entry(path)
            .filter(|(m, _)| *m != FileMode::Symlink)
            .map(|(_, b)| b.clone()))
    }

    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>> {
        if let Some(dir) = self
            .read_past
            .get(path)
            .map(String::as_str)
            .or_else(|| self.unknown(path))
        {
            return Err(self.not_kept_error(path, dir));
        }
        if self.blocked(path) {
            return Ok(None);
        }
        let listed = list_paths(self.files.iter().map(|(p, (m, _))| (p.as_str(), *m)), path);
        // A read-past directory is a directory, whether or not a file of it was kept.
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        let past: Vec<&str> = self
            .read_past
            .iter()
            .filter_map(|d| d.strip_prefix(prefix.as_str()))
            .filter(|name| !name.contains('/'))
            .collect();
        if past.is_empty() {
            return Ok(listed);
        }
        let mut entries: BTreeMap<String, EntryKind> = listed.into_iter().flatten().map(|e| (e.name, e.kind)).collect();
        for name in past {
            entries.insert(name.to_owned(), EntryKind::Dir);
        }
        Ok(Some(
            entries
                .into_iter()
                .map(|(name, kind)| DirEntry { name, kind })
                .collect(),
        ))
    }

    fn mode(&self, path: &str) -> Result<Option<FileMode>> {
        if let Some(dir) = self.unknown(path) {
            return Err(self.not_kept_error(path, dir));
        }
        Ok(self.entry(path).map(|(m, _)| *m))
    }

    fn read_link(&self, path: &str) -> Result<Option<String>> {
        if let Some(dir) = self.unknown(path) {
            return Err(self.not_kept_error(path, dir));
        }
        Ok(self
            .entry(path)
            .filter(|(m, _)| *m == FileMode::Symlink)
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned()))
    }

    fn not_kept(&self) -> Vec<String> {
        self.misses
            .lock()
            .map(|m| m.iter().cloned().collect())
            .unwrap_or_default()
    }
}
