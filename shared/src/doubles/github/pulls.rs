//! Pull requests: opening, their text and labels, comments, closing.
//!
//! - one open pull request per head branch, and none without commits between base and head
//!   or from a head that does not exist (422 "A pull request already exists for ...", "No
//!   commits between ...", `head` `invalid`; <https://docs.github.com/rest/pulls/pulls#create-a-pull-request>),
//!   which the port reports as lost races;
//! - labels added are kept with those already there; the issues endpoint's `labels` replaces
//!   the set (<https://docs.github.com/rest/issues/labels#add-labels-to-an-issue>,
//!   <https://docs.github.com/rest/issues/issues#update-an-issue>);
//! - a closed pull request keeps the head it had when it was closed;
//! - a fork's pull request (`MemPull::head_repo`) may carry the head name of one of the
//!   repository's own branches: the port answers the repository's own pull requests only, as the
//!   adapter tells them apart (REST's `head=owner:branch`, GraphQL's `headRepository`), and the
//!   one open pull request per head is per head *repository* ("A pull request already exists for
//!   acme:branch" names the owner), so a fork's open one does not stop cellbridge's.

use super::auto_merge::MemAutoMerge;
use super::dashboard::now_secs;
use super::{MemGithub, Result, Store, api};
use crate::adapters::github::answers;
use crate::adapters::github::operations::{self as ops, Operation};
use crate::ports::github::{CellReading, GithubError, PullRequest, PullState};

static GRAPHQL_CELL_READING: Operation = ops::GRAPHQL_CELL_READING.as_operation();
static GRAPHQL_LABELLED_ISSUES: Operation = ops::GRAPHQL_LABELLED_ISSUES.as_operation();
static GRAPHQL_BRANCH_PULLS: Operation = ops::GRAPHQL_BRANCH_PULLS.as_operation();

/// The pull requests a page of `cellReading` (and `branchPulls`) holds.
pub(super) const PULLS_PAGE: usize = 10;

/// A pull request as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemPull {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub merged: bool,
    /// Who closed it: `cellbridge`, or `a person`.
    pub closed_by: Option<String>,
    pub comments: Vec<String>,
    // auto-merge
    /// GitHub's auto-merge, while it is on.
    pub auto_merge: Option<MemAutoMerge>,
    /// The logins whose approving review stands.
    pub approvals: Vec<String>,
    /// Who merged it: [`VIEWER`](super::VIEWER) for cellbridge's merge, the login that enabled
    /// auto-merge when GitHub's auto-merge merged it, `a person` for a person's merge.
    pub merged_by: Option<String>,
    /// The head when it was closed or merged: GitHub pins a closed pull request's head ("a closed
    /// PR does not track pushes", open-gsd/gsd-core#4426; it keeps "the stored head sha (which is
    /// what the head was when the pull request was closed)", isaacs/github#361), so a push to the
    /// branch afterwards is not the pull request's.
    pub closed_head: Option<String>,
    /// The fork its head branch is in (`someone/fleet`); `None` for the repository's own branch.
    pub head_repo: Option<String>,
}

impl MemPull {
    /// A pull request as GitHub opens it: no labels, reviews or comments yet.
    pub(super) fn opened(number: u64, head: &str, base: &str, title: &str, body: &str) -> Self {
        MemPull {
            number,
            head: head.to_owned(),
            base: base.to_owned(),
            title: title.to_owned(),
            body: body.to_owned(),
            labels: Vec::new(),
            open: true,
            merged: false,
            closed_by: None,
            comments: Vec::new(),
            auto_merge: None,
            approvals: Vec::new(),
            merged_by: None,
            closed_head: None,
            head_repo: None,
        }
    }

    /// Whether its head branch is the repository's own (not a fork's of the same name).
    pub(super) fn own(&self) -> bool {
        self.head_repo.is_none()
    }

    /// Where it stands, as GitHub tells it.
    pub(super) fn state(&self) -> PullState {
        match (self.open, self.merged) {
            (true, _) => PullState::Open,
            (false, true) => PullState::Merged,
            (false, false) => PullState::Closed,
        }
    }
}

/// The port's pull request primitives (and the issue's, where GitHub's endpoint is the issues').
impl Store {
    pub(super) fn latest_pull(&mut self, branch: &str) -> Result<Option<PullRequest>> {
        self.enter(&ops::PULLS_LIST)?;
        Ok(self.newest_of(branch))
    }

