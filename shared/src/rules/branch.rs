//! The one rule for a cell's branch `cellbridge/<cell>`, whichever kind of proposal (values or
//! decommission) wants it: a branch whose commits beyond the base are all cellbridge's own is
//! cellbridge's to recreate from the base; a branch holding anyone else's commit is never
//! deleted, reset, taken over or built on.
//!
//! cellbridge's own commits are the ones it writes: each carries its `Cellbridge-Digest` trailer
//! ([`super::pull_request::message_for`], [`super::decommission`]'s). A merge of the base into
//! the branch, by cellbridge ([`merge_message`]) or by GitHub's **Update branch** button ("Merge
//! branch 'main' into cellbridge/eu-c1"), brings only what the base has: nobody's work. Anything
//! else (a reviewer's commit, a merge of another branch) is someone else's. A comparison lists at most the newest 250
//! commits: commits it does not list cannot be shown to be cellbridge's, so they count as someone
//! else's.

use super::pull_request::trailers;
use crate::ports::github::{BranchCommit, Comparison};

/// Whose commits a branch holds beyond its base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Every commit is cellbridge's (or there is none).
    Cellbridge,
    /// This commit, the oldest that is not cellbridge's, is someone else's.
    Someone(BranchCommit),
}

/// The message of the merge commit with which cellbridge brings `branch` up to date with `base`.
pub fn merge_message(base: &str, branch: &str) -> String {
    format!("Merge {base} into {branch}")
}

/// Whether `c`, on `branch`, is cellbridge's own commit or a merge of `base` into it.
pub fn nobodys_work(c: &BranchCommit, base: &str, branch: &str) -> bool {
    let subject = c.message.lines().next().unwrap_or_default();
    trailers(&c.message).contains_key("Cellbridge-Digest")
        || subject == merge_message(base, branch)
        || subject == format!("Merge branch '{base}' into {branch}")
}

/// Whose commits `cmp` (the base compared with the branch's head) shows.
pub fn owner(cmp: &Comparison, base: &str, branch: &str) -> Owner {
    if let Some(c) = cmp.commits.iter().find(|c| !nobodys_work(c, base, branch)) {
        return Owner::Someone(c.clone());
    }
    if cmp.total_commits > cmp.commits.len() {
        // The oldest commits were not listed: nothing shows they are cellbridge's.
        return Owner::Someone(BranchCommit {
            sha: cmp.merge_base.clone(),
            message: format!("{} commits beyond the base, more than GitHub lists", cmp.total_commits),
            author: None,
            verified: None,
        });
    }
    Owner::Cellbridge
}

/// How a person reads a commit in a report: its short id, author and subject.
pub fn describe(c: &BranchCommit) -> String {
    let subject = c.message.lines().next().unwrap_or_default();
    let short = &c.sha[..c.sha.len().min(12)];
    match &c.author {
        Some(a) => format!("{short} by {a} (\"{subject}\")"),
        None => format!("{short} (\"{subject}\")"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::github::Relation;

    fn cmp(messages: &[&str], total: usize) -> Comparison {
        Comparison {
            relation: Relation::Ahead,
            merge_base: "base".into(),
            files: vec![],
            head_tree: None,
            commits: messages
                .iter()
                .enumerate()
                .map(|(i, m)| BranchCommit {
                    sha: format!("c{i}"),
                    message: (*m).to_owned(),
                    author: Some("alice".into()),
                    verified: None,
                })
                .collect(),
            total_commits: total,
        }
    }

    const OURS: &str = "cellbridge: eu-c1\n\nCellbridge-Serial: 1\nCellbridge-Lineage: L\nCellbridge-Digest: d\n";
    const DECOMMISSION: &str =
        "cellbridge: decommission cell eu-c1\n\nCellbridge-Digest: e\nCellbridge-Kind: decommission\n";

    #[test]
    fn commits_of_either_kind_and_cellbridges_merges_are_cellbridges() {
        let merge = merge_message("main", "cellbridge/eu-c1");
        assert_eq!(
            owner(&cmp(&[OURS, &merge, DECOMMISSION], 3), "main", "cellbridge/eu-c1"),
            Owner::Cellbridge
        );
        assert_eq!(owner(&cmp(&[], 0), "main", "cellbridge/eu-c1"), Owner::Cellbridge);
    }

    #[test]
    fn a_persons_update_branch_is_nobodys_work() {
        let update = "Merge branch 'main' into cellbridge/eu-c1";
        assert_eq!(
            owner(&cmp(&[OURS, update], 2), "main", "cellbridge/eu-c1"),
            Owner::Cellbridge
        );
    }

    #[test]
    fn a_reviewers_commit_or_a_merge_of_another_branch_is_someone_elses() {
        for theirs in ["Add a note", "Merge branch 'feature' into cellbridge/eu-c1"] {
            match owner(&cmp(&[OURS, theirs, OURS], 3), "main", "cellbridge/eu-c1") {
                Owner::Someone(c) => {
                    assert_eq!(c.sha, "c1");
                    assert!(describe(&c).contains("by alice"), "{}", describe(&c));
                }
                other => panic!("{theirs}: {other:?}"),
            }
        }
    }

    #[test]
    fn commits_github_did_not_list_are_not_taken_for_cellbridges() {
        assert!(matches!(
            owner(&cmp(&[OURS; 250], 251), "main", "cellbridge/eu-c1"),
            Owner::Someone(_)
        ));
    }
}
