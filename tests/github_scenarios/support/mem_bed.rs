//! The in-memory GitHub as a scenario's bed: `MemGithub` driven directly.

use super::*;
use cellbridge::adapters::github::operations::{self as ops, Operation};
use cellbridge::doubles::github::{Fault, MemGithub};
use std::collections::BTreeMap;

/// The in-memory double: the Syncer's repository is the store itself.
pub(crate) struct MemBed;

impl Bed for MemBed {
    type Repo = MemGithub;
    const RETRIES_IN_CLIENT: bool = false;

    fn start(files: &[(String, String)]) -> (Self, MemGithub) {
        (MemBed, MemGithub::new("main", files))
    }

    fn commit(&self, repo: &MemGithub, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        repo.commit(branch, files, message)
    }

    fn delete(&self, repo: &MemGithub, branch: &str, paths: &[&str], message: &str) -> String {
        repo.delete_files(branch, paths, message)
    }

    fn merge(&self, repo: &MemGithub, number: u64) -> Result<(), String> {
        repo.try_merge(number).map(drop).map_err(|refused| refused.to_string())
    }

    fn close(&self, repo: &MemGithub, number: u64) {
        repo.close(number);
    }

    fn update_branch(&self, repo: &MemGithub, number: u64) {
        let _ = repo.update_branch(number);
    }

    fn pulls(&self, repo: &MemGithub) -> Vec<Pull> {
        repo.pulls()
            .into_iter()
            .map(|p| Pull {
                number: p.number,
                head: p.head,
                title: p.title,
                labels: p.labels,
                open: p.open,
                merged: p.merged,
                body: p.body,
                comments: p.comments,
            })
            .collect()
    }

    fn issues(&self, repo: &MemGithub) -> Vec<IssueSeen> {
        repo.issues()
            .into_iter()
            .map(|i| IssueSeen {
                number: i.number,
                state_reason: repo.issue_state_reason(i.number).map(str::to_owned),
                title: i.title,
                body: i.body,
                labels: i.labels,
                open: i.open,
            })
            .collect()
    }

    fn files(&self, repo: &MemGithub, branch: &str) -> BTreeMap<String, String> {
        repo.files(branch)
    }

    fn head(&self, repo: &MemGithub, branch: &str) -> Option<String> {
        repo.head(branch)
    }

    fn commits_ahead(&self, repo: &MemGithub, branch: &str) -> usize {
        repo.commits_ahead(branch)
    }

    fn statuses(&self, repo: &MemGithub, sha: &str) -> Vec<Status> {
        repo.statuses(sha)
            .into_iter()
            .map(|s| Status {
                context: s.context,
                success: s.success,
                pending: s.pending,
                description: s.description,
            })
            .collect()
    }

    fn writes(&self, repo: &MemGithub) -> usize {
        repo.writes()
    }

    fn requests(&self, repo: &MemGithub) -> usize {
        repo.calls().len()
    }

    fn transient(&self, repo: &MemGithub, op: &Operation) {
        repo.fail(op, 1, Fault::Transient);
    }

    fn refuse_once(&self, repo: &MemGithub, op: &Operation, status: u16) {
        repo.fail(op, 1, Fault::Status(status));
    }

    fn open_pull_as_person(&self, repo: &MemGithub, head: &str, title: &str) -> u64 {
        repo.open_pull_as_person(head, title)
    }

    fn graphql_times_out(&self, repo: &MemGithub, op: &Operation, times: usize) {
        repo.fail(op, times, Fault::TimedOut);
    }

    fn graphql_field_refused(&self, repo: &MemGithub, op: &Operation, path: &'static str) {
        repo.fail(op, 1, Fault::FieldRefused(path));
    }

    fn graphql_untyped_error(&self, repo: &MemGithub, op: &Operation, times: usize) {
        repo.fail(op, times, Fault::Untyped);
    }

    fn graphql_unknown_error(&self, repo: &MemGithub, op: &Operation, times: usize) {
        repo.fail(op, times, Fault::UnknownType);
    }

    fn graphql_server_error(&self, repo: &MemGithub, op: &Operation) {
        repo.fail(op, 1, Fault::Transient);
    }

    fn merge_state_unknown_enum(&self, repo: &MemGithub) {
        repo.fail(
            &ops::GRAPHQL_MERGE_STATE.as_operation(),
            1,
            Fault::Unreadable("mergeStateStatus \"QUEUED\" is not one cellbridge knows"),
        );
    }

    fn merge_answer_lost(&self, repo: &MemGithub) {
        repo.fail(&ops::PULLS_MERGE, 1, Fault::AnswerLost);
    }

    fn merge_state_not_computed(&self, repo: &MemGithub, number: u64) {
        repo.merge_state_not_computed(number);
    }

    fn race(&self, repo: &MemGithub, op: &Operation, branch: &str, files: &[(&str, &str)]) {
        repo.race(op, branch, files);
    }

