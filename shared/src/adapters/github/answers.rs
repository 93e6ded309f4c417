//! What GitHub's refusals mean for cellbridge: a lost race to redo, an answer about the pull
//! request, or a failure. One reading, which the REST adapter (`api`) applies to GitHub's
//! answers and the in-memory double (`memory`) to the answers it gives as GitHub does, so that
//! the two cannot read the same answer two ways.

use crate::ports::github::{AutoMergeAnswer, MergeAnswer, QueueAnswer};
use crate::ports::github::{GithubError, Result};

/// "Create a pull request" refused because another run or a person was there first: 422 for a
/// pull request already open for the head, a head that is gone ("head" "invalid" in `errors`),
/// or one already merged ("No commits between"). `None`: another answer.
pub(crate) fn lost_opening(what: &str, status: u16, message: &str) -> Option<GithubError> {
    let lost = status == 422
        && (message.contains("already exists")
            || message.contains("head invalid")
            || message.contains("No commits between"));
    lost.then(|| GithubError::Conflict {
        what: what.to_owned(),
        detail: message.to_owned(),
    })
}

/// "Merge a branch" refused: 404, the branch vanished, or 422 or 403 naming a rule, the branch
/// is protected: someone else's doing, redo, or a person must change the rule. `None`: another
/// answer.
pub(crate) fn merge_into_refused(what: &str, status: u16, message: &str) -> Option<GithubError> {
    match status {
        404 => Some(GithubError::Conflict {
            what: what.to_owned(),
            detail: message.to_owned(),
        }),
        422 | 403 if message.contains("rule") || message.contains("protected") => Some(GithubError::Refused {
            what: what.to_owned(),
            rule: message.to_owned(),
        }),
        _ => None,
    }
}

/// "Update a reference" refused with 422 or 409 (both documented) while the branch is `moved`
/// or not: moved, a lost race to redo; a message naming a rule or a protection ("Repository rule
/// violations found", "Protected branch update failed"), a person must change the rule; anything
/// else is GitHub failing, final and never a refused state.
pub(crate) fn ref_update_refused(what: &str, status: u16, message: &str, moved: bool) -> GithubError {
    let m = message.to_ascii_lowercase();
    if moved {
        GithubError::Conflict {
            what: what.to_owned(),
            detail: message.to_owned(),
        }
    } else if m.contains("rule") || m.contains("protected") {
        GithubError::Refused {
            what: what.to_owned(),
            rule: message.to_owned(),
        }
    } else {
        GithubError::Api {
            what: what.to_owned(),
            status,
            message: message.to_owned(),
        }
    }
}

/// "Merge a pull request" refused: 405, "Method Not Allowed if merge cannot be performed" (a
/// protection not met, a conflict, a method the repository does not allow), is an answer; 409,
/// "Conflict if sha was provided and pull request head did not match", a lost race. `None`:
/// another answer.
pub(crate) fn merge_refused(what: &str, status: u16, message: &str) -> Option<Result<MergeAnswer>> {
    match status {
        405 => Some(Ok(MergeAnswer::NotMergeable(message.to_owned()))),
        409 => Some(Err(GithubError::Conflict {
            what: what.to_owned(),
            detail: message.to_owned(),
        })),
        _ => None,
    }
}

/// One of `errors`: its `type` (GitHub's extension: `NOT_FOUND`, `FORBIDDEN`, `UNPROCESSABLE`,
/// `RATE_LIMITED`...), `message`, `extensions.code` (the GraphQL server's own refusals of a
/// document: `undefinedField` for a field this GitHub does not have, as on a GitHub Enterprise
/// Server older than the field) and `path` (the field refused, dotted).
#[derive(Debug, Default)]
pub(crate) struct GraphqlError {
    pub(crate) kind: String,
    pub(crate) message: String,
    pub(crate) code: String,
    pub(crate) path: String,
}

impl GraphqlError {
    /// One entry of an answer's `errors`.
    pub(crate) fn of(e: &serde_json::Value) -> Self {
        let path = e["path"]
            .as_array()
            .map(|p| {
                p.iter()
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(".")
            })
            .unwrap_or_default();
        GraphqlError {
            kind: e["type"].as_str().unwrap_or_default().to_owned(),
            message: e["message"].as_str().unwrap_or("GraphQL error").to_owned(),
            code: e["extensions"]["code"].as_str().unwrap_or_default().to_owned(),
            path,
        }
    }

    pub(super) fn as_error(&self, what: &str) -> GithubError {
        self.as_error_of(what, None)
    }

