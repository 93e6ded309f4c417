//! The fleet repo as a local checkout (the command line, the fleet repo's own CI).

use std::path::{Component, Path, PathBuf};

use super::{DirEntry, EntryKind, FileMode, FleetError, FleetRead, Result, parents};

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
