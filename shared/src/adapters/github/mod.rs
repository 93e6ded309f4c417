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
//! octocrab client and its credentials from Secrets Manager, read again on a 401), `app` (a
//! GitHub App's JWT and the installation token cellbridge mints, narrowed to the fleet
//! repository and its permissions), `transport` (one request with retries, its
//! `X-GitHub-Api-Version` chosen by the API URL), `answers` (GitHub's refusals classified, once, for this adapter and
//! the double alike), `api` (the typed calls, one per documented operation of [`operations`],
//! implementing [`crate::ports::github`]'s slices over REST and GraphQL), `archive` (the base
//! branch as one archive). What is done with them is [`crate::rules`]'.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::OnceCell;

use crate::pure::redact::Secret;

pub(crate) mod answers;
pub(crate) mod api;
pub(crate) mod app;
pub(crate) mod archive;
pub mod config;
pub mod operations;
pub mod pacing;
pub(crate) mod permissions;
pub(crate) mod transport;

pub use archive::{Archive, ArchiveError, read_archive, read_archive_from};
pub use config::{DEFAULT_GITHUB_API_URL, GithubConfig};

/// How cellbridge authenticates: a GitHub App installation (preferred) or a token.
#[derive(Debug, Clone)]
pub enum Credentials {
    Token(Secret<String>),
    App {
        /// Who signs the App's JWT (its `iss` claim).
        issuer: Issuer,
        installation_id: u64,
        private_key: Secret<String>,
    },
}

/// The `iss` claim of a GitHub App's JWT: "The client ID or application ID of your GitHub App
/// ... Use of the client ID is recommended" ("Generating a JSON Web Token (JWT) for a GitHub
/// App", <https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app>).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issuer {
    /// The App's client ID (`Iv23li...`), sent as a string.
    ClientId(String),
    /// The App's numeric ID, sent as a number.
    AppId(u64),
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
    /// When the token GitHub answers with expires (its `GitHub-Authentication-Token-Expiration`
    /// header, token mode), as last seen.
    token_expiry: std::sync::Mutex<Option<std::time::SystemTime>>,
    /// This process's share of GitHub's limits on content-creating requests.
    pacer: pacing::Pacer,
    /// How many bytes of the fleet repo one read may keep.
    fleet_memory: u64,
    /// Whether a branch requires signed commits, as last asked: (branch, answer, when).
    signatures: std::sync::Mutex<Option<(String, bool, std::time::Instant)>>,
    /// This GitHub refused `Ref.rules` (a GitHub Enterprise Server older than the field): the
    /// cell's reading is sent without it from then on, for the process.
    reading_without_rules: std::sync::atomic::AtomicBool,
}
