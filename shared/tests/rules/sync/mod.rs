//! state-sync's orchestration rules over the in-memory ports (feature `test-support`): the
//! product's own orchestrator and pull request logic, GitHub's primitives and the state bucket in
//! memory (the bed: `crate::support::sync`). Each rule in milliseconds; the end-to-end tests in
//! `tests/` run the same code against moto, real Terraform and the HTTP fake GitHub. One file per
//! rule:

/// Retryable and final failures, the deadline, and the answers to Lambda and SQS.
mod failures;
/// The sync-all fan-out through the queue.
mod fan_out;
/// The pause switch and the outcome metrics.
mod pause_and_metrics;
/// What people do to the pull request, and runs racing each other for it.
mod people_and_races;
/// A new cell, a replay, an update, a merge and a revert: the cell's branch and pull request.
mod pull_request;
/// What is read from GitHub per invocation, and never the whole repository.
mod reads;
/// Refused states and refused access, and where each is told.
mod refusals;
/// Thousands of seeded schedules of Terraform, people and GitHub, and what must hold in each.
mod schedules;
