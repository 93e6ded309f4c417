//! GitHub in memory (feature `test-support`): a store with GitHub's rules for the primitives
//! cellbridge uses ([`GithubRepo`]), so the pull request logic and the orchestrator above it run
//! in every test in milliseconds. It holds no cellbridge logic: what to write and when is
//! decided above the port, in the code the product runs.
//!
//! The rules and where GitHub documents them (the HTTP fake in `tests/fakes/github_fake.py`
//! models the same and is checked against GitHub's OpenAPI description):
//! - refs move by fast-forward only unless forced ("Update a reference": `force` "Indicates
//!   whether to force the update or to make sure the update is a fast-forward update",
//!   https://docs.github.com/rest/git/refs#update-a-reference); a refused update is 422
//!   "Update is not a fast forward", which the port reports as a lost race;
//! - creating a ref that exists is 422 "Reference already exists"
//!   (https://docs.github.com/rest/git/refs#create-a-reference);
//! - a tree's `base_tree`, a commit's tree and parents must exist (422,
//!   https://docs.github.com/rest/git/trees#create-a-tree, .../commits#create-a-commit);
//! - a tree entry has a mode, `100644` a file, `100755` an executable, `120000` "a blob that
//!   specifies the path of a symlink" (same page); the store keeps it, an edit keeps it, and a
//!   change of mode alone is a change;
//! - one open pull request per head branch, and none without commits between base and head
//!   or from a head that does not exist (422 "A pull request already exists for ...", "No
//!   commits between ...", `head` `invalid`; https://docs.github.com/rest/pulls/pulls#create-a-pull-request),
//!   which the port reports as lost races;
//! - deleting a pull request's head branch closes the pull request
//!   (https://docs.github.com/pull-requests/collaborating-with-pull-requests/proposing-changes-to-your-work-with-pull-requests/creating-and-deleting-branches-within-your-repository#deleting-a-branch-used-for-a-pull-request);
//! - a status needs an existing commit and a description of at most 140 characters (422,
//!   https://docs.github.com/rest/commits/statuses#create-a-commit-status);
//! - labels added are kept with those already there; the issues endpoint's `labels` replaces
//!   the set (https://docs.github.com/rest/issues/labels#add-labels-to-an-issue,
//!   https://docs.github.com/rest/issues/issues#update-an-issue);
//! - a pull request behind its base merges when nothing conflicts, keeping both sides ("Merge a
//!   pull request" refuses with 405 "Pull Request is not mergeable" only "if merge cannot be
//!   performed", https://docs.github.com/rest/pulls/pulls#merge-a-pull-request), and it cannot be
//!   when both sides changed the same thing differently, editing vs deleting a file included
//!   (https://docs.github.com/pull-requests/collaborating-with-pull-requests/addressing-merge-conflicts/about-merge-conflicts).
//!   The double merges whole files three ways against the merge base ([`MemGithub::try_merge`]):
//!   git merges lines, so two edits of different lines of one file conflict here, not on GitHub.
//!
//! - an issue's body is at most 65,536 characters: a longer one is 422 Validation Failed, "body
//!   is too long (maximum is 65536 characters)" (GitHub's answer as clients quote it,
//!   https://github.com/PyGithub/PyGithub/issues/1906); a repository whose issues are turned off
//!   answers 410 to creating or updating one ("Create an issue", "Update an issue": 410 Gone,
//!   https://docs.github.com/rest/issues/issues#create-an-issue), while listing them still
//!   answers (https://github.com/ingydotnet/git-hub/issues/72); an issue closes as `completed`
//!   unless a `state_reason` (`duplicate`, `not_planned`) says otherwise
//!   (https://docs.github.com/rest/issues/issues#update-an-issue);
//! - "List pull requests" lists the open ones, oldest first with `direction=asc`, each with the
//!   time it was opened (`created_at`, https://docs.github.com/rest/pulls/pulls#list-pull-requests).
//!
//! Faults: [`MemGithub::fail`] makes the next calls of an operation fail as the transport would
//! report them after its retries; [`MemGithub::race`] lets another writer commit just before
//! an operation runs. People: [`MemGithub::merge`] (and [`MemGithub::try_merge`]),
//! [`MemGithub::commit`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use sha1::Digest as _;

use super::archive::{Keeper, git_object_id, hex};
use super::operations::{self as ops, Operation};
use super::port::{
    Actor, AutoMergeAnswer, AutoMergeRequest, BranchCommit, COMPARE_FILES_MAX, ChangedFile, CheckState, CloseReason,
    Comparison, GithubRepo, Issue, Merge, MergeAnswer, MergeMethod, MergeState, MergeStateStatus, OpenPull,
    PullRequest, PullState, Relation, RequiredCheck, TreeFiles,
};
use super::{GithubError, Result, Snapshot};
use crate::fleet::{FileMode, FileWrite, Keep, MemFleet};

/// A pull request as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemPull {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub merged: bool,
    /// Who closed it: `cellbridge`, or `a person`.
    pub closed_by: Option<String>,
    pub comments: Vec<String>,
    // auto-merge
    /// GitHub's auto-merge, while it is on.
    pub auto_merge: Option<MemAutoMerge>,
    /// The logins whose approving review stands.
    pub approvals: Vec<String>,
    /// Who merged it: [`VIEWER`] for cellbridge's merge, the login that enabled auto-merge when
    /// GitHub's auto-merge merged it, `a person` for a person's merge.
    pub merged_by: Option<String>,
    /// The head when it was closed or merged: GitHub pins a closed pull request's head ("a closed
    /// PR does not track pushes", open-gsd/gsd-core#4426; it keeps "the stored head sha (which is
    /// what the head was when the pull request was closed)", isaacs/github#361), so a push to the
    /// branch afterwards is not the pull request's.
    pub closed_head: Option<String>,
}

// auto-merge
/// The login cellbridge's credentials act as (GraphQL `viewer`): an App installation's bot.
pub const VIEWER: &str = "cellbridge[bot]";

/// GitHub's auto-merge on a pull request (`autoMergeRequest`): who enabled it, and how it merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemAutoMerge {
    pub enabled_by: String,
    pub method: MergeMethod,
}

/// A merge into a base branch, as the store made it: for the tests' invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemMerge {
    pub number: u64,
    /// [`MemPull::merged_by`].
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

/// A base branch's protection, as "Update branch protection" sets it
/// (<https://docs.github.com/rest/branches/branch-protection#update-branch-protection>):
/// `required_status_checks.contexts` and `.strict` ("Require branches to be up to date before
/// merging"), `required_pull_request_reviews.required_approving_review_count`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    pub contexts: Vec<String>,
    pub strict: bool,
    pub approvals: u32,
}

/// An issue (not a pull request) as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemIssue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub comments: Vec<String>,
}

/// A commit status as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemStatus {
    pub context: String,
    pub success: bool,
    pub description: String,
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
/// How the store, which keeps texts, keeps a file's bytes ([`MemGithub::commit_bytes`]).
const BYTES_MARKER: &str = "\u{0}bytes:";
/// The most commits a comparison lists (the most files: [`COMPARE_FILES_MAX`]).
const COMPARE_COMMITS_MAX: usize = 250;

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
fn three_way<V: PartialEq + Clone>(
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

/// A blob's id as git computes it.
fn blob_id(content: &str) -> String {
    hex(&git_object_id("blob", content.as_bytes()))
}

#[derive(Debug, Clone)]
struct Commit {
    tree: String,
    parents: Vec<String>,
    message: String,
    /// The store's clock when it was made: which of two commits is newer.
    when: u64,
}

/// How an injected fault fails the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 5xx or rate limits past the retries, or no answer before the deadline.
    Transient,
    /// A final answer with this HTTP status (401, 403, 404, 422...).
    Status(u16),
}

struct Rule {
    op: &'static str,
    times: usize,
    fault: Fault,
}

struct Race {
    op: &'static str,
    branch: String,
    files: Vec<(String, String)>,
    /// A person merges this pull request instead of committing `files`.
    merge: Option<u64>,
}

/// A file of a tree: its mode and text (a symlink's target).
type Entry = (FileMode, String);

