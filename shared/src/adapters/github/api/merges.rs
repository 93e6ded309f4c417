//! Comparisons and merges: "Compare two commits", "Merge a branch", "Merge a pull request", and
//! GraphQL's merge state and auto-merge.

use std::time::Instant;

use http::StatusCode;
use serde_json::{Value, json};

use crate::adapters::github::answers;
use crate::adapters::github::operations as ops;
use crate::adapters::github::transport::{enc, sha_of};
use crate::ports::github::{
    Actor, AutoMergeAnswer, AutoMergeRequest, BranchCommit, ChangedFile, CheckState, Comparison, Merge, MergeAnswer,
    MergeMethod, MergeQueue, MergeState, MergeStateStatus, PullState, QueueAnswer, QueueEntry, Relation, RequiredCheck,
};
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

impl GithubFleet {
    pub(super) async fn compare(&self, base: &str, head: &str, deadline: Instant) -> Result<Comparison> {
        let what = format!("comparing {head} with {base}");
        let r = self
            .repo_call(
                &what,
                &ops::REPOS_COMPARE_COMMITS,
                &format!("/compare/{}...{}", enc(base), enc(head)),
                None,
                deadline,
            )
            .await?;
        let v = r.json(&what)?;
        let relation = match v["status"].as_str() {
            Some("identical") => Relation::Identical,
            Some("ahead") => Relation::Ahead,
            Some("behind") => Relation::Behind,
            Some("diverged") => Relation::Diverged,
            other => {
                return Err(GithubError::Protocol {
                    what,
                    detail: format!("unknown comparison status {other:?}"),
                });
            }
        };
        let files = v["files"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .filter_map(|f| {
                        let path = f["filename"].as_str()?.to_owned();
                        let blob = (f["status"].as_str() != Some("removed"))
                            .then(|| f["sha"].as_str().map(str::to_owned))
                            .flatten();
                        Some(ChangedFile { path, blob })
                    })
                    .collect()
            })
            .unwrap_or_default();
        // `commits` lists the head's own commits (the newest 250): the head itself among them.
        let head_tree = v["commits"]
            .as_array()
            .and_then(|cs| cs.iter().rev().find(|c| c["sha"].as_str() == Some(head)))
            .and_then(|c| c["commit"]["tree"]["sha"].as_str())
            .map(str::to_owned);
        let commits: Vec<BranchCommit> = v["commits"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| {
                        Some(BranchCommit {
                            sha: c["sha"].as_str()?.to_owned(),
                            message: c["commit"]["message"].as_str().unwrap_or_default().to_owned(),
                            author: c["author"]["login"]
                                .as_str()
                                .or_else(|| c["commit"]["author"]["name"].as_str())
                                .map(str::to_owned),
                            verified: c["commit"]["verification"]["verified"].as_bool(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Comparison {
            relation,
            merge_base: v["merge_base_commit"]["sha"].as_str().unwrap_or_default().to_owned(),
            files,
            head_tree,
            total_commits: v["total_commits"].as_u64().map_or(commits.len(), |n| n as usize),
            commits,
        })
    }

    pub(super) async fn merge_into(
        &self,
        branch: &str,
        commit: &str,
        message: &str,
        deadline: Instant,
    ) -> Result<Merge> {
        let what = format!("merging {commit} into {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::REPOS_MERGE,
                "/merges",
                Some(&json!({"base": branch, "head": commit, "commit_message": message})),
                deadline,
            )
            .await?;
        match r.status {
            StatusCode::CREATED => Ok(Merge::Merged(sha_of(&r, &what)?)),
            StatusCode::NO_CONTENT => Ok(Merge::UpToDate),
            StatusCode::CONFLICT => Ok(Merge::Conflict),
            s => {
                Err(answers::merge_into_refused(&what, s.as_u16(), &r.message()).unwrap_or_else(|| r.api_error(&what)))
            }
        }
    }

    pub(super) async fn merge_pull(
        &self,
        number: u64,
        sha: &str,
        method: MergeMethod,
        deadline: Instant,
    ) -> Result<MergeAnswer> {
        let what = format!("merging pull request #{number}");
        let r = self
            .repo_send(
                &what,
                &ops::PULLS_MERGE,
                &format!("/pulls/{number}/merge"),
                Some(&json!({"sha": sha, "merge_method": method.rest()})),
                deadline,
            )
            .await?;
        match r.status {
            s if s.is_success() => Ok(MergeAnswer::Merged(sha_of(&r, &what)?)),
            s => answers::merge_refused(&what, s.as_u16(), &r.message()).unwrap_or_else(|| Err(r.api_error(&what))),
        }
    }

    pub(super) async fn merge_state(&self, number: u64, deadline: Instant) -> Result<MergeState> {
        let what = format!("reading the merge state of pull request #{number}");
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_MERGE_STATE,
                json!({"owner": self.owner, "name": self.repo, "number": number}),
                deadline,
            )
            .await?;
        if let Some(e) = answer.errors.first() {
            return Err(e.as_error(&what));
        }
        merge_state_of(&answer.data).map_err(|detail| GithubError::Protocol { what, detail })
    }

    pub(super) async fn enable_auto_merge(
        &self,
        node_id: &str,
        expected_head: &str,
        method: MergeMethod,
        deadline: Instant,
    ) -> Result<AutoMergeAnswer> {
        let what = format!("enabling auto-merge on pull request {node_id}");
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_ENABLE_AUTO_MERGE,
                json!({"pullRequestId": node_id, "expectedHeadOid": expected_head, "mergeMethod": method.graphql()}),
                deadline,
            )
            .await?;
        match answer.errors.first() {
            None => Ok(AutoMergeAnswer::Enabled),
            Some(e) => answers::enable_answer(&what, e),
        }
    }

    pub(super) async fn disable_auto_merge(&self, node_id: &str, deadline: Instant) -> Result<()> {
        let what = format!("disabling auto-merge on pull request {node_id}");
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_DISABLE_AUTO_MERGE,
                json!({"pullRequestId": node_id}),
                deadline,
            )
            .await?;
        match answer.errors.first() {
            None => Ok(()),
            // Someone (or GitHub, on a merge or a close) was first.
            Some(e) if e.message.to_ascii_lowercase().contains("not enabled") => Ok(()),
            Some(e) => Err(e.as_error(&what)),
        }
    }
}

