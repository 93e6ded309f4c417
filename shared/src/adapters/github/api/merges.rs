//! Comparisons and merges: "Compare two commits", "Merge a branch", "Merge a pull request", and
//! GraphQL's merge state and auto-merge.

use std::time::Instant;

use http::StatusCode;
use serde_json::{Value, json};

use crate::adapters::github::answers;
use crate::adapters::github::operations as ops;
use crate::adapters::github::permissions;
use crate::adapters::github::transport::{enc, sha_of};
use crate::ports::github::{
    Actor, AutoMergeAnswer, AutoMergeRequest, BranchCommit, ChangedFile, CheckState, Comparison, Merge, MergeAnswer,
    MergeMethod, MergeQueue, MergeState, MergeStateStatus, PullNode, PullState, QueueAnswer, QueueEntry, Relation,
    RequiredCheck,
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
        // What these credentials may read decides the document: an App installation without
        // `checks: read` is asked no check run (GitHub would refuse each inside the answer).
        let reads_checks = match self.installation(deadline).await? {
            Some(app) => permissions::reads_checks(&self.installation_token(app, deadline).await?.permissions),
            None => true,
        };
        let document = if reads_checks {
            ops::GRAPHQL_MERGE_STATE.document
        } else {
            ops::MERGE_STATE_WITHOUT_CHECK_RUNS_QUERY
        };
        let answer = self
            .graphql_document(
                &what,
                &ops::GRAPHQL_MERGE_STATE,
                document,
                json!({"owner": self.owner, "name": self.repo, "number": number}),
                deadline,
            )
            .await?;
        // Any error makes the answer unreadable, whatever `data` still holds: a field refused
        // inside an answer of HTTP 200 is `null` there, which must not read as "none".
        let unreadable = |source: GithubError| GithubError::Unreadable {
            source: Box::new(source),
            pull: pull_node_of(&answer.data),
        };
        if let Some(e) = answer.errors.first() {
            let permission = if e.path.contains("statusCheckRollup") {
                "checks=read, statuses=read"
            } else {
                ops::GRAPHQL_MERGE_STATE.permission
            };
            return Err(unreadable(e.as_error_of(&what, Some(permission))));
        }
        merge_state_of(&answer.data).map_err(|detail| unreadable(GithubError::Protocol { what, detail }))
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

/// What an unreadable answer still tells of the pull request: its node and whether its auto-merge
/// is the viewer's (GitHub answers the rest of `data` beside a field it refused).
fn pull_node_of(data: &Value) -> Option<PullNode> {
    let pr = &data["repository"]["pullRequest"];
    let viewer = data["viewer"]["login"].as_str();
    let by = &pr["autoMergeRequest"]["enabledBy"];
    let by = by["login"].as_str().map(|login| Actor {
        login: login.to_owned(),
        bot: by["__typename"].as_str() == Some("Bot"),
    });
    // `mergeQueueEntry` read as `null` is out of the queue; missing from `data` (the field
    // refused, or the answer cut before it) tells nothing.
    let entry = pr.get("mergeQueueEntry");
    let queued_by_viewer = match entry {
        None => None,
        Some(Value::Null) => Some(false),
        Some(e) => {
            let by = &e["enqueuer"];
            match (by["login"].as_str(), viewer) {
                (Some(login), Some(v)) => Some(
                    Actor {
                        login: login.to_owned(),
                        bot: by["__typename"].as_str() == Some("Bot"),
                    }
                    .is_viewer(v),
                ),
                _ => None,
            }
        }
    };
    Some(PullNode {
        node_id: pr["id"].as_str()?.to_owned(),
        auto_merge_by_viewer: matches!((by, viewer), (Some(by), Some(v)) if by.is_viewer(v)),
        queued_by_viewer,
    })
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
    // With check runs: the rollup's contexts (a connection); without: the commit statuses alone
    // (a list), and the check runs not read.
    let with_check_runs = commit.get("status").is_none();
    let contexts = &commit["statusCheckRollup"]["contexts"];
    let nodes = if with_check_runs {
        &contexts["nodes"]
    } else {
        &commit["status"]["contexts"]
    };
    let required = nodes
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
    // What decides a merge is read as GitHub's schema names it, or the answer is unreadable: a
    // `null` or a value of an enum cellbridge does not know is never taken for one it knows.
    let state = match pr["state"].as_str() {
        Some("OPEN") => PullState::Open,
        Some("MERGED") => PullState::Merged,
        Some("CLOSED") => PullState::Closed,
        other => return Err(format!("PullRequest.state is {other:?}, not OPEN, CLOSED or MERGED")),
    };
    let merge_state = match pr["mergeStateStatus"].as_str() {
        Some(s) => MergeStateStatus::parse(s).ok_or(format!("mergeStateStatus {s:?} is not one cellbridge knows"))?,
        None => return Err("mergeStateStatus is null".into()),
    };
    let auto_merge_allowed = data["repository"]["autoMergeAllowed"]
        .as_bool()
        .ok_or("autoMergeAllowed is null")?;
    let viewer = text(&data["viewer"], "login")?;
    Ok(MergeState {
        node_id: text(pr, "id")?,
        state,
        // The rollup is the head's only when the last commit is the head (it always is; a head
        // pushed between the two is read as not complete).
        checks_complete: with_check_runs
            && contexts["pageInfo"]["hasNextPage"] == false
            && commit["oid"].as_str() == Some(head_sha.as_str()),
        head_sha,
        merge_state,
        auto_merge_allowed,
        auto_merge: pr["autoMergeRequest"].as_object().map(|a| AutoMergeRequest {
            enabled_by: a.get("enabledBy").and_then(actor),
            method: method(a.get("mergeMethod").and_then(Value::as_str).unwrap_or("MERGE")),
        }),
        viewer,
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
