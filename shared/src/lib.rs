//! cellbridge: carries the identifiers Terraform knows into the Flux fleet repo, through a
//! reviewed pull request, and gives every new EKS cluster its first Flux bootstrap.
//!
//! The two main paths:
//!
//! - **A state event becomes a pull request.** `functions/state-sync` → [`sync::lambda_handler`]
//!   (`sync/handler.rs`) → [`sync::Syncer::handle`] (`sync/syncer.rs`: the event's state
//!   objects) → [`sync::Syncer::sync_object`] (the state read whole from a
//!   [`s3::StateSource`], planned against the fleet repo's base branch with [`plan`], redone on
//!   a lost race) → [`github::proposal::converge`] (which kind of proposal takes the cell's
//!   branch; then open, update or close its pull request) → GitHub's primitives, [`github::GithubRepo`], which `github/api.rs` sends
//!   through `github/transport.rs`.
//! - **A new cluster gets Flux.** `functions/cluster-bootstrap` →
//!   [`bootstrap::handler::lambda_handler`] → [`bootstrap::Bootstrapper`] (`bootstrap/mod.rs`:
//!   find the cell, wait for ACTIVE, temporary access, the plan of objects in order) → the
//!   cluster's [`bootstrap::KubeApi`] (`bootstrap/apply/`: server-side apply, CRDs Established
//!   first).
//!
//! Below both: the pure core, no network I/O, tested in milliseconds (`tfstate`, `metadata`,
//! `configmap`, `envsubst`, `check`, `plan`, `template`, `events`, `fleet`); the one error model
//! ([`error`]); the outside services as ports ([`github::GithubRepo`], [`s3::StateSource`],
//! [`secrets::SecretStore`], `bootstrap/ports.rs`), each with its real adapter; the Lambda shell
//! (`lambda`, `telemetry`, `config`). With the `test-support` feature, `github::memory`,
//! `s3::memory`, `secrets::memory` and `bootstrap::memory` hold in-memory doubles of GitHub, the
//! state bucket, Secrets Manager, EKS/STS and Kubernetes with the real services' rules.

pub mod automerge;
pub mod backoff;
pub mod bootstrap;
pub mod cells;
pub mod check;
pub mod config;
pub mod configmap;
pub mod decommission;
pub mod envsubst;
pub mod error;
pub mod events;
pub mod fleet;
pub mod github;
pub mod lambda;
mod markdown;
pub mod metadata;
pub mod metrics;
pub mod pause;
pub mod plan;
pub mod record;
pub mod redact;
pub mod retry;
pub mod s3;
pub mod secrets;
pub mod status;
pub mod sync;
pub mod telemetry;
pub mod template;
pub mod tfstate;
mod yaml;
