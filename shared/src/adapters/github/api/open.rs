//! The open pull requests the fleet dashboard shows, through GraphQL (`openCellPulls`): a page
//! of a hundred a request, each with its head's status of one context, whether it is in the
//! merge queue and its merge state.

use std::time::Instant;

use serde_json::{Value, json};

use crate::adapters::github::operations as ops;
use crate::adapters::github::transport::GRAPHQL_TIMEOUT;
use crate::ports::github::{HeadStatus, MergeStateStatus, OpenPull, StatusState};
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

impl GithubFleet {
    pub(super) async fn open_pulls(
        &self,
        head_prefix: &str,
        context: &str,
        deadline: Instant,
    ) -> Result<Vec<OpenPull>> {
        let mut pulls = Vec::new();
        let mut after: Option<String> = None;
        let mut first = ops::OPEN_CELL_PULLS_PER_QUERY;
        let ours = format!("{}/{}", self.owner, self.repo).to_ascii_lowercase();
        loop {
            let what = format!("listing the open pull requests ({first} a page)");
            let variables = json!({"owner": self.owner, "name": self.repo, "context": context, "after": after});
            let document = ops::open_cell_pulls_document(first);
            let answer = match self
                .graphql_page(&what, &ops::GRAPHQL_OPEN_CELL_PULLS, &document, variables, deadline)
                .await
            {
                // GitHub gave up on the page in time: the same page, smaller, may be answered.
                Err(GithubError::Transient { detail, .. })
                    if detail.contains(GRAPHQL_TIMEOUT) && first > ops::OPEN_CELL_PULLS_SMALLEST =>
                {
                    first /= 2;
                    tracing::warn!(request = what, next_page = first, error = %detail, "GitHub timed out; asking a smaller page");
                    continue;
                }
                other => other?,
            };
            // A field refused (the status without `statuses=read`) or missing (an older GitHub
            // Enterprise Server) refuses the read: a row that says "not posted" for a status that
            // was not read would be wrong.
            if let Some(e) = answer.errors.first() {
                return Err(e.as_error_of(&what, Some(ops::GRAPHQL_OPEN_CELL_PULLS.permission)));
            }
            let page = &answer.data["repository"]["pullRequests"];
            let nodes = page["nodes"].as_array().ok_or_else(|| GithubError::Protocol {
                what: what.clone(),
                detail: "no pull requests in the answer".into(),
            })?;
            for pr in nodes {
                let head = pr["headRefName"].as_str().unwrap_or_default();
                // A fork's branch of the same name is not cellbridge's.
                let same_repo = pr["isCrossRepository"] == json!(false)
                    && pr["headRepository"]["nameWithOwner"]
                        .as_str()
                        .is_some_and(|n| n.to_ascii_lowercase() == ours);
                if head.starts_with(head_prefix) && same_repo {
                    pulls.push(open_pull(pr, head, &what)?);
                }
            }
            if page["pageInfo"]["hasNextPage"] != json!(true) {
                return Ok(pulls);
            }
            after = Some(
                page["pageInfo"]["endCursor"]
                    .as_str()
                    .ok_or_else(|| GithubError::Protocol {
                        what: what.clone(),
                        detail: "a next page without endCursor".into(),
                    })?
                    .to_owned(),
            );
        }
    }
}

/// One node of `openCellPulls`. The status is its head's only when the newest commit read is
/// the head (`headRefOid`): a push between the two is read as not posted yet.
fn open_pull(pr: &Value, head: &str, what: &str) -> Result<OpenPull> {
    let protocol = |detail: String| GithubError::Protocol {
        what: what.to_owned(),
        detail,
    };
    let number = pr["number"]
        .as_u64()
        .ok_or_else(|| protocol("pull request without number".into()))?;
    let created = pr["createdAt"].as_str().unwrap_or_default();
    let created_at = epoch_secs(created)
        .ok_or_else(|| protocol(format!("pull request #{number}: createdAt {created:?} is no date")))?;
    let head_sha = pr["headRefOid"].as_str().unwrap_or_default().to_owned();
    let commit = &pr["commits"]["nodes"][0]["commit"];
    // `StatusState`: `SUCCESS` passes; `ERROR`, `FAILURE`, `PENDING`, `EXPECTED` and a value
    // added since do not.
    let status = match Some(&commit["status"]["context"])
        .filter(|_| commit["oid"].as_str() == Some(head_sha.as_str()))
        .and_then(|st| Some((st, st["state"].as_str()?)))
    {
        None => None,
        Some((st, state)) => {
            let posted = st["createdAt"].as_str().unwrap_or_default();
            let created_at = epoch_secs(posted).ok_or_else(|| {
                protocol(format!(
                    "pull request #{number}: its head's status createdAt {posted:?} is no date"
                ))
            })?;
            Some(HeadStatus {
                state: StatusState::parse(state),
                description: st["description"].as_str().unwrap_or_default().to_owned(),
                created_at,
            })
        }
    };
    let merge = pr["mergeStateStatus"].as_str().unwrap_or_default();
    let merge_state = MergeStateStatus::parse(merge)
        .ok_or_else(|| protocol(format!("pull request #{number}: mergeStateStatus {merge:?}")))?;
    let labels = super::cells::names(&pr["labels"]);
    Ok(OpenPull {
        number,
        url: pr["url"].as_str().unwrap_or_default().to_owned(),
        head: head.to_owned(),
        head_sha,
        created_at,
        labels,
        body: pr["body"].as_str().unwrap_or_default().to_owned(),
        status,
        queued: pr["isInMergeQueue"] == json!(true),
        auto_merge: pr["autoMergeRequest"].is_object(),
        merge_state,
    })
}

/// Seconds since the epoch of an ISO 8601 time as GitHub writes them (`2026-12-02T10:00:00Z`),
/// read with the SDK's RFC 3339 parser (aws-smithy-types, already linked).
fn epoch_secs(iso: &str) -> Option<u64> {
    use aws_sdk_s3::primitives::{DateTime, DateTimeFormat};
    u64::try_from(DateTime::from_str(iso, DateTimeFormat::DateTime).ok()?.secs()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_times_are_read_to_the_second() {
        assert_eq!(epoch_secs("2026-12-02T10:00:00Z"), Some(1_796_205_600));
        assert_eq!(epoch_secs("1970-01-01T00:00:01Z"), Some(1));
        assert_eq!(epoch_secs("yesterday"), None);
    }

    #[test]
    fn a_status_of_another_commit_than_the_head_is_not_the_heads() {
        let node = |oid: &str| {
            json!({"number": 7, "createdAt": "2026-12-02T10:00:00Z", "headRefOid": "aaa",
                   "mergeStateStatus": "UNKNOWN", "isInMergeQueue": true,
                   "commits": {"nodes": [{"commit": {"oid": oid, "status": {"context": {"state": "SUCCESS", "description": "ok", "createdAt": "2026-12-02T10:00:01Z"}}}}]}})
        };
        let head = open_pull(&node("aaa"), "cellbridge/c", "w").unwrap();
        assert_eq!(
            head.status,
            Some(HeadStatus {
                state: StatusState::Success,
                description: "ok".to_owned(),
                created_at: 1_796_205_601
            })
        );
        assert_eq!((head.queued, head.merge_state), (true, MergeStateStatus::Unknown));
        assert_eq!(open_pull(&node("bbb"), "cellbridge/c", "w").unwrap().status, None);
    }
}