    /// GraphQL's `cellReading`: the newest pull request, the labelled open issues and the base
    /// commit's tree in one request; one more (`branchPulls`) per further ten pull requests of
    /// the head name while none was the repository's own (forks' newer ones filled the page), one
    /// more (`labelledIssues`) per further hundred issues.
    pub(super) fn cell_reading(
        &mut self,
        branch: &str,
        label: &str,
        base: &str,
        base_sha: &str,
    ) -> Result<CellReading> {
        self.enter(&GRAPHQL_CELL_READING)?;
        for _ in 0..self.pages_past_forks(branch, PULLS_PAGE) {
            self.enter(&GRAPHQL_BRANCH_PULLS)?;
        }
        let labelled = self.labelled(label);
        for _ in 1..labelled.len().div_ceil(100) {
            self.enter(&GRAPHQL_LABELLED_ISSUES)?;
        }
        // `object(expression:)` is null for a commit GitHub does not have: read as the adapter
        // reads it.
        let base_tree = self
            .commits
            .get(base_sha)
            .map(|c| c.tree.clone())
            .ok_or_else(|| GithubError::Protocol {
                what: format!("reading the tree of {base_sha}"),
                detail: format!("no commit {base_sha} in the repository"),
            })?;
        // The base's `ref` in the same read: whether it requires signed commits.
        self.signatures_read = Some((base.to_owned(), self.signature_rules.contains_key(base)));
        Ok(CellReading {
            latest: self.newest_of(branch),
            labelled,
            base_tree,
        })
    }

    /// The `branchPulls` pages (of [`PULLS_PAGE`]) read after a first page of `first` pull
    /// requests named `branch`, newest first: GraphQL's `headRefName` lists forks' of the name
    /// too, and the adapter pages on while none was this repository's and more are left.
    pub(super) fn pages_past_forks(&self, branch: &str, first: usize) -> usize {
        let named: Vec<bool> = self
            .pulls
            .iter()
            .rev()
            .filter(|p| p.head == branch)
            .map(MemPull::own)
            .collect();
        match named.iter().position(|own| *own) {
            Some(at) if at < first => 0,
            Some(at) => (at - first) / PULLS_PAGE + 1,
            None => named.len().saturating_sub(first).div_ceil(PULLS_PAGE),
        }
    }

    /// The newest pull request of `branch`, as GitHub's answers give it.
    pub(super) fn newest_of(&self, branch: &str) -> Option<PullRequest> {
        self.pulls
            .iter()
            .rev()
            .find(|p| p.own() && p.head == branch)
            .map(|p| PullRequest {
                number: p.number,
                url: format!("https://github.example/acme/fleet/pull/{}", p.number),
                branch: p.head.clone(),
                title: p.title.clone(),
                state: p.state(),
                // A closed pull request's head is the one it had when it was closed (see
                // `MemPull::closed_head`), also once its branch is deleted.
                head_sha: match (&p.closed_head, p.open) {
                    (Some(pinned), false) => pinned.clone(),
                    _ => self.refs.get(&p.head).cloned().unwrap_or_default(),
                },
                labels: p.labels.clone(),
                body: p.body.clone(),
                node_id: Some(super::auto_merge::node_id(p.number)),
            })
    }

    pub(super) fn create_pull(&mut self, head: &str, base: &str, title: &str, body: &str) -> Result<(u64, String)> {
        self.enter(&ops::PULLS_CREATE)?;
        // GitHub's 422s, read as the adapter reads them: each is a lost race.
        let refused = |message: String| {
            answers::lost_opening(&format!("opening the pull request for {head}"), 422, &message)
                .unwrap_or_else(|| api(&ops::PULLS_CREATE, 422, message))
        };
        let (Some(h), Some(b)) = (self.refs.get(head).cloned(), self.refs.get(base).cloned()) else {
            // GitHub: 422 Validation Failed, `{"field": "head", "code": "invalid"}`.
            return Err(refused("Validation Failed: head invalid".into()));
        };
        if self.pulls.iter().any(|p| p.open && p.own() && p.head == head) {
            return Err(refused(format!("A pull request already exists for acme:{head}.")));
        }
        if self.is_ancestor(&h, &b) {
            // Someone merged it first.
            return Err(refused(format!("No commits between {base} and {head}")));
        }
        let number = self.next_number();
        self.pulls.push(MemPull::opened(number, head, base, title, body));
        self.pull_created.insert(number, now_secs());
        Ok((number, format!("https://github.example/acme/fleet/pull/{number}")))
    }

