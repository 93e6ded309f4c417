//! state-sync, the orchestrator: event → state objects → for each, the latest state version →
//! the cell's plan against the fleet repo's base branch → the cell's pull request.
//!
//! Level-triggered: an event only says "this state may have changed". Whatever version the
//! event names, the latest one is read and the pull request converges to it, so duplicated,
//! reordered and replayed events end in the same place. A lost race is redone from the start.
//!
//! Files: `config` (the function's variables, where a cell's state lives), `syncer` (the
//! orchestrator as a [`crate::shell::lambda::Job`]: one state, its attempts; `syncer/decommission.rs` a
//! destroyed stack's decommission and the cell an EKS DeleteCluster names), `invocation` (what an
//! event asks for, the dashboard after a sync-all, the answer), `outcome` (a state's answer,
//! action and error), `dashboard` (the fleet dashboard's rows and its run), `handler` (the
//! service as the Lambda and the command line build it).

use crate::ports::state::S3Error;
use crate::pure::events::sync as events;
use crate::shell::config::ConfigError;
use crate::shell::error::{Class, Classify};

mod config;
mod dashboard;
pub mod fanout;
mod handler;
mod invocation;
mod outcome;
mod syncer;

pub use config::{DEFAULT_KEY_PATTERN, KeyPattern, SyncConfig};
pub use dashboard::{DashboardAction, DashboardError, DashboardRun, IssueRef};
pub use handler::{
    SyncService, cluster_access, invoke_from_file, service_for, service_from_env, service_with, state_role_from_env,
    state_source,
};
pub use invocation::{SyncPlan, Target};
pub use outcome::{Action, CellError, CellResult, Redo};
pub use syncer::{ClusterAccess, SharedBase, Syncer};

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("event: {0}")]
    Event(#[from] events::SyncEventError),
    #[error("{path}: {reason}")]
    EventFile { path: String, reason: String },
    /// The sync-all listing failed.
    #[error("listing states under s3://{bucket}/{prefix}: {source}")]
    Listing {
        bucket: String,
        prefix: String,
        #[source]
        source: Box<S3Error>,
    },
    /// sync-all could not send its messages to the queue: the next run sends them (a state
    /// synced twice is synced once).
    #[error("sync-all: sending one message per state to state-sync's queue: {source} (retryable)")]
    Enqueue {
        #[source]
        source: Box<crate::ports::queue::EnqueueError>,
    },
    /// An EKS DeleteCluster's cluster could not be matched to a cell.
    #[error("EKS cluster {cluster} in {region}: finding its cell in the fleet repo: {source}")]
    ClusterLookup {
        cluster: String,
        region: String,
        #[source]
        source: Box<CellLookupError>,
    },
    /// The sync-all listing did not end in time: the same invocation later may well succeed.
    #[error("listing states under s3://{bucket}/{prefix} did not finish before the function's deadline (retryable)")]
    ListingTimedOut { bucket: String, prefix: String },
}

impl Classify for SyncError {
    fn class(&self) -> Class {
        match self {
            SyncError::Event(_) | SyncError::EventFile { .. } => Class::InvalidInput,
            SyncError::Listing { source, .. } => match source.class() {
                Class::Retryable => Class::Retryable,
                _ => Class::Final,
            },
            SyncError::ListingTimedOut { .. } | SyncError::Enqueue { .. } => Class::Retryable,
            SyncError::ClusterLookup { source, .. } if matches!(&**source, CellLookupError::Github(e) if e.retryable()) => {
                Class::Retryable
            }
            SyncError::ClusterLookup { .. } | SyncError::Config(_) => Class::Final,
        }
    }
}

/// Why the cell an EKS DeleteCluster names cannot be told.
#[derive(Debug, thiserror::Error)]
pub enum CellLookupError {
    /// The base branch's index of cells cannot be read.
    #[error(transparent)]
    Github(#[from] crate::ports::github::GithubError),
    #[error(transparent)]
    Cell(#[from] crate::rules::cells::CellError),
    #[error(
        "cell {cell}: CELLBRIDGE_STATE_KEY_PATTERN names both {{cell}} and {{workspace}}, so the cell's state cannot be told; sync it with \"bucket\" and \"key\""
    )]
    KeyUntold { cell: String },
}
