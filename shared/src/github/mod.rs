//! The fleet repo on GitHub: read the base branch as one archive, publish a plan as one commit
//! and one pull request per cell, through octocrab.
//!
//! Request budget (what `sync` costs, counted by [`RequestCounts`]): the base branch archive
//! (one API request answered with a redirect, plus the download), the cell's open pull request
//! (one), and for a change the tree, the commit, the ref, the pull request (plus its labels
//! when new) and the commit status; a tree built on the base branch (a new cell) first reads the
//! base commit's tree id from GitHub. Whatever the number of files there is no per-file request,
//! and the archive is read as it streams in, keeping only the cells being planned.
//!
//! Retries are ours, not octocrab's: octocrab would sleep for whatever `Retry-After` says,
//! however long, while a Lambda has a deadline. Every request here retries 5xx, transport
//! errors and rate limits with bounded exponential backoff, honours `Retry-After`, and gives up
//! with a retryable error as soon as waiting would cross the deadline.
//!
//! The module's files, in the order a sync meets them: [`config`] (which repository, the
//! octocrab client and its credentials from Secrets Manager, read again on a 401), `transport`
//! (one request with retries), `api` (the typed calls, one per documented operation of
//! [`operations`]), `archive` (the base branch as one archive), `port` (GitHub's primitives,
//! [`GithubRepo`], which `api` implements over REST and `memory` in memory), [`proposal`] (what
//! the cell's branch holds and which kind of proposal takes it: [`proposal::converge`]), then
//! each kind's writer: [`pull_request`] (Terraform's values) and [`decommission`] (a destroyed
//! cell's removal), both under the one branch rule of [`branch`].

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::OnceCell;

use crate::error::{Class, Classify};
use crate::fleet::{Keep, MemFleet};
use crate::redact::Secret;

mod answers;
mod api;
mod archive;
pub mod branch;
// auto-merge
pub mod auto_merge;
pub mod config;
pub mod dashboard;
pub mod decommission;
#[cfg(feature = "test-support")]
pub mod memory;
pub mod operations;
pub mod pacing;
mod permissions;
mod port;
pub mod proposal;
pub mod pull_request;
pub mod report;
mod transport;

pub use archive::{Archive, ArchiveError, read_archive, read_archive_from};
pub use config::{DEFAULT_GITHUB_API_URL, GithubConfig};
pub use port::{
    BranchCommit, ChangedFile, CloseReason, Comparison, GitData, GithubRepo, Issue, Issues, Merge, Merges, OpenPull,
    PullRequest, PullState, Pulls, Relation, TreeFiles,
};
// auto-merge
pub use port::{
    Actor, AutoMergeAnswer, AutoMergeRequest, CheckState, MergeAnswer, MergeMethod, MergeState, MergeStateStatus,
    RequiredCheck,
};
pub use proposal::{Proposal, Proposed};
pub use pull_request::{Converged, plan_digest};

#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    /// GitHub kept failing (5xx, rate limit, transport) or the deadline came first: try later.
    #[error("GitHub {what}: {detail} (retryable)")]
    Transient { what: String, detail: String },
    /// Someone else moved the cell's branch or opened its pull request meanwhile: redo the sync
    /// on a fresh snapshot.
    #[error("GitHub {what}: lost a race ({detail}); redo on the fresh base")]
    Conflict { what: String, detail: String },
    /// GitHub refused the request for good (validation, a state it will not change).
    #[error("GitHub {what}: HTTP {status}: {message}")]
    Api { what: String, status: u16, message: String },
    /// GitHub access itself failed: the credentials were refused (401, after the secret was
    /// read again), lack a permission (403: `permission` names the one GitHub's answer or
    /// documentation gives for the call), or cannot see the repository (404: the App is not
    /// installed on it, or it does not exist). The people who run cellbridge must fix it; a
    /// cell's team cannot, so it is a metric and an alarm, never a report on GitHub.
    #[error("GitHub {what}: HTTP {status}: {message}{}", permission_hint(permission.as_deref()))]
    Access {
        what: String,
        status: u16,
        message: String,
        permission: Option<String>,
    },
    /// A repository rule (a ruleset, signed commits required...) refuses the write: a person
    /// must change the rule or exempt cellbridge.
    #[error("GitHub {what}: refused by a repository rule: {rule}")]
    Refused { what: String, rule: String },
    #[error("GitHub {what}: unexpected answer: {detail}")]
    Protocol { what: String, detail: String },
    /// The cell's branch holds someone else's commit and no pull request shows it: cellbridge
    /// neither builds on it nor deletes it, and a person must choose.
    #[error(
        "branch {branch} holds {commit}, a commit cellbridge did not write, and no pull request is open for it: cellbridge will not build on it, reset it or delete it. Open a pull request from {branch} to keep that work (or reopen the one that was closed), or delete the branch; the next state event then proposes again"
    )]
    Foreign { branch: String, commit: String },
    /// The fleet repo is too large for what this function may keep in memory.
    #[error("GitHub {what}: {source}")]
    TooLarge {
        what: String,
        #[source]
        source: ArchiveError,
    },
    #[error("GitHub client for {api_url}: {reason}")]
    Setup { api_url: String, reason: String },
    /// The App installation's permissions, read before the first write, lack what cellbridge
    /// writes with.
    #[error(
        "GitHub App installation {installation} lacks the repository permission{} {}: grant it in the App's settings (Permissions & events) and accept the change on the installation; it grants {granted}",
        if missing.len() > 1 { "s" } else { "" },
        missing.join(", ")
    )]
    MissingPermissions {
        installation: u64,
        missing: Vec<String>,
        granted: String,
    },
}

