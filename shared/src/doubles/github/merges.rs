//! Merges: a pull request into its base ("Merge a pull request"), and a commit into a branch
//! ("Merge a branch", a person's "Update branch").
//!
//! - a pull request behind its base merges when nothing conflicts, keeping both sides ("Merge a
//!   pull request" refuses with 405 "Pull Request is not mergeable" only "if merge cannot be
//!   performed", <https://docs.github.com/rest/pulls/pulls#merge-a-pull-request>), and it cannot be
//!   when both sides changed the same thing differently, editing vs deleting a file included
//!   (<https://docs.github.com/pull-requests/collaborating-with-pull-requests/addressing-merge-conflicts/about-merge-conflicts>).
//!   The double merges whole files three ways against the merge base ([`MemGithub::try_merge`]):
//!   git merges lines, so two edits of different lines of one file conflict here, not on GitHub;
//! - a merge is held to the base's protection, and refused with 409 when the head is not the
//!   one given (see `auto_merge`).

use std::collections::{BTreeMap, BTreeSet};

use super::auto_merge::VIEWER;
use super::pulls::MemPull;
use super::{MemGithub, Result, Store, api};
use crate::adapters::github::answers;
use crate::adapters::github::operations as ops;
use crate::ports::github::{CheckState, Merge, MergeAnswer, MergeMethod};

/// A merge into a base branch, as the store made it: for the tests' invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemMerge {
    pub number: u64,
    /// [`MemPull::merged_by`](super::MemPull::merged_by).
    pub by: String,
    /// The pull request's head that was merged.
    pub head: String,
    /// The base branch's head before the merge, and after it.
    pub base_before: String,
    pub commit: String,
    /// The head's checks and the approvals standing when it merged.
    pub checks: BTreeMap<String, CheckState>,
    pub approvals: usize,
}

/// Why GitHub refused a person's merge (`PUT /pulls/{n}/merge`): its status and message, and
/// the paths both sides changed differently when that is why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRefused {
    pub status: u16,
    pub message: String,
    pub conflicts: Vec<String>,
}

