//! Signed commits, as GitHub signs and requires them:
//!
//! - a commit made through the Git data API, and a merge by `POST /merges`, is signed when the
//!   credentials are a GitHub App installation's and the request names no author, committer or
//!   signature ("Signature verification for bots will only work if the request is verified and
//!   authenticated as the GitHub App or bot and contains no custom author information, custom
//!   committer information, and no custom signature information", GitHub's "About commit
//!   signature verification"); a personal access token's is not (`verification.reason:
//!   "unsigned"`, as anthropics/claude-code-action#1511 shows for the REST Git data API);
//! - GraphQL `createCommitOnBranch` is signed for both (Renovate's `platformCommit` uses it so,
//!   renovatebot/renovate#44085; a token's commit there is `signer: web-flow`, helium/HIP#1226),
//!   and writes every file as 100644 (babarot/gh-infra#167);
//! - "Update branch" (a merge commit GitHub makes itself) and the merge or squash of a pull
//!   request are signed by GitHub; a rebase merge is not ("Signature verification for rebase and
//!   merge", github/docs#18216; pulseengine/temper#7), so a base requiring signatures refuses it;
//! - people's commits pushed here are unsigned;
//! - a rule requiring signatures (a ruleset's `required_signatures`, "Commits pushed to matching
//!   refs must have verified signatures"; classic protection's "Require signed commits") blocks
//!   a pull request holding one unverified commit, whatever its checks say (helium/HIP#1226: an
//!   unsigned commit and the pull request reads `BLOCKED`).

use std::collections::HashSet;

use super::{GithubError, MemGithub, MemPull, Result, Store};
use crate::adapters::github::operations::{self as ops, Operation};
use crate::ports::github::Merge;
use crate::pure::fleet::{FileMode, FileWrite};

static GRAPHQL_REF_UPDATE_RULE: Operation = ops::GRAPHQL_REF_UPDATE_RULE.as_operation();
static GRAPHQL_CREATE_COMMIT: Operation = ops::GRAPHQL_CREATE_COMMIT_ON_BRANCH.as_operation();

/// How a branch requires signed commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureRule {
    /// A ruleset's `required_signatures` rule ("Get rules for a branch" lists it).
    Ruleset,
    /// Classic branch protection's "Require signed commits" (GraphQL `refUpdateRule`).
    Protection,
}

/// GitHub's 405 for a pull request holding an unverified commit on a base requiring signatures
/// (GitHub's words for a push it refuses so: "Commits must have verified signatures.").
pub(super) const UNSIGNED: &str = "Commits must have verified signatures.";
/// The double's words for a rebase merge onto such a base (GitHub's are not documented).
pub(super) const REBASE_UNSIGNABLE: &str =
    "Rebase merges cannot be signed by GitHub, and the base branch requires signed commits.";

impl Store {
    /// Whether commits reaching `branch` must be signed, by either rule.
    pub(super) fn signatures_required(&self, branch: &str) -> bool {
        self.signature_rules.contains_key(branch)
    }

    /// The oldest commit of `pr` (beyond `base`, up to `head`) GitHub has not verified, when the
    /// base requires signatures.
    pub(super) fn unsigned_in(&self, pr: &MemPull, head: &str, base: &str) -> Option<String> {
        if !self.signatures_required(&pr.base) {
            return None;
        }
        let base_side = self.ancestors(base);
        let mut ahead: Vec<(u64, String)> = self
            .ancestors(head)
            .into_iter()
            .filter(|c| !base_side.contains(c) && !self.verified.contains(c))
            .map(|c| (self.commits[&c].when, c))
            .collect();
        ahead.sort();
        ahead.into_iter().next().map(|(_, c)| c)
    }

    /// `sha` made by GitHub for these credentials through the Git data API: signed for an App.
    pub(super) fn sign_if_app(&mut self, sha: &str) {
        if !self.token {
            self.verified.insert(sha.to_owned());
        }
    }

    pub(super) fn requires_signatures(&mut self, branch: &str) -> Result<bool> {
        if let Some((read, required)) = &self.signatures_read
            && read == branch
        {
            return Ok(*required);
        }
        self.enter(&ops::REPOS_GET_BRANCH_RULES)?;
        if self.signature_rules.get(branch) == Some(&SignatureRule::Ruleset) {
            return Ok(true);
        }
        self.enter(&GRAPHQL_REF_UPDATE_RULE)?;
        Ok(self.signature_rules.get(branch) == Some(&SignatureRule::Protection))
    }

