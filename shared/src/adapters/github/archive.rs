//! The base branch as one archive: GitHub's tarball, read as it streams in (no per-file
//! request), keeping the shared part of the fleet and the cells being planned, within a memory
//! limit.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::time::Instant;

use http::Method;
use http_body_util::BodyExt;

use super::operations as ops;
use super::transport::{
    DEADLINE_MARGIN, FIRST_BACKOFF, Headers, MAX_ATTEMPTS, MAX_BACKOFF, Response, download_client, enc, execute,
    octocrab_message, transient_status,
};
use crate::pure::fleet::{FileMode, Keep, MemFleet};
use crate::{
    adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result, ports::github::Snapshot,
};

impl GithubFleet {
    /// The base branch's head commit and the files `keep` keeps.
    pub(super) async fn download_snapshot(&self, keep: &Keep, deadline: Instant) -> Result<Snapshot> {
        let base_branch = self.base_branch(deadline).await?;
        let what = format!("downloading {} at {base_branch}", self.repo_name());
        let r = self
            .repo_send(
                &what,
                &ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE,
                &format!("/tarball/{}", enc(&base_branch)),
                None,
                deadline,
            )
            .await?;
        let archive = if r.status.is_redirection() {
            let loc = r
                .headers
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| GithubError::Protocol {
                    what: what.clone(),
                    detail: "redirect without Location".into(),
                })?;
            let loc = match loc
                .starts_with('/')
                .then(|| http::Uri::try_from(self.api_url.as_str()).ok())
                .flatten()
            {
                // A path is relative to the server, not to the API's base path.
                Some(api) => format!(
                    "{}://{}{loc}",
                    api.scheme_str().unwrap_or("https"),
                    api.authority().map(|a| a.as_str()).unwrap_or_default()
                ),
                None => loc.to_owned(),
            };
            self.stream_archive(&what, &loc, keep, deadline).await?
        } else if r.status.is_success() {
            // Served whole by the API itself: already in memory.
            let (keep, limit, body) = (keep.clone(), self.fleet_memory, r.body);
            blocking(&what, move || read_archive_from(&body[..], &keep, limit)).await?
        } else {
            return Err(r.api_error(&what));
        };
        tracing::info!(
            commit = %archive.sha,
            kept_kb = archive.kept_bytes / 1024,
            cells = keep.cells.len(),
            "read the fleet repo's base branch"
        );
        Ok(Snapshot {
            base_branch,
            base_sha: archive.sha,
            base_tree: Default::default(),
            fleet: archive.fleet,
            keep: keep.clone(),
        })
    }

    /// Downloads the archive at `url` (the redirect's target, whose URL carries a token: never
    /// logged) and reads it while it streams in, on a blocking thread fed chunk by chunk, so that
    /// neither the compressed archive nor what is read past is ever held whole. A transport
    /// failure or a 5xx starts the download again, within the deadline.
    async fn stream_archive(&self, what: &str, url: &str, keep: &Keep, deadline: Instant) -> Result<Archive> {
        let mut wait = FIRST_BACKOFF;
        for attempt in 1..=MAX_ATTEMPTS {
            self.counts.downloads.fetch_add(1, Ordering::Relaxed);
            let err = match self.stream_once(what, url, keep, deadline).await {
                Ok(archive) => return Ok(archive),
                Err(Streamed::Final(e)) => return Err(e),
                Err(Streamed::Again(detail)) => detail,
            };
            if attempt == MAX_ATTEMPTS || Instant::now() + wait + DEADLINE_MARGIN >= deadline {
                return Err(GithubError::Transient {
                    what: what.to_owned(),
                    detail: format!("{err}, after {attempt} attempt(s)"),
                });
            }
            tracing::warn!(request = what, attempt, wait_ms = wait.as_millis() as u64, error = %err, "archive download failed, retrying");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_BACKOFF);
        }
        unreachable!("the last attempt returns")
    }

    async fn stream_once(
        &self,
        what: &str,
        url: &str,
        keep: &Keep,
        deadline: Instant,
    ) -> std::result::Result<Archive, Streamed> {
        let again = |detail: String| Streamed::Again(detail);
        let (client, path) = match download_client(url) {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(Streamed::Final(GithubError::Protocol {
                    what: what.to_owned(),
                    detail: "the archive redirect is not an absolute URL".into(),
                }));
            }
            Err(reason) => return Err(again(reason)),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let resp = match tokio::time::timeout(
            left.saturating_sub(DEADLINE_MARGIN),
            execute(
                &client,
                Method::GET,
                &path,
                None,
                Headers {
                    accept: Some("application/x-gzip"),
                    ..Headers::default()
                },
            ),
        )
        .await
        {
            Err(_) => return Err(again("no answer before the function's deadline".into())),
            Ok(Err(e)) => return Err(again(e.message())),
            Ok(Ok(resp)) => resp,
        };
        let (parts, mut body) = resp.into_parts();
        if !parts.status.is_success() {
            let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let r = Response {
                status: parts.status,
                headers: parts.headers,
                body: bytes,
                permission: "",
            };
            return Err(if transient_status(r.status) {
                again(format!("HTTP {}", r.status.as_u16()))
            } else {
                Streamed::Final(r.api_error(what))
            });
        }
        // A few chunks in flight: the reader keeps pace with the network, memory stays flat.
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(8);
        let (keep, limit) = (keep.clone(), self.fleet_memory);
        let reader = tokio::task::spawn_blocking(move || read_archive_from(ChunkReader::new(rx), &keep, limit));
        let feed = async {
            while let Some(frame) = body.frame().await {
                let chunk = match frame {
                    Ok(f) => match f.into_data() {
                        Ok(d) => Ok(d),
                        Err(_) => continue,
                    },
                    Err(e) => Err(std::io::Error::other(octocrab_message(&e))),
                };
                let failed = chunk.is_err();
                // The reader stopped (an error of its own, or the archive ended): stop sending.
                if tx.send(chunk).await.is_err() || failed {
                    break;
                }
            }
            drop(tx);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if tokio::time::timeout(left.saturating_sub(DEADLINE_MARGIN), feed)
            .await
            .is_err()
        {
            reader.abort();
            return Err(again(
                "the download did not finish before the function's deadline".into(),
            ));
        }
        match reader.await {
            Err(e) => Err(Streamed::Final(GithubError::Protocol {
                what: what.to_owned(),
                detail: e.to_string(),
            })),
            Ok(Ok(archive)) => Ok(archive),
            Ok(Err(e @ ArchiveError::TooLarge { .. })) => Err(Streamed::Final(GithubError::TooLarge {
                what: what.to_owned(),
                source: e,
            })),
            // Cut short in transit reads as a corrupt archive: download it again.
            Ok(Err(ArchiveError::Corrupt(detail))) => Err(again(detail)),
        }
    }
}