    /// What asking again can do about this error: by its `type` (GitHub's), and for an
    /// untyped one by `extensions.code` (the GraphQL server's refusal of the document), else by
    /// GitHub's own words for its failures.
    pub(crate) fn retry(&self) -> Retry {
        match self.kind.as_str() {
            // "NOT_FOUND", "FORBIDDEN", "UNPROCESSABLE" (GitHub's refusals of the request as
            // asked) and the limits it enforces on a document before it runs
            // ("MAX_NODE_LIMIT_EXCEEDED", "EXCESSIVE_PAGINATION",
            // "MISSING_PAGINATION_BOUNDARIES"; "Rate limits and query limits for the GraphQL API").
            "NOT_FOUND"
            | "FORBIDDEN"
            | "UNPROCESSABLE"
            | "MAX_NODE_LIMIT_EXCEEDED"
            | "EXCESSIVE_PAGINATION"
            | "MISSING_PAGINATION_BOUNDARIES" => Retry::Never,
            "RATE_LIMITED" | "RATE_LIMIT" => Retry::Later,
            "" if SCHEMA_CODES.contains(&self.code.as_str()) => Retry::Never,
            "" if self.code.is_empty() && gave_up(&self.message) => Retry::Later,
            _ => Retry::Unknown,
        }
    }

    /// [`as_error`](Self::as_error) of an operation needing `permission`: a field refused
    /// (`FORBIDDEN` inside an answer of HTTP 200, not a 403) names the field and the permission;
    /// a field this GitHub lacks names the field. Both final: asking again changes nothing.
    pub(crate) fn as_error_of(&self, what: &str, permission: Option<&str>) -> GithubError {
        let at = if self.path.is_empty() {
            String::new()
        } else {
            format!(" (field {})", self.path)
        };
        match self.retry() {
            Retry::Later => {
                return GithubError::Transient {
                    what: what.to_owned(),
                    detail: format!("GitHub failed inside an answer of HTTP 200: {}{at}", self.message),
                };
            }
            Retry::Unknown => {
                // Asked again UNKNOWN_RETRIES times by `graphql.rs` first: what is left is final.
                return GithubError::Api {
                    what: what.to_owned(),
                    status: 200,
                    message: format!(
                        "GitHub answered an error of a kind cellbridge does not know, {} times (type {:?}, code {:?}): {}{at}",
                        UNKNOWN_RETRIES + 1,
                        self.kind,
                        self.code,
                        self.message
                    ),
                };
            }
            Retry::Never => {}
        }
        if self.code == "undefinedField" {
            return GithubError::Api {
                what: what.to_owned(),
                status: 422,
                message: format!(
                    "this GitHub's GraphQL lacks a field cellbridge reads (undefinedField: an older GitHub Enterprise Server?): {}{at}",
                    self.message
                ),
            };
        }
        if let (Some(p), "FORBIDDEN") = (permission, self.kind.as_str()) {
            // GitHub answered 200 and refused the field inside the answer.
            return GithubError::Access {
                what: what.to_owned(),
                status: 200,
                message: format!("a field refused inside the answer (FORBIDDEN): {}{at}", self.message),
                permission: Some(p.to_owned()),
            };
        }
        let status = match self.kind.as_str() {
            "NOT_FOUND" => 404,
            "FORBIDDEN" => 403,
            _ => 422,
        };
        GithubError::from_status(what, status, format!("{}{at}", self.message), None)
    }
}

/// What asking again can do about one of `errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// The document or the request as asked is refused: the same answer again.
    Never,
    /// GitHub failed or ran out of time (or of rate limit): a later delivery may pass.
    Later,
    /// A shape cellbridge does not know: asked again [`UNKNOWN_RETRIES`] times, then final.
    Unknown,
}

/// How many times a GraphQL request answered with an error of a kind cellbridge does not know is
/// sent again before the error is final.
pub(crate) const UNKNOWN_RETRIES: usize = 2;

/// The GraphQL server's codes (`extensions.code`, untyped errors) for a document it cannot
/// run against its schema, as graphql-ruby names its static validation errors
/// (`undefinedField` for a field this GitHub lacks, as an older GitHub Enterprise Server does;
/// `undefinedType`, `argumentNotAccepted`, `missingRequiredArguments`...): permanent.
const SCHEMA_CODES: [&str; 9] = [
    "undefinedField",
    "undefinedType",
    "argumentNotAccepted",
    "missingRequiredArguments",
    "argumentLiteralsIncompatible",
    "variableMismatch",
    "variableNotUsed",
    "variableNotDefined",
    "selectionMismatch",
];

/// GitHub's words when it failed running a document, sent untyped in `errors`, with HTTP 200
/// (<https://github.com/int128/wait-for-workflows-action/pull/104>) or with a 502 or 504 on a
/// timeout: "Something went wrong while executing your query. This may be the result of a
/// timeout, or it could be a GitHub bug. Please include `4A9B:716A:296B9:53EA6:64DCF39F` when
/// reporting this issue." (<https://github.com/liatrio/liatrio-otel-collector/issues/71>), or
/// naming a timeout.
fn gave_up(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.starts_with("something went wrong while executing your query") || m.contains("timeout") || m.contains("timed out")
}

