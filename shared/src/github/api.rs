//! The typed calls: GitHub's primitives ([`GithubRepo`]) over the REST API, one documented
//! operation of [`super::operations`] each, naming what they do in their errors.

use std::time::Instant;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::operations as ops;
use base64::Engine as _;

use super::operations::GraphqlOperation;
use super::port::{
    Actor, AutoMergeAnswer, AutoMergeRequest, BranchCommit, ChangedFile, CheckState, CloseReason, Comparison,
    GithubRepo, Issue, Merge, MergeAnswer, MergeMethod, MergeState, MergeStateStatus, OpenPull, PullRequest, PullState,
    Relation, RequiredCheck, TreeFiles,
};
use super::transport::{Target, enc, sha_of, url_query};
use super::{GithubError, GithubFleet, Result, Snapshot};
use crate::fleet::{FileWrite, Keep};

impl GithubFleet {
    pub(super) async fn base_branch(&self, deadline: Instant) -> Result<String> {
        self.base_branch
            .get_or_try_init(|| self.repository_field("default_branch", deadline))
            .await
            .cloned()
    }

    /// The repository's GraphQL node id, which `updateRefs` takes: its REST answer's `node_id`,
    /// read once per client (the base branch's lookup keeps it too).
    async fn repository_id(&self, deadline: Instant) -> Result<String> {
        self.repository_id
            .get_or_try_init(|| self.repository_field("node_id", deadline))
            .await
            .cloned()
    }

    /// One field of "Get a repository"; the node id is kept for [`Self::repository_id`] whatever
    /// field was asked for.
    async fn repository_field(&self, field: &str, deadline: Instant) -> Result<String> {
        let what = format!("reading repository {}", self.repo_name());
        let r = self.repo_call(&what, &ops::REPOS_GET, "", None, deadline).await?;
        let v = r.json(&what)?;
        if let Some(id) = v.get("node_id").and_then(Value::as_str) {
            let _ = self.repository_id.set(id.to_owned());
        }
        v.get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| GithubError::Protocol {
                what,
                detail: format!("no {field}"),
            })
    }

    pub(super) async fn commit_tree(&self, sha: &str, deadline: Instant) -> Result<String> {
        let what = format!("reading commit {sha}");
        let r = self
            .repo_call(
                &what,
                &ops::GIT_GET_COMMIT,
                &format!("/git/commits/{sha}"),
                None,
                deadline,
            )
            .await?;
        r.json(&what)?["tree"]["sha"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| GithubError::Protocol {
                what,
                detail: "commit without tree".into(),
            })
    }
}

impl GithubRepo for GithubFleet {
    fn write_room(&self, deadline: Instant) -> Result<()> {
        self.pacer.room_before(deadline).map_err(|too_soon| GithubError::Transient {
            what: "pacing writes".into(),
            detail: format!(
                "paced: the next write keeps GitHub's limits on content-creating requests only in {} s, after the deadline; nothing was read",
                too_soon.wait.as_secs()
            ),
        })
    }

    async fn read_base(&self, keep: &Keep, deadline: Instant) -> Result<Snapshot> {
        self.download_snapshot(keep, deadline).await
    }

    async fn latest_pull(&self, branch: &str, deadline: Instant) -> Result<Option<PullRequest>> {
        let what = format!("listing the pull requests of {branch}");
        let q: String = url_query(&[
            ("state", "all"),
            ("head", &format!("{}:{branch}", self.owner)),
            ("sort", "created"),
            ("direction", "desc"),
            ("per_page", "1"),
        ]);
        let r = self
            .repo_call(&what, &ops::PULLS_LIST, &format!("/pulls?{q}"), None, deadline)
            .await?;
        let list = r.json(&what)?;
        let Some(pr) = list.as_array().and_then(|a| a.first()) else {
            return Ok(None);
        };
        let state = match (pr["state"].as_str(), pr["merged_at"].is_string()) {
            (_, true) => PullState::Merged,
            (Some("open"), _) => PullState::Open,
            _ => PullState::Closed,
        };
        Ok(Some(PullRequest {
            number: pr["number"].as_u64().ok_or_else(|| GithubError::Protocol {
                what: what.clone(),
                detail: "pull request without number".into(),
            })?,
            url: pr["html_url"].as_str().unwrap_or_default().to_owned(),
            branch: branch.to_owned(),
            title: pr["title"].as_str().unwrap_or_default().to_owned(),
            state,
            head_sha: pr["head"]["sha"].as_str().unwrap_or_default().to_owned(),
            labels: label_names(pr),
            body: pr["body"].as_str().unwrap_or_default().to_owned(),
        }))
    }