    pub(super) fn commit_on_branch(
        &mut self,
        branch: &str,
        expected_head: &str,
        files: &[FileWrite],
        removed: &[String],
        message: &str,
    ) -> Result<String> {
        self.enter(&GRAPHQL_CREATE_COMMIT)?;
        self.check_rules(branch, "committing on")?;
        let Some(head) = self.refs.get(branch).cloned() else {
            return Err(super::api(&GRAPHQL_CREATE_COMMIT, 404, format!("no branch {branch}")));
        };
        if head != expected_head {
            return Err(GithubError::Conflict {
                what: format!("committing on {branch}"),
                detail: format!("expectedHeadOid {expected_head} is not the head {head}"),
            });
        }
        let mut tree = self.files_at(&head);
        for f in files {
            // The mutation has no mode: an edit of an executable stays one only in git's
            // checkout, not here; what it adds is a regular file.
            tree.insert(f.path.clone(), (FileMode::Regular, f.content.clone()));
        }
        for p in removed {
            if tree.remove(p).is_none() {
                return Err(super::api(&GRAPHQL_CREATE_COMMIT, 422, format!("{p} does not exist")));
            }
        }
        let tree = self.put_tree(tree);
        let sha = self.put_commit(&tree, std::slice::from_ref(&head), message);
        self.verified.insert(sha.clone());
        self.created.push(sha.clone());
        self.refs.insert(branch.to_owned(), sha.clone());
        Ok(sha)
    }

    pub(super) fn update_pull_branch(&mut self, number: u64, branch: &str, expected_head: &str) -> Result<Merge> {
        self.enter(&ops::PULLS_UPDATE_BRANCH)?;
        let Some(pr) = self.pulls.iter().find(|p| p.number == number && p.open).cloned() else {
            return Err(super::api(&ops::PULLS_UPDATE_BRANCH, 422, "Validation Failed"));
        };
        let head = self.refs.get(&pr.head).cloned();
        if head.as_deref() != Some(expected_head) {
            return Err(GithubError::Conflict {
                what: format!("updating branch {branch}"),
                detail: "expected head sha didn't match current head ref.".into(),
            });
        }
        self.check_rules(&pr.head, "updating")?;
        let base = self.refs[&pr.base].clone();
        Ok(
            match self.merge_commit(&pr.head, &base, &format!("Merge branch '{}' into {}", pr.base, pr.head)) {
                Ok(Some(sha)) => {
                    self.verified.insert(sha.clone());
                    Merge::Merged(sha)
                }
                Ok(None) => Merge::UpToDate,
                Err(_) => Merge::Conflict,
            },
        )
    }
}

/// What a test sets and reads of signatures.
impl MemGithub {
    /// The credentials are a personal access token: GitHub signs none of their Git-data commits.
    pub fn use_token(&self) {
        self.with(|s| s.token = true);
    }

    /// `branch` requires signed commits by `rule`, or not (`None`).
    pub fn require_signatures(&self, branch: &str, rule: Option<SignatureRule>) {
        self.with(|s| match rule {
            Some(r) => {
                s.signature_rules.insert(branch.to_owned(), r);
            }
            None => {
                s.signature_rules.remove(branch);
            }
        });
    }

    /// A person's (unsigned) commit on `branch` adding `path` as an executable (100755).
    pub fn commit_executable(&self, branch: &str, path: &str, text: &str, message: &str) -> String {
        self.with(|s| {
            let sha = s.commit_on(branch, &[(path.to_owned(), Some(text.to_owned()))], message);
            let mut tree = s.files_at(&sha);
            tree.insert(path.to_owned(), (FileMode::Executable, text.to_owned()));
            let tree = s.put_tree(tree);
            let parents = s.commits[&sha].parents.clone();
            let sha = s.put_commit(&tree, &parents, message);
            s.refs.insert(branch.to_owned(), sha.clone());
            sha
        })
    }

    /// Whether GitHub verified `commit`'s signature.
    pub fn verified(&self, commit: &str) -> bool {
        self.with(|s| s.verified.contains(commit))
    }

    /// Every commit `branch` holds beyond `base`, with whether it is verified.
    pub fn commits_verified(&self, base: &str, branch: &str) -> Vec<(String, bool)> {
        self.with(|s| {
            let base_side: HashSet<String> = s.ancestors(&s.refs[base]);
            let mut out: Vec<(u64, String, bool)> = s
                .ancestors(&s.refs[branch])
                .into_iter()
                .filter(|c| !base_side.contains(c))
                .map(|c| (s.commits[&c].when, c.clone(), s.verified.contains(&c)))
                .collect();
            out.sort();
            out.into_iter().map(|(_, c, v)| (c, v)).collect()
        })
    }
}