    fn merge_before(&self, repo: &MemGithub, op: &Operation, number: u64) {
        repo.merge_before(op, number);
    }

    fn edit_body(&self, repo: &MemGithub, number: u64, body: &str) {
        repo.edit_body(number, body);
    }

    fn commit_bytes(&self, repo: &MemGithub, branch: &str, path: &str, bytes: &[u8], message: &str) -> String {
        repo.commit_bytes(branch, path, bytes, message)
    }

    fn force_push(&self, repo: &MemGithub, branch: &str, commit: &str) {
        repo.force_push(branch, commit);
    }

    fn issue_listings(&self, repo: &MemGithub) -> usize {
        repo.calls()
            .iter()
            .filter(|c| **c == ops::ISSUES_LIST_FOR_REPO.id)
            .count()
    }

    fn open_issue(&self, repo: &MemGithub, title: &str, body: &str, labels: &[&str]) -> u64 {
        repo.open_issue(title, body, labels)
    }

    fn disable_issues(&self, repo: &MemGithub) {
        repo.disable_issues();
    }

    fn fork_pull(&self, repo: &MemGithub, branch: &str, open: bool) -> u64 {
        repo.fork_pull(FORK, branch, open)
    }

    const CELLBRIDGE: &'static str = cellbridge::doubles::github::VIEWER;

    fn allow_auto_merge(&self, repo: &MemGithub, on: bool) {
        repo.allow_auto_merge(on);
    }

    fn protect_main(&self, repo: &MemGithub, protection: Option<(&[&str], u32, bool)>) {
        repo.protect_branch(
            "main",
            protection.map(
                |(contexts, approvals, strict)| cellbridge::doubles::github::Protection {
                    contexts: contexts.iter().map(|c| c.to_string()).collect(),
                    strict,
                    approvals,
                },
            ),
        );
    }

    fn ci(&self, repo: &MemGithub, sha: &str, context: &str, passed: bool) {
        let state = if passed {
            cellbridge::ports::github::CheckState::Passed
        } else {
            cellbridge::ports::github::CheckState::Failed
        };
        repo.post_check(sha, context, state);
    }

    fn approve(&self, repo: &MemGithub, number: u64) {
        repo.approve(number, REVIEWER);
    }

    fn enable_auto_merge_as_reviewer(&self, repo: &MemGithub, number: u64) {
        assert_eq!(
            repo.enable_auto_merge_as(number, REVIEWER).unwrap(),
            cellbridge::ports::github::AutoMergeAnswer::Enabled
        );
    }

    fn auto_merge(&self, repo: &MemGithub, number: u64) -> (Option<String>, Option<String>) {
        let p = repo.pulls().into_iter().find(|p| p.number == number).unwrap();
        (p.auto_merge.map(|a| a.enabled_by), p.merged_by)
    }

    fn credentials(w: &mut World<Self>, token: bool) {
        // The double starts as an App installation's, whose Git-data commits GitHub signs.
        if token {
            w.repo().use_token();
        }
    }

    fn require_signatures(&self, repo: &MemGithub, ruleset: bool) {
        use cellbridge::doubles::github::SignatureRule;
        let rule = if ruleset {
            SignatureRule::Ruleset
        } else {
            SignatureRule::Protection
        };
        repo.require_signatures("main", Some(rule));
    }

    fn verified_commits(&self, repo: &MemGithub, branch: &str) -> Vec<(String, bool)> {
        repo.commits_verified("main", branch)
    }

    fn commit_executable(&self, repo: &MemGithub, branch: &str, path: &str, text: &str) -> String {
        repo.commit_executable(branch, path, text, "a script")
    }

    fn signature_reads(&self, repo: &MemGithub) -> usize {
        repo.calls()
            .iter()
            .filter(|c| **c == ops::REPOS_GET_BRANCH_RULES.id)
            .count()
    }

    fn require_merge_queue(&self, repo: &MemGithub, method: Option<cellbridge::ports::github::MergeMethod>) {
        repo.require_merge_queue("main", method);
    }

    fn merge_group(&self, repo: &MemGithub, number: u64) -> Option<MergeGroup> {
        repo.merge_group(number).map(|g| MergeGroup {
            head_sha: g.head_sha,
            head_ref: g.head_ref,
            base_sha: g.base_sha,
            base_ref: g.base_ref,
        })
    }

    fn commit_files(&self, repo: &MemGithub, sha: &str) -> BTreeMap<String, String> {
        repo.files_at(sha)
    }

    fn queued_by(&self, repo: &MemGithub, number: u64) -> Option<String> {
        repo.queued_by(number)
    }

    fn enqueue_as_reviewer(&self, repo: &MemGithub, number: u64) {
        assert_eq!(
            repo.enqueue_as(number, REVIEWER).unwrap(),
            cellbridge::ports::github::QueueAnswer::Queued
        );
    }
}
