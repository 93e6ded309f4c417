//! Signed commits: whether the base branch requires them (a ruleset's `required_signatures`,
//! classic protection's "Require signed commits"), a commit GitHub signs whatever the
//! credentials (GraphQL `createCommitOnBranch`), and the base merged in by GitHub's "Update
//! branch", whose merge commit GitHub signs.

use std::time::{Duration, Instant};

use base64::Engine as _;
use http::StatusCode;
use serde_json::{Value, json};

use crate::adapters::github::operations as ops;
use crate::adapters::github::transport::enc;
use crate::ports::github::Merge;
use crate::pure::fleet::FileWrite;
use crate::{adapters::github::GithubFleet, ports::github::GithubError, ports::github::Result};

/// How long an answer to "does the branch require signatures" is kept: a warm process asks at
/// most this often, so one invocation asks at most once, and a rule added is seen within it.
const SIGNATURES_KEPT: Duration = Duration::from_secs(300);

/// How often, and how far apart, the branch is read after "Update branch": GitHub answers 202
/// and merges asynchronously ("Update a pull request branch").
const UPDATE_READS: u32 = 5;
const UPDATE_PAUSE: Duration = Duration::from_millis(400);

impl GithubFleet {
    pub(super) async fn signs_git_data(&self, deadline: Instant) -> Result<bool> {
        // "Signature verification for bots will only work if the request is verified and
        // authenticated as the GitHub App or bot and contains no custom author information,
        // custom committer information, and no custom signature information" (GitHub's
        // "About commit signature verification"); cellbridge names none. A personal access
        // token's Git-data commits carry no signature (`verification.reason: unsigned`).
        Ok(self.installation(deadline).await?.is_some())
    }

    pub(super) async fn requires_signatures(&self, branch: &str, deadline: Instant) -> Result<bool> {
        if let Some((b, required, when)) = self.signatures.lock().expect("signatures").clone()
            && b == branch
            && when.elapsed() < SIGNATURES_KEPT
        {
            return Ok(required);
        }
        let required = self.ruleset_requires_signatures(branch, deadline).await?
            || self.protection_requires_signatures(branch, deadline).await?;
        self.keep_signatures(branch, required);
        Ok(required)
    }

    /// `branch` requires signed commits or not, as GitHub just answered (here, or in a cell's
    /// reading): kept for [`SIGNATURES_KEPT`].
    pub(super) fn keep_signatures(&self, branch: &str, required: bool) {
        *self.signatures.lock().expect("signatures") = Some((branch.to_owned(), required, Instant::now()));
    }

    async fn ruleset_requires_signatures(&self, branch: &str, deadline: Instant) -> Result<bool> {
        let what = format!("reading the rules of branch {branch}");
        let r = self
            .repo_call(
                &what,
                &ops::REPOS_GET_BRANCH_RULES,
                &format!("/rules/branches/{}?per_page=100", enc(branch)),
                None,
                deadline,
            )
            .await?;
        Ok(r.json(&what)?
            .as_array()
            .is_some_and(|rules| rules.iter().any(|r| r["type"] == "required_signatures")))
    }

