//! What the head holds: the files it changed since its merge base, and the plan checked on the
//! head's own content, so that its status and auto-merge judge what people pushed too.

use std::collections::BTreeMap;
use std::time::Instant;

use super::updating::set_status;
use crate::ports::github::{Comparison, GitData, GithubRepo, Merges};
use crate::ports::github::{GithubError, Result, Snapshot};
use crate::pure::configmap;
use crate::pure::fleet::object_id::blob_id;
use crate::pure::fleet::{FileMode, FleetRead, Overlay};
use crate::pure::plan::{self, Plan};

/// What a head changed since its merge base with the base: every file it added or changed,
/// by blob id, and every file it removed. The comparison tells when it lists every file; past
/// the 300 files GitHub lists, the two commits' whole trees do (`git/trees?recursive=1`; a
/// `truncated` answer is a failure, never a shorter list), so that nothing the head holds
/// escapes its status or auto-merge.
pub(super) struct HeadChanges {
    changed: BTreeMap<String, String>,
    removed: Vec<String>,
    /// Taken from a comparison's list (which names a gitlink like a file), not from the trees.
    listed: bool,
    merge_base: String,
    head: String,
}

impl HeadChanges {
    pub(super) async fn of<G: GitData>(gh: &G, cmp: &Comparison, head: &str, deadline: Instant) -> Result<Self> {
        if !cmp.lists_every_file() {
            return Self::from_trees(gh, &cmp.merge_base, head, deadline).await;
        }
        let mut changed = BTreeMap::new();
        let mut removed = Vec::new();
        for f in &cmp.files {
            match &f.blob {
                Some(blob) => {
                    changed.insert(f.path.clone(), blob.clone());
                }
                None => removed.push(f.path.clone()),
            }
        }
        Ok(Self {
            changed,
            removed,
            listed: true,
            merge_base: cmp.merge_base.clone(),
            head: head.to_owned(),
        })
    }

    /// From the whole trees of `merge_base` and `head` (gitlinks are no files there).
    async fn from_trees<G: GitData>(gh: &G, merge_base: &str, head: &str, deadline: Instant) -> Result<Self> {
        let at_head = gh.tree_files(head, deadline).await?.files;
        let at_base = gh.tree_files(merge_base, deadline).await?.files;
        let removed = at_base.keys().filter(|p| !at_head.contains_key(*p)).cloned().collect();
        let changed = at_head
            .into_iter()
            .filter(|(path, blob)| at_base.get(path) != Some(blob))
            .collect();
        Ok(Self {
            changed,
            removed,
            listed: false,
            merge_base: merge_base.to_owned(),
            head: head.to_owned(),
        })
    }

    /// Whether the head holds `text` at `path`, the base's file at `path` being `base`.
    pub(super) fn holds(&self, path: &str, text: &str, base: Option<&str>) -> bool {
        match self.changed.get(path) {
            Some(blob) => *blob == blob_id(text),
            None if self.removed.iter().any(|p| p == path) => false,
            None => base == Some(text),
        }
    }

    /// Every path the head added, changed or removed.
    fn paths(&self) -> impl Iterator<Item = &str> {
        self.changed
            .keys()
            .map(String::as_str)
            .chain(self.removed.iter().map(String::as_str))
    }
}

/// The head's content as it would merge: the base with every file the branch changed since
/// their merge base (`written` is cellbridge's file as it now stands on the branch). A file
/// whose blob is one cellbridge wrote is not read again, and keeps the mode cellbridge gave it
/// (a comparison names no mode: another changed file is taken as a regular one).
async fn head_content<G: GitData>(
    gh: &G,
    plan: &Plan,
    changes: &HeadChanges,
    written: (&str, &str),
    deadline: Instant,
) -> Result<Vec<(String, FileMode, Vec<u8>)>> {
    let mut files = Vec::new();
    for (path, blob) in &changes.changed {
        if *path == written.0 {
            continue;
        }
        let known = plan
            .files
            .iter()
            .find(|p| p.path == *path && blob_id(&p.new) == *blob)
            .map(|p| (p.mode, p.new.clone()));
        // Bytes as they are: a file that is not UTF-8 stays opaque, read (and then a finding
        // naming it) only if a layer reads it.
        let (mode, bytes) = match known {
            Some((mode, text)) => (mode, text.into_bytes()),
            None => (FileMode::Regular, gh.read_blob(blob, deadline).await?),
        };
        files.push((path.clone(), mode, bytes));
    }
    files.push((written.0.to_owned(), FileMode::Regular, written.1.as_bytes().to_vec()));
    Ok(files)
}

/// The plan as checked on `head`'s own content (`ours`: cellbridge's file as it stands there):
/// the check run on the base with every file the head changed, and those files as the plan's,
/// so that auto-merge's rules see what people pushed too (a removed file included).
pub(super) async fn checked_head<G: GithubRepo>(
    gh: &G,
    snap: &Snapshot,
    plan: &Plan,
    changes: &HeadChanges,
    ours: &str,
    deadline: Instant,
) -> Result<Plan> {
    let cm = configmap::path_for(&plan.cell);
    let from_trees;
    let (content, changes) = match head_content(gh, plan, changes, (&cm, ours), deadline).await {
        // A path the comparison lists whose blob the repository does not have is a gitlink (a
        // submodule's commit, which a comparison lists like a file): the two trees, which tell
        // gitlinks apart, are read instead, and the submodule is no file of the head.
        Err(GithubError::Access { status: 404, .. }) if changes.listed => {
            from_trees = HeadChanges::from_trees(gh, &changes.merge_base, &changes.head, deadline).await?;
            (
                head_content(gh, plan, &from_trees, (&cm, ours), deadline).await?,
                &from_trees,
            )
        }
        other => (other?, changes),
    };
    // What the head deleted is gone from what is checked: a deleted layer no longer fails the
    // check, a deleted variable source no longer passes it.
    let deleted = changes.removed.iter().filter(|p| **p != cm).cloned();
    let view = Overlay::with_modes(&snap.fleet as &dyn FleetRead, content).without(deleted);
    let mut checked = plan.rechecked(&view);
    let mut files: Vec<plan::FileChange> = changes
        .paths()
        .filter(|p| *p != cm)
        .map(|p| plan::FileChange {
            path: p.to_owned(),
            old: None,
            new: String::new(),
            mode: FileMode::Regular,
        })
        .collect();
    if let Some(ours) = plan.files.iter().find(|f| f.path == cm) {
        files.push(ours.clone());
    }
    checked.files = files;
    Ok(checked)
}

/// The status of `head` as `checked` says, posted unless the newest one says the same
/// (`fresh`: a commit just made has none).
pub(super) async fn post_status<G: Merges>(
    gh: &G,
    head: &str,
    checked: &Plan,
    fresh: bool,
    deadline: Instant,
) -> Result<()> {
    let posted = if fresh {
        None
    } else {
        gh.status(head, plan::STATUS_CONTEXT, deadline).await?
    };
    if posted != Some((checked.status_ok(), checked.status_description())) {
        set_status(gh, head, checked, deadline).await?;
    }
    Ok(())
}
