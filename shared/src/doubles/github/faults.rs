//! What a test makes happen around cellbridge's requests, and what it reads back: faults as the
//! transport reports them after its retries, another writer racing a request, the App
//! installation's permissions, a seeded schedule, and the journal of every call.

use super::{GithubError, MemGithub, Result, Store, api};
use crate::adapters::github::answers::{GraphqlError, UNKNOWN_RETRIES};
use crate::adapters::github::operations::{self as ops, Operation};
use crate::adapters::github::permissions;
use crate::adapters::github::transport::GRAPHQL_TIMEOUT;
use crate::ports::github::MergeMethod;

/// How an injected fault fails the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 5xx or rate limits past the retries, or no answer before the deadline.
    Transient,
    /// A final answer with this HTTP status (401, 403, 404, 422...).
    Status(u16),
    /// GitHub gave up on a GraphQL query that took too long (a 502 saying so).
    TimedOut,
    /// GraphQL answered 200 and refused the field at this path inside `errors` (`FORBIDDEN`: the
    /// credentials lack the operation's permission for it; at a node of the rollup's contexts,
    /// <https://github.com/philips-software/pull-request-report-action/issues/557>, or at the
    /// rollup, <https://github.com/windmill-labs/windmill-sync-example/pull/72>).
    FieldRefused(&'static str),
    /// GraphQL answered 200 with an untyped error of GitHub's own failure: "Something went
    /// wrong while executing your query" (<https://github.com/int128/wait-for-workflows-action/pull/104>).
    Untyped,
    /// GraphQL answered 200 with an error whose `type` cellbridge does not know
    /// (`INSUFFICIENT_SCOPES`, which GitHub sends a token lacking an OAuth scope:
    /// <https://github.com/github/docs/issues/19712>): each call answered so counts as one of the
    /// adapter's bounded sends of it.
    UnknownType,
    /// The merge state answered with a value cellbridge cannot read (a `null` where a value
    /// decides, an enum value it does not know): the adapter's reading's error, with this detail.
    Unreadable(&'static str),
    /// The request is carried out and its answer lost: the transport sends it again, and the
    /// second answer is the one returned ("Merge a pull request" only).
    AnswerLost,
}

pub(super) struct Rule {
    op: &'static str,
    times: usize,
    fault: Fault,
}

pub(super) struct Race {
    op: &'static str,
    branch: String,
    files: Vec<(String, String)>,
    /// A person merges this pull request instead of committing `files`.
    merge: Option<u64>,
}

impl Store {
    /// Records the call, runs a pending race, and answers an injected fault.
    pub(super) fn enter(&mut self, op: &'static Operation) -> Result<()> {
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
                    permissions::grants(granted.get(name).map(String::as_str), level)
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
        if let Some(rule) = self
            .rules
            .iter_mut()
            .find(|r| r.op == op.id && r.times > 0 && r.fault == Fault::UnknownType)
        {
            // The adapter sends it again at most UNKNOWN_RETRIES times; then the error is final.
            let tries = rule.times.min(UNKNOWN_RETRIES + 1);
            rule.times -= tries;
            for _ in 1..tries {
                self.calls.push(op.id);
                self.journal.push(op.id.to_owned());
            }
            if tries > UNKNOWN_RETRIES {
                return Err(GraphqlError {
                    kind: "INSUFFICIENT_SCOPES".into(),
                    message: "Your token has not been granted the required scopes to execute this query.".into(),
                    ..GraphqlError::default()
                }
                .as_error_of(op.id, None));
            }
            // Answered on a later send.
            self.calls.push(op.id);
            self.journal.push(op.id.to_owned());
        }
        if let Some(rule) = self
            .rules
            .iter_mut()
            .find(|r| r.op == op.id && r.times > 0 && !matches!(r.fault, Fault::AnswerLost | Fault::UnknownType))
        {
            rule.times -= 1;
            return Err(match rule.fault {
                Fault::Transient => GithubError::Transient {
                    what: op.id.to_owned(),
                    detail: "injected: 502 after every retry".into(),
                },
                Fault::Status(s) => api(op, s, "injected"),
                Fault::TimedOut => GithubError::Transient {
                    what: op.id.to_owned(),
                    detail: format!("HTTP 502: {GRAPHQL_TIMEOUT}: injected"),
                },
                Fault::FieldRefused(path) => GraphqlError {
                    kind: "FORBIDDEN".into(),
                    message: "Resource not accessible by integration".into(),
                    path: path.to_owned(),
                    ..GraphqlError::default()
                }
                .as_error_of(op.id, Some(op.permission)),
                Fault::Untyped => GraphqlError {
                    message: "Something went wrong while executing your query. Please include `9C8E:4B15:1F4E2A:3E1C7B:64DCF39F` when reporting this issue.".into(),
                    ..GraphqlError::default()
                }
                .as_error_of(op.id, None),
                Fault::Unreadable(detail) => GithubError::Protocol {
                    what: op.id.to_owned(),
                    detail: detail.to_owned(),
                },
                Fault::UnknownType | Fault::AnswerLost => unreachable!("taken above"),
            });
        }
        Ok(())
    }

    /// Whether the next call of `op` is carried out with its answer lost ([`Fault::AnswerLost`]).
    pub(super) fn answer_lost(&mut self, op: &'static Operation) -> bool {
        match self
            .rules
            .iter_mut()
            .find(|r| r.op == op.id && r.times > 0 && r.fault == Fault::AnswerLost)
        {
            Some(rule) => {
                rule.times -= 1;
                true
            }
            None => false,
        }
    }

    /// As the adapter: an App mints its installation token narrowed to cellbridge's permissions
    /// once; GitHub refuses it with 422 when the installation lacks one, and the installation's
    /// permissions are then read to name what is missing. Nothing is written either way.
    /// Whether the merge state reads check runs: not once the installation was found without
    /// `checks: read` (a token's credentials read them).
    pub(super) fn reads_check_runs(&self) -> bool {
        !self.no_checks
    }

    pub(super) fn check_write_access(&mut self) -> Result<()> {
        // Credentials of a token until `grant` makes them an App installation's.
        let Some(granted) = self.permissions.clone() else {
            return Ok(());
        };
        if self.token_minted {
            return Ok(());
        }
        self.enter(&ops::APPS_CREATE_INSTALLATION_ACCESS_TOKEN)?;
        let as_json = serde_json::Value::Object(
            granted
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        );
        let missing = permissions::missing(&as_json);
        if missing.is_empty() {
            if !self.no_checks && !permissions::reads_checks(&as_json) {
                // The token asked for checks=read is refused with 422 ("The permissions requested
                // are not granted to this installation."), the installation's permissions are
                // read, and the token is asked for again without it.
                self.enter(&ops::APPS_GET_INSTALLATION)?;
                self.enter(&ops::APPS_CREATE_INSTALLATION_ACCESS_TOKEN)?;
                self.no_checks = true;
            }
            self.token_minted = true;
            return Ok(());
        }
        self.enter(&ops::APPS_GET_INSTALLATION)?;
        Err(GithubError::MissingPermissions {
            installation: 777,
            missing,
            granted: granted
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

impl MemGithub {
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

    /// The App installation's permissions from now on (`name` → `read`/`write`), as an
    /// administrator edits them: what is not listed is not granted.
    /// The token's expiry GitHub's answers report from now on (`None`: a token without one).
    pub fn set_token_expiry(&self, at: Option<std::time::SystemTime>) {
        self.with(|s| s.token_expiry = at);
    }

    pub fn grant(&self, permissions: &[(&str, &str)]) {
        self.with(|s| {
            s.token_minted = false;
            s.permissions = Some(
                permissions
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
        });
    }

    /// Interleaves concurrent callers: from now on every call first yields to the scheduler a
    /// number of times drawn from `seed`'s sequence, so one seed is one reproducible schedule.
    pub fn jitter(&self, seed: u64) {
        self.with(|s| s.jitter = Some(seed.max(1)));
    }

    pub(super) async fn pause(&self) {
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
            ops::APPS_CREATE_INSTALLATION_ACCESS_TOKEN.id,
            ops::GRAPHQL_MERGE_STATE.id,
            ops::REPOS_GET_BRANCH_RULES.id,
            ops::GRAPHQL_REF_UPDATE_RULE.id,
            ops::GRAPHQL_CELL_READING.id,
            ops::GRAPHQL_LABELLED_ISSUES.id,
            ops::GRAPHQL_BRANCH_PULLS.id,
            ops::GRAPHQL_NEWEST_PULLS.id,
            ops::GRAPHQL_OPEN_CELL_PULLS.id,
        ];
        self.calls().iter().filter(|c| !reads.contains(c)).count()
    }

    pub fn clear_calls(&self) {
        self.with(|s| s.calls.clear());
    }
}
