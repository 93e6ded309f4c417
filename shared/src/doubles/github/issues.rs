//! Issues (not pull requests): opening, listing by label, closing.
//!
//! - an issue's body is at most 65,536 characters: a longer one is 422 Validation Failed, "body
//!   is too long (maximum is 65536 characters)" (GitHub's answer as clients quote it,
//!   <https://github.com/PyGithub/PyGithub/issues/1906>); a repository whose issues are turned off
//!   answers 410 to creating or updating one ("Create an issue", "Update an issue": 410 Gone,
//!   <https://docs.github.com/rest/issues/issues#create-an-issue>), while listing them still
//!   answers (<https://github.com/ingydotnet/git-hub/issues/72>); an issue closes as `completed`
//!   unless a `state_reason` (`duplicate`, `not_planned`) says otherwise
//!   (<https://docs.github.com/rest/issues/issues#update-an-issue>).

use super::{MemGithub, Result, Store, api};
use crate::adapters::github::operations::{self as ops, Operation};
use crate::ports::github::{CloseReason, Issue};
use crate::pure::status::BODY_LIMIT;

/// An issue (not a pull request) as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemIssue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub comments: Vec<String>,
}

impl Store {
    /// GitHub's refusals of an issue write: issues turned off (410), a body too long (422).
    pub(super) fn check_issue_write(&self, op: &Operation, number: Option<u64>, body: &str) -> Result<()> {
        let plain = number.is_none_or(|n| self.issues.iter().any(|i| i.number == n));
        if plain && self.issues_disabled {
            return Err(api(op, 410, "Issues are disabled for this repo"));
        }
        if body.chars().count() > BODY_LIMIT {
            return Err(api(
                op,
                422,
                format!("Validation Failed: body is too long (maximum is {BODY_LIMIT} characters)"),
            ));
        }
        Ok(())
    }
}

/// The port's issue primitives.
impl Store {
    pub(super) fn open_issues(&mut self, label: &str) -> Result<Vec<Issue>> {
        self.enter(&ops::ISSUES_LIST_FOR_REPO)?;
        Ok(self.labelled(label))
    }

    /// The open issues carrying `label`, oldest first.
    pub(super) fn labelled(&self, label: &str) -> Vec<Issue> {
        self.issues
            .iter()
            .filter(|i| i.open && i.labels.iter().any(|l| l == label))
            .map(|i| Issue {
                number: i.number,
                url: format!("https://github.example/acme/fleet/issues/{}", i.number),
                title: i.title.clone(),
                body: i.body.clone(),
                labels: i.labels.clone(),
            })
            .collect()
    }

    pub(super) fn create_issue(&mut self, title: &str, body: &str, labels: &[String]) -> Result<(u64, String)> {
        self.enter(&ops::ISSUES_CREATE)?;
        self.check_issue_write(&ops::ISSUES_CREATE, None, body)?;
        let number = self.next_number();
        self.issues.push(MemIssue {
            number,
            title: title.to_owned(),
            body: body.to_owned(),
            labels: labels.to_vec(),
            open: true,
            comments: Vec::new(),
        });
        Ok((number, format!("https://github.example/acme/fleet/issues/{number}")))
    }

    pub(super) fn close_issue(&mut self, number: u64, body: &str, reason: CloseReason) -> Result<()> {
        self.enter(&ops::ISSUES_UPDATE)?;
        self.check_issue_write(&ops::ISSUES_UPDATE, Some(number), body)?;
        let Some(i) = self.issues.iter_mut().find(|i| i.number == number) else {
            return Err(api(&ops::ISSUES_UPDATE, 404, "Not Found"));
        };
        i.open = false;
        i.body = body.to_owned();
        self.state_reasons.insert(number, reason.state_reason());
        Ok(())
    }
}

/// What people do to issues, and what the tests read of them.
impl MemGithub {
    /// Every issue (not pull request), in number order.
    pub fn issues(&self) -> Vec<MemIssue> {
        self.with(|s| s.issues.clone())
    }

    /// Why issue `number` was closed (`completed`, `duplicate`), `None` while it is open.
    pub fn issue_state_reason(&self, number: u64) -> Option<&'static str> {
        self.with(|s| {
            s.issues
                .iter()
                .find(|i| i.number == number && !i.open)
                .map(|i| s.state_reasons.get(&i.number).copied().unwrap_or("completed"))
        })
    }

    /// The repository's issues are turned off in its settings.
    pub fn disable_issues(&self) {
        self.with(|s| s.issues_disabled = true);
    }

    /// Another run (or a person) opens an issue: its number.
    pub fn open_issue(&self, title: &str, body: &str, labels: &[&str]) -> u64 {
        self.with(|s| {
            let number = s.next_number();
            s.issues.push(MemIssue {
                number,
                title: title.to_owned(),
                body: body.to_owned(),
                labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                open: true,
                comments: Vec::new(),
            });
            number
        })
    }

    /// A person closing an issue.
    pub fn close_issue_by_hand(&self, number: u64) {
        self.with(|s| {
            if let Some(i) = s.issues.iter_mut().find(|i| i.number == number) {
                i.open = false;
            }
        });
    }
}
