//! "Compare two commits" (<https://docs.github.com/rest/commits/commits#compare-two-commits>):
//! three dots, the head's changes since its merge base with the base, as git's `merge-base`
//! finds it; at most 300 files and the newest 250 commits, as GitHub lists them.

use std::collections::{BTreeMap, BTreeSet};

use super::{Result, Store, api};
use crate::adapters::github::operations as ops;
use crate::ports::github::{BranchCommit, COMPARE_FILES_MAX, ChangedFile, Comparison, Relation};
use crate::pure::fleet::object_id::blob_id;

/// The most commits a comparison lists (the most files: [`COMPARE_FILES_MAX`]).
const COMPARE_COMMITS_MAX: usize = 250;

impl Store {
    pub(super) fn compare(&mut self, base: &str, head: &str) -> Result<Comparison> {
        self.enter(&ops::REPOS_COMPARE_COMMITS)?;
        let resolve = |r: &str| {
            self.refs
                .get(r)
                .cloned()
                .or_else(|| self.commits.contains_key(r).then(|| r.to_owned()))
        };
        let (Some(b), Some(h)) = (resolve(base), resolve(head)) else {
            return Err(api(&ops::REPOS_COMPARE_COMMITS, 404, "Not Found"));
        };
        let Some(since) = self.merge_base(&b, &h) else {
            return Err(api(
                &ops::REPOS_COMPARE_COMMITS,
                404,
                format!("No common ancestor between {base} and {head}."),
            ));
        };
        let relation = match (since == h, since == b) {
            (true, true) => Relation::Identical,
            (true, false) => Relation::Behind,
            (false, true) => Relation::Ahead,
            (false, false) => Relation::Diverged,
        };
        let empty = BTreeMap::new();
        let tree_of = |c: &str| {
            self.commits
                .get(c)
                .and_then(|c| self.trees.get(&c.tree))
                .unwrap_or(&empty)
        };
        let (old, new) = (tree_of(&since), tree_of(&h));
        let paths: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        let changed: Vec<(String, Option<(String, String)>)> = paths
            .into_iter()
            .filter(|p| old.get(*p) != new.get(*p))
            .map(|p| (p.clone(), new.get(p).map(|(_, c)| (blob_id(c), c.clone()))))
            .collect();
        let mut files = Vec::new();
        for (path, blob) in changed {
            files.push(ChangedFile {
                path,
                blob: blob.as_ref().map(|(id, _)| id.clone()),
            });
            if let Some((id, text)) = blob {
                self.blobs.insert(id, text);
            }
        }
        // "The response will include a comparison of up to 300 files" ("Compare two
        // commits", https://docs.github.com/rest/commits/commits#compare-two-commits).
        files.truncate(COMPARE_FILES_MAX);
        // The head's own commits, oldest first, as GitHub lists them (the newest 250).
        let base_side = self.ancestors(&b);
        let mut ahead: Vec<(u64, String)> = self
            .ancestors(&h)
            .into_iter()
            .filter(|c| !base_side.contains(c))
            .map(|c| (self.commits[&c].when, c))
            .collect();
        ahead.sort();
        let total_commits = ahead.len();
        let commits: Vec<BranchCommit> = ahead
            .into_iter()
            .skip(total_commits.saturating_sub(COMPARE_COMMITS_MAX))
            .map(|(_, sha)| BranchCommit {
                message: self.commits[&sha].message.clone(),
                author: None,
                verified: Some(self.verified.contains(&sha)),
                sha,
            })
            .collect();
        Ok(Comparison {
            relation,
            head_tree: (since != h).then(|| self.commits[&h].tree.clone()),
            merge_base: since,
            files,
            total_commits,
            commits,
        })
    }
}
