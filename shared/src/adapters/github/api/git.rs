//! Git data: trees, commits, blobs and refs ("Git database" API), and a branch's head.

use std::time::Instant;

use base64::Engine as _;
use http::StatusCode;
use serde_json::{Value, json};

use crate::adapters::github::answers;
use crate::adapters::github::operations as ops;
use crate::adapters::github::transport::{enc, sha_of};
use crate::ports::github::TreeFiles;
use crate::pure::fleet::FileWrite;
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

impl GithubFleet {
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

    pub(super) async fn tree_files(&self, commit: &str, deadline: Instant) -> Result<TreeFiles> {
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

    pub(super) async fn read_blob(&self, blob: &str, deadline: Instant) -> Result<Vec<u8>> {
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

    pub(super) async fn create_tree(
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

    pub(super) async fn create_commit(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
        deadline: Instant,
    ) -> Result<String> {
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
    pub(super) async fn move_branch(&self, branch: &str, from: &str, commit: &str, deadline: Instant) -> Result<()> {
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
                Err(answers::ref_update_refused(
                    &what,
                    r.status.as_u16(),
                    &message,
                    now.as_deref() != Some(from),
                ))
            }
            _ => Err(r.api_error(&what)),
        }
    }

    /// Creates the branch; `Ok(false)` when it already exists.
    pub(super) async fn create_branch(&self, branch: &str, commit: &str, deadline: Instant) -> Result<bool> {
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
    pub(super) async fn branch_head(&self, branch: &str, deadline: Instant) -> Result<Option<(String, String)>> {
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

    pub(super) async fn delete_branch_at(&self, branch: &str, head: &str, deadline: Instant) -> Result<bool> {
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
}