impl std::fmt::Display for MergeRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.message)?;
        if !self.conflicts.is_empty() {
            write!(f, " (conflicting: {})", self.conflicts.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for MergeRefused {}

const NOT_MERGEABLE: &str = "Pull Request is not mergeable";

fn not_mergeable(conflicts: Vec<String>) -> MergeRefused {
    MergeRefused {
        status: 405,
        message: NOT_MERGEABLE.to_owned(),
        conflicts,
    }
}

/// Merges `ours` and `theirs` (path → text) against their merge base `base`, file by file: a
/// side that left a path as in `base` takes the other side's version, identical changes are
/// taken, different changes (deleting vs editing included) conflict. The merged files, or the
/// conflicting paths.
pub(super) fn three_way<V: PartialEq + Clone>(
    base: &BTreeMap<String, V>,
    ours: &BTreeMap<String, V>,
    theirs: &BTreeMap<String, V>,
) -> std::result::Result<BTreeMap<String, V>, Vec<String>> {
    let paths: BTreeSet<&String> = base.keys().chain(ours.keys()).chain(theirs.keys()).collect();
    let mut merged = BTreeMap::new();
    let mut conflicts = Vec::new();
    for path in paths {
        let (b, o, t) = (base.get(path), ours.get(path), theirs.get(path));
        let pick = if o == t {
            o
        } else if o == b {
            t
        } else if t == b {
            o
        } else {
            conflicts.push(path.clone());
            continue;
        };
        if let Some(text) = pick {
            merged.insert(path.clone(), text.clone());
        }
    }
    if conflicts.is_empty() {
        Ok(merged)
    } else {
        Err(conflicts)
    }
}

impl Store {
    /// Merges `commit` into `branch` three ways ("Merge a branch",
    /// <https://docs.github.com/rest/branches/branches#merge-a-branch>): `None` when the branch
    /// already contains it, else the merge commit (the branch moved to it), or the conflicting
    /// paths (nothing moved).
    pub(super) fn merge_commit(
        &mut self,
        branch: &str,
        commit: &str,
        message: &str,
    ) -> std::result::Result<Option<String>, Vec<String>> {
        let head = self.refs[branch].clone();
        if self.is_ancestor(commit, &head) {
            return Ok(None);
        }
        let since = self.merge_base(&head, commit).ok_or_else(Vec::new)?;
        let files = three_way(&self.files_at(&since), &self.files_at(&head), &self.files_at(commit))?;
        let tree = self.put_tree(files);
        let sha = self.put_commit(&tree, &[head, commit.to_owned()], message);
        self.refs.insert(branch.to_owned(), sha.clone());
        Ok(Some(sha))
    }

    /// Merges pull request `number` as "Merge a pull request" does: the head into the base
    /// (three ways, see the module), by `method`, only if the head is `sha` (when given) and,
    /// when `enforce`, the base's protection is met. The new head of the base.
    pub(super) fn merge_pr(
        &mut self,
        number: u64,
        method: MergeMethod,
        sha: Option<&str>,
        by: &str,
        enforce: bool,
    ) -> std::result::Result<String, MergeRefused> {
        let Some(pr) = self.pulls.iter().find(|p| p.number == number).cloned() else {
            return Err(MergeRefused {
                status: 404,
                message: "Not Found".into(),
                conflicts: Vec::new(),
            });
        };
        let (Some(head), Some(base)) = (self.refs.get(&pr.head).cloned(), self.refs.get(&pr.base).cloned()) else {
            return Err(not_mergeable(Vec::new()));
        };
        if !pr.open {
            return Err(not_mergeable(Vec::new()));
        }
        if sha.is_some_and(|s| s != head) {
            return Err(MergeRefused {
                status: 409,
                message: "Head branch was modified. Review and try the merge again.".into(),
                conflicts: Vec::new(),
            });
        }
        let Some(since) = self.merge_base(&base, &head) else {
            return Err(not_mergeable(Vec::new()));
        };
        // A conflict is the first refusal, before the protection's.
        three_way(&self.files_at(&since), &self.files_at(&base), &self.files_at(&head)).map_err(not_mergeable)?;
        if enforce && self.queued_base(&pr) {
            return Err(MergeRefused {
                status: 405,
                message: super::merge_queue::THROUGH_THE_QUEUE.to_owned(),
                conflicts: Vec::new(),
            });
        }
        if enforce && let Some(message) = self.unmet(&pr, &head, &base) {
            return Err(MergeRefused {
                status: 405,
                message,
                conflicts: Vec::new(),
            });
        }
        if method == MergeMethod::Rebase && self.signatures_required(&pr.base) {
            return Err(MergeRefused {
                status: 405,
                message: super::signing::REBASE_UNSIGNABLE.into(),
                conflicts: Vec::new(),
            });
        }
        let sha = self.merged_commit(&pr, method, &base, &head).map_err(not_mergeable)?;
        self.refs.insert(pr.base.clone(), sha.clone());
        self.merged(&pr, by, &head, &base, &sha);
        Ok(sha)
    }

    /// The commit `method` makes of pull request `pr`'s `head` on `base` (see
    /// [`Store::merge_pr`]), no ref moved; the conflicting paths when it cannot be made.
    pub(super) fn merged_commit(
        &mut self,
        pr: &MemPull,
        method: MergeMethod,
        base: &str,
        head: &str,
    ) -> std::result::Result<String, Vec<String>> {
        let since = self.merge_base(base, head).ok_or_else(Vec::new)?;
        let files = three_way(&self.files_at(&since), &self.files_at(base), &self.files_at(head))?;
        let number = pr.number;
        let tree = self.put_tree(files);
        let sha = match method {
            MergeMethod::Merge => self.put_commit(
                &tree,
                &[base.to_owned(), head.to_owned()],
                &format!("Merge pull request #{number}"),
            ),
            // A squash is one commit on the base with the merged tree; a rebase replays the pull
            // request's commits onto the base, which ends in the same tree: the double makes that
            // one commit too (the replayed intermediate commits are not modelled).
            MergeMethod::Squash | MergeMethod::Rebase => {
                self.put_commit(&tree, &[base.to_owned()], &format!("{} (#{number})", pr.title))
            }
        };
        // A merge or squash GitHub makes is signed; a rebase's replayed commits are not.
        if method != MergeMethod::Rebase {
            self.verified.insert(sha.clone());
        }
        Ok(sha)
    }

    /// Pull request `pr` merged at `head` by `by`, its base moved from `base` to `commit`.
    pub(super) fn merged(&mut self, pr: &MemPull, by: &str, head: &str, base: &str, commit: &str) {
        let number = pr.number;
        self.merges.push(MemMerge {
            number,
            by: by.to_owned(),
            checks: self.check_states(head),
            head: head.to_owned(),
            base_before: base.to_owned(),
            commit: commit.to_owned(),
            approvals: pr.approvals.len(),
        });
        let pinned = self.refs.get(&pr.head).cloned();
        let p = self
            .pulls
            .iter_mut()
            .find(|p| p.number == number)
            .expect("a pull request");
        p.open = false;
        p.closed_head = pinned;
        p.merged = true;
        p.auto_merge = None;
        p.merged_by = Some(by.to_owned());
        self.journal.push(format!("#{number} merged by {by}"));
    }
}

/// The port's merges.
impl Store {
    pub(super) fn merge_into(&mut self, branch: &str, commit: &str, message: &str) -> Result<Merge> {
        self.enter(&ops::REPOS_MERGE)?;
        self.check_rules(branch, "merging into")?;
        if !self.refs.contains_key(branch) || !self.commits.contains_key(commit) {
            let (what, base_gone) = (format!("merging {commit} into {branch}"), "Base does not exist");
            return Err(answers::merge_into_refused(&what, 404, base_gone)
                .unwrap_or_else(|| api(&ops::REPOS_MERGE, 404, base_gone)));
        }
        Ok(match self.merge_commit(branch, commit, message) {
            Ok(Some(sha)) => {
                self.sign_if_app(&sha);
                Merge::Merged(sha)
            }
            Ok(None) => Merge::UpToDate,
            Err(_) => Merge::Conflict,
        })
    }

    pub(super) fn merge_pull(&mut self, number: u64, sha: &str, method: MergeMethod) -> Result<MergeAnswer> {
        let lost = self.answer_lost(&ops::PULLS_MERGE);
        self.enter(&ops::PULLS_MERGE)?;
        let answer = match self.merge_pr(number, method, Some(sha), VIEWER, true) {
            Ok(merged) => {
                self.settle();
                Ok(MergeAnswer::Merged(merged))
            }
            Err(r) => answers::merge_refused(&format!("merging pull request #{number}"), r.status, &r.message)
                .unwrap_or_else(|| Err(api(&ops::PULLS_MERGE, r.status, r.message))),
        };
        if lost {
            // The transport sends it again, and that answer is the one cellbridge reads.
            return self.merge_pull(number, sha, method);
        }
        answer
    }
}

/// People's merges.
impl MemGithub {
    /// A person presses "Update branch" on pull request `number`: the base merged into the head
    /// branch (<https://docs.github.com/rest/pulls/pulls#update-a-pull-request-branch>). The new
    /// head, or the paths that conflict (nothing moved).
    pub fn update_branch(&self, number: u64) -> std::result::Result<String, Vec<String>> {
        self.with(|s| {
            let pr = s
                .pulls
                .iter()
                .find(|p| p.number == number)
                .cloned()
                .expect("a pull request");
            let base = s.refs[&pr.base].clone();
            match s.merge_commit(&pr.head, &base, &format!("Merge branch '{}' into {}", pr.base, pr.head))? {
                // GitHub makes this merge commit itself, and signs it (`signing`).
                Some(sha) => {
                    s.verified.insert(sha.clone());
                    Ok(sha)
                }
                None => Ok(s.refs[&pr.head].clone()),
            }
        })
    }

    /// The merge commit squashed: a person merges pull request `number` with
    /// `merge_method: squash`, one commit on the base with the merged tree.
    pub fn squash_merge(&self, number: u64) -> std::result::Result<String, MergeRefused> {
        let merge = self.try_merge(number)?;
        self.with(|s| {
            let (tree, parents) = {
                let c = &s.commits[&merge];
                (c.tree.clone(), c.parents[..1].to_vec())
            };
            let pr = s
                .pulls
                .iter()
                .find(|p| p.number == number)
                .cloned()
                .expect("merged above");
            let sha = s.put_commit(&tree, &parents, &format!("{} (#{number})", pr.title));
            s.verified.insert(sha.clone());
            s.refs.insert(pr.base, sha.clone());
            Ok(sha)
        })
    }

    /// A person merges pull request `number` as GitHub's "Merge a pull request" with
    /// `merge_method: merge` does: the head merged into the base three ways (see the module's
    /// rules), in a merge commit whose parents are the base's head and the pull request's; the
    /// pull request is then merged and closed, its head branch stays until someone deletes it.
    /// The merge commit's id, or GitHub's refusal (404 for no such pull request; 405 when it is
    /// closed, its branches are gone, or both sides changed a file differently), after which
    /// nothing changed.
    pub fn try_merge(&self, number: u64) -> std::result::Result<String, MergeRefused> {
        self.with(|s| {
            // A person's merge is held to the base's protection too (auto-merge).
            let sha = s.merge_pr(number, MergeMethod::Merge, None, "a person", true)?;
            s.settle();
            Ok(sha)
        })
    }

    /// [`MemGithub::try_merge`] for a test that expects the merge to happen: panics with GitHub's
    /// refusal otherwise.
    pub fn merge(&self, number: u64) -> String {
        self.try_merge(number)
            .unwrap_or_else(|e| panic!("merging pull request #{number}: GitHub refuses: {e}"))
    }

    /// Every merge of a pull request so far, in order.
    pub fn merges(&self) -> Vec<MemMerge> {
        self.with(|s| s.merges.clone())
    }
}