#[derive(Default)]
struct Store {
    default_branch: String,
    /// Tree id → path → (mode, text; a symlink's text is its target).
    trees: HashMap<String, BTreeMap<String, Entry>>,
    commits: HashMap<String, Commit>,
    refs: BTreeMap<String, String>,
    pulls: Vec<MemPull>,
    /// Issues and pull requests share one sequence of numbers, as on GitHub.
    issues: Vec<MemIssue>,
    /// The App installation's permissions (`None`: everything cellbridge needs): a call whose
    /// documented permission is missing is refused with 403, as GitHub refuses it.
    permissions: Option<BTreeMap<String, String>>,
    statuses: HashMap<String, Vec<MemStatus>>,
    rules: Vec<Rule>,
    races: Vec<Race>,
    /// Branch → the message of the repository rule that refuses updates to it.
    protected: BTreeMap<String, String>,
    calls: Vec<&'static str>,
    clock: u64,
    /// Commits made through the port (cellbridge's), in order.
    created: Vec<String>,
    /// Every call and every note of the test, in order: a schedule's story.
    journal: Vec<String>,
    /// Blobs by id, as comparisons named them.
    blobs: HashMap<String, String>,
    /// Seeded interleaving: each call yields to the scheduler a pseudo-random number of times.
    jitter: Option<u64>,
    // auto-merge
    /// The repository's "Allow auto-merge" setting (`allow_auto_merge`, off unless set: "Default:
    /// `false`", https://docs.github.com/rest/repos/repos#update-a-repository).
    allow_auto_merge: bool,
    /// Base branch → its protection.
    branch_protection: BTreeMap<String, Protection>,
    /// Commit → the checks people's CI reported on it (name, state), newest last.
    checks: HashMap<String, Vec<(String, CheckState)>>,
    /// Every merge of a pull request, in order.
    merges: Vec<MemMerge>,
    // dashboard
    /// When each pull request was opened (seconds since the epoch), by number.
    pull_created: HashMap<u64, u64>,
    /// Why each closed issue was closed (`completed`, `duplicate`), by number.
    state_reasons: HashMap<u64, &'static str>,
    /// Issues turned off in the repository's settings.
    issues_disabled: bool,
}

/// One repository on GitHub, in memory.
pub struct MemGithub {
    store: Mutex<Store>,
}

/// GitHub's final answer, classified as the transport classifies it.
fn api(op: &Operation, status: u16, message: impl Into<String>) -> GithubError {
    GithubError::from_status(op.id, status, message.into(), None)
}

/// GitHub's limit on an issue's (and a pull request's) body, in characters.
const BODY_MAX: usize = 65_536;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Store {
    /// GitHub's refusals of an issue write: issues turned off (410), a body too long (422).
    fn check_issue_write(&self, op: &Operation, number: Option<u64>, body: &str) -> Result<()> {
        let plain = number.is_none_or(|n| self.issues.iter().any(|i| i.number == n));
        if plain && self.issues_disabled {
            return Err(api(op, 410, "Issues are disabled for this repo"));
        }
        if body.chars().count() > BODY_MAX {
            return Err(api(
                op,
                422,
                "Validation Failed: body is too long (maximum is 65536 characters)",
            ));
        }
        Ok(())
    }
}

impl Store {
    fn put_tree(&mut self, files: BTreeMap<String, Entry>) -> String {
        let mut h = sha1::Sha1::new();
        for (p, (m, c)) in &files {
            h.update(p.as_bytes());
            h.update([0]);
            h.update(m.git_mode().as_bytes());
            h.update([0]);
            h.update(c.as_bytes());
            h.update([0]);
        }
        let id = hex(&h.finalize());
        self.trees.insert(id.clone(), files);
        id
    }

    fn put_commit(&mut self, tree: &str, parents: &[String], message: &str) -> String {
        // Like git's, the id covers a timestamp: two commits of the same content differ.
        self.clock += 1;
        let mut h = sha1::Sha1::new();
        h.update(format!("tree {tree}\n{}\n{}\n{message}", parents.join(" "), self.clock));
        let id = hex(&h.finalize());
        self.commits.insert(
            id.clone(),
            Commit {
                tree: tree.to_owned(),
                parents: parents.to_vec(),
                message: message.to_owned(),
                when: self.clock,
            },
        );
        id
    }

    /// `of` and every commit it descends from.
    fn ancestors(&self, of: &str) -> HashSet<String> {
        let mut seen = HashSet::new();
        let mut stack = vec![of.to_owned()];
        while let Some(c) = stack.pop() {
            if let Some(commit) = self.commits.get(&c)
                && seen.insert(c)
            {
                stack.extend(commit.parents.iter().cloned());
            }
        }
        seen
    }

    /// The newest common ancestor of `a` and `b`, as `git merge-base`: a common ancestor no
    /// other common ancestor descends from (after criss-cross merges there can be several, which
    /// git merges into a virtual base: the double takes the newest); none without shared history.
    fn merge_base(&self, a: &str, b: &str) -> Option<String> {
        let theirs = self.ancestors(b);
        let common: Vec<String> = self.ancestors(a).into_iter().filter(|c| theirs.contains(c)).collect();
        let mut dominated = HashSet::new();
        let mut stack: Vec<String> = common
            .iter()
            .flat_map(|c| self.commits[c].parents.iter().cloned())
            .collect();
        while let Some(c) = stack.pop() {
            if !dominated.contains(&c) {
                stack.extend(self.commits[&c].parents.iter().cloned());
                dominated.insert(c);
            }
        }
        common
            .into_iter()
            .filter(|c| !dominated.contains(c))
            .max_by(|x, y| (self.commits[x].when, x).cmp(&(self.commits[y].when, y)))
    }

    fn is_ancestor(&self, ancestor: &str, of: &str) -> bool {
        let mut stack = vec![of.to_owned()];
        let mut seen = std::collections::HashSet::new();
        while let Some(c) = stack.pop() {
            if c == ancestor {
                return true;
            }
            if seen.insert(c.clone())
                && let Some(commit) = self.commits.get(&c)
            {
                stack.extend(commit.parents.iter().cloned());
            }
        }
        false
    }

    fn files_at(&self, commit: &str) -> BTreeMap<String, Entry> {
        self.commits
            .get(commit)
            .and_then(|c| self.trees.get(&c.tree))
            .cloned()
            .unwrap_or_default()
    }