impl Classify for GithubError {
    fn class(&self) -> Class {
        match self {
            GithubError::Transient { .. } | GithubError::Conflict { .. } => Class::Retryable,
            GithubError::Api { .. }
            | GithubError::Access { .. }
            | GithubError::Refused { .. }
            | GithubError::Protocol { .. }
            | GithubError::Foreign { .. }
            | GithubError::Setup { .. }
            | GithubError::TooLarge { .. }
            | GithubError::MissingPermissions { .. } => Class::Final,
        }
    }
}

impl GithubError {
    /// A final answer of GitHub as an error. 401, 403 and 404 are GitHub refusing cellbridge's
    /// access ("Troubleshooting the REST API",
    /// <https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api>): a 403
    /// names `permission` (what GitHub's `X-Accepted-GitHub-Permissions` header or the
    /// operation's documentation gives); a 404 is also GitHub's answer for a repository the
    /// credentials cannot see.
    pub fn from_status(what: &str, status: u16, message: String, permission: Option<String>) -> Self {
        let what = what.to_owned();
        match status {
            401 => GithubError::Access {
                what,
                status,
                message: format!(
                    "{message} (the credentials were refused, read again from the secret: revoked, expired, or the App's key replaced)"
                ),
                permission: None,
            },
            403 => GithubError::Access {
                what,
                status,
                message,
                permission,
            },
            404 => GithubError::Access {
                what,
                status,
                message: format!(
                    "{message} (no such repository or object, or the credentials cannot see it: is the GitHub App installed on the repository?)"
                ),
                permission: None,
            },
            _ => GithubError::Api { what, status, message },
        }
    }

    /// A failure of GitHub access itself (credentials, permissions, installation): nothing a
    /// report on GitHub could reach anyone with, since GitHub refuses cellbridge.
    pub fn is_access(&self) -> bool {
        matches!(
            self,
            GithubError::Access { .. } | GithubError::Setup { .. } | GithubError::MissingPermissions { .. }
        )
    }
}

fn permission_hint(permission: Option<&str>) -> String {
    match permission {
        Some(p) => format!(
            " (the credentials lack the repository permission {p}: grant it to the GitHub App, and accept it on the installation, or to the token)"
        ),
        None => String::new(),
    }
}

pub type Result<T, E = GithubError> = std::result::Result<T, E>;

/// How cellbridge authenticates: a GitHub App installation (preferred) or a token.
#[derive(Debug, Clone)]
pub enum Credentials {
    Token(Secret<String>),
    App {
        app_id: u64,
        installation_id: u64,
        private_key: Secret<String>,
    },
}

/// Requests sent so far by one client, for the benchmark and the request-budget tests.
#[derive(Debug, Default)]
pub struct RequestCounts {
    /// Requests to the REST API (each retry counts).
    pub api: AtomicUsize,
    /// Archive downloads from the redirect target (codeload on github.com).
    pub downloads: AtomicUsize,
}

impl RequestCounts {
    pub fn total(&self) -> usize {
        self.api.load(Ordering::Relaxed) + self.downloads.load(Ordering::Relaxed)
    }
}

/// The base branch as it was when read.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub base_branch: String,
    /// The commit, as GitHub's archive names it.
    pub base_sha: String,
    /// The root tree id when one of GitHub's answers gave it; `None`: GitHub is asked for the
    /// commit's tree when a tree is built on the base. Never computed from the archive, which
    /// can lack what the tree has (`export-ignore`, submodules).
    pub base_tree: Option<String>,
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

/// One fleet repo on GitHub, through one octocrab client.
pub struct GithubFleet {
    client: config::Client,
    api_url: String,
    owner: String,
    repo: String,
    base_branch: OnceCell<String>,
    /// The repository's GraphQL node id.
    repository_id: OnceCell<String>,
    counts: RequestCounts,
    /// The App installation whose permissions were found sufficient (checked once).
    access_checked: std::sync::Mutex<Option<u64>>,
    /// This process's share of GitHub's limits on content-creating requests.
    pacer: pacing::Pacer,
    /// How many bytes of the fleet repo one read may keep.
    fleet_memory: u64,
}