impl GithubFleet {
    pub(super) async fn queue_auto_merge(
        &self,
        node_id: &str,
        expected_head: &str,
        deadline: Instant,
    ) -> Result<QueueAnswer> {
        let what = format!("enabling auto-merge into the merge queue on pull request {node_id}");
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_QUEUE_AUTO_MERGE,
                json!({"pullRequestId": node_id, "expectedHeadOid": expected_head}),
                deadline,
            )
            .await?;
        match answer.errors.first() {
            // A pull request whose requirements are met goes into the queue at once.
            None if answer.data["enablePullRequestAutoMerge"]["pullRequest"]["isInMergeQueue"] == true => {
                Ok(QueueAnswer::Queued)
            }
            None => Ok(QueueAnswer::Armed),
            Some(e) => answers::queue_answer(&what, e),
        }
    }

    pub(super) async fn enqueue(&self, node_id: &str, expected_head: &str, deadline: Instant) -> Result<QueueAnswer> {
        let what = format!("adding pull request {node_id} to the merge queue");
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_ENQUEUE,
                json!({"pullRequestId": node_id, "expectedHeadOid": expected_head}),
                deadline,
            )
            .await?;
        match answer.errors.first() {
            None => Ok(QueueAnswer::Queued),
            Some(e) => answers::queue_answer(&what, e),
        }
    }

    pub(super) async fn dequeue(&self, node_id: &str, deadline: Instant) -> Result<()> {
        let what = format!("removing pull request {node_id} from the merge queue");
        let answer = self
            .graphql(&what, &ops::GRAPHQL_DEQUEUE, json!({"id": node_id}), deadline)
            .await?;
        match answer.errors.first() {
            None => Ok(()),
            // Already out (merged, dropped by GitHub on a push or a failed check, or removed by
            // someone): what was asked.
            Some(e) if e.message.to_ascii_lowercase().contains("not in the merge queue") => Ok(()),
            Some(e) => Err(e.as_error(&what)),
        }
    }
}

