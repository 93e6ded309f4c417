//! In-memory doubles of every port, with the real services' rules (GitHub's merge and status
//! rules, EKS's access entries, Kubernetes' server-side apply), for the rule and scenario tests.
//! Only with the `test-support` feature: never in the shipped functions.

pub mod cluster;
pub mod github;
pub mod queue;
pub mod s3;
pub mod secrets;
