//! Where a bootstrap reads the fleet repo from: the base branch as it is now (GitHub's archive,
//! or a checkout for the command line), keeping at least what a run needs.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crate::ports::github::GithubError;
use crate::pure::fleet::{FleetRead, Keep};

/// The fleet repo's base branch as a run reads it.
pub struct BaseFleet {
    pub fleet: Arc<dyn FleetRead>,
    /// The branch's name when known (GitHub's default branch unless `CELLBRIDGE_BASE_BRANCH`
    /// names another): the branch Flux follows when no `gotk-sync.yaml` names one.
    pub branch: Option<String>,
}

/// Where a run reads the fleet repo from: the base branch as it is now, keeping at least what
/// `keep` keeps.
pub trait FleetSource: Send + Sync {
    fn fleet(&self, keep: &Keep, deadline: Instant) -> impl Future<Output = Result<BaseFleet, GithubError>> + Send;
}
