//! Which parts of a large fleet repo a read keeps in memory.

use std::collections::BTreeSet;

/// What a read of the fleet repo keeps in memory. Whatever grows with the fleet is a cell's
/// directory, `clusters/<cell>/`; everything else (shared manifests, `.cellbridge/`,
/// `clusters/_template/` and any `clusters/_*`) is kept, with the directories of [`Keep::cells`]
/// and, with [`Keep::index`], every cell's `cell-metadata.yaml` (what finds a cluster's cell).
/// Other cells' directories are read past: a view of them answers
/// [`FleetError::NotKept`](super::FleetError::NotKept), never "nothing there".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keep {
    pub cells: BTreeSet<String>,
    pub index: bool,
    pub all: bool,
    /// Clusters (name, region) whose cell is kept too: the cell whose `cell-metadata.yaml` names
    /// one, found in the same pass (a cell's files are held only until its metadata tells).
    pub clusters: BTreeSet<(String, String)>,
}

impl Keep {
    /// Everything (the command line on a local archive, the tests).
    pub fn all() -> Self {
        Self {
            all: true,
            ..Self::default()
        }
    }

    /// The shared part and these cells' directories.
    pub fn cells<I: IntoIterator<Item = S>, S: Into<String>>(cells: I) -> Self {
        Self {
            cells: cells.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Also every cell's `cell-metadata.yaml`.
    pub fn with_index(mut self) -> Self {
        self.index = true;
        self
    }

    /// Also the cell of each of these clusters (name, region).
    pub fn with_clusters<I: IntoIterator<Item = (String, String)>>(mut self, clusters: I) -> Self {
        self.clusters.extend(clusters);
        self
    }

    /// Whether a read with `self` holds everything a read with `other` holds.
    pub fn covers(&self, other: &Keep) -> bool {
        self.all
            || (!other.all
                && (self.index || !other.index)
                && other.cells.is_subset(&self.cells)
                && other.clusters.is_subset(&self.clusters))
    }

    /// The cell directory `path` lies in when this keep reads it past; `None`: kept.
    pub fn read_past<'p>(&self, path: &'p str) -> Option<&'p str> {
        let dir = self.other_cell(path)?;
        if self.is_index(path) {
            return None;
        }
        Some(dir)
    }

    /// The directory of a cell not in [`Keep::cells`] that `path` lies in, whatever the index.
    pub fn other_cell<'p>(&self, path: &'p str) -> Option<&'p str> {
        if self.all {
            return None;
        }
        let rest = path.strip_prefix("clusters/")?;
        let (cell, inside) = rest.split_once('/')?;
        if cell.starts_with('_') || inside.is_empty() || self.cells.contains(cell) {
            return None;
        }
        Some(&path[..("clusters/".len() + cell.len())])
    }

    /// Whether `path` is a cell's `cell-metadata.yaml` this keep keeps as the index.
    pub fn is_index(&self, path: &str) -> bool {
        self.index
            && path
                .strip_prefix("clusters/")
                .and_then(|r| r.split_once('/'))
                .is_some_and(|(_, inside)| inside == crate::pure::configmap::FILE_NAME)
    }
}