    pub(super) fn update_pull_text(&mut self, number: u64, title: &str, body: &str, labels: &[String]) -> Result<bool> {
        self.enter(&ops::ISSUES_UPDATE)?;
        self.check_issue_write(&ops::ISSUES_UPDATE, Some(number), body)?;
        let mut labels = labels.to_vec();
        labels.sort();
        labels.dedup();
        if let Some(i) = self.issues.iter_mut().find(|i| i.number == number) {
            i.title = title.to_owned();
            i.body = body.to_owned();
            i.labels = labels;
            return Ok(i.open);
        }
        let Some(p) = self.pulls.iter_mut().find(|p| p.number == number) else {
            return Err(api(&ops::ISSUES_UPDATE, 404, "Not Found"));
        };
        p.title = title.to_owned();
        p.body = body.to_owned();
        p.labels = labels;
        Ok(p.open)
    }

    pub(super) fn add_labels(&mut self, number: u64, labels: &[String]) -> Result<()> {
        self.enter(&ops::ISSUES_ADD_LABELS)?;
        let Some(p) = self.pulls.iter_mut().find(|p| p.number == number) else {
            return Err(api(&ops::ISSUES_ADD_LABELS, 404, "Not Found"));
        };
        p.labels.extend(labels.iter().cloned());
        p.labels.sort();
        p.labels.dedup();
        Ok(())
    }

    pub(super) fn comment(&mut self, number: u64, body: &str) -> Result<()> {
        self.enter(&ops::ISSUES_CREATE_COMMENT)?;
        if let Some(i) = self.issues.iter_mut().find(|i| i.number == number) {
            i.comments.push(body.to_owned());
            return Ok(());
        }
        let Some(p) = self.pulls.iter_mut().find(|p| p.number == number) else {
            return Err(api(&ops::ISSUES_CREATE_COMMENT, 404, "Not Found"));
        };
        p.comments.push(body.to_owned());
        Ok(())
    }

    pub(super) fn close_pull(&mut self, number: u64, body: &str) -> Result<()> {
        self.enter(&ops::PULLS_UPDATE)?;
        let refs = self.refs.clone();
        let Some(p) = self.pulls.iter_mut().find(|p| p.number == number) else {
            return Err(api(&ops::PULLS_UPDATE, 404, "Not Found"));
        };
        if p.open {
            p.closed_by = Some("cellbridge".into());
            p.closed_head = refs.get(&p.head).cloned();
        }
        p.open = false;
        p.auto_merge = None;
        p.body = body.to_owned();
        Ok(())
    }
}

/// What people do to pull requests, and what the tests read of them.
impl MemGithub {
    /// A person edits pull request `number`'s description (its body), as GitHub's "Edit" does.
    pub fn edit_body(&self, number: u64, body: &str) {
        self.with(|s| {
            if let Some(p) = s.pulls.iter_mut().find(|p| p.number == number) {
                p.body = body.to_owned();
            }
            s.journal.push(format!("#{number} body edited by a person"));
        });
    }

    /// A person opens a pull request from `head` (a branch of this repository) into `main`.
    pub fn open_pull_as_person(&self, head: &str, title: &str) -> u64 {
        self.with(|s| {
            let number = s.next_number();
            s.pulls.push(MemPull::opened(number, head, "main", title, ""));
            s.pull_created.insert(number, super::dashboard::now_secs());
            s.journal.push(format!("#{number} opened by a person"));
            number
        })
    }

    /// A person closes pull request `number` without merging it.
    pub fn close(&self, number: u64) {
        self.with(|s| {
            let refs = s.refs.clone();
            if let Some(p) = s.pulls.iter_mut().find(|p| p.number == number && p.open) {
                p.open = false;
                p.closed_head = refs.get(&p.head).cloned();
                p.closed_by = Some("a person".into());
                // Closing cancels auto-merge (see "auto-merge" above).
                p.auto_merge = None;
            }
        });
    }

    /// Someone opens a pull request from their fork `fork`'s branch `branch` (a head name the
    /// repository may have too) into the default branch; closed at once unless `open`. Its number.
    pub fn fork_pull(&self, fork: &str, branch: &str, open: bool) -> u64 {
        self.with(|s| {
            let number = s.next_number();
            let base = s.default_branch.clone();
            let mut p = MemPull::opened(number, branch, &base, &format!("{fork}'s change"), "");
            p.head_repo = Some(fork.to_owned());
            // Its head commit is in the fork; the repository's refs never move it.
            p.closed_head = s.refs.get(&base).cloned();
            if !open {
                p.open = false;
                p.closed_by = Some("a person".into());
            }
            s.pulls.push(p);
            s.pull_created.insert(number, now_secs());
            number
        })
    }

    pub fn pulls(&self) -> Vec<MemPull> {
        self.with(|s| s.pulls.clone())
    }
}
