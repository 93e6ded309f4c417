//! The pure core: the contract with Terraform, the fleet repo's files, Flux's substitution rules
//! and the plan of a pull request. No network I/O, nothing async: every rule here is tested in
//! milliseconds, and nothing here imports another layer.

pub mod automerge;
pub mod bootstrap;
pub mod check;
pub mod configmap;
pub mod decommission;
pub mod envsubst;
pub mod events;
pub mod fleet;
pub(crate) mod markdown;
pub mod metadata;
pub mod plan;
pub mod record;
pub mod redact;
pub mod secrets;
pub mod status;
pub mod template;
pub mod tfstate;
pub(crate) mod yaml;
