//! A read-only view of the fleet repository, whatever holds it: a local directory (the
//! command line, the fleet repo's own CI), an in-memory snapshot of a GitHub tarball (the
//! Lambda functions), or a snapshot with a proposed change laid over it (the check runs
//! against what the pull request *would* contain).
//!
//! # Symlinks, as Flux sees them
//!
//! Every view shows the repository the way Flux's source artifact holds it, so the command
//! line and the Lambda functions reach the same verdict on the same commit:
//!
//! - source-controller builds a GitRepository's artifact with `Storage.Archive`, which walks the
//!   checkout without following links and keeps regular files and directories only ("Ignore
//!   anything that is not a file or directories e.g. symlinks",
//!   <https://github.com/fluxcd/source-controller/blob/main/internal/storage/storage.go>); the
//!   maintainers keep it that way (<https://github.com/fluxcd/source-controller/issues/191>,
//!   <https://github.com/fluxcd/source-controller/issues/569>);
//! - kustomize-controller unpacks the artifact with `tar.Untar(..., tar.WithSkipSymlinks())`,
//!   which drops any link left (<https://github.com/fluxcd/pkg/blob/main/http/fetch/archive_fetcher.go>,
//!   <https://github.com/fluxcd/pkg/blob/main/tar/untar.go>), so a Kustomization whose
//!   `spec.path` is, or goes through, a link fails with "kustomization path not found: stat
//!   ...: no such file or directory" (<https://github.com/fluxcd/flux2/issues/3619>, closed as
//!   wontfix), and a kustomize resource or patch reached through one is missing.
//!
//! So [`FleetRead::read`] and [`FleetRead::list`] never follow a link: a path that is a link,
//! or goes through one, holds nothing. [`FleetRead::list`] still names a link
//! ([`EntryKind::Symlink`]) and [`FleetRead::symlink_on`] tells which link hides a path, so
//! the check can say why something is missing, and [`FleetRead::mode`] / [`FleetRead::read_link`]
//! give what a commit needs to copy a file faithfully (its executable bit, a link's target).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("fleet path {path:?} is not a plain relative path inside the fleet repo")]
    OutsideRepo { path: String },
    #[error(
        "fleet path {path} is a symlink (→ {target}): Flux leaves symlinks out of its source artifact, so nothing is there for it"
    )]
    Symlink { path: String, target: String },
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
    /// The path lies in a cell directory this read of the fleet repo did not keep ([`Keep`]):
    /// unknown here, not absent. The caller reads the base again keeping it.
    #[error(
        "fleet path {path}: {dir}/ is another cell's directory, read past when the fleet repo was read (only the cells being planned are kept)"
    )]
    NotKept { path: String, dir: String },
}

pub type Result<T, E = FleetError> = std::result::Result<T, E>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    /// A symbolic link, whatever it points at: Flux's artifact has nothing at its path.
    Symlink,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
}

/// A file's mode as git records it: a regular file, an executable one, or a symbolic link
/// (whose content is its target).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileMode {
    #[default]
    Regular,
    Executable,
    Symlink,
}

impl FileMode {
    /// The mode of a git tree entry: `100644`, `100755` or `120000`.
    pub fn git_mode(self) -> &'static str {
        match self {
            FileMode::Regular => "100644",
            FileMode::Executable => "100755",
            FileMode::Symlink => "120000",
        }
    }

    /// The mode of a git tree entry's blob; `None` for a tree or a submodule.
    pub fn from_git_mode(mode: &str) -> Option<Self> {
        match mode {
            // 100664 is a mode old git versions wrote; git reads it as a regular file.
            "100644" | "100664" => Some(FileMode::Regular),
            "100755" => Some(FileMode::Executable),
            "120000" => Some(FileMode::Symlink),
            _ => None,
        }
    }

    pub fn is_regular(&self) -> bool {
        *self == FileMode::Regular
    }
}

/// A whole file to write: its path, mode and content (a link's target for a symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    pub path: String,
    pub mode: FileMode,
    pub content: String,
}

