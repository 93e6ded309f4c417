//! The typed calls: GitHub's primitives ([`GithubRepo`]) over the REST API, one documented
//! operation of [`super::operations`] each, naming what they do in their errors.

use std::time::Instant;

use http::StatusCode;
use serde_json::{Value, json};

use super::operations as ops;
use super::port::{GithubRepo, OpenPull};
use super::transport::{enc, sha_of, url_query};
use super::{GithubError, GithubFleet, Result, Snapshot};

impl GithubFleet {
    pub(super) async fn base_branch(&self, deadline: Instant) -> Result<String> {
        self.base_branch
            .get_or_try_init(|| async {
                let what = format!("reading repository {}", self.repo_name());
                let r = self.repo_call(&what, &ops::REPOS_GET, "", None, deadline).await?;
                r.json(&what)?
                    .get("default_branch")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| GithubError::Protocol {
                        what,
                        detail: "no default_branch".into(),
                    })
            })
            .await
            .cloned()
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
    async fn read_base(&self, deadline: Instant) -> Result<Snapshot> {
        self.download_snapshot(deadline).await
    }

    async fn open_pull(&self, branch: &str, deadline: Instant) -> Result<Option<OpenPull>> {
        let what = format!("listing open pull requests of {branch}");
        let q: String = url_query(&[
            ("state", "open"),
            ("head", &format!("{}:{branch}", self.owner)),
            ("per_page", "10"),
        ]);
        let r = self
            .repo_call(&what, &ops::PULLS_LIST, &format!("/pulls?{q}"), None, deadline)
            .await?;
        let list = r.json(&what)?;
        let Some(pr) = list.as_array().and_then(|a| a.first()) else {
            return Ok(None);
        };
        Ok(Some(OpenPull {
            number: pr["number"].as_u64().ok_or_else(|| GithubError::Protocol {
                what: what.clone(),
                detail: "pull request without number".into(),
            })?,
            url: pr["html_url"].as_str().unwrap_or_default().to_owned(),
            head_sha: pr["head"]["sha"].as_str().unwrap_or_default().to_owned(),
            labels: pr["labels"]
                .as_array()
                .map(|ls| {
                    ls.iter()
                        .filter_map(|l| l["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            body: pr["body"].as_str().unwrap_or_default().to_owned(),
        }))
    }

    async fn create_tree(&self, snap: &Snapshot, files: &[(String, String)], deadline: Instant) -> Result<String> {
        let what = format!("creating a tree of {} file(s) on {}", files.len(), snap.base_sha);
        let entries: Vec<Value> = files
            .iter()
            .map(|(path, content)| json!({"path": path, "mode": "100644", "type": "blob", "content": content}))
            .collect();
        let mut base_tree = snap.base_tree.clone();
        loop {
            let base = match &base_tree {
                Some(t) => t.clone(),
                None => self.commit_tree(&snap.base_sha, deadline).await?,
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
            // A tree id computed from the archive can miss what archives leave out (submodules,
            // export-ignore): ask GitHub for the real one once.
            if r.status == StatusCode::UNPROCESSABLE_ENTITY && snap.base_tree.is_some() && base_tree.is_some() {
                tracing::info!(base = %snap.base_sha, "locally computed base tree unknown to GitHub; reading it");
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
    async fn move_branch(&self, branch: &str, commit: &str, deadline: Instant) -> Result<()> {
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
            StatusCode::UNPROCESSABLE_ENTITY | StatusCode::CONFLICT => Err(GithubError::Conflict {
                what,
                detail: r.message(),
            }),
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

    async fn close_pull(&self, number: u64, deadline: Instant) -> Result<()> {
        let what = format!("closing pull request #{number}");
        self.repo_call(
            &what,
            &ops::PULLS_UPDATE,
            &format!("/pulls/{number}"),
            Some(&json!({"state": "closed"})),
            deadline,
        )
        .await?;
        Ok(())
    }

    async fn delete_branch(&self, branch: &str, deadline: Instant) -> Result<()> {
        let what = format!("deleting branch {branch}");
        let r = self
            .repo_send(
                &what,
                &ops::GIT_DELETE_REF,
                &format!("/git/refs/heads/{}", enc(branch)),
                None,
                deadline,
            )
            .await?;
        // Already gone is fine: someone (or GitHub's auto-delete) was first.
        if !r.status.is_success() && r.status != StatusCode::UNPROCESSABLE_ENTITY && r.status != StatusCode::NOT_FOUND {
            return Err(r.api_error(&what));
        }
        Ok(())
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
        if r.status == StatusCode::UNPROCESSABLE_ENTITY && r.message().contains("already exists") {
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
    ) -> Result<()> {
        let what = format!("updating pull request #{number}");
        // The issues endpoint sets title, body and labels in one request.
        self.repo_call(
            &what,
            &ops::ISSUES_UPDATE,
            &format!("/issues/{number}"),
            Some(&json!({"title": title, "body": body, "labels": labels})),
            deadline,
        )
        .await?;
        Ok(())
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
}
