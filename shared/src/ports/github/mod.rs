//! GitHub as the pull-request logic sees it: the primitives of one repository (read the base,
//! trees and commits, refs, pull requests, statuses, labels), not "publish a plan". The logic
//! above ([`crate::rules::pull_request`]) runs the same whatever implements this: [`crate::adapters::github::GithubFleet`]
//! over the REST API, or the in-memory store of the `test-support` feature.
//!
//! The primitives come in slices by what their consumers need: [`GitData`] (the base, trees,
//! blobs, commits and refs), [`Pulls`], [`Issues`] and [`Merges`] (statuses, auto-merge, a
//! merge); [`GithubRepo`] is all of them.
//!
//! Each method answers what GitHub answers, classified: a ref that moved under a fast-forward
//! is [`Conflict`](GithubError::Conflict) (redo on a fresh base), a repository rule
//! refusing a ref update is [`Refused`](GithubError::Refused), a 5xx or rate limit that
//! outlived the retries is [`Transient`](GithubError::Transient), any other refusal is
//! [`Api`](GithubError::Api).

mod error;
mod merging;

pub use error::{GithubError, Result};

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Instant;

use crate::pure::fleet::{FileWrite, Keep, MemFleet};

/// Where a pull request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullState {
    Open,
    /// Closed without merging.
    Closed,
    Merged,
}

/// A cell's pull request, as far as cellbridge needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    /// Its head branch (`cellbridge/<cell>`).
    pub branch: String,
    pub url: String,
    pub title: String,
    pub state: PullState,
    pub head_sha: String,
    pub labels: Vec<String>,
    pub body: String,
    /// Its node id (GraphQL `PullRequest.id`, REST `node_id`), which the auto-merge mutations
    /// take: known from the reading, so that cellbridge's own auto-merge can be turned off even
    /// when the merge state's answer carries no data. `None` when the answer did not carry it.
    pub node_id: Option<String>,
}

/// What [`Pulls::cell_reading`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellReading {
    /// The newest pull request of the branch, as [`Pulls::latest_pull`] answers it.
    pub latest: Option<PullRequest>,
    /// The open issues carrying the label, oldest first, as [`Issues::open_issues`] answers them.
    pub labelled: Vec<Issue>,
    /// The root tree of the base commit, as GitHub names it (never computed from the archive).
    pub base_tree: String,
}

/// An open issue (not a pull request), as far as cellbridge needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub number: u64,
    pub url: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
}

/// How a commit relates to another ("Compare two commits": the head's status against the base).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Identical,
    /// The head has commits the base lacks, and lacks none of the base's.
    Ahead,
    /// The head lacks commits of the base and has none of its own.
    Behind,
    /// Each has commits the other lacks.
    Diverged,
}

impl Relation {
    /// The head contains every commit of the base.
    pub fn contains_base(self) -> bool {
        matches!(self, Relation::Identical | Relation::Ahead)
    }
}

/// A file the head changed since its merge base with the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    pub path: String,
    /// The blob at the head; `None` when the head removed the file.
    pub blob: Option<String>,
}

/// The most files GitHub lists in a comparison ("Compare two commits": "the response includes a
/// maximum of 300 files"): a list that long may be cut, so it is never taken as complete.
pub const COMPARE_FILES_MAX: usize = 300;

/// A commit's whole tree: its id, and every file's path and blob id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeFiles {
    pub tree: String,
    pub files: std::collections::BTreeMap<String, String>,
}

/// A commit the head has that the base lacks, as a comparison lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchCommit {
    pub sha: String,
    pub message: String,
    /// The git author's name, when the answer gives it (said in reports, never decided on).
    pub author: Option<String>,
    /// Whether GitHub verified the commit's signature (`commit.verification.verified`), when
    /// the answer says: a rule requiring signatures blocks a pull request holding one that is not.
    pub verified: Option<bool>,
}

/// "Compare two commits" (three dots: the head's changes since the merge base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub relation: Relation,
    pub merge_base: String,
    pub files: Vec<ChangedFile>,
    /// The head commit's tree, when the answer shows it (saves reading the commit).
    pub head_tree: Option<String>,
    /// The head's commits since the merge base, oldest first: GitHub lists at most the newest
    /// 250 ("Compare two commits"), so [`Comparison::total_commits`] can be larger.
    pub commits: Vec<BranchCommit>,
    pub total_commits: usize,
}

