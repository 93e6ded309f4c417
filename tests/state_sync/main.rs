//! state-sync end to end: real Terraform writes real state into moto's S3, the notification
//! moto sends to SQS is received and handed to the real Lambda handler, which reads the latest
//! state and talks to the fake GitHub. Assertions look at what a user would see on GitHub.
//!
//! Where `terraform` is absent, each apply uploads the state file recorded from a real run
//! (`tests/fixtures/state_sync/`) instead, and the test says so. Set
//! `CELLBRIDGE_RECORD_FIXTURES=1` with Terraform installed to re-record them.
//!
//! One file per rule (each file's doc says which it holds); the bed they share is `support`.

mod aws;
mod dashboard_and_decommission;
mod failures;
mod operator;
mod pull_request;
mod support;