/// [`MergeState`] from the `pullRequestMergeState` query's `data`.
fn merge_state_of(data: &Value) -> std::result::Result<MergeState, String> {
    let pr = &data["repository"]["pullRequest"];
    if pr.is_null() {
        return Err("no pullRequest in the answer".into());
    }
    let text = |v: &Value, name: &str| v[name].as_str().map(str::to_owned).ok_or(format!("no {name}"));
    let method = |m: &str| match m {
        "SQUASH" => MergeMethod::Squash,
        "REBASE" => MergeMethod::Rebase,
        _ => MergeMethod::Merge,
    };
    let actor = |b: &Value| {
        Some(Actor {
            login: b["login"].as_str()?.to_owned(),
            bot: b["__typename"].as_str() == Some("Bot"),
        })
    };
    let commit = &pr["commits"]["nodes"][0]["commit"];
    let contexts = &commit["statusCheckRollup"]["contexts"];
    let required = contexts["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter(|n| n["isRequired"] == true)
                .map(|n| {
                    // A commit status: `state` (StatusState); a check run: `status` until it is
                    // COMPLETED, then its `conclusion` (CheckConclusionState).
                    let (name, state) = if n["__typename"] == "CheckRun" {
                        let state = match (n["status"].as_str(), n["conclusion"].as_str()) {
                            (Some("COMPLETED"), Some("SUCCESS" | "NEUTRAL" | "SKIPPED")) => CheckState::Passed,
                            (Some("COMPLETED"), _) => CheckState::Failed,
                            _ => CheckState::Pending,
                        };
                        (n["name"].as_str(), state)
                    } else {
                        let state = match n["state"].as_str() {
                            Some("SUCCESS") => CheckState::Passed,
                            Some("PENDING" | "EXPECTED") => CheckState::Pending,
                            _ => CheckState::Failed,
                        };
                        (n["context"].as_str(), state)
                    };
                    RequiredCheck {
                        name: name.unwrap_or_default().to_owned(),
                        state,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let head_sha = text(pr, "headRefOid")?;
    Ok(MergeState {
        node_id: text(pr, "id")?,
        state: match pr["state"].as_str() {
            Some("OPEN") => PullState::Open,
            Some("MERGED") => PullState::Merged,
            _ => PullState::Closed,
        },
        // The rollup is the head's only when the last commit is the head (it always is; a head
        // pushed between the two is read as not complete).
        checks_complete: contexts["pageInfo"]["hasNextPage"] != true
            && commit["oid"].as_str() == Some(head_sha.as_str()),
        head_sha,
        merge_state: pr["mergeStateStatus"]
            .as_str()
            .and_then(MergeStateStatus::parse)
            .unwrap_or(MergeStateStatus::Unknown),
        auto_merge_allowed: data["repository"]["autoMergeAllowed"] == true,
        auto_merge: pr["autoMergeRequest"].as_object().map(|a| AutoMergeRequest {
            enabled_by: a.get("enabledBy").and_then(actor),
            method: method(a.get("mergeMethod").and_then(Value::as_str).unwrap_or("MERGE")),
        }),
        viewer: data["viewer"]["login"].as_str().unwrap_or_default().to_owned(),
        required,
        queue: pr["mergeQueue"].as_object().map(|q| MergeQueue {
            method: q
                .get("configuration")
                .and_then(|c| c["mergeMethod"].as_str())
                .map(method),
        }),
        queued: pr["mergeQueueEntry"].as_object().and_then(|e| {
            Some(QueueEntry {
                enqueuer: actor(e.get("enqueuer")?)?,
                state: e.get("state").and_then(Value::as_str).unwrap_or_default().to_owned(),
            })
        }),
    })
}