/// One try at a streamed download failed: try again, or stop with this error.
enum Streamed {
    Again(String),
    Final(GithubError),
}

/// Runs a whole-archive read on a blocking thread.
async fn blocking(
    what: &str,
    read: impl FnOnce() -> std::result::Result<Archive, ArchiveError> + Send + 'static,
) -> Result<Archive> {
    match tokio::task::spawn_blocking(read).await {
        Err(e) => Err(GithubError::Protocol {
            what: what.to_owned(),
            detail: e.to_string(),
        }),
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e @ ArchiveError::TooLarge { .. })) => Err(GithubError::TooLarge {
            what: what.to_owned(),
            source: e,
        }),
        Ok(Err(ArchiveError::Corrupt(detail))) => Err(GithubError::Protocol {
            what: what.to_owned(),
            detail,
        }),
    }
}

/// The chunks of a download as a [`Read`], for the tar reader on its blocking thread.
struct ChunkReader {
    rx: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>,
    chunk: bytes::Bytes,
}

impl ChunkReader {
    fn new(rx: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>) -> Self {
        Self {
            rx,
            chunk: bytes::Bytes::new(),
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.chunk.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(Err(e)) => return Err(e),
                Some(Ok(c)) => self.chunk = c,
            }
        }
        let n = out.len().min(self.chunk.len());
        out[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

/// A GitHub archive read: the commit it names and the files kept ([`Keep`]) with their modes
/// (symlinks as symlinks: see [`crate::pure::fleet`] for how the fleet reads them).
#[derive(Debug, Clone)]
pub struct Archive {
    pub sha: String,
    pub fleet: MemFleet,
    /// Bytes kept in memory (contents and paths).
    pub kept_bytes: u64,
}

/// Why an archive could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{0}")]
    Corrupt(String),
    /// What must be kept is more than the memory allows: a final answer, which no retry fixes.
    #[error(
        "what this run must keep of it (everything outside clusters/<cell>/, the template and the cells being planned) is over {}, the limit for this function's memory ({LIMIT_VAR}, default a quarter of the Lambda function's memory): give the function more memory, or keep less outside clusters/<cell>/",
        size(*limit)
    )]
    TooLarge { limit: u64 },
}