impl Comparison {
    /// Whether [`Comparison::files`] is every file the head changed (shorter than GitHub's cap).
    pub fn lists_every_file(&self) -> bool {
        self.files.len() < COMPARE_FILES_MAX
    }
}

/// What merging a commit into a branch did ("Merge a branch").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// A merge commit, now the branch's head.
    Merged(String),
    /// The branch already contains the commit.
    UpToDate,
    /// Both sides changed the same thing: nothing moved.
    Conflict,
}

pub use merging::{
    Actor, AutoMergeAnswer, AutoMergeRequest, CheckState, MergeAnswer, MergeMethod, MergeQueue, MergeState,
    MergeStateStatus, PullNode, QueueAnswer, QueueEntry, RequiredCheck,
};

/// Git's data in one repository: the base branch, trees, blobs and commits, comparisons, the
/// refs cellbridge moves, and whether the credentials may write at all.
pub trait GitData: Send + Sync {
    /// Whether the credentials may write what cellbridge writes, where GitHub tells before any
    /// write (a GitHub App installation's permissions):
    /// [`MissingPermissions`](GithubError::MissingPermissions) names what is missing.
    /// `Ok` when GitHub cannot tell (a token): a 403 then names the permission.
    fn check_write_access(&self, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// When the credentials' token expires, as GitHub's answers so far said (its
    /// `GitHub-Authentication-Token-Expiration` header); `None` for a token without expiry, a
    /// GitHub App (whose installation tokens are renewed as they expire), or before any answer.
    fn token_expires_at(&self) -> Option<std::time::SystemTime> {
        None
    }
    /// Whether a write could still be sent before `deadline` within this process's share of
    /// GitHub's limits: [`Transient`](GithubError::Transient) when the pacing leaves no
    /// room, so that a state comes back later instead of reading the base for nothing.
    fn write_room(&self, _deadline: Instant) -> Result<()> {
        Ok(())
    }
    /// The base branch's head commit and the files `keep` keeps (the rest read past), within
    /// the memory limit ([`TooLarge`](GithubError::TooLarge) beyond it).
    fn read_base(&self, keep: &Keep, deadline: Instant) -> impl Future<Output = Result<Snapshot>> + Send;
    /// How `head` relates to `base`, and the files `head` changed since their merge base.
    fn compare(&self, base: &str, head: &str, deadline: Instant) -> impl Future<Output = Result<Comparison>> + Send;
    /// The files of `commit`'s tree, all of them (`git/trees/{sha}?recursive=1`): path → blob
    /// id, and the tree's id. Gitlinks (submodules) are no file of the repository and are left
    /// out; an answer GitHub cut short (`truncated`) is a failure naming the commit, never taken
    /// for the whole tree. Where a comparison lists at most 300 files, this lists them all.
    fn tree_files(&self, commit: &str, deadline: Instant) -> impl Future<Output = Result<TreeFiles>> + Send;
    /// A blob's bytes, as they are: a file that is not UTF-8 (an image, an archive someone
    /// committed) is kept opaque, never refused here.
    fn read_blob(&self, blob: &str, deadline: Instant) -> impl Future<Output = Result<Vec<u8>>> + Send;
    /// A tree: the tree of commit `on` (or `tree`, when the caller knows it) with `files`
    /// written over it, each with its mode (a symlink's content is its target), and the files
    /// `removed` taken out (each must be there: GitHub refuses to delete a file that does not
    /// exist).
    fn create_tree(
        &self,
        on: &str,
        tree: Option<&str>,
        files: &[FileWrite],
        removed: &[String],
        deadline: Instant,
    ) -> impl Future<Output = Result<String>> + Send;
    fn create_commit(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<String>> + Send;
    /// Moves `branch` from `from` to `commit` by fast-forward only: [`Conflict`](GithubError::Conflict)
    /// when someone moved it meanwhile, [`Refused`](GithubError::Refused) when a
    /// repository rule refuses the update.
    fn move_branch(
        &self,
        branch: &str,
        from: &str,
        commit: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Creates `branch` at `commit`; `Ok(false)` when it already exists.
    fn create_branch(&self, branch: &str, commit: &str, deadline: Instant)
    -> impl Future<Output = Result<bool>> + Send;
    /// The branch head's id and commit message, `None` when there is no such branch.
    fn branch_head(
        &self,
        branch: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Option<(String, String)>>> + Send;
    /// Deletes `branch` if it still points at `head`, in one step on GitHub's side (GraphQL
    /// `updateRefs` with `beforeOid`): `Ok(false)` when it points elsewhere or is gone, and then
    /// nothing was deleted. A push that lands between a read and the deletion is never lost.
    fn delete_branch_at(
        &self,
        branch: &str,
        head: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Merges `commit` into `branch` on GitHub's side, as a person's "Update branch" would.
    fn merge_into(
        &self,
        branch: &str,
        commit: &str,
        message: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Merge>> + Send;
    // signatures
    /// Whether GitHub signs the commits these credentials write through the Git data API (and
    /// its `POST /merges`): a GitHub App installation's are, naming no author or committer
    /// ("Signature verification for bots"); a personal access token's are not.
    fn signs_git_data(&self, deadline: Instant) -> impl Future<Output = Result<bool>> + Send;
    /// Whether commits reaching `branch` must carry verified signatures: a ruleset's
    /// `required_signatures` rule or classic branch protection's "Require signed commits". Asked
    /// of GitHub once in a while, not once per call (see the implementations).
    fn requires_signatures(&self, branch: &str, deadline: Instant) -> impl Future<Output = Result<bool>> + Send;
    /// One commit on `branch` through GraphQL `createCommitOnBranch`, which GitHub signs whatever
    /// the credentials: `files` written (each as a regular file: the mutation has no mode) and
    /// `removed` taken out, on the head `expected_head` only ([`Conflict`](GithubError::Conflict)
    /// when the branch moved). The new head.
    fn commit_on_branch(
        &self,
        branch: &str,
        expected_head: &str,
        files: &[FileWrite],
        removed: &[String],
        message: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<String>> + Send;
    /// The base branch merged into pull request `number`'s branch by GitHub's "Update branch"
    /// (`PUT /pulls/{n}/update-branch` with `expected_head_sha`), whose merge commit GitHub
    /// signs: the new head, [`Merge::UpToDate`], or [`Merge::Conflict`].
    fn update_pull_branch(
        &self,
        number: u64,
        branch: &str,
        expected_head: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Merge>> + Send;
}

/// Pull requests: a branch's newest, opening one, its text, labels and comments, closing it,
/// and the open ones (the dashboard's listing).
pub trait Pulls: Send + Sync {
    /// The newest pull request whose head is `branch`, open, closed or merged.
    fn latest_pull(&self, branch: &str, deadline: Instant) -> impl Future<Output = Result<Option<PullRequest>>> + Send;
    /// What a new cell's proposal needs to know before its first write, in one request where
    /// GitHub allows it (a new cell's budget of requests is the fleet's): the newest pull request
    /// of `branch` (a fork's of the same name left out), the open issues carrying `label`
    /// (every page), and the root tree of commit `base_sha`, the head of `base`. The same read
    /// tells whether `base` requires signed commits: [`GitData::requires_signatures`] of `base`
    /// is then answered without asking GitHub again.
    fn cell_reading(
        &self,
        branch: &str,
        label: &str,
        base: &str,
        base_sha: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<CellReading>> + Send;
    /// Opens a pull request; [`Conflict`](GithubError::Conflict) when one is already open
    /// for `head`, or `head` is gone (another run deleted it meanwhile).
    fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<(u64, String)>> + Send;
    /// Title, body and the whole label set of a pull request or an issue, in one write; whether
    /// it is still open, as GitHub's answer to the write says (a pull request a person merged
    /// meanwhile is closed).
    fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Adds labels; the pull request keeps the ones it has.
    fn add_labels(&self, number: u64, labels: &[String], deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// A comment on the pull request's conversation.
    fn comment(&self, number: u64, body: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Closes the pull request, its body replaced by `body` in the same write.
    fn close_pull(&self, number: u64, body: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Every open pull request whose head is a branch of this repository starting with
    /// `head_prefix` (not a fork's), oldest first, all pages of the listing, each with its
    /// head's status of `context`, its place in the merge queue and its merge state.
    fn open_pulls(
        &self,
        head_prefix: &str,
        context: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Vec<OpenPull>>> + Send;
    /// [`latest_pull`](Pulls::latest_pull) of each of `branches` (this repository's, never a
    /// fork's of the same name), in as few requests as GitHub allows (GraphQL: a hundred
    /// branches a request), so that the dashboard reads every pending cell's however many.
    fn newest_pulls(
        &self,
        branches: &[String],
        deadline: Instant,
    ) -> impl Future<Output = Result<BTreeMap<String, PullRequest>>> + Send;
}

/// Issues (pull requests left out): the open ones carrying a label, opening and closing one.
pub trait Issues: Send + Sync {
    /// The open issues (pull requests left out) carrying `label`, oldest first.
    fn open_issues(&self, label: &str, deadline: Instant) -> impl Future<Output = Result<Vec<Issue>>> + Send;
    /// Opens an issue with `labels`.
    fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> impl Future<Output = Result<(u64, String)>> + Send;
    /// Closes an issue, its body replaced by `body` in the same write, saying why (`reason`).
    fn close_issue(
        &self,
        number: u64,
        body: &str,
        reason: CloseReason,
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Commit statuses, and merging a pull request: where it stands for merging, GitHub's
/// auto-merge, a merge by cellbridge.
pub trait Merges: Send + Sync {
    /// The newest status of `context` on `commit`: (success, description).
    fn status(
        &self,
        commit: &str,
        context: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<Option<(bool, String)>>> + Send;
    fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
    /// A `pending` status of `context` on `commit`: what decides whether it may pass could not
    /// be verified (`description` says what), so it does not pass.
    fn set_pending(
        &self,
        commit: &str,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Where pull request `number` stands for merging ([`MergeState`]), in one GraphQL query.
    fn merge_state(&self, number: u64, deadline: Instant) -> impl Future<Output = Result<MergeState>> + Send;
    /// Enables GitHub's auto-merge on the pull request `node_id` (from [`MergeState`]) for the
    /// head `expected_head` only: a head that moved meanwhile is
    /// [`Conflict`](GithubError::Conflict). GitHub's refusals are answers.
    fn enable_auto_merge(
        &self,
        node_id: &str,
        expected_head: &str,
        method: MergeMethod,
        deadline: Instant,
    ) -> impl Future<Output = Result<AutoMergeAnswer>> + Send;
    /// Disables auto-merge on the pull request `node_id`; already off is fine.
    fn disable_auto_merge(&self, node_id: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Where the base requires a merge queue: GitHub's auto-merge on for the head
    /// `expected_head` only, with no merge method ("the merge strategy ... is set by the merge
    /// queue": a method is refused), which queues it once every requirement is met.
    fn queue_auto_merge(
        &self,
        node_id: &str,
        expected_head: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<QueueAnswer>> + Send;
    /// Adds the pull request to the merge queue its base requires, for the head
    /// `expected_head` only (`enqueuePullRequest`); a head that moved is
    /// [`Conflict`](GithubError::Conflict).
    fn enqueue(
        &self,
        node_id: &str,
        expected_head: &str,
        deadline: Instant,
    ) -> impl Future<Output = Result<QueueAnswer>> + Send;
    /// Takes the pull request out of the merge queue (`dequeuePullRequest`); not in it is fine.
    fn dequeue(&self, node_id: &str, deadline: Instant) -> impl Future<Output = Result<()>> + Send;
    /// Merges pull request `number` if its head is still `sha` (else
    /// [`Conflict`](GithubError::Conflict)); GitHub decides whether its protections allow it.
    fn merge_pull(
        &self,
        number: u64,
        sha: &str,
        method: MergeMethod,
        deadline: Instant,
    ) -> impl Future<Output = Result<MergeAnswer>> + Send;
}

/// The primitives of one GitHub repository: every slice of it ([`GitData`], [`Pulls`],
/// [`Issues`], [`Merges`]), implemented for whatever implements them all. A consumer that needs
/// only some slices is bounded by those.
pub trait GithubRepo: GitData + Pulls + Issues + Merges {}

impl<T: GitData + Pulls + Issues + Merges> GithubRepo for T {}

/// Why an issue is closed: GitHub's `state_reason` ("completed", "not_planned", "duplicate";
/// <https://docs.github.com/rest/issues/issues#update-an-issue>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// What it reported was resolved.
    Completed,
    /// Another issue, kept, says the same (two runs raced and each opened one).
    Duplicate,
}

impl CloseReason {
    pub fn state_reason(self) -> &'static str {
        match self {
            CloseReason::Completed => "completed",
            CloseReason::Duplicate => "duplicate",
        }
    }
}

// dashboard

/// An open pull request, as the fleet dashboard lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenPull {
    pub number: u64,
    pub url: String,
    /// The head branch, in this repository.
    pub head: String,
    pub head_sha: String,
    /// When it was opened, in seconds since the Unix epoch.
    pub created_at: u64,
    pub labels: Vec<String>,
    /// Its description as the listing gives it: what cellbridge recorded there is shown to
    /// people (the dashboard), never decided on.
    pub body: String,
    /// The newest status of the context asked for on its head commit; `None` when none was
    /// posted there.
    pub status: Option<HeadStatus>,
    /// In the base branch's merge queue, as GitHub says (`isInMergeQueue`): never the body's
    /// `queued=yes`, which a person can edit.
    pub queued: bool,
    /// GitHub's auto-merge is on (`autoMergeRequest` is not `null`), whoever enabled it: with
    /// `queued`, what the cap on cellbridge's pull requests in flight counts.
    pub auto_merge: bool,
    /// Where it stands for merging, as GitHub computed it (`Unknown`: not computed yet).
    pub merge_state: MergeStateStatus,
}

/// The newest status of one context on a head, as the dashboard's listing reads it
/// (`StatusContext`: `state`, `description`, `createdAt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadStatus {
    pub state: StatusState,
    pub description: String,
    /// When it was posted, in seconds since the Unix epoch.
    pub created_at: u64,
}

/// A commit status's state, as GitHub's GraphQL `StatusState` names it
/// (<https://docs.github.com/graphql/reference/enums#statusstate>).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusState {
    Success,
    Pending,
    Failure,
    Error,
    /// "Status is expected": none posted yet for a required context.
    Expected,
    /// A value GitHub added after cellbridge was written: never a pass.
    Other(String),
}

impl StatusState {
    pub fn parse(state: &str) -> Self {
        match state {
            "SUCCESS" => StatusState::Success,
            "PENDING" => StatusState::Pending,
            "FAILURE" => StatusState::Failure,
            "ERROR" => StatusState::Error,
            "EXPECTED" => StatusState::Expected,
            other => StatusState::Other(other.to_owned()),
        }
    }
}

/// The base branch as it was when read.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub base_branch: String,
    /// The commit, as GitHub's archive names it.
    pub base_sha: String,
    /// The root tree id once one of GitHub's answers gave it (a cell's reading, the same for
    /// every cell of this base); unset: GitHub is asked for the commit's tree when a tree is
    /// built on the base. Never computed from the archive, which can lack what the tree has
    /// (`export-ignore`, submodules).
    pub base_tree: std::sync::OnceLock<String>,
    /// What was kept: the shared part and [`Keep::cells`]; other cells were read past.
    pub fleet: MemFleet,
    pub keep: Keep,
}

/// What publishing did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Published {
    /// A new pull request.
    Opened { number: u64, url: String, commit: String },
    /// The open pull request now holds the plan.
    Updated { number: u64, url: String, commit: String },
    /// The open pull request already holds exactly this plan: nothing was written.
    Unchanged { number: u64, url: String },
    /// The base branch holds the plan: the stale pull request was closed, its branch deleted.
    Closed { number: u64, url: String },
    /// The base branch holds the plan and nothing is open: nothing to do.
    InSync,
    /// A person closed the pull request that proposed these very values: it stays closed.
    Declined { number: u64, url: String },
    /// The base cannot be merged into the pull request's branch (a person and the base changed
    /// the same file): the branch is left as it is, its status and one comment say so.
    Conflicted { number: u64, url: String },
    /// The open pull request holds another state's values for this cell (another key, another
    /// lineage): two states claim one cell.
    Claimed {
        number: u64,
        url: String,
        other_key: String,
    },
    /// A newer serial of this state is already proposed or merged: this event is old news.
    Stale {
        proposed_serial: u64,
        number: Option<u64>,
        url: Option<String>,
    },
}