    async fn protection_requires_signatures(&self, branch: &str, deadline: Instant) -> Result<bool> {
        let what = format!("reading the protection of branch {branch}");
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_REF_UPDATE_RULE,
                json!({"owner": self.owner, "name": self.repo, "ref": format!("refs/heads/{branch}")}),
                deadline,
            )
            .await?;
        if let Some(e) = answer.errors.first() {
            return Err(e.as_error(&what));
        }
        // No protection rule matches: `refUpdateRule` is null.
        Ok(answer.data["repository"]["ref"]["refUpdateRule"]["requiresSignatures"] == true)
    }

    pub(super) async fn commit_on_branch(
        &self,
        branch: &str,
        expected_head: &str,
        files: &[FileWrite],
        removed: &[String],
        message: &str,
        deadline: Instant,
    ) -> Result<String> {
        let what = format!("committing {} file(s) on {branch} (createCommitOnBranch)", files.len());
        // `FileAddition.contents` is "the base64 encoded contents of the file"; a deletion names
        // its path; `CommitMessage` is a headline and a body (GraphQL reference, input objects).
        let additions: Vec<Value> = files
            .iter()
            .map(|f| json!({"path": f.path, "contents": base64::engine::general_purpose::STANDARD.encode(&f.content)}))
            .collect();
        let deletions: Vec<Value> = removed.iter().map(|p| json!({"path": p})).collect();
        let (headline, body) = message.split_once("\n\n").unwrap_or((message, ""));
        let input = json!({
            "branch": {"repositoryNameWithOwner": format!("{}/{}", self.owner, self.repo), "branchName": branch},
            "expectedHeadOid": expected_head,
            "message": {"headline": headline.trim_end(), "body": body},
            "fileChanges": {"additions": additions, "deletions": deletions},
        });
        let answer = self
            .graphql(
                &what,
                &ops::GRAPHQL_CREATE_COMMIT_ON_BRANCH,
                json!({"input": input}),
                deadline,
            )
            .await?;
        if let Some(oid) = answer.data["createCommitOnBranch"]["commit"]["oid"].as_str() {
            return Ok(oid.to_owned());
        }
        let Some(e) = answer.errors.first() else {
            return Err(GithubError::Protocol {
                what,
                detail: "no commit in the answer".into(),
            });
        };
        // The branch gone (`NOT_FOUND`: "A ref named ... does not exist"): another run deleted
        // it between its creation and this commit, and may have made it again since; a lost
        // race either way, redone on a fresh read.
        if e.kind == "NOT_FOUND" {
            return Err(GithubError::Conflict {
                what,
                detail: e.message.clone(),
            });
        }
        // GitHub documents the check (`expectedHeadOid`), not its refusal's words: the branch as
        // it is now tells a head that moved from another refusal (a rule, a missing permission).
        match self.branch_head(branch, deadline).await? {
            Some((now, _)) if now == expected_head => Err(e.as_error(&what)),
            _ => Err(GithubError::Conflict {
                what,
                detail: e.message.clone(),
            }),
        }
    }

    pub(super) async fn update_pull_branch(
        &self,
        number: u64,
        branch: &str,
        expected_head: &str,
        deadline: Instant,
    ) -> Result<Merge> {
        let what = format!("updating the branch of pull request #{number}");
        let r = self
            .repo_send(
                &what,
                &ops::PULLS_UPDATE_BRANCH,
                &format!("/pulls/{number}/update-branch"),
                Some(&json!({"expected_head_sha": expected_head})),
                deadline,
            )
            .await?;
        if r.status == StatusCode::UNPROCESSABLE_ENTITY {
            // Every refusal is a 422 ("Update a pull request branch"): the head read again tells
            // a head that moved (a lost race) from a conflict or nothing to merge.
            let message = r.message();
            let now = self.branch_head(branch, deadline).await?.map(|(sha, _)| sha);
            if now.as_deref() != Some(expected_head) {
                return Err(GithubError::Conflict { what, detail: message });
            }
            let m = message.to_ascii_lowercase();
            return if m.contains("conflict") {
                Ok(Merge::Conflict)
            } else if m.contains("no new commits") {
                Ok(Merge::UpToDate)
            } else {
                Err(r.api_error(&what))
            };
        }
        if !r.status.is_success() {
            return Err(r.api_error(&what));
        }
        // 202: "the merge happens asynchronously"; the new head is the branch's once it moved.
        for attempt in 0..UPDATE_READS {
            if let Some((now, _)) = self.branch_head(branch, deadline).await?
                && now != expected_head
            {
                return Ok(Merge::Merged(now));
            }
            if attempt + 1 < UPDATE_READS && Instant::now() + UPDATE_PAUSE < deadline {
                tokio::time::sleep(UPDATE_PAUSE).await;
            }
        }
        Err(GithubError::Transient {
            what,
            detail: "GitHub accepted the update but the branch had not moved yet".into(),
        })
    }
}