const MB: u64 = 1024 * 1024;

fn size(bytes: u64) -> String {
    if bytes >= MB {
        format!("{:.1} MB", bytes as f64 / MB as f64)
    } else {
        format!("{} KB", bytes.div_ceil(1024))
    }
}
/// Outside Lambda (the command line).
pub const DEFAULT_LIMIT: u64 = 512 * MB;
pub const LIMIT_VAR: &str = "CELLBRIDGE_FLEET_MEMORY_MB";

/// How much of the fleet repo one read may keep in memory: `CELLBRIDGE_FLEET_MEMORY_MB`, else a
/// quarter of the Lambda function's memory (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, set by Lambda:
/// the rest holds the plan, the rendered check and the runtime), else 512 MB (the command line).
pub fn memory_limit_from_env() -> std::result::Result<u64, crate::shell::config::ConfigError> {
    if let Some(v) = crate::shell::config::optional(LIMIT_VAR) {
        return match v.parse::<u64>() {
            Ok(mb) if mb > 0 => Ok(mb * MB),
            _ => Err(crate::shell::config::ConfigError::Invalid {
                name: LIMIT_VAR,
                value: v,
                reason: "expected a whole number of megabytes, above 0".into(),
            }),
        };
    }
    Ok(std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|mb| mb * MB / 4)
        .unwrap_or(DEFAULT_LIMIT))
}

/// Reads a whole GitHub archive held in memory, keeping everything.
pub fn read_archive(bytes: &[u8]) -> std::result::Result<Archive, String> {
    read_archive_from(bytes, &Keep::all(), u64::MAX).map_err(|e| e.to_string())
}

/// Reads a GitHub archive as it streams in: a gzip'd pax tar whose global header's `comment` is
/// the commit id and whose entries sit under one `owner-repo-<short sha>/` directory, as `git
/// archive` of a commit writes it (regular files 0664 or 0775, symlinks as symlink entries whose
/// link name is the target). Only what `keep` keeps is held, at most `limit` bytes; the rest
/// (other cells' directories, what grows with the fleet) is read past.
pub fn read_archive_from(reader: impl Read, keep: &Keep, limit: u64) -> std::result::Result<Archive, ArchiveError> {
    let corrupt = |e: std::io::Error| ArchiveError::Corrupt(format!("corrupt archive: {e}"));
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(reader));
    let mut sha = None;
    let mut keeper = Keeper::new(keep, limit);
    let entries = tar
        .entries()
        .map_err(|e| ArchiveError::Corrupt(format!("not a tar.gz archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(corrupt)?;
        let kind = entry.header().entry_type();
        if kind == tar::EntryType::XGlobalHeader {
            let mut buf = Vec::new();
            entry.read_to_end(&mut buf).map_err(corrupt)?;
            sha = pax_comment(&buf);
            continue;
        }
        let path = entry.path().map_err(corrupt)?.to_string_lossy().into_owned();
        let Some((_, rel)) = path.split_once('/') else { continue };
        let rel = rel.trim_end_matches('/');
        if rel.is_empty() || rel.split('/').any(|s| s == ".." || s == "." || s.is_empty()) {
            continue;
        }
        let mode = if kind.is_symlink() {
            FileMode::Symlink
        } else if kind.is_file() {
            // Git records the executable bit alone; `git archive` writes 0775 for it.
            match entry.header().mode() {
                Ok(m) if m & 0o100 != 0 => FileMode::Executable,
                _ => FileMode::Regular,
            }
        } else {
            continue;
        };
        let size = entry.size();
        // Read past unless kept: the tar reader skips the entry's bytes without holding them.
        keeper.offer(rel, mode, size, || {
            if mode == FileMode::Symlink {
                // Git stores a link as a blob of its target.
                Ok(entry.link_name_bytes().map(|b| b.into_owned()).unwrap_or_default())
            } else {
                let mut buf = Vec::with_capacity(size as usize);
                entry
                    .read_to_end(&mut buf)
                    .map_err(|e| ArchiveError::Corrupt(format!("corrupt archive at {rel}: {e}")))?;
                Ok(buf)
            }
        })?;
    }
    let (fleet, kept) = keeper.finish();
    let sha = sha.ok_or_else(|| ArchiveError::Corrupt("the archive has no pax header naming its commit".into()))?;
    Ok(Archive {
        sha,
        fleet,
        kept_bytes: kept,
    })
}

/// What a read of the fleet repo keeps, offered its files in the order git writes a tree (a
/// directory's entries together, by name): the [`Keep`] rules, the memory limit, and the cells
/// found by the clusters they name, whose files are held only until their `cell-metadata.yaml`
/// says (or the directory ends). The archive reader and the in-memory GitHub both read through it.
pub(crate) struct Keeper<'k> {
    keep: &'k Keep,
    limit: u64,
    kept: u64,
    fleet: MemFleet,
    /// The read-past cell directory being offered now, while it may still be a cluster's cell:
    /// its files so far, and whether its metadata named one (`Some(true)`: kept from now on).
    pending: Option<(String, Vec<Held>, Option<bool>)>,
}