    /// Merges `commit` into `branch` three ways ("Merge a branch",
    /// <https://docs.github.com/rest/branches/branches#merge-a-branch>): `None` when the branch
    /// already contains it, else the merge commit (the branch moved to it), or the conflicting
    /// paths (nothing moved).
    fn merge_commit(
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

    /// Another writer's commit on `branch` (created if missing, from the default branch); a
    /// `None` text deletes the file.
    fn commit_on(&mut self, branch: &str, files: &[(String, Option<String>)], message: &str) -> String {
        let parent = self
            .refs
            .get(branch)
            .or_else(|| self.refs.get(&self.default_branch))
            .cloned();
        let mut tree = parent.as_deref().map(|p| self.files_at(p)).unwrap_or_default();
        for (p, c) in files {
            match c {
                // A person's edit keeps the file's mode, as git does.
                Some(c) => {
                    tree.entry(p.clone())
                        .and_modify(|e| e.1.clone_from(c))
                        .or_insert_with(|| (FileMode::Regular, c.clone()));
                }
                None => {
                    tree.remove(p);
                }
            }
        }
        let tree = self.put_tree(tree);
        let parents: Vec<String> = parent.into_iter().collect();
        let sha = self.put_commit(&tree, &parents, message);
        self.refs.insert(branch.to_owned(), sha.clone());
        sha
    }

    /// A repository rule refusing a write to `branch`: 422 "Repository rule violations found"
    /// (<https://docs.github.com/rest/git/refs#update-a-reference>,
    /// <https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets>).
    fn check_rules(&self, branch: &str, doing: &str) -> Result<()> {
        match self.protected.get(branch) {
            Some(rule) => Err(GithubError::Refused {
                what: format!("{doing} branch {branch}"),
                rule: format!("Repository rule violations found\n\n{rule}"),
            }),
            None => Ok(()),
        }
    }

    /// Records the call, runs a pending race, and answers an injected fault.
    fn next_number(&self) -> u64 {
        (self.pulls.len() + self.issues.len()) as u64 + 1
    }

    fn enter(&mut self, op: &'static Operation) -> Result<()> {
        self.calls.push(op.id);
        self.journal.push(op.id.to_owned());
        if let Some(i) = self.races.iter().position(|r| r.op == op.id) {
            let race = self.races.remove(i);
            if let Some(number) = race.merge {
                // A person's merge lands just before this request: what the request acts on was
                // read while the pull request was open.
                if self
                    .merge_pr(number, MergeMethod::Merge, None, "a person", false)
                    .is_ok()
                {
                    self.settle();
                }
            } else {
                let files: Vec<(String, Option<String>)> = race.files.into_iter().map(|(p, c)| (p, Some(c))).collect();
                self.commit_on(&race.branch, &files, "another writer");
            }
        }
        if let Some(granted) = &self.permissions
            && !op.permission.is_empty()
            && !op.permission.split("; ").any(|set| {
                set.split(',').all(|p| {
                    let (name, level) = p.trim().split_once('=').unwrap_or((p, "read"));
                    let rank = |l: &str| ["", "read", "write", "admin"].iter().position(|x| *x == l).unwrap_or(0);
                    rank(granted.get(name).map(String::as_str).unwrap_or("")) >= rank(level)
                })
            })
        {
            // "Resource not accessible by integration", with the permission GitHub's
            // `X-Accepted-GitHub-Permissions` header names.
            return Err(GithubError::from_status(
                op.id,
                403,
                "Resource not accessible by integration".into(),
                Some(op.permission.to_owned()),
            ));
        }
        if let Some(rule) = self.rules.iter_mut().find(|r| r.op == op.id && r.times > 0) {
            rule.times -= 1;
            return Err(match rule.fault {
                Fault::Transient => GithubError::Transient {
                    what: op.id.to_owned(),
                    detail: "injected: 502 after every retry".into(),
                },
                Fault::Status(s) => api(op, s, "injected"),
            });
        }
        Ok(())
    }
}

// auto-merge: branch protection, GitHub's merge state and its auto-merge.
//
// - A pull request's `mergeStateStatus` (https://docs.github.com/graphql/reference/enums#mergestatestatus)
//   is derived from the store: DIRTY when it cannot merge (the module's three-way rule), BEHIND
//   when the base's protection is `strict` ("Require branches to be up to date before merging",
//   https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging)
//   and the head lacks the base's head, BLOCKED when a required check of the head is missing,
//   pending or failed, or fewer approving reviews stand than required, UNSTABLE when only checks
//   that are not required do not pass ("Mergeable with non-passing commit status"), else CLEAN.
// - A check of a commit is a commit status (cellbridge's, `set_status`) or a check run people's
//   CI reports ([`MemGithub::post_check`]); `isRequired(pullRequestNumber:)` is true for those
//   the base's protection names, and only checks that exist on the head are listed.
// - Auto-merge (https://docs.github.com/pull-requests/collaborating-with-pull-requests/incorporating-changes-from-a-pull-request/automatically-merging-a-pull-request):
//   "the pull request will merge automatically when all required reviews are met and all
//   required status checks have passed" ([`Store::settle`], after every change that can meet
//   them); it needs the repository's "Allow auto-merge" ("Before you can use auto-merge with a
//   pull request, auto-merge must be enabled for the repository"); closing the pull request
//   cancels it. `enablePullRequestAutoMerge` refuses a pull request that can merge now with
//   "Pull request is in clean status" (or "unstable status"), as GitHub answers it (quoted in
//   https://github.com/peter-evans/enable-pull-request-automerge/issues/343 and
//   https://github.com/peter-evans/enable-pull-request-automerge/issues/1118), a repository that
//   does not allow it with "Auto merge is not allowed for this repository" (quoted in
//   https://github.com/indexable-inc/index/issues/2948), and a closed one with GitHub's generic
//   "Can't enable auto-merge for this pull request." (quoted in
//   https://github.com/peter-evans/enable-pull-request-automerge/issues/310).
//   Not modelled: auto-merge disabled by a push from someone without write permission (every
//   person here has it).
// - "Merge a pull request" (https://docs.github.com/rest/pulls/pulls#merge-a-pull-request) is 405
//   when a protection is not met, with GitHub's messages as clients quote them: `Required
//   status check "X" is expected.` (https://github.com/claroline/Distribution/issues/492),
//   "At least 1 approving review is required by reviewers with write access."
//   (https://github.com/Reviewable/Reviewable/issues/561), "N of N required status checks are
//   expected." for a head that is behind a strict base
//   (https://github.com/RakuenSoftware/aimee/pull/2460); 409 "Head branch was modified. Review
//   and try the merge again." when `sha` is not the head (the description's example).
impl Store {
    /// The latest state of every check of `sha`: cellbridge's statuses and people's check runs.
    fn check_states(&self, sha: &str) -> BTreeMap<String, CheckState> {
        let mut out = BTreeMap::new();
        for st in self.statuses.get(sha).into_iter().flatten() {
            out.insert(
                st.context.clone(),
                if st.success {
                    CheckState::Passed
                } else {
                    CheckState::Failed
                },
            );
        }
        for (name, state) in self.checks.get(sha).into_iter().flatten() {
            out.insert(name.clone(), *state);
        }
        out
    }

    /// Why the base's protection does not let `pr` merge (GitHub's 405 message), or `None`.
    fn unmet(&self, pr: &MemPull, head: &str, base: &str) -> Option<String> {
        let p = self.branch_protection.get(&pr.base)?;
        if p.strict && !p.contexts.is_empty() && !self.is_ancestor(base, head) {
            let n = p.contexts.len();
            return Some(format!("{n} of {n} required status checks are expected."));
        }
        let checks = self.check_states(head);
        for ctx in &p.contexts {
            match checks.get(ctx) {
                Some(CheckState::Passed) => {}
                Some(CheckState::Failed) => return Some(format!("Required status check \"{ctx}\" is failing.")),
                _ => return Some(format!("Required status check \"{ctx}\" is expected.")),
            }
        }
        if (pr.approvals.len() as u32) < p.approvals {
            return Some(format!(
                "At least {} approving review{} required by reviewers with write access.",
                p.approvals,
                if p.approvals == 1 { " is" } else { "s are" }
            ));
        }
        None
    }

    fn merge_state_of(&self, pr: &MemPull) -> MergeStateStatus {
        let (Some(head), Some(base)) = (self.refs.get(&pr.head), self.refs.get(&pr.base)) else {
            return MergeStateStatus::Unknown;
        };
        let mergeable = self
            .merge_base(base, head)
            .is_some_and(|since| three_way(&self.files_at(&since), &self.files_at(base), &self.files_at(head)).is_ok());
        if !mergeable {
            return MergeStateStatus::Dirty;
        }
        if let Some(p) = self.branch_protection.get(&pr.base)
            && p.strict
            && !p.contexts.is_empty()
            && !self.is_ancestor(base, head)
        {
            return MergeStateStatus::Behind;
        }
        if self.unmet(pr, head, base).is_some() {
            return MergeStateStatus::Blocked;
        }
        if self.check_states(head).values().any(|c| *c != CheckState::Passed) {
            return MergeStateStatus::Unstable;
        }
        MergeStateStatus::Clean
    }

    /// Merges pull request `number` as "Merge a pull request" does: the head into the base
    /// (three ways, see the module), by `method`, only if the head is `sha` (when given) and,
    /// when `enforce`, the base's protection is met. The new head of the base.
    fn merge_pr(
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
        let files =
            three_way(&self.files_at(&since), &self.files_at(&base), &self.files_at(&head)).map_err(not_mergeable)?;
        if enforce && let Some(message) = self.unmet(&pr, &head, &base) {
            return Err(MergeRefused {
                status: 405,
                message,
                conflicts: Vec::new(),
            });
        }
        let tree = self.put_tree(files);
        let sha = match method {
            MergeMethod::Merge => self.put_commit(
                &tree,
                &[base.clone(), head.clone()],
                &format!("Merge pull request #{number}"),
            ),
            // A squash is one commit on the base with the merged tree; a rebase replays the pull
            // request's commits onto the base, which ends in the same tree: the double makes that
            // one commit too (the replayed intermediate commits are not modelled).
            MergeMethod::Squash | MergeMethod::Rebase => {
                self.put_commit(&tree, std::slice::from_ref(&base), &format!("{} (#{number})", pr.title))
            }
        };
        self.refs.insert(pr.base.clone(), sha.clone());
        self.merges.push(MemMerge {
            number,
            by: by.to_owned(),
            checks: self.check_states(&head),
            head,
            base_before: base.clone(),
            commit: sha.clone(),
            approvals: pr.approvals.len(),
        });
        let pinned = self.refs.get(&pr.head).cloned();
        let p = self.pulls.iter_mut().find(|p| p.number == number).expect("found above");
        p.open = false;
        p.closed_head = pinned;
        p.merged = true;
        p.auto_merge = None;
        p.merged_by = Some(by.to_owned());
        self.journal.push(format!("#{number} merged by {by}"));
        Ok(sha)
    }

    /// GitHub's auto-merge: every open pull request whose auto-merge is on and whose
    /// requirements are now met merges, by the method it was enabled with, as the one who
    /// enabled it.
    fn settle(&mut self) {
        loop {
            let ready = self.pulls.iter().find_map(|p| {
                let am = p.auto_merge.as_ref()?;
                (p.open && self.merge_state_of(p).mergeable_now()).then(|| (p.number, am.clone()))
            });
            let Some((number, am)) = ready else { return };
            if self.merge_pr(number, am.method, None, &am.enabled_by, true).is_err() {
                // Cannot happen (the state said mergeable); never loop on it.
                if let Some(p) = self.pulls.iter_mut().find(|p| p.number == number) {
                    p.auto_merge = None;
                }
            }
        }
    }