    async fn check_write_access(&self, deadline: Instant) -> Result<()> {
        let Some(id) = self.installation(deadline).await? else {
            // A token's permissions cannot be read: a 403 names the one missing.
            return Ok(());
        };
        if *self.access_checked.lock().unwrap_or_else(|e| e.into_inner()) == Some(id) {
            return Ok(());
        }
        // "Get an installation for the authenticated app"
        // (https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app):
        // the permissions the installation was granted, read with the App's JWT.
        let what = format!("reading the permissions of GitHub App installation {id}");
        let path = format!("/app/installations/{id}");
        let r = self
            .send(
                &what,
                ops::APPS_GET_INSTALLATION.method.clone(),
                &path,
                None,
                None,
                deadline,
            )
            .await?;
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        let granted = r.json(&what)?["permissions"].clone();
        let missing = missing_permissions(&granted);
        if !missing.is_empty() {
            let mut listed: Vec<String> = granted
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                        .collect()
                })
                .unwrap_or_default();
            listed.sort();
            return Err(GithubError::MissingPermissions {
                installation: id,
                missing,
                granted: if listed.is_empty() {
                    "none".into()
                } else {
                    listed.join(", ")
                },
            });
        }
        *self.access_checked.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
        Ok(())
    }

    async fn open_issues(&self, label: &str, deadline: Instant) -> Result<Vec<Issue>> {
        let what = format!("listing the open issues labelled {label}");
        let mut issues = Vec::new();
        // A fleet may have many refused cells at once: every page, 100 at a time.
        for page in 1.. {
            let page = page.to_string();
            let q = url_query(&[
                ("state", "open"),
                ("labels", label),
                ("sort", "created"),
                ("direction", "asc"),
                ("per_page", "100"),
                ("page", &page),
            ]);
            let r = self
                .repo_call(
                    &what,
                    &ops::ISSUES_LIST_FOR_REPO,
                    &format!("/issues?{q}"),
                    None,
                    deadline,
                )
                .await?;
            let list = r.json(&what)?;
            let items = list.as_array().cloned().unwrap_or_default();
            let full = items.len() == 100;
            // "GitHub's REST API considers every pull request an issue": those carry a
            // `pull_request` key (https://docs.github.com/rest/issues/issues#list-repository-issues).
            issues.extend(
                items
                    .iter()
                    .filter(|i| i.get("pull_request").is_none())
                    .filter_map(|i| {
                        Some(Issue {
                            number: i["number"].as_u64()?,
                            url: i["html_url"].as_str().unwrap_or_default().to_owned(),
                            title: i["title"].as_str().unwrap_or_default().to_owned(),
                            body: i["body"].as_str().unwrap_or_default().to_owned(),
                            labels: label_names(i),
                        })
                    }),
            );
            if !full {
                break;
            }
        }
        Ok(issues)
    }

    async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> Result<(u64, String)> {
        let what = format!("opening issue {title:?}");
        let r = self
            .repo_call(
                &what,
                &ops::ISSUES_CREATE,
                "/issues",
                Some(&json!({"title": title, "body": body, "labels": labels})),
                deadline,
            )
            .await?;
        let v = r.json(&what)?;
        let number = v["number"].as_u64().ok_or_else(|| GithubError::Protocol {
            what: what.clone(),
            detail: "no number".into(),
        })?;
        Ok((number, v["html_url"].as_str().unwrap_or_default().to_owned()))
    }

    async fn close_issue(&self, number: u64, body: &str, reason: CloseReason, deadline: Instant) -> Result<()> {
        let what = format!("closing issue #{number} ({})", reason.state_reason());
        self.repo_call(
            &what,
            &ops::ISSUES_UPDATE,
            &format!("/issues/{number}"),
            Some(&json!({"state": "closed", "state_reason": reason.state_reason(), "body": body})),
            deadline,
        )
        .await?;
        Ok(())
    }

    async fn compare(&self, base: &str, head: &str, deadline: Instant) -> Result<Comparison> {
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

    async fn tree_files(&self, commit: &str, deadline: Instant) -> Result<TreeFiles> {
        let what = format!("listing the tree of {commit}");
        // "Get a tree": `recursive` lists every entry; "If truncated is true in the response then
        // the number of items in the tree array exceeded our maximum limit"
        // (https://docs.github.com/rest/git/trees#get-a-tree). A tree-ish: a commit's sha works.
        let r = self
            .repo_call(
                &what,
                &ops::GIT_GET_TREE,
                &format!("/git/trees/{}?recursive=1", enc(commit)),
                None,
                deadline,
            )
            .await?;
        let v = r.json(&what)?;
        if v["truncated"] == true {
            return Err(GithubError::Protocol {
                what,
                detail: "GitHub cut the tree's listing short (truncated): it is larger than GitHub lists in one answer"
                    .into(),
            });
        }
        let files = v["tree"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    // A gitlink (mode 160000, type `commit`) is a submodule, not a file here.
                    .filter(|e| e["type"] == "blob")
                    .filter_map(|e| Some((e["path"].as_str()?.to_owned(), e["sha"].as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(TreeFiles {
            tree: v["sha"].as_str().unwrap_or_default().to_owned(),
            files,
        })
    }

    async fn read_blob(&self, blob: &str, deadline: Instant) -> Result<Vec<u8>> {
        let what = format!("reading blob {blob}");
        let r = self
            .repo_call(&what, &ops::GIT_GET_BLOB, &format!("/git/blobs/{blob}"), None, deadline)
            .await?;
        let v = r.json(&what)?;
        let protocol = |detail: &str| GithubError::Protocol {
            what: what.clone(),
            detail: detail.to_owned(),
        };
        let content: String = v["content"]
            .as_str()
            .ok_or_else(|| protocol("blob without content"))?
            .split_whitespace()
            .collect();
        base64::engine::general_purpose::STANDARD
            .decode(content)
            .map_err(|_| protocol("blob content is not base64"))
    }

    async fn create_tree(
        &self,
        on: &str,
        tree: Option<&str>,
        files: &[FileWrite],
        removed: &[String],
        deadline: Instant,
    ) -> Result<String> {
        let what = if removed.is_empty() {
            format!("creating a tree of {} file(s) on {on}", files.len())
        } else {
            format!(
                "creating a tree of {} file(s), {} removed, on {on}",
                files.len(),
                removed.len()
            )
        };
        // "mode": 100644 a file, 100755 an executable, 120000 "a blob that specifies the path
        // of a symlink" (https://docs.github.com/rest/git/trees#create-a-tree): a link's
        // content is its target.
        // A removed file is an entry whose `sha` is null: "If the value is null then the file
        // will be deleted" (the same page); the mode and type are those of a blob.
        let entries: Vec<Value> = files
            .iter()
            .map(|f| json!({"path": f.path, "mode": f.mode.git_mode(), "type": "blob", "content": f.content}))
            .chain(
                removed
                    .iter()
                    .map(|p| json!({"path": p, "mode": "100644", "type": "blob", "sha": Value::Null})),
            )
            .collect();
        let mut base_tree = tree.map(str::to_owned);
        loop {
            let base = match &base_tree {
                Some(t) => t.clone(),
                None => self.commit_tree(on, deadline).await?,
            };
            let r = self
                .repo_send(
                    &what,
                    &ops::GIT_CREATE_TREE,
                    "/git/trees",
                    Some(&json!({"base_tree": base, "tree": entries})),
                    deadline,
                )
                .await?;
            if r.status.is_success() {
                return sha_of(&r, &what);
            }
            // A tree id the caller held that GitHub does not know (gone since): ask GitHub for
            // the commit's own once.
            if r.status == StatusCode::UNPROCESSABLE_ENTITY && tree.is_some() && base_tree.is_some() {
                tracing::info!(base = %on, "the base tree given is unknown to GitHub; reading the commit's");
                base_tree = None;
                continue;
            }
            return Err(r.api_error(&what));
        }
    }

    async fn create_commit(&self, tree: &str, parents: &[String], message: &str, deadline: Instant) -> Result<String> {
        let what = "creating the commit";
        let r = self
            .repo_call(
                what,
                &ops::GIT_CREATE_COMMIT,
                "/git/commits",
                Some(&json!({"message": message, "tree": tree, "parents": parents})),
                deadline,
            )
            .await?;
        sha_of(&r, what)
    }

    /// Moves the branch only by fast-forward: the commit descends from the head we read, so a
    /// writer that moved the branch meanwhile makes this fail instead of being overwritten.
    /// GitHub answers 422 both for that and for a repository rule; the branch, read again, tells
    /// which (still at `from`: a rule).
    async fn move_branch(&self, branch: &str, from: &str, commit: &str, deadline: Instant) -> Result<()> {
        let what = format!("updating branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::GIT_UPDATE_REF,
                &format!("/git/refs/heads/{}", enc(branch)),
                Some(&json!({"sha": commit, "force": false})),
                deadline,
            )
            .await?;
        match r.status {
            s if s.is_success() => Ok(()),
            StatusCode::UNPROCESSABLE_ENTITY | StatusCode::CONFLICT => {
                let message = r.message();
                let now = self.branch_head(branch, deadline).await?.map(|(sha, _)| sha);
                if now.as_deref() == Some(from) {
                    Err(GithubError::Refused { what, rule: message })
                } else {
                    Err(GithubError::Conflict { what, detail: message })
                }
            }
            _ => Err(r.api_error(&what)),
        }
    }

    /// Creates the branch; `Ok(false)` when it already exists.
    async fn create_branch(&self, branch: &str, commit: &str, deadline: Instant) -> Result<bool> {
        let what = format!("creating branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::GIT_CREATE_REF,
                "/git/refs",
                Some(&json!({"ref": format!("refs/heads/{branch}"), "sha": commit})),
                deadline,
            )
            .await?;
        match r.status {
            s if s.is_success() => Ok(true),
            StatusCode::UNPROCESSABLE_ENTITY if r.message().contains("already exists") => Ok(false),
            _ => Err(r.api_error(&what)),
        }
    }

    /// The branch head's id and commit message.
    async fn branch_head(&self, branch: &str, deadline: Instant) -> Result<Option<(String, String)>> {
        let what = format!("reading branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::REPOS_GET_COMMIT,
                &format!("/commits/heads/{}", enc(branch)),
                None,
                deadline,
            )
            .await?;
        if r.status == StatusCode::NOT_FOUND || r.status == StatusCode::UNPROCESSABLE_ENTITY {
            return Ok(None);
        }
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        let v = r.json(&what)?;
        Ok(Some((
            v["sha"].as_str().unwrap_or_default().to_owned(),
            v["commit"]["message"].as_str().unwrap_or_default().to_owned(),
        )))
    }

    async fn set_status(
        &self,
        commit: &str,
        success: bool,
        context: &str,
        description: &str,
        deadline: Instant,
    ) -> Result<()> {
        let what = format!("setting status {context} on {commit}");
        let state = if success { "success" } else { "failure" };
        let body = json!({"state": state, "context": context, "description": description});
        self.repo_call(
            &what,
            &ops::REPOS_CREATE_COMMIT_STATUS,
            &format!("/statuses/{commit}"),
            Some(&body),
            deadline,
        )
        .await?;
        Ok(())
    }

    async fn close_pull(&self, number: u64, body: &str, deadline: Instant) -> Result<()> {
        let what = format!("closing pull request #{number}");
        self.repo_call(
            &what,
            &ops::PULLS_UPDATE,
            &format!("/pulls/{number}"),
            Some(&json!({"state": "closed", "body": body})),
            deadline,
        )
        .await?;
        Ok(())
    }

    async fn merge_into(&self, branch: &str, commit: &str, message: &str, deadline: Instant) -> Result<Merge> {
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
            // The branch vanished or moved under a rule: someone else's doing, redo.
            StatusCode::NOT_FOUND => Err(GithubError::Conflict {
                what,
                detail: r.message(),
            }),
            StatusCode::UNPROCESSABLE_ENTITY | StatusCode::FORBIDDEN
                if r.message().contains("rule") || r.message().contains("protected") =>
            {
                Err(GithubError::Refused {
                    what,
                    rule: r.message(),
                })
            }
            _ => Err(r.api_error(&what)),
        }
    }

    async fn status(&self, commit: &str, context: &str, deadline: Instant) -> Result<Option<(bool, String)>> {
        let what = format!("reading the statuses of {commit}");
        let q = url_query(&[("per_page", "100")]);
        let r = self
            .repo_call(
                &what,
                &ops::REPOS_LIST_COMMIT_STATUSES_FOR_REF,
                &format!("/commits/{commit}/statuses?{q}"),
                None,
                deadline,
            )
            .await?;
        // Newest first, as GitHub lists them.
        Ok(r.json(&what)?.as_array().and_then(|list| {
            list.iter().find(|s| s["context"].as_str() == Some(context)).map(|s| {
                (
                    s["state"].as_str() == Some("success"),
                    s["description"].as_str().unwrap_or_default().to_owned(),
                )
            })
        }))
    }

    async fn comment(&self, number: u64, body: &str, deadline: Instant) -> Result<()> {
        let what = format!("commenting on pull request #{number}");
        self.repo_call(
            &what,
            &ops::ISSUES_CREATE_COMMENT,
            &format!("/issues/{number}/comments"),
            Some(&json!({ "body": body })),
            deadline,
        )
        .await?;
        Ok(())
    }

    async fn delete_branch_at(&self, branch: &str, head: &str, deadline: Instant) -> Result<bool> {
        let what = format!("deleting branch {branch} at {head}");
        let repository = self.repository_id(deadline).await?;
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_UPDATE_REFS,
                json!({"repositoryId": repository, "refUpdates": [{
                    "name": format!("refs/heads/{branch}"),
                    "beforeOid": head,
                    "afterOid": "0000000000000000000000000000000000000000",
                }]}),
                deadline,
            )
            .await?;
        let Some(e) = answer.errors.first() else {
            return Ok(true);
        };
        // GitHub documents the check (`beforeOid`), not the words of its refusal: the branch as
        // it is now tells whether it was that, or another refusal (a rule protecting it).
        match self.branch_head(branch, deadline).await? {
            Some((now, _)) if now == head => Err(e.as_error(&what)),
            _ => Ok(false),
        }
    }

    async fn create_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        deadline: Instant,
    ) -> Result<(u64, String)> {
        let what = format!("opening the pull request for {head}");
        let r = self
            .repo_send(
                &what,
                &ops::PULLS_CREATE,
                "/pulls",
                Some(
                    &json!({"title": title, "head": head, "base": base, "body": body, "maintainer_can_modify": false}),
                ),
                deadline,
            )
            .await?;
        // 422 for a pull request already open for the head, a head that is gone ("head"
        // "invalid" in `errors`), or one already merged ("No commits between"): another run or
        // a person was there first.
        let m = r.message();
        if r.status == StatusCode::UNPROCESSABLE_ENTITY
            && (m.contains("already exists") || m.contains("head invalid") || m.contains("No commits between"))
        {
            return Err(GithubError::Conflict {
                what,
                detail: r.message(),
            });
        }
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        let pr = r.json(&what)?;
        let number = pr["number"].as_u64().ok_or_else(|| GithubError::Protocol {
            what: what.clone(),
            detail: "no number".into(),
        })?;
        Ok((number, pr["html_url"].as_str().unwrap_or_default().to_owned()))
    }

    async fn update_pull_text(
        &self,
        number: u64,
        title: &str,
        body: &str,
        labels: &[String],
        deadline: Instant,
    ) -> Result<bool> {
        let what = format!("updating pull request #{number}");
        // The issues endpoint sets title, body and labels in one request; its answer is the
        // issue as it now is, `state` included (a merged pull request is `closed`).
        let r = self
            .repo_call(
                &what,
                &ops::ISSUES_UPDATE,
                &format!("/issues/{number}"),
                Some(&json!({"title": title, "body": body, "labels": labels})),
                deadline,
            )
            .await?;
        Ok(r.json(&what)?["state"].as_str() != Some("closed"))
    }

    /// Adds labels to a pull request (GitHub keeps the ones it already has).
    async fn add_labels(&self, number: u64, labels: &[String], deadline: Instant) -> Result<()> {
        let what = format!("labelling pull request #{number}");
        self.repo_call(
            &what,
            &ops::ISSUES_ADD_LABELS,
            &format!("/issues/{number}/labels"),
            Some(&json!({ "labels": labels })),
            deadline,
        )
        .await?;
        Ok(())
    }
    // auto-merge
    async fn merge_state(&self, number: u64, deadline: Instant) -> Result<MergeState> {
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

    async fn enable_auto_merge(
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
        let Some(e) = answer.errors.first() else {
            return Ok(AutoMergeAnswer::Enabled);
        };
        Ok(match enable_refusal(&e.message) {
            Refusal::MergeableNow => AutoMergeAnswer::MergeableNow(e.message.clone()),
            Refusal::NotAllowed => AutoMergeAnswer::NotAllowed(e.message.clone()),
            Refusal::HeadMoved => {
                return Err(GithubError::Conflict {
                    what,
                    detail: e.message.clone(),
                });
            }
            Refusal::Other if e.kind == "NOT_FOUND" => return Err(e.as_error(&what)),
            Refusal::Other => AutoMergeAnswer::Refused(e.message.clone()),
        })
    }

    async fn disable_auto_merge(&self, node_id: &str, deadline: Instant) -> Result<()> {
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

    async fn merge_pull(&self, number: u64, sha: &str, method: MergeMethod, deadline: Instant) -> Result<MergeAnswer> {
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
            // "Method Not Allowed if merge cannot be performed": a protection not met, a
            // conflict, a method the repository does not allow.
            StatusCode::METHOD_NOT_ALLOWED => Ok(MergeAnswer::NotMergeable(r.message())),
            // "Conflict if sha was provided and pull request head did not match".
            StatusCode::CONFLICT => Err(GithubError::Conflict {
                what,
                detail: r.message(),
            }),
            _ => Err(r.api_error(&what)),
        }
    }

    // dashboard
    async fn open_pulls(&self, head_prefix: &str, deadline: Instant) -> Result<Vec<OpenPull>> {
        let what = "listing the open pull requests".to_owned();
        let mut pulls = Vec::new();
        // "List pull requests" (https://docs.github.com/rest/pulls/pulls#list-pull-requests):
        // `head` filters on one branch only, so every open pull request is listed, 100 a page,
        // oldest first: one opened meanwhile lands on a later page, none moves ahead.
        for page in 1.. {
            let page = page.to_string();
            let q = url_query(&[
                ("state", "open"),
                ("sort", "created"),
                ("direction", "asc"),
                ("per_page", "100"),
                ("page", &page),
            ]);
            let r = self
                .repo_call(&what, &ops::PULLS_LIST, &format!("/pulls?{q}"), None, deadline)
                .await?;
            let list = r.json(&what)?;
            let items = list.as_array().cloned().unwrap_or_default();
            let full = items.len() == 100;
            for pr in &items {
                let head = pr["head"]["ref"].as_str().unwrap_or_default();
                // A fork's branch of the same name is not cellbridge's: its label is the
                // fork owner's (`owner:ref`).
                if !head.starts_with(head_prefix)
                    || pr["head"]["label"].as_str() != Some(format!("{}:{head}", self.owner).as_str())
                {
                    continue;
                }
                let protocol = |detail: String| GithubError::Protocol {
                    what: what.clone(),
                    detail,
                };
                let number = pr["number"]
                    .as_u64()
                    .ok_or_else(|| protocol("pull request without number".into()))?;
                let created = pr["created_at"].as_str().unwrap_or_default();
                let created_at = epoch_secs(created)
                    .ok_or_else(|| protocol(format!("pull request #{number}: created_at {created:?} is no date")))?;
                pulls.push(OpenPull {
                    number,
                    url: pr["html_url"].as_str().unwrap_or_default().to_owned(),
                    head: head.to_owned(),
                    head_sha: pr["head"]["sha"].as_str().unwrap_or_default().to_owned(),
                    created_at,
                    labels: label_names(pr),
                });
            }
            if !full {
                break;
            }
        }
        Ok(pulls)
    }
}

/// Seconds since the epoch of an ISO 8601 time as GitHub writes them (`2026-12-02T10:00:00Z`),
/// read with the SDK's RFC 3339 parser (aws-smithy-types, already linked).
fn epoch_secs(iso: &str) -> Option<u64> {
    use aws_sdk_s3::primitives::{DateTime, DateTimeFormat};
    u64::try_from(DateTime::from_str(iso, DateTimeFormat::DateTime).ok()?.secs()).ok()
}

// auto-merge: GraphQL over the transport.

/// A GraphQL answer: GitHub answers 200 with `data` and, when something was refused, `errors`
/// ("Forming calls with GraphQL"; a refused mutation leaves its field `null`).
pub(super) struct Graphql {
    pub(super) data: Value,
    pub(super) errors: Vec<GraphqlError>,
}

/// One of `errors`: its `type` (GitHub's extension: `NOT_FOUND`, `FORBIDDEN`, `UNPROCESSABLE`,
/// `RATE_LIMITED`...) and `message`.
pub(super) struct GraphqlError {
    pub(super) kind: String,
    pub(super) message: String,
}

impl GraphqlError {
    fn as_error(&self, what: &str) -> GithubError {
        let status = match self.kind.as_str() {
            "NOT_FOUND" => 404,
            "FORBIDDEN" => 403,
            _ => 422,
        };
        GithubError::from_status(what, status, self.message.clone(), None)
    }
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
        let mut r = self
            .send_to(
                what,
                Method::POST,
                "/graphql",
                Some(&json!({"query": op.document, "operationName": op.name, "variables": variables})),
                None,
                deadline,
                Target::Graphql { mutation: op.mutation },
            )
            .await?;
        r.permission = op.permission;
        if !r.status.is_success() {
            return Err(r.api_error(what));
        }
        let v = r.json(what)?;
        let errors: Vec<GraphqlError> = v["errors"]
            .as_array()
            .map(|es| {
                es.iter()
                    .map(|e| GraphqlError {
                        kind: e["type"].as_str().unwrap_or_default().to_owned(),
                        message: e["message"].as_str().unwrap_or("GraphQL error").to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        // "If you exceed your primary rate limit ... the response ... errors ... RATE_LIMITED"
        // ("Rate limits and query limits for the GraphQL API"): try later.
        if let Some(e) = errors.iter().find(|e| e.kind == "RATE_LIMITED") {
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
            enabled_by: a.get("enabledBy").and_then(|b| {
                Some(Actor {
                    login: b["login"].as_str()?.to_owned(),
                    bot: b["__typename"].as_str() == Some("Bot"),
                })
            }),
            method: method(a.get("mergeMethod").and_then(Value::as_str).unwrap_or("MERGE")),
        }),
        viewer: data["viewer"]["login"].as_str().unwrap_or_default().to_owned(),
        required,
    })
}

fn label_names(item: &Value) -> Vec<String> {
    item["labels"]
        .as_array()
        .map(|ls| {
            ls.iter()
                .filter_map(|l| l["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The repository permissions cellbridge writes with (README, "What state-sync does with
/// GitHub"), as an installation's `permissions` names them.
pub(super) const REQUIRED_PERMISSIONS: [(&str, &str); 5] = [
    ("metadata", "read"),
    ("contents", "write"),
    ("pull_requests", "write"),
    ("issues", "write"),
    ("statuses", "write"),
];

/// What `granted` (an installation's `permissions`) lacks of [`REQUIRED_PERMISSIONS`], as
/// `name=level`; `write` grants `read`, `admin` both.
pub(super) fn missing_permissions(granted: &Value) -> Vec<String> {
    let rank = |level: &str| match level {
        "read" => 1,
        "write" => 2,
        "admin" => 3,
        _ => 0,
    };
    REQUIRED_PERMISSIONS
        .iter()
        .filter(|(name, level)| rank(granted[*name].as_str().unwrap_or("")) < rank(level))
        .map(|(name, level)| format!("{name}={level}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_permissions_are_named_and_write_grants_read() {
        let all = json!({"metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "statuses": "write"});
        assert!(missing_permissions(&all).is_empty());
        let mut some = all.clone();
        some["statuses"] = json!("read");
        some.as_object_mut().unwrap().remove("issues");
        some["metadata"] = json!("write");
        assert_eq!(missing_permissions(&some), ["issues=write", "statuses=write"]);
        assert_eq!(missing_permissions(&json!({})).len(), 5);
    }

    #[test]
    fn githubs_times_are_read_to_the_second() {
        assert_eq!(epoch_secs("2026-12-02T10:00:00Z"), Some(1_796_205_600));
        assert_eq!(epoch_secs("1970-01-01T00:00:01Z"), Some(1));
        assert_eq!(epoch_secs("yesterday"), None);
    }
}
