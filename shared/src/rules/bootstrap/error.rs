//! Why a bootstrap failed, and what each failure means for a retry ([`Classify`]).

use crate::ports::cluster::eks;
use crate::ports::secrets::SecretsError;
use crate::pure::bootstrap::{gitsecret, plan};
use crate::pure::template;
use crate::rules::cells as cell;
use crate::shell::error::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Config(#[from] crate::shell::config::ConfigError),
    #[error(transparent)]
    Cell(#[from] cell::CellError),
    #[error(transparent)]
    Eks(#[from] eks::EksError),
    #[error(transparent)]
    Access(#[from] crate::ports::cluster::AccessError),
    #[error(transparent)]
    Plan(#[from] plan::BootstrapPlanError),
    #[error(transparent)]
    Template(#[from] template::TemplateError),
    #[error(transparent)]
    GitSecret(#[from] gitsecret::GitSecretError),
    #[error("cluster {cluster} (cell {cell}): {source}")]
    Apply {
        cluster: String,
        cell: String,
        #[source]
        source: Box<crate::ports::cluster::kube::ApplyError>,
    },
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    #[error("CELLBRIDGE_FLUX_GIT_SECRET is not set: name the Secrets Manager secret that holds Flux's Git credentials")]
    NoGitSecret,
    #[error(
        "cluster {cluster}: no cell given and none found in the fleet repo (clusters/*/cell-metadata.yaml with cluster_name and aws_region); pass --cell"
    )]
    NoCell { cluster: String },
    #[error("invalid request: {0}")]
    Event(#[from] crate::pure::events::bootstrap::BootstrapEventError),
    #[error("invalid request: {what} {value:?} is not {expected}")]
    InvalidRequest {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A file or folder named on the command line cannot be used.
    #[error("{path}: {reason}")]
    Input { path: String, reason: String },
    #[error("cannot read the fleet repo: {0}")]
    Fleet(#[from] crate::ports::github::GithubError),
    /// Which account and role reach the cluster cannot be decided safely.
    #[error("cluster {cluster}: {source}")]
    Account {
        cluster: String,
        #[source]
        source: Box<crate::rules::cells::RoleError>,
    },
    /// An SQS message that is no cluster-bootstrap event, said as the event's reader says it.
    #[error(transparent)]
    Unreadable(crate::pure::events::bootstrap::BootstrapEventError),
    /// `.cellbridge/settings.yaml` on the base branch cannot be read.
    #[error(transparent)]
    Settings(#[from] crate::shell::pause::SettingsError),
    /// The cluster is not the cell the request names (or no cell can be proven from the
    /// cluster itself): nothing is written.
    #[error(
        "cluster {cluster} in {region}: the request names cell {asked}, but {proof}; nothing was written (one cell per cluster: the cluster's {tag} tag, or the merged cell-metadata.yaml naming it, decides)",
        tag = crate::rules::cells::CELL_TAG
    )]
    OtherCell {
        cluster: String,
        region: String,
        asked: String,
        proof: String,
    },
    /// The cluster is still being created: the event comes back later.
    #[error("cluster {cluster} is still {status}; retry later")]
    NotReady { cluster: String, status: String },
}

impl Classify for BootstrapError {
    fn class(&self) -> Class {
        match self {
            BootstrapError::Eks(e) => e.class(),
            BootstrapError::Access(e) => e.class(),
            BootstrapError::GitSecret(e) => e.class(),
            BootstrapError::Secrets(e) => e.class(),
            BootstrapError::Apply { source, .. } => source.class(),
            BootstrapError::Fleet(e) => e.class(),
            BootstrapError::Event(_)
            | BootstrapError::Unreadable(_)
            | BootstrapError::InvalidRequest { .. }
            | BootstrapError::Input { .. } => Class::InvalidInput,
            BootstrapError::NotReady { .. } => Class::Retryable,
            BootstrapError::Config(_)
            | BootstrapError::Cell(_)
            | BootstrapError::Plan(_)
            | BootstrapError::Template(_)
            | BootstrapError::NoGitSecret
            | BootstrapError::NoCell { .. }
            | BootstrapError::Settings(_)
            | BootstrapError::Account { .. }
            | BootstrapError::OtherCell { .. } => Class::Final,
        }
    }
}
