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
//!
//! Where each part lives: this module holds the paths, modes and the [`FleetRead`] trait every
//! view answers; `local.rs` the checkout on disk, `mem.rs` the in-memory snapshot and `keep.rs`
//! what a read of a large fleet keeps of it, `overlay.rs` a snapshot with a branch's files laid
//! over it.

mod keep;
mod local;
mod mem;
pub mod object_id;
mod overlay;

#[cfg(test)]
mod tests;

pub use keep::Keep;
pub use local::LocalFleet;
pub use mem::MemFleet;
pub use overlay::Overlay;

use std::path::Path;

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