    /// `enablePullRequestAutoMerge` for `by` (see the module's rules).
    fn enable(
        &mut self,
        number: u64,
        expected_head: Option<&str>,
        method: MergeMethod,
        by: &str,
    ) -> Result<AutoMergeAnswer> {
        let Some(pr) = self.pulls.iter().find(|p| p.number == number).cloned() else {
            return Err(api(
                &GRAPHQL_ENABLE,
                404,
                "Could not resolve to a node with the global id",
            ));
        };
        if !pr.open {
            return Ok(AutoMergeAnswer::Refused(
                "Can't enable auto-merge for this pull request.".into(),
            ));
        }
        if !self.allow_auto_merge {
            return Ok(AutoMergeAnswer::NotAllowed(
                "Auto merge is not allowed for this repository".into(),
            ));
        }
        let head = self.refs.get(&pr.head).cloned().unwrap_or_default();
        if expected_head.is_some_and(|e| e != head) {
            return Err(GithubError::Conflict {
                what: format!("enabling auto-merge on pull request #{number}"),
                detail: format!("the head is {head}, not the one checked"),
            });
        }
        let state = self.merge_state_of(&pr);
        if state.mergeable_now() {
            let word = if state == MergeStateStatus::Unstable {
                "unstable"
            } else {
                "clean"
            };
            return Ok(AutoMergeAnswer::MergeableNow(format!(
                "Pull request is in {word} status"
            )));
        }
        let p = self.pulls.iter_mut().find(|p| p.number == number).expect("found above");
        p.auto_merge = Some(MemAutoMerge {
            enabled_by: by.to_owned(),
            method,
        });
        self.journal.push(format!("#{number} auto-merge enabled by {by}"));
        Ok(AutoMergeAnswer::Enabled)
    }
}

static GRAPHQL_MERGE_STATE: Operation = ops::GRAPHQL_MERGE_STATE.as_operation();
static GRAPHQL_ENABLE: Operation = ops::GRAPHQL_ENABLE_AUTO_MERGE.as_operation();
static GRAPHQL_DISABLE: Operation = ops::GRAPHQL_DISABLE_AUTO_MERGE.as_operation();
static GRAPHQL_UPDATE_REFS: Operation = ops::GRAPHQL_UPDATE_REFS.as_operation();

/// A pull request's node id (`PullRequest.id`), as the store hands it out.
fn node_id(number: u64) -> String {
    format!("PR_kwDOfleet{number}")
}

fn number_of(node: &str) -> Option<u64> {
    node.strip_prefix("PR_kwDOfleet")?.parse().ok()
}

impl MemGithub {
    /// A repository whose default branch `branch` holds `files` (path, text) in one commit.
    pub fn new(branch: &str, files: &[(String, String)]) -> Self {
        let mut store = Store {
            default_branch: branch.to_owned(),
            ..Store::default()
        };
        let files: Vec<(String, Option<String>)> = files.iter().map(|(p, c)| (p.clone(), Some(c.clone()))).collect();
        store.commit_on(branch, &files, "initial commit");
        Self {
            store: Mutex::new(store),
        }
    }

