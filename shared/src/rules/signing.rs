//! Commits on a base branch that requires signed ones. GitHub signs what a GitHub App
//! installation writes through the Git data API (naming no author or committer), and what
//! anyone writes through GraphQL `createCommitOnBranch` or "Update branch"; a personal access
//! token's Git-data commits and `POST /merges` merges are unsigned, and a rule requiring
//! signatures then blocks the pull request with every check green. So, with a token, on such a
//! base: commits go through `createCommitOnBranch` and the base comes in by "Update branch";
//! since that mutation writes every file as a regular one, a file that must stay an executable or
//! a symlink is refused before anything is written. Whether the base requires signatures is asked
//! only where it matters (a token before its first commit, a rebase merge asked of auto-merge, a
//! person's unsigned commit on the pull request): an App on a base without the rule asks nothing.

use std::time::Instant;

use crate::ports::github::{BranchCommit, Comparison, GitData, GithubError, Result};
use crate::pure::fleet::FileMode;
use crate::pure::plan::Plan;
use crate::rules::automerge::Run;
use crate::rules::branch;

/// How cellbridge's commits reach the branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Writer {
    /// Trees, commits and refs (modes kept), merges by `POST /merges`: signed for an App, and
    /// unsigned where nothing requires signatures.
    GitData,
    /// `createCommitOnBranch` and "Update branch": a token on a base requiring signatures.
    Signed,
}

/// How this run writes, asked of GitHub at most once.
#[derive(Default)]
pub(super) struct Signing {
    writer: Option<Writer>,
}

impl Signing {
    pub(super) async fn writer<G: GitData>(&mut self, gh: &G, base: &str, deadline: Instant) -> Result<Writer> {
        if let Some(w) = self.writer {
            return Ok(w);
        }
        let w = if !gh.signs_git_data(deadline).await? && gh.requires_signatures(base, deadline).await? {
            Writer::Signed
        } else {
            Writer::GitData
        };
        self.writer = Some(w);
        Ok(w)
    }
}

/// The plan's files, each writable by `createCommitOnBranch` (a regular file), or the refusal
/// naming the first that is not.
pub(super) fn writable(plan: &Plan, base: &str) -> Result<()> {
    match plan.files.iter().find(|f| f.mode != FileMode::Regular) {
        None => Ok(()),
        Some(f) => Err(GithubError::Unsignable {
            cell: plan.cell.clone(),
            path: f.path.clone(),
            kind: if f.mode == FileMode::Symlink {
                "a symlink"
            } else {
                "an executable"
            },
            mode: f.mode.git_mode(),
            base: base.to_owned(),
        }),
    }
}

/// An eligible head whose opt-in file asks `merge_method: rebase`, on a base requiring signed
/// commits: not eligible, saying why. GitHub cannot sign the commits a rebase merge writes
/// ("Signature verification for rebase and merge"), so the merge would be refused after
/// auto-merge was enabled for it. Asked only where the opt-in file's method applies, a base
/// without a merge queue (the caller, `Run::after_status`, knows once it read the merge state):
/// a queue merges by its own method, whatever the file asks.
pub(super) async fn refuse_rebase<G: GitData>(gh: &G, base: &str, run: &mut Run, deadline: Instant) -> Result<()> {
    if !run.eligibility.eligible || run.method() != crate::ports::github::MergeMethod::Rebase {
        return Ok(());
    }
    if gh.requires_signatures(base, deadline).await? {
        run.eligibility.eligible = false;
        run.eligibility.reasons = vec![format!(
            "`.cellbridge/auto-merge.yaml` asks `merge_method: rebase`, but `{base}` requires signed commits and GitHub cannot sign the commits a rebase merge writes: ask `merge` or `squash`."
        )];
    }
    Ok(())
}

/// The oldest commit of someone else's on the branch (`cmp`: the base compared with the head)
/// that GitHub did not verify, when the base requires signatures: it blocks the pull request.
pub(super) async fn unsigned_commit<G: GitData>(
    gh: &G,
    cmp: &Comparison,
    base: &str,
    branch_name: &str,
    deadline: Instant,
) -> Result<Option<BranchCommit>> {
    let theirs = cmp
        .commits
        .iter()
        .find(|c| c.verified == Some(false) && !branch::nobodys_work(c, base, branch_name));
    match theirs {
        Some(c) if gh.requires_signatures(base, deadline).await? => Ok(Some(c.clone())),
        _ => Ok(None),
    }
}

const BLOCK_OPEN: &str = "<!-- cellbridge-signatures -->";
const BLOCK_CLOSE: &str = "<!-- /cellbridge-signatures -->";

/// `body` with the paragraph naming `unsigned` (replaced in place, added before the marker line),
/// or without it when there is none.
pub(super) fn with_unsigned(body: &str, unsigned: Option<&BranchCommit>, base: &str) -> String {
    let block = unsigned.map(|c| {
        format!(
            "{BLOCK_OPEN}\n`{base}` requires signed commits, and commit {} has no verified signature: GitHub will not merge this pull request, whatever its checks say. Its author can sign it again and force-push the branch, or drop it.\n{BLOCK_CLOSE}",
            branch::describe(c)
        )
    });
    let cleaned = match (body.find(BLOCK_OPEN), body.find(BLOCK_CLOSE)) {
        (Some(a), Some(b)) if a < b => {
            let rest = &body[b + BLOCK_CLOSE.len()..];
            format!(
                "{}{}",
                body[..a].trim_end(),
                rest.strip_prefix('\n').map_or(rest.to_owned(), |r| format!("\n{r}"))
            )
        }
        _ => body.to_owned(),
    };
    let Some(block) = block else { return cleaned };
    match cleaned.rfind("<!-- cellbridge:") {
        Some(i) => format!("{}\n\n{block}\n{}", cleaned[..i].trim_end(), &cleaned[i..]),
        None => format!("{}\n\n{block}\n", cleaned.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paragraph_is_added_replaced_and_removed_in_place() {
        let c = BranchCommit {
            sha: "0123456789abcdef".into(),
            message: "a note".into(),
            author: Some("alice".into()),
            verified: Some(false),
        };
        let body = "values\n<!-- cellbridge:digest=d -->\n";
        let with = with_unsigned(body, Some(&c), "main");
        assert!(with.contains("0123456789ab by alice"), "{with}");
        assert!(
            with.ends_with("<!-- /cellbridge-signatures -->\n<!-- cellbridge:digest=d -->\n"),
            "{with}"
        );
        assert_eq!(with_unsigned(&with, Some(&c), "main"), with);
        assert_eq!(with_unsigned(&with, None, "main"), body);
    }
}
