//! The ports implemented against the real services: GitHub (REST and GraphQL, through octocrab),
//! S3, Secrets Manager, EKS and STS (the AWS SDK), Kubernetes (kube-rs). Each classifies its
//! service's answers once ([`crate::shell::error::Class`]); GitHub's classifier is shared with its
//! double, so both halves of every scenario go through the same matching.

pub mod aws;
pub mod github;
pub mod kube;
pub mod probe;
pub mod s3;
pub mod secrets;
