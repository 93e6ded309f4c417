//! cellbridge: carries the identifiers Terraform knows into the Flux fleet repo, through a
//! reviewed pull request, and gives every new EKS cluster its first Flux bootstrap.
//!
//! The pure core (`tfstate`, `metadata`, `configmap`, `envsubst`, `check`, `plan`, `template`,
//! `events`) does no network I/O and tests in milliseconds. The adapters (`s3`, `secrets`,
//! `github`, `bootstrap`) sit at the edges behind small traits (`StateSource`, `FleetRead`,
//! `FleetWrite`, `ClusterAccess`).

pub mod bootstrap;
pub mod check;
pub mod config;
pub mod configmap;
pub mod envsubst;
pub mod error;
pub mod events;
pub mod fleet;
pub mod github;
pub mod lambda;
pub mod metadata;
pub mod plan;
pub mod redact;
pub mod s3;
pub mod secrets;
pub mod sync;
pub mod telemetry;
pub mod template;
pub mod tfstate;
