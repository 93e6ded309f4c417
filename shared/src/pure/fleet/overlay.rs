//! A snapshot with a pull request's files laid over it: what the branch would hold.

use std::collections::BTreeMap;

use super::{DirEntry, EntryKind, FileMode, FleetRead, MemFleet, Result, join, parents};

/// A base fleet with whole files (of any mode) replaced or added: what the branch of a pull
/// request holds. An added file or link hides whatever the base has below its path, as git's
/// tree would.
pub struct Overlay<'a> {
    base: &'a dyn FleetRead,
    top: MemFleet,
    /// Files of the base the view no longer has (a branch deleted them).
    removed: std::collections::BTreeSet<String>,
}

impl<'a> Overlay<'a> {
    /// Regular files laid over `base`.
    pub fn new(base: &'a dyn FleetRead, files: impl IntoIterator<Item = (String, Vec<u8>)>) -> Self {
        Self {
            base,
            top: files.into_iter().collect(),
            removed: Default::default(),
        }
    }

    /// Files of any mode laid over `base` (a symlink's bytes are its target).
    pub fn with_modes(base: &'a dyn FleetRead, files: impl IntoIterator<Item = (String, FileMode, Vec<u8>)>) -> Self {
        Self {
            base,
            top: files.into_iter().collect(),
            removed: Default::default(),
        }
    }

    /// The same view without the files (or symlinks) at `paths`: what a branch deleted.
    pub fn without(mut self, paths: impl IntoIterator<Item = String>) -> Self {
        self.removed.extend(paths);
        self
    }

    fn is_removed(&self, path: &str) -> bool {
        self.removed.contains(path) && !self.top.files.contains_key(path)
    }

    /// Whether the top holds `path`, or a file or link on the way to it, or files below it
    /// (then `path` is a directory, whatever the base has there).
    fn covers(&self, path: &str) -> bool {
        let below = format!("{path}/");
        self.top.files.contains_key(path)
            || parents(path).any(|d| self.top.files.contains_key(d))
            || self
                .top
                .files
                .range(below.clone()..)
                .next()
                .is_some_and(|(k, _)| k.starts_with(&below))
    }
}

impl FleetRead for Overlay<'_> {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        if self.covers(path) {
            return self.top.read(path);
        }
        if self.is_removed(path) {
            return Ok(None);
        }
        self.base.read(path)
    }

    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>> {
        if self.top.blocked(path) {
            return Ok(None);
        }
        let base = self.base.list(path)?.map(|entries| {
            entries
                .into_iter()
                .filter(|e| !self.is_removed(&join(path, &e.name)))
                .collect::<Vec<_>>()
        });
        let extra = self.top.list(path)?;
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

    fn mode(&self, path: &str) -> Result<Option<FileMode>> {
        if self.covers(path) {
            return self.top.mode(path);
        }
        if self.is_removed(path) {
            return Ok(None);
        }
        self.base.mode(path)
    }

    fn read_link(&self, path: &str) -> Result<Option<String>> {
        if self.covers(path) {
            return self.top.read_link(path);
        }
        if self.is_removed(path) {
            return Ok(None);
        }
        self.base.read_link(path)
    }

    fn not_kept(&self) -> Vec<String> {
        self.base.not_kept()
    }
}
