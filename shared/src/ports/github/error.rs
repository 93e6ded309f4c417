//! GitHub's refusals, classified once: every port method answers with a [`GithubError`] whose
//! [`Class`] says whether a retry can help.

use crate::adapters::github::ArchiveError;
use crate::shell::error::{Class, Classify};

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
    /// A pull request's merge state could not be read (an error inside the answer, a field
    /// refused, a `null` or a value cellbridge does not know where one decides), classed as its
    /// cause; `pull` is what the answer still told of the pull request itself, when it did.
    #[error("{source}")]
    Unreadable {
        #[source]
        source: Box<GithubError>,
        pull: Option<super::PullNode>,
    },
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
    /// The base branch requires signed commits and these credentials (a token) can have GitHub
    /// sign only what `createCommitOnBranch` writes, which has no file mode: a file the cell
    /// needs as an executable or a symlink cannot be written so. Refused before any write.
    #[error(
        "cell {cell}: {path} must be written as {kind} (mode {mode}), but {base} requires signed commits and a token's commits are signed only through GraphQL createCommitOnBranch, which writes every file as a regular one (100644): run cellbridge as a GitHub App, whose commits GitHub signs with their modes, or exempt cellbridge from the rule"
    )]
    Unsignable {
        cell: String,
        path: String,
        kind: &'static str,
        mode: &'static str,
        base: String,
    },
    /// The App installation cannot see the fleet repository: GitHub refused a token for it.
    #[error(
        "GitHub App installation {installation} cannot reach repository {repository}: add it to the installation's repositories (the App's installation settings, Repository access) or install the App on its owner; GitHub said: {message}"
    )]
    NotInstalled {
        installation: u64,
        repository: String,
        message: String,
    },
}

impl Classify for GithubError {
    fn class(&self) -> Class {
        match self {
            GithubError::Unreadable { source, .. } => source.class(),
            GithubError::Transient { .. } | GithubError::Conflict { .. } => Class::Retryable,
            GithubError::Api { .. }
            | GithubError::Access { .. }
            | GithubError::Refused { .. }
            | GithubError::Protocol { .. }
            | GithubError::Foreign { .. }
            | GithubError::Setup { .. }
            | GithubError::TooLarge { .. }
            | GithubError::MissingPermissions { .. }
            | GithubError::Unsignable { .. }
            | GithubError::NotInstalled { .. } => Class::Final,
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
        if let GithubError::Unreadable { source, .. } = self {
            return source.is_access();
        }
        matches!(
            self,
            GithubError::Access { .. }
                | GithubError::Setup { .. }
                | GithubError::MissingPermissions { .. }
                | GithubError::NotInstalled { .. }
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
