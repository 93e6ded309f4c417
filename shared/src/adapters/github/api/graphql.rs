//! GraphQL over the transport: one operation, its retries and pacing, and GitHub's errors.

use std::time::Instant;

use http::Method;
use serde_json::{Value, json};

use crate::adapters::github::answers::{self, GraphqlError, Retry};
use crate::adapters::github::operations::GraphqlOperation;
use crate::adapters::github::transport::Target;
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

/// A GraphQL answer: GitHub answers 200 with `data` and, when something was refused, `errors`
/// ("Forming calls with GraphQL"; a refused mutation leaves its field `null`).
pub(super) struct Graphql {
    pub(super) data: Value,
    pub(super) errors: Vec<GraphqlError>,
}

impl GithubFleet {
    /// One GraphQL operation with `variables`, through the transport (its retries, and its
    /// pacing for a mutation). An HTTP refusal is an error; GraphQL's own refusals are in the
    /// answer, except its rate limit, which is retryable.
    pub(super) async fn graphql(
        &self,
        what: &str,
        op: &GraphqlOperation,
        variables: Value,
        deadline: Instant,
    ) -> Result<Graphql> {
        self.graphql_document(what, op, op.document, variables, deadline).await
    }

    /// [`graphql`](Self::graphql) with `document` for the operation's own: the same operation
    /// with as many aliases as a request reads (`newestPulls`).
    pub(super) async fn graphql_document(
        &self,
        what: &str,
        op: &GraphqlOperation,
        document: &str,
        variables: Value,
        deadline: Instant,
    ) -> Result<Graphql> {
        self.graphql_sent(what, op, document, variables, deadline, false).await
    }

    /// [`graphql_document`](Self::graphql_document) of a page the caller asks again smaller
    /// when GitHub gives up on it: a timeout fails at once (`Transient`, saying
    /// [`GRAPHQL_TIMEOUT`](crate::adapters::github::transport::GRAPHQL_TIMEOUT)), not asked
    /// again as it was.
    pub(super) async fn graphql_page(
        &self,
        what: &str,
        op: &GraphqlOperation,
        document: &str,
        variables: Value,
        deadline: Instant,
    ) -> Result<Graphql> {
        self.graphql_sent(what, op, document, variables, deadline, true).await
    }

    /// [`graphql_once`](Self::graphql_once), sent again while GitHub answers an error of a
    /// kind cellbridge does not know, at most [`answers::UNKNOWN_RETRIES`] times: a shape
    /// GitHub added may be a passing failure; the same answer after that is final
    /// ([`GraphqlError::as_error_of`]). Every request is compare-and-swap or idempotent (a
    /// mutation names the head it acts on), so sending one again changes nothing twice.
    async fn graphql_sent(
        &self,
        what: &str,
        op: &GraphqlOperation,
        document: &str,
        variables: Value,
        deadline: Instant,
        paged: bool,
    ) -> Result<Graphql> {
        let mut tries = 0;
        loop {
            let answer = self
                .graphql_once(what, op, document, variables.clone(), deadline, paged)
                .await?;
            let unknown = answer.errors.iter().any(|e| e.retry() == Retry::Unknown);
            if !unknown || tries >= answers::UNKNOWN_RETRIES {
                return Ok(answer);
            }
            tries += 1;
            tracing::warn!(request = %what, operation = op.name, error = %answer.errors[0].message, tries, "GitHub answered an error of an unknown kind: asking again");
        }
    }

    async fn graphql_once(
        &self,
        what: &str,
        op: &GraphqlOperation,
        document: &str,
        variables: Value,
        deadline: Instant,
        paged: bool,
    ) -> Result<Graphql> {
        let mut r = self
            .send_to(
                what,
                Method::POST,
                "/graphql",
                Some(&json!({"query": document, "operationName": op.name, "variables": variables})),
                None,
                deadline,
                Target::Graphql {
                    mutation: op.mutation,
                    paged,
                },
            )
            .await?;
        r.permission = op.permission;
        if !r.status.is_success() {
            return Err(r.api_error(what));
        }
        let v = r.json(what)?;
        let errors: Vec<GraphqlError> = v["errors"]
            .as_array()
            .map(|es| es.iter().map(GraphqlError::of).collect())
            .unwrap_or_default();
        // A spent primary rate limit is still answered 200 ("Rate limits and query limits for the
        // GraphQL API": "the response status will still be 200"), its reason in `errors`: typed
        // `RATE_LIMITED` (renovatebot/renovate#21861) or, in answers reported since,
        // `RATE_LIMIT` with `code: graphql_rate_limit` (yanyongyu/githubkit#271). Try later.
        if let Some(e) = errors
            .iter()
            .find(|e| matches!(e.kind.as_str(), "RATE_LIMITED" | "RATE_LIMIT"))
        {
            return Err(GithubError::Transient {
                what: what.to_owned(),
                detail: e.message.clone(),
            });
        }
        Ok(Graphql {
            data: v["data"].clone(),
            errors,
        })
    }
}