impl FileWrite {
    /// Writes the file at `to` (its directory made if missing) as Git would check it out: an
    /// executable with execute wherever read is allowed (`chmod +x` under the umask), a
    /// symlink as a symlink to `content`.
    pub fn write_at(&self, to: &Path) -> std::io::Result<()> {
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match self.mode {
            FileMode::Symlink => {
                let _ = std::fs::remove_file(to);
                std::os::unix::fs::symlink(&self.content, to)
            }
            FileMode::Regular | FileMode::Executable => {
                std::fs::write(to, &self.content)?;
                if self.mode == FileMode::Executable {
                    use std::os::unix::fs::PermissionsExt as _;
                    let mut perm = std::fs::metadata(to)?.permissions();
                    perm.set_mode(perm.mode() | (perm.mode() & 0o444) >> 2);
                    std::fs::set_permissions(to, perm)?;
                }
                Ok(())
            }
        }
    }

    pub fn regular(path: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            mode: FileMode::Regular,
            content: content.into(),
        }
    }
}

/// A symbolic link of the fleet repo: where it is and what it points at, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symlink {
    pub path: String,
    pub target: String,
}

impl Symlink {
    /// The repo path the link points at, when it is a relative path that stays inside the repo.
    pub fn resolved(&self) -> Option<String> {
        let parent = self.path.rsplit_once('/').map_or("", |(d, _)| d);
        normalize(parent, &self.target).ok()
    }
}

/// Read access to a fleet repository. Paths are relative to the repo root, `/`-separated,
/// without `.` or `..` components (use [`normalize`] to build them). No method follows a
/// symbolic link (see the module's documentation).
pub trait FleetRead: Send + Sync {
    /// The file's bytes, or `None` when no file is at `path` (nothing, a directory, a
    /// symlink, or a path through a symlink).
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>>;
    /// The directory's entries sorted by name, or `None` when no directory is at `path` (a
    /// symlink to one is none). `""` is the root.
    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>>;
    /// The mode of the file or symlink at `path`; `None` for nothing, a directory, or a path
    /// through a symlink.
    fn mode(&self, path: &str) -> Result<Option<FileMode>>;
    /// The target of the symlink at `path` (not through one), as written in the link.
    fn read_link(&self, path: &str) -> Result<Option<String>>;

    /// The cell directories a read was refused in so far ([`FleetError::NotKept`]): what to
    /// keep when the base is read again. Empty for a view that holds everything.
    fn not_kept(&self) -> Vec<String> {
        Vec::new()
    }

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