/// A file held while its cell's metadata is not read yet: path, mode, bytes.
type Held = (String, FileMode, Vec<u8>);

impl<'k> Keeper<'k> {
    pub(crate) fn new(keep: &'k Keep, limit: u64) -> Self {
        Self {
            keep,
            limit,
            kept: 0,
            fleet: MemFleet::kept(keep),
            pending: None,
        }
    }

    /// A file at `rel` of `mode` and `size` bytes; `read` gives its bytes (a link's target) and
    /// is called only when they are kept or may be.
    pub(crate) fn offer(
        &mut self,
        rel: &str,
        mode: FileMode,
        size: u64,
        read: impl FnOnce() -> std::result::Result<Vec<u8>, ArchiveError>,
    ) -> std::result::Result<(), ArchiveError> {
        let Some(dir) = self.keep.other_cell(rel) else {
            self.settle(None);
            return self.hold(rel, mode, size, read);
        };
        let index = self.keep.is_index(rel);
        if self.keep.clusters.is_empty() {
            if index {
                return self.hold(rel, mode, size, read);
            }
            self.fleet.insert_read_past(dir);
            return Ok(());
        }
        if self.pending.as_ref().is_none_or(|(d, _, _)| d != dir) {
            self.settle(Some(dir));
        }
        match self.pending.as_ref().and_then(|(_, _, found)| *found) {
            Some(true) => return self.hold(rel, mode, size, read),
            Some(false) if index => return self.hold(rel, mode, size, read),
            Some(false) => return Ok(()),
            None => {}
        }
        self.check(rel, size)?;
        let bytes = read()?;
        self.charge(rel, &bytes)?;
        let is_metadata = rel
            .strip_prefix(dir)
            .is_some_and(|r| r == format!("/{}", crate::pure::configmap::FILE_NAME));
        let found = is_metadata.then(|| self.names_a_cluster(rel, &bytes));
        let Some((_, held, verdict)) = self.pending.as_mut() else {
            return Ok(());
        };
        held.push((rel.to_owned(), mode, bytes));
        match found {
            Some(true) => {
                *verdict = Some(true);
                for (p, m, b) in std::mem::take(held) {
                    self.fleet.insert_mode(p, m, b);
                }
            }
            Some(false) => {
                *verdict = Some(false);
                // The index keeps the metadata file itself.
                let metadata = if index { held.pop() } else { None };
                let dropped: u64 = held.drain(..).map(|(p, _, b)| (p.len() + b.len()) as u64).sum();
                self.kept -= dropped;
                if let Some((p, m, b)) = metadata {
                    self.fleet.insert_mode(p, m, b);
                }
                self.fleet.insert_read_past(dir);
            }
            None => {}
        }
        Ok(())
    }

    /// What was kept, and its size.
    pub(crate) fn finish(mut self) -> (MemFleet, u64) {
        self.settle(None);
        (self.fleet, self.kept)
    }