    /// A repository whose default branch `branch` holds `fleet` (modes and symlinks included)
    /// in one commit.
    pub fn from_fleet(branch: &str, fleet: &MemFleet) -> Self {
        let mut store = Store {
            default_branch: branch.to_owned(),
            ..Store::default()
        };
        let tree: BTreeMap<String, Entry> = fleet
            .files()
            .iter()
            .map(|(p, (m, b))| (p.clone(), (*m, String::from_utf8_lossy(b).into_owned())))
            .collect();
        let tree = store.put_tree(tree);
        let sha = store.put_commit(&tree, &[], "initial commit");
        store.refs.insert(branch.to_owned(), sha);
        Self {
            store: Mutex::new(store),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        f(&mut self.store.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The next `times` calls of `op` fail with `fault`.
    pub fn fail(&self, op: &Operation, times: usize, fault: Fault) {
        self.with(|s| {
            s.rules.push(Rule {
                op: op.id,
                times,
                fault,
            })
        });
    }

    /// Just before the next call of `op`, another writer commits `files` on `branch`.
    pub fn race(&self, op: &Operation, branch: &str, files: &[(&str, &str)]) {
        let files = files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect();
        self.with(|s| {
            s.races.push(Race {
                op: op.id,
                branch: branch.to_owned(),
                files,
                merge: None,
            })
        });
    }

    /// A person merges pull request `number` just before cellbridge's next request of `op`.
    pub fn merge_before(&self, op: &Operation, number: u64) {
        self.with(|s| {
            s.races.push(Race {
                op: op.id,
                branch: String::new(),
                files: Vec::new(),
                merge: Some(number),
            })
        });
    }

    /// A person edits pull request `number`'s description (its body), as GitHub's "Edit" does.
    pub fn edit_body(&self, number: u64, body: &str) {
        self.with(|s| {
            if let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) {
                p.body = body.to_owned();
            }
            s.journal.push(format!("#{number} body edited by a person"));
        });
    }

    /// A person's commit on `branch`; its id.
    pub fn commit(&self, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        let files: Vec<(String, Option<String>)> = files
            .iter()
            .map(|(p, c)| (p.to_string(), Some(c.to_string())))
            .collect();
        self.with(|s| {
            let sha = s.commit_on(branch, &files, message);
            s.settle();
            sha
        })
    }

    /// A person's commit on `branch` adding `path` with these bytes (a binary file). The store
    /// keeps texts: bytes are kept as a marker text that its blobs read back as the bytes.
    pub fn commit_bytes(&self, branch: &str, path: &str, bytes: &[u8], message: &str) -> String {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let files = vec![(path.to_owned(), Some(format!("{BYTES_MARKER}{hex}")))];
        self.with(|s| s.commit_on(branch, &files, message))
    }

    /// A person's commit on `branch` that deletes `paths`; its id.
    pub fn delete_files(&self, branch: &str, paths: &[&str], message: &str) -> String {
        let files: Vec<(String, Option<String>)> = paths.iter().map(|p| (p.to_string(), None)).collect();
        self.with(|s| s.commit_on(branch, &files, message))
    }

    /// A person force-pushes `branch` to `commit` (history rewritten; GitHub allows it on a
    /// branch no rule protects). Pull requests keep what they pinned; an open one follows.
    pub fn force_push(&self, branch: &str, commit: &str) {
        self.with(|s| {
            s.refs.insert(branch.to_owned(), commit.to_owned());
        });
    }

    /// A person closes pull request `number` without merging it.
    /// The App installation's permissions from now on (`name` → `read`/`write`), as an
    /// administrator edits them: what is not listed is not granted.
    pub fn grant(&self, permissions: &[(&str, &str)]) {
        self.with(|s| {
            s.permissions = Some(
                permissions
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
        });
    }

    /// Every issue (not pull request), in number order.
    pub fn issues(&self) -> Vec<MemIssue> {
        self.with(|s| s.issues.clone())
    }

    // dashboard
    /// Why issue `number` was closed (`completed`, `duplicate`), `None` while it is open.
    pub fn issue_state_reason(&self, number: u64) -> Option<&'static str> {
        self.with(|s| {
            s.issues
                .iter()
                .find(|i| i.number == number && !i.open)
                .map(|i| s.state_reasons.get(&i.number).copied().unwrap_or("completed"))
        })
    }

    /// Pull request `number` was opened `days` days ago (as if).
    pub fn opened_days_ago(&self, number: u64, days: u64) {
        self.with(|s| s.pull_created.insert(number, now_secs().saturating_sub(days * 86_400)));
    }

    /// The repository's issues are turned off in its settings.
    pub fn disable_issues(&self) {
        self.with(|s| s.issues_disabled = true);
    }

    /// Another run (or a person) opens an issue: its number.
    pub fn open_issue(&self, title: &str, body: &str, labels: &[&str]) -> u64 {
        self.with(|s| {
            let number = s.next_number();
            s.issues.push(MemIssue {
                number,
                title: title.to_owned(),
                body: body.to_owned(),
                labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                open: true,
                comments: Vec::new(),
            });
            number
        })
    }

    /// A person closing an issue.
    pub fn close_issue_by_hand(&self, number: u64) {
        self.with(|s| {
            if let Some(i) = s.issues.iter_mut().find(|i| i.number == number) {
                i.open = false;
            }
        });
    }

    pub fn close(&self, number: u64) {
        self.with(|s| {
            let refs = s.refs.clone();
            if let Some(p) = s.pulls.iter_mut().find(|p| p.number == number && p.open) {
                p.open = false;
                p.closed_head = refs.get(&p.head).cloned();
                p.closed_by = Some("a person".into());
                // Closing cancels auto-merge (see "auto-merge" above).
                p.auto_merge = None;
            }
        });
    }

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
                Some(sha) => Ok(sha),
                None => Ok(s.refs[&pr.head].clone()),
            }
        })
    }

    /// A repository rule (a ruleset: "Changes must be made through a pull request", signed
    /// commits required...) refuses every update of `branch` with `message`.
    pub fn protect(&self, branch: &str, message: &str) {
        self.with(|s| s.protected.insert(branch.to_owned(), message.to_owned()));
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

    // auto-merge: what administrators and reviewers do.

    /// The repository's "Allow auto-merge" setting, as an administrator sets it ("Managing
    /// auto-merge for pull requests in your repository",
    /// <https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/configuring-pull-request-merges/managing-auto-merge-for-pull-requests-in-your-repository>).
    pub fn allow_auto_merge(&self, allow: bool) {
        self.with(|s| s.allow_auto_merge = allow);
    }

    /// An administrator protects `branch` (`None`: removes its protection).
    pub fn protect_branch(&self, branch: &str, protection: Option<Protection>) {
        self.with(|s| {
            match protection {
                Some(p) => s.branch_protection.insert(branch.to_owned(), p),
                None => s.branch_protection.remove(branch),
            };
            s.settle();
        });
    }

    /// `login` approves pull request `number` ("Create a review for a pull request" with `event:
    /// APPROVE`, https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request).
    pub fn approve(&self, number: u64, login: &str) {
        self.with(|s| {
            if let Some(p) = s.pulls.iter_mut().find(|p| p.number == number && p.open) {
                if !p.approvals.iter().any(|a| a == login) {
                    p.approvals.push(login.to_owned());
                }
                s.journal.push(format!("#{number} approved by {login}"));
            }
            s.settle();
        });
    }

    /// People's CI reports check `name` on commit `sha` (a check run: "Create a check run",
    /// https://docs.github.com/rest/checks/runs#create-a-check-run).
    pub fn post_check(&self, sha: &str, name: &str, state: CheckState) {
        self.with(|s| {
            let list = s.checks.entry(sha.to_owned()).or_default();
            list.retain(|(n, _)| n != name);
            list.push((name.to_owned(), state));
            s.journal.push(format!("check {name} {state:?} on {sha}"));
            s.settle();
        });
    }

    /// A person (`login`) enables auto-merge on pull request `number` for its current head, in
    /// the web interface; GitHub's answer.
    pub fn enable_auto_merge_as(&self, number: u64, login: &str) -> Result<AutoMergeAnswer> {
        self.with(|s| s.enable(number, None, MergeMethod::Merge, login))
    }

    /// Every merge of a pull request so far, in order.
    pub fn merges(&self) -> Vec<MemMerge> {
        self.with(|s| s.merges.clone())
    }

    /// The latest state of every check of `sha` (statuses and people's check runs).
    pub fn check_states(&self, sha: &str) -> BTreeMap<String, CheckState> {
        self.with(|s| s.check_states(sha))
    }

    /// The merge state GitHub would report for pull request `number`.
    pub fn merge_state_of(&self, number: u64) -> Option<MergeStateStatus> {
        self.with(|s| s.pulls.iter().find(|p| p.number == number).map(|p| s.merge_state_of(p)))
    }

    /// Interleaves concurrent callers: from now on every call first yields to the scheduler a
    /// number of times drawn from `seed`'s sequence, so one seed is one reproducible schedule.
    pub fn jitter(&self, seed: u64) {
        self.with(|s| s.jitter = Some(seed.max(1)));
    }

    async fn pause(&self) {
        let n = self.with(|s| {
            s.jitter.as_mut().map_or(0, |x| {
                // xorshift64: no dependency for a test schedule.
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                *x % 4
            })
        });
        for _ in 0..n {
            tokio::task::yield_now().await;
        }
    }

    /// Adds a line to the journal (what a person did, say).
    pub fn note(&self, line: String) {
        self.with(|s| s.journal.push(line));
    }

    /// Every call and note so far, in order.
    pub fn journal(&self) -> Vec<String> {
        self.with(|s| s.journal.clone())
    }

    /// The commits made through the port (cellbridge's), in order.
    pub fn created_commits(&self) -> Vec<String> {
        self.with(|s| s.created.clone())
    }

    /// The commit's parents.
    /// A commit's message.
    pub fn message(&self, commit: &str) -> String {
        self.with(|s| s.commits.get(commit).map(|c| c.message.clone()).unwrap_or_default())
    }

    pub fn parents(&self, commit: &str) -> Vec<String> {
        self.with(|s| s.commits.get(commit).map(|c| c.parents.clone()).unwrap_or_default())
    }

    /// The paths a commit changes against its first parent (every path for a root commit).
    pub fn changed_paths(&self, commit: &str) -> Vec<String> {
        self.with(|s| {
            let new = s.files_at(commit);
            let old = s.commits[commit]
                .parents
                .first()
                .map(|p| s.files_at(p))
                .unwrap_or_default();
            let paths: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
            paths
                .into_iter()
                .filter(|p| old.get(*p) != new.get(*p))
                .cloned()
                .collect()
        })
    }

    /// Whether `commit` is `of` or one of its ancestors.
    pub fn is_ancestor(&self, commit: &str, of: &str) -> bool {
        self.with(|s| s.is_ancestor(commit, of))
    }

    /// The files of a commit (path → text; a symlink's text is its target).
    pub fn files_at(&self, commit: &str) -> BTreeMap<String, String> {
        self.with(|s| s.files_at(commit).into_iter().map(|(p, (_, t))| (p, t)).collect())
    }

    pub fn pulls(&self) -> Vec<MemPull> {
        self.with(|s| s.pulls.clone())
    }

    /// The files of `branch` (path → text), empty when there is no such branch.
    pub fn files(&self, branch: &str) -> BTreeMap<String, String> {
        self.head(branch).map(|c| self.files_at(&c)).unwrap_or_default()
    }

    /// The mode of every file of `branch` (path → mode), empty when there is no such branch.
    pub fn modes(&self, branch: &str) -> BTreeMap<String, FileMode> {
        self.with(|s| {
            s.refs
                .get(branch)
                .map(|c| s.files_at(c).into_iter().map(|(p, (m, _))| (p, m)).collect())
                .unwrap_or_default()
        })
    }

    pub fn head(&self, branch: &str) -> Option<String> {
        self.with(|s| s.refs.get(branch).cloned())
    }

    /// Commits reachable from `branch` but not from the default branch (what a pull request shows).
    pub fn commits_ahead(&self, branch: &str) -> usize {
        self.with(|s| {
            let (Some(head), Some(base)) = (s.refs.get(branch), s.refs.get(&s.default_branch)) else {
                return 0;
            };
            let mut stack = vec![head.clone()];
            let mut seen = std::collections::HashSet::new();
            while let Some(c) = stack.pop() {
                if s.is_ancestor(&c, base) || !seen.insert(c.clone()) {
                    continue;
                }
                stack.extend(s.commits[&c].parents.iter().cloned());
            }
            seen.len()
        })
    }

    pub fn statuses(&self, commit: &str) -> Vec<MemStatus> {
        self.with(|s| s.statuses.get(commit).cloned().unwrap_or_default())
    }

    /// The operation ids called so far, in order.
    pub fn calls(&self) -> Vec<&'static str> {
        self.with(|s| s.calls.clone())
    }

    /// Calls that write (every operation but the reads).
    pub fn writes(&self) -> usize {
        let reads = [
            ops::REPOS_GET.id,
            ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE.id,
            ops::PULLS_LIST.id,
            ops::GIT_GET_COMMIT.id,
            ops::REPOS_GET_COMMIT.id,
            ops::REPOS_COMPARE_COMMITS.id,
            ops::GIT_GET_BLOB.id,
            ops::REPOS_LIST_COMMIT_STATUSES_FOR_REF.id,
            ops::ISSUES_LIST_FOR_REPO.id,
            ops::APPS_GET_INSTALLATION.id,
            ops::GRAPHQL_MERGE_STATE.id,
        ];
        self.calls().iter().filter(|c| !reads.contains(c)).count()
    }

    pub fn clear_calls(&self) {
        self.with(|s| s.calls.clear());
    }
}