/// GitHub's refusal `e` of `enablePullRequestAutoMerge`: an answer about the pull request, a
/// head that moved (a lost race), or, for a pull request GitHub cannot find, a failure.
pub(crate) fn enable_answer(what: &str, e: &GraphqlError) -> Result<AutoMergeAnswer> {
    Ok(match enable_refusal(&e.message) {
        Refusal::MergeableNow => AutoMergeAnswer::MergeableNow(e.message.clone()),
        Refusal::NotAllowed => AutoMergeAnswer::NotAllowed(e.message.clone()),
        Refusal::HeadMoved => {
            return Err(GithubError::Conflict {
                what: what.to_owned(),
                detail: e.message.clone(),
            });
        }
        Refusal::Other if e.kind == "NOT_FOUND" => return Err(e.as_error(what)),
        Refusal::Other => AutoMergeAnswer::Refused(e.message.clone()),
    })
}

/// What an `enablePullRequestAutoMerge` refusal means, by GitHub's message (the API documents
/// none of them; the messages are GitHub's as clients quote them, see the fakes).
enum Refusal {
    /// "Pull request is in clean status" (also "unstable" and "has_hooks"): nothing to wait for.
    MergeableNow,
    /// "Auto merge is not allowed for this repository".
    NotAllowed,
    /// The head is not `expectedHeadOid`.
    HeadMoved,
    Other,
}

fn enable_refusal(message: &str) -> Refusal {
    let m = message.to_ascii_lowercase();
    if [
        "clean status",
        "unstable status",
        "has_hooks status",
        "has hooks status",
    ]
    .iter()
    .any(|s| m.contains(s))
    {
        Refusal::MergeableNow
    } else if m.contains("auto merge is not allowed") || m.contains("auto-merge is not allowed") {
        Refusal::NotAllowed
    } else if m.contains("expected head") || m.contains("expectedheadoid") || m.contains("head oid") {
        Refusal::HeadMoved
    } else {
        Refusal::Other
    }
}

/// GitHub's refusal `e` of putting a pull request in a merge queue (`enqueuePullRequest`, or
/// `enablePullRequestAutoMerge` where a queue is required): already in it is what was asked
/// ("Pull request is already in the queue", quoted in
/// <https://github.com/ClickHouse/ClickHouse/pull/109183>); a head that moved is a lost race; a
/// pull request GitHub cannot find a failure; auto-merge refused for a pull request that can
/// merge now ("clean status") says it can be added now; anything else (a requirement not met: "Pull
/// request Waiting on code owner review from ...", <https://github.com/github/app/issues/93>; a
/// merge method: "The merge strategy for main is set by the merge queue") an answer.
pub(crate) fn queue_answer(what: &str, e: &GraphqlError) -> Result<QueueAnswer> {
    if e.message.to_ascii_lowercase().contains("already in the queue") {
        return Ok(QueueAnswer::Queued);
    }
    Ok(match enable_refusal(&e.message) {
        Refusal::NotAllowed => QueueAnswer::NotAllowed(e.message.clone()),
        Refusal::HeadMoved => {
            return Err(GithubError::Conflict {
                what: what.to_owned(),
                detail: e.message.clone(),
            });
        }
        Refusal::Other if e.kind == "NOT_FOUND" => return Err(e.as_error(what)),
        Refusal::MergeableNow => QueueAnswer::MergeableNow(e.message.clone()),
        Refusal::Other => QueueAnswer::Refused(e.message.clone()),
    })
}

#[cfg(test)]
mod graphql_error_tests {
    use super::*;
    use crate::shell::error::{Class, Classify};

    #[test]
    fn a_field_refused_or_missing_inside_the_answer_is_final_and_named() {
        let refused = GraphqlError::of(&serde_json::json!({
            "type": "FORBIDDEN", "message": "Resource not accessible by integration",
            "path": ["repository", "pullRequests", "nodes", 0, "commits", "nodes", 0, "commit", "status"]
        }))
        .as_error_of("listing the open pull requests", Some("statuses=read"));
        let text = refused.to_string();
        assert_eq!(refused.class(), Class::Final);
        assert!(
            text.contains("HTTP 200") && text.contains("nodes.0.commit.status") && text.contains("statuses=read"),
            "{text}"
        );
        let missing = GraphqlError::of(&serde_json::json!({
            "message": "Field 'isInMergeQueue' doesn't exist on type 'PullRequest'",
            "extensions": {"code": "undefinedField", "typeName": "PullRequest", "fieldName": "isInMergeQueue"}
        }))
        .as_error_of("listing the open pull requests", Some("pull_requests=read"));
        let text = missing.to_string();
        assert_eq!(missing.class(), Class::Final);
        assert!(
            text.contains("undefinedField") && text.contains("isInMergeQueue"),
            "{text}"
        );
    }
}