    fn names_a_cluster(&self, file: &str, bytes: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return false;
        };
        // A file that does not parse names no cluster here; the run that reads it says why.
        let Ok(existing) = crate::pure::configmap::parse(text, file) else {
            return false;
        };
        self.keep
            .clusters
            .iter()
            .any(|(cluster, region)| crate::pure::configmap::names_cluster(&existing.data, cluster, region))
    }

    /// The pending directory ends (another starts, or the archive): undecided, it was read past.
    fn settle(&mut self, next: Option<&str>) {
        if let Some((dir, held, verdict)) = self.pending.take()
            && verdict.is_none()
        {
            for (p, m, b) in held {
                if self.keep.is_index(&p) {
                    self.fleet.insert_mode(p, m, b);
                } else {
                    self.kept -= (p.len() + b.len()) as u64;
                }
            }
            self.fleet.insert_read_past(dir);
        }
        self.pending = next.map(|d| (d.to_owned(), Vec::new(), None));
    }

    /// Refuses, before reading it, an entry of `size` bytes that would pass the limit.
    fn check(&self, rel: &str, size: u64) -> std::result::Result<(), ArchiveError> {
        if self.kept.saturating_add(size).saturating_add(rel.len() as u64) > self.limit {
            return Err(ArchiveError::TooLarge { limit: self.limit });
        }
        Ok(())
    }

    /// Counts what is held by what it is (a symlink's entry has size 0 but holds its target), so
    /// that dropping it later gives back exactly as much.
    fn charge(&mut self, rel: &str, bytes: &[u8]) -> std::result::Result<(), ArchiveError> {
        self.kept += (rel.len() + bytes.len()) as u64;
        if self.kept > self.limit {
            return Err(ArchiveError::TooLarge { limit: self.limit });
        }
        Ok(())
    }

    fn hold(
        &mut self,
        rel: &str,
        mode: FileMode,
        size: u64,
        read: impl FnOnce() -> std::result::Result<Vec<u8>, ArchiveError>,
    ) -> std::result::Result<(), ArchiveError> {
        self.check(rel, size)?;
        let bytes = read()?;
        self.charge(rel, &bytes)?;
        self.fleet.insert_mode(rel.to_owned(), mode, bytes);
        Ok(())
    }
}

pub(super) fn pax_comment(records: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(records);
    text.lines()
        .find_map(|l| {
            l.split_once(' ')
                .and_then(|(_, kv)| kv.strip_prefix("comment="))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| s.len() == 40)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(cluster: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  cluster_name: \"{cluster}\"\n  aws_region: \"eu-west-1\"\n"
        )
    }

    #[test]
    fn a_keeper_finds_a_clusters_cell_in_the_same_pass_and_reads_the_others_past() {
        let keep = Keep::default()
            .with_index()
            .with_clusters([("eks-b".to_owned(), "eu-west-1".to_owned())]);
        let mut k = Keeper::new(&keep, u64::MAX);
        // In git's order: each directory's entries together, by name.
        let files = [
            ("apps/x.yaml", "shared".to_owned()),
            ("clusters/_template/layers.yaml", "template".to_owned()),
            ("clusters/a/addons/big.yaml", "a".repeat(1000)),
            ("clusters/a/cell-metadata.yaml", metadata("eks-a")),
            ("clusters/a/flux-system/gotk-components.yaml", "a".repeat(1000)),
            ("clusters/b/addons/big.yaml", "b".repeat(1000)),
            ("clusters/b/cell-metadata.yaml", metadata("eks-b")),
            ("clusters/b/flux-system/gotk-components.yaml", "b".repeat(1000)),
            ("clusters/c/flux-system/gotk-components.yaml", "c".repeat(1000)),
        ];
        for (p, c) in &files {
            k.offer(p, FileMode::Regular, c.len() as u64, || Ok(c.clone().into_bytes()))
                .unwrap();
            if *p == "clusters/a/addons/big.yaml" {
                // A symlink's tar entry has size 0 but holds its target: held, then given back.
                k.offer("clusters/a/addons/link", FileMode::Symlink, 0, || {
                    Ok(b"big.yaml".to_vec())
                })
                .unwrap();
            }
        }
        let (fleet, kept) = k.finish();
        use crate::pure::fleet::FleetRead as _;
        assert_eq!(
            fleet.read_text("clusters/b/addons/big.yaml").unwrap().map(|t| t.len()),
            Some(1000)
        );
        assert!(
            fleet
                .read("clusters/b/flux-system/gotk-components.yaml")
                .unwrap()
                .is_some()
        );
        assert!(
            fleet.read_text("clusters/a/cell-metadata.yaml").unwrap().is_some(),
            "the index"
        );
        assert!(
            fleet.read("clusters/a/addons/big.yaml").is_err(),
            "read past, not absent"
        );
        assert!(fleet.read("clusters/c/flux-system/gotk-components.yaml").is_err());
        let expected: u64 = files
            .iter()
            .filter(|(p, _)| !p.starts_with("clusters/a/") && !p.starts_with("clusters/c/"))
            .chain(files.iter().filter(|(p, _)| *p == "clusters/a/cell-metadata.yaml"))
            .map(|(p, c)| (p.len() + c.len()) as u64)
            .sum();
        assert_eq!(kept, expected, "what was held for a while is not counted once dropped");
    }

    #[test]
    fn pax_comment_is_the_commit() {
        let sha = "48e9c0b5358ffbb0edb88f0f4db3b893b419c1a6";
        assert_eq!(
            pax_comment(format!("52 comment={sha}\n").as_bytes()).as_deref(),
            Some(sha)
        );
    }
}