impl GithubRepo for MemGithub {
    async fn read_base(&self, keep: &Keep, _deadline: Instant) -> Result<Snapshot> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::REPOS_DOWNLOAD_TARBALL_ARCHIVE)?;
            let base_sha = s.refs[&s.default_branch].clone();
            let tree = s.commits[&base_sha].tree.clone();
            // As GitHub's archive is read: other cells' directories read past, and no tree id.
            let mut keeper = Keeper::new(keep, u64::MAX);
            for (p, (m, c)) in &s.trees[&tree] {
                let _ = keeper.offer(p, *m, c.len() as u64, || Ok(c.clone().into_bytes()));
            }
            let (fleet, _) = keeper.finish();
            Ok(Snapshot {
                base_branch: s.default_branch.clone(),
                base_sha,
                base_tree: None,
                fleet,
                keep: keep.clone(),
            })
        })
    }

    async fn latest_pull(&self, branch: &str, _deadline: Instant) -> Result<Option<PullRequest>> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::PULLS_LIST)?;
            Ok(s.pulls.iter().rev().find(|p| p.head == branch).map(|p| PullRequest {
                number: p.number,
                url: format!("https://github.example/acme/fleet/pull/{}", p.number),
                branch: p.head.clone(),
                title: p.title.clone(),
                state: match (p.open, p.merged) {
                    (true, _) => PullState::Open,
                    (false, true) => PullState::Merged,
                    (false, false) => PullState::Closed,
                },
                // A closed pull request's head is the one it had when it was closed (see
                // `MemPull::closed_head`), also once its branch is deleted.
                head_sha: match (&p.closed_head, p.open) {
                    (Some(pinned), false) => pinned.clone(),
                    _ => s.refs.get(&p.head).cloned().unwrap_or_default(),
                },
                labels: p.labels.clone(),
                body: p.body.clone(),
            }))
        })
    }

    async fn compare(&self, base: &str, head: &str, _deadline: Instant) -> Result<Comparison> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::REPOS_COMPARE_COMMITS)?;
            let resolve = |r: &str| {
                s.refs
                    .get(r)
                    .cloned()
                    .or_else(|| s.commits.contains_key(r).then(|| r.to_owned()))
            };
            let (Some(b), Some(h)) = (resolve(base), resolve(head)) else {
                return Err(api(&ops::REPOS_COMPARE_COMMITS, 404, "Not Found"));
            };
            let Some(since) = s.merge_base(&b, &h) else {
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
            let tree_of = |c: &str| s.commits.get(c).and_then(|c| s.trees.get(&c.tree)).unwrap_or(&empty);
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
                    s.blobs.insert(id, text);
                }
            }
            // "The response will include a comparison of up to 300 files" ("Compare two
            // commits", https://docs.github.com/rest/commits/commits#compare-two-commits).
            files.truncate(COMPARE_FILES_MAX);
            // The head's own commits, oldest first, as GitHub lists them (the newest 250).
            let base_side = s.ancestors(&b);
            let mut ahead: Vec<(u64, String)> = s
                .ancestors(&h)
                .into_iter()
                .filter(|c| !base_side.contains(c))
                .map(|c| (s.commits[&c].when, c))
                .collect();
            ahead.sort();
            let total_commits = ahead.len();
            let commits: Vec<BranchCommit> = ahead
                .into_iter()
                .skip(total_commits.saturating_sub(COMPARE_COMMITS_MAX))
                .map(|(_, sha)| BranchCommit {
                    message: s.commits[&sha].message.clone(),
                    author: None,
                    sha,
                })
                .collect();
            Ok(Comparison {
                relation,
                head_tree: (since != h).then(|| s.commits[&h].tree.clone()),
                merge_base: since,
                files,
                total_commits,
                commits,
            })
        })
    }

    async fn tree_files(&self, commit: &str, _deadline: Instant) -> Result<TreeFiles> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::GIT_GET_TREE)?;
            let Some(c) = s.commits.get(commit) else {
                return Err(api(&ops::GIT_GET_TREE, 404, "Not Found"));
            };
            let tree = c.tree.clone();
            let files: BTreeMap<String, String> = s
                .files_at(commit)
                .into_iter()
                .map(|(p, (_, text))| {
                    let id = blob_id(&text);
                    s.blobs.entry(id.clone()).or_insert(text);
                    (p, id)
                })
                .collect();
            Ok(TreeFiles { tree, files })
        })
    }

    async fn read_blob(&self, blob: &str, _deadline: Instant) -> Result<Vec<u8>> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::GIT_GET_BLOB)?;
            // Ids are learnt from comparisons, as a client learns them.
            s.blobs
                .get(blob)
                .map(|t| match t.strip_prefix(BYTES_MARKER) {
                    Some(hex) => (0..hex.len() / 2)
                        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or_default())
                        .collect(),
                    None => t.clone().into_bytes(),
                })
                .ok_or_else(|| api(&ops::GIT_GET_BLOB, 404, "Not Found"))
        })
    }

    async fn create_tree(
        &self,
        on: &str,
        tree: Option<&str>,
        files: &[FileWrite],
        removed: &[String],
        _deadline: Instant,
    ) -> Result<String> {
        self.pause().await;
        self.with(|s| {
            // Without the tree's id, GitHub is asked for the commit first.
            let base = match tree {
                Some(t) => t.to_owned(),
                None => {
                    s.enter(&ops::GIT_GET_COMMIT)?;
                    s.commits.get(on).map(|c| c.tree.clone()).unwrap_or_default()
                }
            };
            s.enter(&ops::GIT_CREATE_TREE)?;
            let base = base.as_str();
            let Some(mut tree) = s.trees.get(base).cloned() else {
                return Err(api(
                    &ops::GIT_CREATE_TREE,
                    422,
                    "Invalid tree info: base_tree does not exist",
                ));
            };
            for f in files {
                tree.insert(f.path.clone(), (f.mode, f.content.clone()));
            }
            // An entry with `"sha": null` deletes the path; GitHub "returns an error if you
            // try to delete a file that does not exist"
            // (https://docs.github.com/rest/git/trees#create-a-tree): a 422.
            for path in removed {
                if tree.remove(path).is_none() {
                    return Err(api(&ops::GIT_CREATE_TREE, 422, "GitRPC::BadObjectState"));
                }
            }
            Ok(s.put_tree(tree))
        })
    }

    async fn create_commit(&self, tree: &str, parents: &[String], message: &str, _deadline: Instant) -> Result<String> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::GIT_CREATE_COMMIT)?;
            if !s.trees.contains_key(tree) {
                return Err(api(&ops::GIT_CREATE_COMMIT, 422, "Tree SHA does not exist"));
            }
            if parents.iter().any(|p| !s.commits.contains_key(p)) {
                return Err(api(
                    &ops::GIT_CREATE_COMMIT,
                    422,
                    "Parent SHA does not exist or is not a commit object",
                ));
            }
            let sha = s.put_commit(tree, parents, message);
            s.created.push(sha.clone());
            Ok(sha)
        })
    }

    async fn move_branch(&self, branch: &str, _from: &str, commit: &str, _deadline: Instant) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::GIT_UPDATE_REF)?;
            s.check_rules(branch, "updating")?;
            let lost = |detail: &str| GithubError::Conflict {
                what: format!("updating branch {branch}"),
                detail: detail.to_owned(),
            };
            let Some(current) = s.refs.get(branch).cloned() else {
                return Err(lost("Reference does not exist"));
            };
            if !s.commits.contains_key(commit) {
                return Err(api(&ops::GIT_UPDATE_REF, 422, "Object does not exist"));
            }
            if !s.is_ancestor(&current, commit) {
                return Err(lost("Update is not a fast forward"));
            }
            s.refs.insert(branch.to_owned(), commit.to_owned());
            Ok(())
        })
    }

    async fn create_branch(&self, branch: &str, commit: &str, _deadline: Instant) -> Result<bool> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::GIT_CREATE_REF)?;
            s.check_rules(branch, "creating")?;
            if s.refs.contains_key(branch) {
                return Ok(false);
            }
            if !s.commits.contains_key(commit) {
                return Err(api(&ops::GIT_CREATE_REF, 422, "Object does not exist"));
            }
            s.refs.insert(branch.to_owned(), commit.to_owned());
            Ok(true)
        })
    }

    async fn branch_head(&self, branch: &str, _deadline: Instant) -> Result<Option<(String, String)>> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::REPOS_GET_COMMIT)?;
            Ok(s.refs.get(branch).map(|c| (c.clone(), s.commits[c].message.clone())))
        })
    }

    async fn delete_branch_at(&self, branch: &str, expected: &str, _deadline: Instant) -> Result<bool> {
        self.pause().await;
        self.with(|s| {
            s.enter(&GRAPHQL_UPDATE_REFS)?;
            // `beforeOid`: the ref must point at `expected`, or nothing is updated (the
            // mutation's refusal; see `port::GithubRepo::delete_branch_at`).
            if s.refs.get(branch).map(String::as_str) != Some(expected) {
                return Ok(false);
            }
            s.check_rules(branch, "deleting")?;
            if let Some(head) = s.refs.remove(branch) {
                for p in s.pulls.iter_mut().filter(|p| p.open && p.head == branch) {
                    p.open = false;
                    p.closed_head = Some(head.clone());
                    p.auto_merge = None;
                }
            }
            Ok(true)
        })
    }

    async fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        _deadline: Instant,
    ) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::REPOS_CREATE_COMMIT_STATUS)?;
            if !s.commits.contains_key(commit) {
                return Err(api(
                    &ops::REPOS_CREATE_COMMIT_STATUS,
                    422,
                    format!("No commit found for SHA: {commit}"),
                ));
            }
            if description.chars().count() > 140 {
                return Err(api(
                    &ops::REPOS_CREATE_COMMIT_STATUS,
                    422,
                    "description is too long (maximum is 140 characters)",
                ));
            }
            let list = s.statuses.entry(commit.to_owned()).or_default();
            list.retain(|st| st.context != context);
            list.push(MemStatus {
                context: context.to_owned(),
                success,
                description: description.to_owned(),
            });
            // The last required status turning success is what GitHub's auto-merge waits for.
            s.settle();
            Ok(())
        })
    }

    async fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        _deadline: Instant,
    ) -> Result<(u64, String)> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::PULLS_CREATE)?;
            let (Some(h), Some(b)) = (s.refs.get(head).cloned(), s.refs.get(base).cloned()) else {
                // GitHub: 422 Validation Failed, `{"field": "head", "code": "invalid"}`; the port
                // reports a head that vanished as a lost race.
                return Err(GithubError::Conflict {
                    what: format!("opening the pull request for {head}"),
                    detail: "Validation Failed: head invalid".into(),
                });
            };
            if s.pulls.iter().any(|p| p.open && p.head == head) {
                return Err(GithubError::Conflict {
                    what: format!("opening the pull request for {head}"),
                    detail: format!("A pull request already exists for acme:{head}."),
                });
            }
            if s.is_ancestor(&h, &b) {
                // GitHub: 422 "No commits between ..."; for the port, someone merged it first.
                return Err(GithubError::Conflict {
                    what: format!("opening the pull request for {head}"),
                    detail: format!("No commits between {base} and {head}"),
                });
            }
            let number = s.next_number();
            s.pulls.push(MemPull {
                number,
                head: head.to_owned(),
                base: base.to_owned(),
                title: title.to_owned(),
                body: body.to_owned(),
                labels: Vec::new(),
                open: true,
                merged: false,
                closed_by: None,
                comments: Vec::new(),
                auto_merge: None,
                approvals: Vec::new(),
                merged_by: None,
                closed_head: None,
            });
            s.pull_created.insert(number, now_secs());
            Ok((number, format!("https://github.example/acme/fleet/pull/{number}")))
        })
    }

    async fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        _deadline: Instant,
    ) -> Result<bool> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::ISSUES_UPDATE)?;
            s.check_issue_write(&ops::ISSUES_UPDATE, Some(number), body)?;
            let mut labels = labels.to_vec();
            labels.sort();
            labels.dedup();
            if let Some(i) = s.issues.iter_mut().find(|i| i.number == number) {
                i.title = title.to_owned();
                i.body = body.to_owned();
                i.labels = labels;
                return Ok(i.open);
            }
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) else {
                return Err(api(&ops::ISSUES_UPDATE, 404, "Not Found"));
            };
            p.title = title.to_owned();
            p.body = body.to_owned();
            p.labels = labels;
            Ok(p.open)
        })
    }

    async fn add_labels(&self, number: u64, labels: &[String], _deadline: Instant) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::ISSUES_ADD_LABELS)?;
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) else {
                return Err(api(&ops::ISSUES_ADD_LABELS, 404, "Not Found"));
            };
            p.labels.extend(labels.iter().cloned());
            p.labels.sort();
            p.labels.dedup();
            Ok(())
        })
    }

    async fn close_pull(&self, number: u64, body: &str, _deadline: Instant) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::PULLS_UPDATE)?;
            let refs = s.refs.clone();
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) else {
                return Err(api(&ops::PULLS_UPDATE, 404, "Not Found"));
            };
            if p.open {
                p.closed_by = Some("cellbridge".into());
                p.closed_head = refs.get(&p.head).cloned();
            }
            p.open = false;
            p.auto_merge = None;
            p.body = body.to_owned();
            Ok(())
        })
    }

    async fn merge_into(&self, branch: &str, commit: &str, message: &str, _deadline: Instant) -> Result<Merge> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::REPOS_MERGE)?;
            s.check_rules(branch, "merging into")?;
            if !s.refs.contains_key(branch) || !s.commits.contains_key(commit) {
                return Err(GithubError::Conflict {
                    what: format!("merging {commit} into {branch}"),
                    detail: "Base does not exist".into(),
                });
            }
            Ok(match s.merge_commit(branch, commit, message) {
                Ok(Some(sha)) => Merge::Merged(sha),
                Ok(None) => Merge::UpToDate,
                Err(_) => Merge::Conflict,
            })
        })
    }

    async fn status(&self, commit: &str, context: &str, _deadline: Instant) -> Result<Option<(bool, String)>> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::REPOS_LIST_COMMIT_STATUSES_FOR_REF)?;
            Ok(s.statuses
                .get(commit)
                .and_then(|l| l.iter().rev().find(|st| st.context == context))
                .map(|st| (st.success, st.description.clone())))
        })
    }

    async fn check_write_access(&self, _deadline: Instant) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            // Credentials of a token until `grant` makes them an App installation's.
            if s.permissions.is_none() {
                return Ok(());
            }
            s.enter(&ops::APPS_GET_INSTALLATION)?;
            let Some(granted) = &s.permissions else { return Ok(()) };
            let as_json = serde_json::Value::Object(
                granted
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
            );
            let missing = super::permissions::missing(&as_json);
            if missing.is_empty() {
                return Ok(());
            }
            Err(GithubError::MissingPermissions {
                installation: 777,
                missing,
                granted: granted
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        })
    }

    async fn open_issues(&self, label: &str, _deadline: Instant) -> Result<Vec<Issue>> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::ISSUES_LIST_FOR_REPO)?;
            Ok(s.issues
                .iter()
                .filter(|i| i.open && i.labels.iter().any(|l| l == label))
                .map(|i| Issue {
                    number: i.number,
                    url: format!("https://github.example/acme/fleet/issues/{}", i.number),
                    title: i.title.clone(),
                    body: i.body.clone(),
                    labels: i.labels.clone(),
                })
                .collect())
        })
    }

    async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        _deadline: Instant,
    ) -> Result<(u64, String)> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::ISSUES_CREATE)?;
            s.check_issue_write(&ops::ISSUES_CREATE, None, body)?;
            let number = s.next_number();
            s.issues.push(MemIssue {
                number,
                title: title.to_owned(),
                body: body.to_owned(),
                labels: labels.to_vec(),
                open: true,
                comments: Vec::new(),
            });
            Ok((number, format!("https://github.example/acme/fleet/issues/{number}")))
        })
    }

    async fn close_issue(&self, number: u64, body: &str, reason: CloseReason, _deadline: Instant) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::ISSUES_UPDATE)?;
            s.check_issue_write(&ops::ISSUES_UPDATE, Some(number), body)?;
            let Some(i) = s.issues.iter_mut().find(|i| i.number == number) else {
                return Err(api(&ops::ISSUES_UPDATE, 404, "Not Found"));
            };
            i.open = false;
            i.body = body.to_owned();
            s.state_reasons.insert(number, reason.state_reason());
            Ok(())
        })
    }

    async fn comment(&self, number: u64, body: &str, _deadline: Instant) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::ISSUES_CREATE_COMMENT)?;
            if let Some(i) = s.issues.iter_mut().find(|i| i.number == number) {
                i.comments.push(body.to_owned());
                return Ok(());
            }
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) else {
                return Err(api(&ops::ISSUES_CREATE_COMMENT, 404, "Not Found"));
            };
            p.comments.push(body.to_owned());
            Ok(())
        })
    }
    // auto-merge
    async fn merge_state(&self, number: u64, _deadline: Instant) -> Result<MergeState> {
        self.pause().await;
        self.with(|s| {
            s.enter(&GRAPHQL_MERGE_STATE)?;
            let Some(pr) = s.pulls.iter().find(|p| p.number == number) else {
                return Err(api(
                    &GRAPHQL_MERGE_STATE,
                    404,
                    format!("Could not resolve to a PullRequest with the number of {number}."),
                ));
            };
            let head = s.refs.get(&pr.head).cloned().unwrap_or_default();
            let required_names: Vec<String> = s
                .branch_protection
                .get(&pr.base)
                .map(|p| p.contexts.clone())
                .unwrap_or_default();
            let required = s
                .check_states(&head)
                .into_iter()
                .filter(|(name, _)| required_names.contains(name))
                .map(|(name, state)| RequiredCheck { name, state })
                .collect();
            Ok(MergeState {
                node_id: node_id(number),
                state: match (pr.open, pr.merged) {
                    (true, _) => PullState::Open,
                    (false, true) => PullState::Merged,
                    (false, false) => PullState::Closed,
                },
                head_sha: head,
                merge_state: s.merge_state_of(pr),
                auto_merge_allowed: s.allow_auto_merge,
                // GraphQL names an App as a `Bot` by its slug, without the `[bot]` suffix of its
                // REST login and of `viewer.login` (see `port::Actor`).
                auto_merge: pr.auto_merge.as_ref().map(|a| AutoMergeRequest {
                    enabled_by: Some(match a.enabled_by.strip_suffix("[bot]") {
                        Some(slug) => Actor {
                            login: slug.to_owned(),
                            bot: true,
                        },
                        None => Actor {
                            login: a.enabled_by.clone(),
                            bot: false,
                        },
                    }),
                    method: a.method,
                }),
                viewer: VIEWER.to_owned(),
                required,
                checks_complete: true,
            })
        })
    }

    async fn enable_auto_merge(
        &self,
        node: &str,
        expected_head: &str,
        method: MergeMethod,
        _deadline: Instant,
    ) -> Result<AutoMergeAnswer> {
        self.pause().await;
        self.with(|s| {
            s.enter(&GRAPHQL_ENABLE)?;
            let number = number_of(node).ok_or_else(|| api(&GRAPHQL_ENABLE, 404, "Could not resolve to a node"))?;
            s.enable(number, Some(expected_head), method, VIEWER)
        })
    }

    async fn disable_auto_merge(&self, node: &str, _deadline: Instant) -> Result<()> {
        self.pause().await;
        self.with(|s| {
            s.enter(&GRAPHQL_DISABLE)?;
            let number = number_of(node).ok_or_else(|| api(&GRAPHQL_DISABLE, 404, "Could not resolve to a node"))?;
            if let Some(p) = s.pulls.iter_mut().find(|p| p.number == number)
                && p.auto_merge.take().is_some()
            {
                s.journal.push(format!("#{number} auto-merge disabled by {VIEWER}"));
            }
            Ok(())
        })
    }

    async fn merge_pull(&self, number: u64, sha: &str, method: MergeMethod, _deadline: Instant) -> Result<MergeAnswer> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::PULLS_MERGE)?;
            match s.merge_pr(number, method, Some(sha), VIEWER, true) {
                Ok(merged) => {
                    s.settle();
                    Ok(MergeAnswer::Merged(merged))
                }
                Err(r) if r.status == 405 => Ok(MergeAnswer::NotMergeable(r.message)),
                Err(r) if r.status == 409 => Err(GithubError::Conflict {
                    what: format!("merging pull request #{number}"),
                    detail: r.message,
                }),
                Err(r) => Err(api(&ops::PULLS_MERGE, r.status, r.message)),
            }
        })
    }

    // dashboard
    async fn open_pulls(&self, head_prefix: &str, _deadline: Instant) -> Result<Vec<OpenPull>> {
        self.pause().await;
        self.with(|s| {
            s.enter(&ops::PULLS_LIST)?;
            Ok(s.pulls
                .iter()
                .filter(|p| p.open && p.head.starts_with(head_prefix))
                .map(|p| OpenPull {
                    number: p.number,
                    url: format!("https://github.example/acme/fleet/pull/{}", p.number),
                    head: p.head.clone(),
                    head_sha: s.refs.get(&p.head).cloned().unwrap_or_default(),
                    created_at: s.pull_created.get(&p.number).copied().unwrap_or_else(now_secs),
                    labels: p.labels.clone(),
                })
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
    }

    /// main with `a` and `b`, and pull request #1 from `topic` (cut from it) adding `cell`.
    fn repo_with_pull() -> MemGithub {
        let gh = MemGithub::new("main", &files(&[("a", "a\n"), ("b", "b\n")]));
        gh.commit("topic", &[("cell", "vpc: 1\n")], "the cell");
        gh.with(|s| {
            s.pulls.push(MemPull {
                number: 1,
                head: "topic".into(),
                base: "main".into(),
                title: "cell".into(),
                body: String::new(),
                labels: Vec::new(),
                open: true,
                merged: false,
                closed_by: None,
                comments: Vec::new(),
                auto_merge: None,
                approvals: Vec::new(),
                merged_by: None,
                closed_head: None,
            })
        });
        gh
    }

    #[tokio::test]
    async fn trees_keep_modes_and_symlinks() {
        use crate::fleet::FleetRead as _;
        let gh = repo_with_pull();
        let d = Instant::now() + std::time::Duration::from_secs(5);
        let main = gh.head("main").unwrap();
        let files = [
            FileWrite {
                path: "run.sh".into(),
                mode: FileMode::Executable,
                content: "#!/bin/sh\n".into(),
            },
            FileWrite {
                path: "docs".into(),
                mode: FileMode::Symlink,
                content: "a".into(),
            },
        ];
        let tree = gh.create_tree(&main, None, &files, &[], d).await.unwrap();
        let commit = gh
            .create_commit(&tree, std::slice::from_ref(&main), "modes", d)
            .await
            .unwrap();
        assert!(gh.create_branch("modes", &commit, d).await.unwrap());
        gh.commit(
            "modes",
            &[("run.sh", "#!/bin/sh\nexit 0\n")],
            "a person edits the script",
        );
        let modes = gh.modes("modes");
        assert_eq!(
            (modes["run.sh"], modes["docs"], modes["a"]),
            (FileMode::Executable, FileMode::Symlink, FileMode::Regular)
        );
        assert_eq!(gh.files("modes")["docs"], "a");
        let snap = gh.read_base(&Keep::all(), d).await.unwrap();
        assert_eq!(snap.fleet.mode("a").unwrap(), Some(FileMode::Regular));
    }

    #[test]
    fn a_pull_request_behind_its_base_merges_both_sides_in_a_merge_commit() {
        let gh = repo_with_pull();
        let base = gh.commit("main", &[("OWNERS", "platform\n")], "main moves");
        let head = gh.head("topic").unwrap();
        let sha = gh.merge(1);
        assert_eq!(gh.with(|s| s.commits[&sha].parents.clone()), [base, head]);
        let main = gh.files("main");
        assert_eq!(main.keys().collect::<Vec<_>>(), ["OWNERS", "a", "b", "cell"]);
        assert!(gh.pulls()[0].merged && !gh.pulls()[0].open);
    }

    #[test]
    fn identical_changes_merge_and_different_ones_conflict() {
        let gh = repo_with_pull();
        gh.commit("main", &[("a", "A\n"), ("b", "main\n")], "main");
        gh.commit("topic", &[("a", "A\n"), ("b", "topic\n")], "topic");
        let before = (gh.head("main"), gh.files("main"));
        let refused = gh.try_merge(1).unwrap_err();
        assert_eq!(
            (refused.status, refused.conflicts.as_slice()),
            (405, ["b".to_owned()].as_slice())
        );
        assert_eq!(refused.message, "Pull Request is not mergeable");
        assert_eq!((gh.head("main"), gh.files("main")), before, "nothing moved");
        assert!(gh.pulls()[0].open && !gh.pulls()[0].merged);
    }

    #[test]
    fn deleting_a_file_one_side_edits_conflicts_and_one_left_alone_is_deleted() {
        let base = BTreeMap::from([("a".to_owned(), "a".to_owned()), ("b".to_owned(), "b".to_owned())]);
        let ours = BTreeMap::from([("b".to_owned(), "b".to_owned())]);
        let theirs = BTreeMap::from([("a".to_owned(), "a".to_owned()), ("b".to_owned(), "B".to_owned())]);
        assert_eq!(
            three_way(&base, &ours, &theirs),
            Ok(BTreeMap::from([("b".to_owned(), "B".to_owned())]))
        );
        let edited = BTreeMap::from([("a".to_owned(), "A".to_owned()), ("b".to_owned(), "b".to_owned())]);
        assert_eq!(three_way(&base, &ours, &edited), Err(vec!["a".to_owned()]));
    }

    #[test]
    fn a_closed_or_missing_pull_request_is_refused() {
        let gh = repo_with_pull();
        assert_eq!(gh.try_merge(7).unwrap_err().status, 404);
        gh.merge(1);
        assert_eq!(gh.try_merge(1).unwrap_err().status, 405);
    }

    #[test]
    fn the_merge_base_is_the_newest_common_ancestor() {
        let gh = repo_with_pull();
        gh.commit("main", &[("OWNERS", "platform\n")], "main moves");
        let merged_head = gh.head("topic").unwrap();
        gh.merge(1);
        let cut = gh.commit("topic", &[("cell", "vpc: 2\n")], "the cell again");
        let main = gh.commit("main", &[("a", "A\n")], "main moves again");
        assert_eq!(gh.with(|s| s.merge_base(&main, &cut)), Some(merged_head));
    }
}
