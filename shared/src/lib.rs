//! cellbridge: carries the identifiers Terraform knows into the Flux fleet repo, through a
//! reviewed pull request, and gives every new EKS cluster its first Flux bootstrap.
//!
//! # The two chains
//!
//! From the Lambda handler to the port method that sends the request, each arrow one call, each
//! step one TRACE span of that name (target [`lambda::CHAIN`]); `shared/tests/rules/chains.rs`
//! drives both handlers on the in-memory doubles and checks the path taken against these lines.
//!
//! **A state event becomes a pull request** (`functions/state-sync`):
//! [`lambda::handler`] → [`Syncer::run`](lambda::Job::run) → [`proposal::converge`](github::proposal::converge) → [`pull_request::converge_from`](github::pull_request::converge_from) → [`pull_request::open`](github::pull_request::open) → [`GithubRepo::create_pull`](github::Pulls::create_pull)
//!
//! [`Syncer::run`](lambda::Job::run) ([`sync::Syncer`]'s) is one state: read whole from the [`s3::StateSource`],
//! planned against the fleet repo's base branch with [`plan`], redone on a lost race;
//! [`proposal::converge`](github::proposal::converge) decides which kind of proposal takes the
//! cell's branch; [`GithubFleet`](github::GithubFleet) sends through `github/transport.rs`.
//!
//! **A new cluster gets Flux** (`functions/cluster-bootstrap`):
//! [`lambda::handler`] → [`BootstrapService::run`](lambda::Job::run) → [`Bootstrapper::run_before`](bootstrap::Bootstrapper::run_before) → [`Bootstrapper::run_eks`](bootstrap::Bootstrapper::run_eks) → [`Bootstrapper::install`](bootstrap::Bootstrapper::install) → [`KubeApi::apply`](bootstrap::KubeApi::apply)
//!
//! [`Bootstrapper::run_eks`](bootstrap::Bootstrapper::run_eks) finds the cell, waits for
//! ACTIVE and takes temporary access; [`Bootstrapper::install`](bootstrap::Bootstrapper::install)
//! applies the plan in order, CRDs Established first; `bootstrap/apply/`'s `Applier` sends the
//! server-side apply.
//!
//! # The module map
//!
//! - The Lambda shell: [`lambda`] (the one [`lambda::handler`] of every [`lambda::Job`]: pause,
//!   the item loop, metrics, the SQS batch answer and its backoff; clients built once),
//!   [`metrics`], [`pause`], [`backoff`], [`retry`], [`telemetry`], [`config`], [`error`] (the
//!   one error model), [`redact`].
//! - state-sync: [`sync`] (the job, one state's sync, the dashboard, sync-all's fan-out),
//!   [`decommission`] (a destroyed stack's cell), [`automerge`], [`status`] (the fleet's rows),
//!   [`record`] (what a pull request records).
//! - cluster-bootstrap: [`bootstrap`] (the job, one run, the sweep of expired access).
//! - Both: [`cells`] (which cell a cluster is, the role that reaches it, whether EKS still knows
//!   it), [`events`] (every trigger's shape).
//! - The outside services as ports, each with its real adapter and, with the `test-support`
//!   feature, an in-memory double with the real service's rules: [`github`]
//!   ([`github::GithubRepo`]), [`s3`] ([`s3::StateSource`]), [`secrets`]
//!   ([`secrets::SecretStore`]), [`bootstrap::ports`] (EKS, STS, Kubernetes).
//! - The pure core, no network I/O, tested in milliseconds: [`tfstate`], [`metadata`],
//!   [`configmap`], [`envsubst`], [`check`], [`plan`], [`template`], [`fleet`].

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
