//! cellbridge: carries the identifiers Terraform knows into the Flux fleet repo, through a
//! reviewed pull request, and gives every new EKS cluster its first Flux bootstrap.
//!
//! # The two chains
//!
//! From the Lambda handler to the port method that sends the request, each arrow one call, each
//! step one TRACE span of that name (target [`shell::lambda::CHAIN`]); `shared/tests/rules/chains.rs`
//! drives both handlers on the in-memory doubles and checks the path taken against these lines.
//!
//! **A state event becomes a pull request** (`functions/state-sync`):
//! [`lambda::handler`](shell::lambda::handler) → [`Syncer::run`](shell::lambda::Job::run) → [`proposal::converge`](rules::proposal::converge) → [`pull_request::converge_from`](rules::pull_request::converge_from) → [`pull_request::open`](rules::pull_request::open) → [`GithubRepo::create_pull`](ports::github::Pulls::create_pull)
//!
//! [`Syncer::run`](shell::lambda::Job::run) ([`jobs::sync::Syncer`]'s) is one state: read whole
//! from the [`StateSource`](ports::state::StateSource), planned against the fleet repo's base
//! branch with [`pure::plan`], redone on a lost race; [`proposal::converge`](rules::proposal::converge)
//! decides which kind of proposal takes the cell's branch; [`GithubFleet`](adapters::github::GithubFleet)
//! sends through `adapters/github/transport/`.
//!
//! **A new cluster gets Flux** (`functions/cluster-bootstrap`):
//! [`lambda::handler`](shell::lambda::handler) → [`BootstrapService::run`](shell::lambda::Job::run) → [`Bootstrapper::run_before`](rules::bootstrap::Bootstrapper::run_before) → [`Bootstrapper::run_eks`](rules::bootstrap::Bootstrapper::run_eks) → [`Bootstrapper::install`](rules::bootstrap::Bootstrapper::install) → [`KubeApi::apply`](ports::cluster::KubeApi::apply)
//!
//! [`Bootstrapper::run_eks`](rules::bootstrap::Bootstrapper::run_eks) finds the cell, waits for
//! ACTIVE and takes temporary access; [`Bootstrapper::install`](rules::bootstrap::Bootstrapper::install)
//! applies the plan in order, CRDs Established first; `adapters/kube/`'s `Applier` sends the
//! server-side apply.
//!
//! # The layers
//!
//! Each folder of `shared/src` is a layer and imports only the layers listed before it
//! (`tests/layers.py`, run by `make test`, holds the table and its few exceptions, each with its
//! reason):
//!
//! - [`pure`]: the core, no I/O — the state's outputs ([`pure::tfstate`], [`pure::metadata`]), the
//!   fleet repo's files ([`pure::fleet`], [`pure::configmap`], [`pure::template`]), Flux's
//!   substitution ([`pure::envsubst`], [`pure::check`]), the plan of a pull request
//!   ([`pure::plan`], [`pure::record`]), a removal's and auto-merge's verdicts
//!   ([`pure::decommission`], [`pure::automerge`]), the fleet's rows ([`pure::status`]), every
//!   trigger's shape ([`pure::events`]), what a bootstrap applies ([`pure::bootstrap`]),
//!   [`pure::redact`].
//! - [`ports`]: the outside services as traits, one async style, typed errors — GitHub in slices
//!   by consumer ([`ports::github`]: `GitData`, `Pulls`, `Issues`, `Merges`; `GithubRepo` their
//!   union), the state source, secrets, the EKS probe, the queue, the cluster (EKS, STS,
//!   Kubernetes).
//! - [`rules`]: what cellbridge does with them, written once against the ports — a cell's branch
//!   and pull request ([`rules::proposal`], [`rules::pull_request`], [`rules::decommission`],
//!   [`rules::branch`], [`rules::automerge`], [`rules::report`], [`rules::dashboard`]), which cell a
//!   cluster is ([`rules::cells`]), a bootstrap ([`rules::bootstrap`]).
//! - [`adapters`]: the ports against GitHub (REST and GraphQL), S3, Secrets Manager, EKS and STS,
//!   Kubernetes.
//! - `doubles` (feature `test-support`): every port in memory, with the real service's rules.
//! - [`jobs`]: state-sync ([`jobs::sync`]) and cluster-bootstrap ([`jobs::bootstrap`]), each a
//!   [`Job`](shell::lambda::Job) composed of rules and adapters.
//! - [`shell`]: the one Lambda handler of every job ([`shell::lambda`]: pause, the item loop,
//!   metrics, the SQS batch answer and its backoff), the error model ([`shell::error`]),
//!   settings, metrics, retries, telemetry.

pub mod adapters;
#[cfg(feature = "test-support")]
pub mod doubles;
pub mod jobs;
pub mod ports;
pub mod pure;
pub mod rules;
pub mod shell;