    /// The symlink that `path` is, or goes through (the first one from the root), if any: why a
    /// path Flux's artifact lacks is missing.
    fn symlink_on(&self, path: &str) -> Result<Option<Symlink>> {
        let mut prefix = String::new();
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            prefix = join(&prefix, seg);
            match self.mode(&prefix)? {
                Some(FileMode::Symlink) => {
                    let target = self.read_link(&prefix)?.unwrap_or_default();
                    return Ok(Some(Symlink { path: prefix, target }));
                }
                // A file: nothing lies below it.
                Some(_) => return Ok(None),
                None => {}
            }
        }
        Ok(None)
    }

    /// Every file and symlink below `dir`, recursively (links not followed), as full repo
    /// paths with their modes, in sorted order.
    fn walk(&self, dir: &str) -> Result<Vec<(String, FileMode)>> {
        let mut out = Vec::new();
        let mut stack = vec![dir.trim_end_matches('/').to_owned()];
        while let Some(d) = stack.pop() {
            let Some(entries) = self.list(&d)? else { continue };
            for e in entries {
                let p = join(&d, &e.name);
                match e.kind {
                    EntryKind::Dir => stack.push(p),
                    EntryKind::Symlink => out.push((p, FileMode::Symlink)),
                    EntryKind::File => {
                        let mode = self.mode(&p)?.unwrap_or_default();
                        out.push((p, mode));
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Every file below `dir`, recursively, as full repo paths in sorted order; symlinks are
    /// left out, as Flux's artifact leaves them out.
    fn walk_files(&self, dir: &str) -> Result<Vec<String>> {
        Ok(self
            .walk(dir)?
            .into_iter()
            .filter(|(_, mode)| *mode != FileMode::Symlink)
            .map(|(p, _)| p)
            .collect())
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

/// The proper prefixes of `path` (`a/b/c` → `a`, `a/b`).
fn parents(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// A fleet repo checked out in a local directory, read as Flux's artifact of it would be: no
/// symlink is followed (a link is listed as one, and nothing is behind it), and `.git` at the
/// root is not part of it (GitHub's archive and Flux's artifact have none).
#[derive(Debug, Clone)]
pub struct LocalFleet {
    root: PathBuf,
}

impl LocalFleet {
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let meta = std::fs::metadata(&root).map_err(|e| FleetError::Repo {
            root: root.display().to_string(),
            reason: format!("cannot open: {e}"),
        })?;
        if !meta.is_dir() {
            return Err(FleetError::Repo {
                root: root.display().to_string(),
                reason: "not a directory".into(),
            });
        }
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What is at `path` itself (`lstat`), or `None` when nothing is, or when a directory on
    /// the way is a symlink (or not a directory at all).
    fn lstat(&self, path: &str) -> Result<Option<std::fs::Metadata>> {
        if !path.is_empty() && Path::new(path).components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(FleetError::OutsideRepo { path: path.to_owned() });
        }
        if path == ".git" || path.starts_with(".git/") {
            return Ok(None);
        }
        let stat = |p: &str| match std::fs::symlink_metadata(self.root.join(p)) {
            Ok(m) => Ok(Some(m)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(FleetError::Io {
                path: p.to_owned(),
                source: e,
            }),
        };
        for dir in parents(path) {
            match stat(dir)? {
                Some(m) if m.is_dir() => {}
                _ => return Ok(None),
            }
        }
        stat(path)
    }
}

impl FleetRead for LocalFleet {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        match self.lstat(path)? {
            Some(m) if m.is_file() => std::fs::read(self.root.join(path))
                .map(Some)
                .map_err(|e| FleetError::Io {
                    path: path.to_owned(),
                    source: e,
                }),
            _ => Ok(None),
        }
    }

    fn list(&self, path: &str) -> Result<Option<Vec<DirEntry>>> {
        match self.lstat(path)? {
            Some(m) if m.is_dir() => {}
            _ => return Ok(None),
        }
        let io = |e| FleetError::Io {
            path: path.to_owned(),
            source: e,
        };
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.root.join(path)).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_empty() && name == ".git" {
                continue;
            }
            // The entry's own type: a symlink is not followed.
            let t = entry.file_type().map_err(io)?;
            let kind = if t.is_symlink() {
                EntryKind::Symlink
            } else if t.is_dir() {
                EntryKind::Dir
            } else if t.is_file() {
                EntryKind::File
            } else {
                // Sockets, fifos, devices: git cannot hold them.
                continue;
            };
            out.push(DirEntry { name, kind });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(out))
    }

    fn mode(&self, path: &str) -> Result<Option<FileMode>> {
        use std::os::unix::fs::PermissionsExt as _;
        Ok(self.lstat(path)?.and_then(|m| {
            if m.file_type().is_symlink() {
                Some(FileMode::Symlink)
            } else if m.is_file() {
                // Git records a file as executable when its owner may execute it.
                Some(if m.permissions().mode() & 0o100 != 0 {
                    FileMode::Executable
                } else {
                    FileMode::Regular
                })
            } else {
                None
            }
        }))
    }

    fn read_link(&self, path: &str) -> Result<Option<String>> {
        match self.lstat(path)? {
            Some(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(self.root.join(path)).map_err(|e| FleetError::Io {
                    path: path.to_owned(),
                    source: e,
                })?;
                target
                    .into_os_string()
                    .into_string()
                    .map(Some)
                    .map_err(|_| FleetError::NotText { path: path.to_owned() })
            }
            _ => Ok(None),
        }
    }
}

/// An in-memory fleet: the snapshot of a GitHub tarball, or a test fixture. Each path holds a
/// file's bytes with its mode (a symlink's bytes are its target).
#[derive(Debug, Clone, Default)]
pub struct MemFleet {
    files: BTreeMap<String, (FileMode, Vec<u8>)>,
    /// Cell directories read past ([`Keep`]): what lies in them is unknown, not absent, but for
    /// the files kept there (the index's `cell-metadata.yaml`).
    read_past: BTreeSet<String>,
    /// The read-past directories something asked for.
    misses: Arc<Mutex<BTreeSet<String>>>,
    /// What the read kept (`None`: everything).
    keep: Option<Keep>,
}

/// What a read of the fleet repo keeps in memory. Whatever grows with the fleet is a cell's
/// directory, `clusters/<cell>/`; everything else (shared manifests, `.cellbridge/`,
/// `clusters/_template/` and any `clusters/_*`) is kept, with the directories of [`Keep::cells`]
/// and, with [`Keep::index`], every cell's `cell-metadata.yaml` (what finds a cluster's cell).
/// Other cells' directories are read past: a view of them answers [`FleetError::NotKept`],
/// never "nothing there".
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
                .is_some_and(|(_, inside)| inside == crate::configmap::FILE_NAME)
    }
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
    fn blocked(&self, dir: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keep_reads_past_only_other_cells_directories() {
        let keep = Keep::cells(["a"]);
        for kept in [
            "README.md",
            "infrastructure/base/kustomization.yaml",
            ".cellbridge/settings.yaml",
            "clusters/_template/layers.yaml",
            "clusters/_shared/x.yaml",
            "clusters/README.md",
            "clusters/b",
            "clusters/a/flux-system/gotk-components.yaml",
        ] {
            assert_eq!(keep.read_past(kept), None, "{kept}");
        }
        assert_eq!(keep.read_past("clusters/b/cell-metadata.yaml"), Some("clusters/b"));
        assert_eq!(keep.read_past("clusters/b/apps/x.yaml"), Some("clusters/b"));
        let index = keep.clone().with_index();
        assert_eq!(index.read_past("clusters/b/cell-metadata.yaml"), None);
        assert_eq!(index.read_past("clusters/b/apps/x.yaml"), Some("clusters/b"));
        assert!(index.covers(&keep) && !keep.covers(&index));
        assert!(Keep::all().covers(&index) && !index.covers(&Keep::all()));
        assert!(!keep.covers(&Keep::cells(["a", "b"])));
    }

    #[test]
    fn a_read_past_directory_is_listed_and_unknown_never_empty() {
        let keep = Keep::cells(["a"]).with_index();
        let mut f = MemFleet::kept(&keep);
        f.insert("clusters/a/kustomization.yaml", "a");
        f.insert("clusters/b/cell-metadata.yaml", "b");
        f.insert_read_past("clusters/b");
        f.insert_read_past("clusters/c");
        let names: Vec<String> = f
            .list("clusters")
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            f.read_text("clusters/b/cell-metadata.yaml").unwrap().as_deref(),
            Some("b")
        );
        // Kept by the index, so absent for real.
        assert_eq!(f.read("clusters/c/cell-metadata.yaml").unwrap(), None);
        // A cell that is not in the repo at all is simply absent.
        assert_eq!(f.read("clusters/d/kustomization.yaml").unwrap(), None);
        assert!(f.not_kept().is_empty());
        assert!(matches!(
            f.read("clusters/b/apps/x.yaml"),
            Err(FleetError::NotKept { .. })
        ));
        assert!(matches!(f.list("clusters/c"), Err(FleetError::NotKept { .. })));
        assert!(matches!(f.mode("clusters/c/x"), Err(FleetError::NotKept { .. })));
        assert_eq!(f.not_kept(), ["b", "c"]);
    }

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

    /// One small repo with every kind of link, as each view must show it.
    const TREE: &[(&str, FileMode, &str)] = &[
        (
            "apps/base/kustomization.yaml",
            FileMode::Regular,
            "resources: [a.yaml]\n",
        ),
        ("apps/base/a.yaml", FileMode::Regular, "kind: A\n"),
        ("apps/base/alias.yaml", FileMode::Symlink, "a.yaml"),
        ("apps/prod", FileMode::Symlink, "base"),
        ("apps/loop", FileMode::Symlink, ".."),
        ("apps/passwd", FileMode::Symlink, "/etc/passwd"),
        ("apps/dangling", FileMode::Symlink, "nowhere"),
        ("bin/run.sh", FileMode::Executable, "#!/bin/sh\n"),
    ];

    fn assert_flux_view(f: &dyn FleetRead) {
        let names = |d: &str| -> Vec<(String, EntryKind)> {
            f.list(d)
                .unwrap()
                .unwrap()
                .into_iter()
                .map(|e| (e.name, e.kind))
                .collect()
        };
        assert_eq!(
            names("apps"),
            vec![
                ("base".into(), EntryKind::Dir),
                ("dangling".into(), EntryKind::Symlink),
                ("loop".into(), EntryKind::Symlink),
                ("passwd".into(), EntryKind::Symlink),
                ("prod".into(), EntryKind::Symlink),
            ]
        );
        // Nothing is behind a link, whatever it points at: no error either.
        for p in [
            "apps/prod",
            "apps/prod/a.yaml",
            "apps/base/alias.yaml",
            "apps/passwd",
            "apps/loop/apps",
        ] {
            assert_eq!(f.read(p).unwrap(), None, "{p}");
            assert!(!f.is_dir(p).unwrap(), "{p}");
        }
        assert_eq!(f.read_text("apps/base/a.yaml").unwrap().as_deref(), Some("kind: A\n"));
        assert_eq!(
            f.symlink_on("apps/prod/kustomization.yaml").unwrap(),
            Some(Symlink {
                path: "apps/prod".into(),
                target: "base".into()
            })
        );
        assert_eq!(f.symlink_on("apps/base/a.yaml").unwrap(), None);
        assert_eq!(f.symlink_on("apps/nothing/x").unwrap(), None);
        assert_eq!(f.read_link("apps/passwd").unwrap().as_deref(), Some("/etc/passwd"));
        assert_eq!(f.read_link("apps/base/a.yaml").unwrap(), None);
        assert_eq!(f.mode("bin/run.sh").unwrap(), Some(FileMode::Executable));
        assert_eq!(f.mode("apps/base/a.yaml").unwrap(), Some(FileMode::Regular));
        assert_eq!(f.mode("apps/prod").unwrap(), Some(FileMode::Symlink));
        assert_eq!(f.mode("apps/prod/a.yaml").unwrap(), None);
        assert_eq!(f.mode("apps").unwrap(), None);
        assert_eq!(
            f.walk_files("").unwrap(),
            vec!["apps/base/a.yaml", "apps/base/kustomization.yaml", "bin/run.sh"]
        );
        let mut all: Vec<(String, FileMode)> = TREE.iter().map(|(p, m, _)| (p.to_string(), *m)).collect();
        all.sort();
        assert_eq!(f.walk("").unwrap(), all);
        assert_eq!(
            Symlink {
                path: "apps/base/alias.yaml".into(),
                target: "../../apps/base/a.yaml".into()
            }
            .resolved()
            .as_deref(),
            Some("apps/base/a.yaml")
        );
    }

    #[test]
    fn every_view_shows_symlinks_as_flux_artifacts_do() {
        let dir = tempfile::tempdir().unwrap();
        for (p, mode, content) in TREE {
            let f = FileWrite {
                path: (*p).to_owned(),
                mode: *mode,
                content: (*content).to_owned(),
            };
            f.write_at(&dir.path().join(p)).unwrap();
        }
        // A checkout's own .git is no part of the fleet.
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let local = LocalFleet::open(dir.path()).unwrap();
        assert_flux_view(&local);
        assert_eq!(local.read(".git/HEAD").unwrap(), None);
        assert!(matches!(local.read("apps/../x"), Err(FleetError::OutsideRepo { .. })));

        let mem: MemFleet = TREE
            .iter()
            .map(|(p, m, c)| (p.to_string(), *m, c.as_bytes().to_vec()))
            .collect();
        assert_flux_view(&mem);

        // The same files proposed over an empty base, and over a base they replace.
        let empty = MemFleet::new();
        assert_flux_view(&Overlay::with_modes(
            &empty,
            TREE.iter().map(|(p, m, c)| (p.to_string(), *m, c.as_bytes().to_vec())),
        ));
        let mut base = MemFleet::new();
        base.insert("apps/prod/old.yaml", "kind: Old\n");
        base.insert("bin/run.sh", "old\n");
        base.insert("apps/base/a.yaml", "kind: A\n");
        let over = Overlay::with_modes(
            &base,
            TREE.iter().map(|(p, m, c)| (p.to_string(), *m, c.as_bytes().to_vec())),
        );
        assert_flux_view(&over);
    }

    #[test]
    fn git_modes_round_trip() {
        for m in [FileMode::Regular, FileMode::Executable, FileMode::Symlink] {
            assert_eq!(FileMode::from_git_mode(m.git_mode()), Some(m));
        }
        assert_eq!(FileMode::from_git_mode("040000"), None);
    }
}
