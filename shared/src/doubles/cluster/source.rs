//! The fleet repo's base branch in memory, as a run reads it ([`FleetSource`]): a
//! [`MemFleet`] and the name of its branch, read whole or as GitHub's archive is read, or a
//! failure as GitHub can answer one.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::ports::fleet::{BaseFleet, FleetSource};
use crate::ports::github::GithubError;
use crate::pure::fleet::{FleetRead, Keep, MemFleet};

/// A [`FleetSource`] over a [`MemFleet`]. Each read's [`Keep`] is recorded ([`MemSource::reads`]).
#[derive(Clone)]
pub struct MemSource {
    fleet: Result<MemFleet, fn() -> GithubError>,
    branch: Option<String>,
    archive: bool,
    reads: Arc<Mutex<Vec<Keep>>>,
}

impl MemSource {
    /// `fleet`, read whole, on a branch whose name is not known (as a checkout without one).
    pub fn new(fleet: MemFleet) -> Self {
        Self {
            fleet: Ok(fleet),
            branch: None,
            archive: false,
            reads: Default::default(),
        }
    }

    /// Every read fails with `error()` (a GitHub that refuses or does not answer).
    pub fn failing(error: fn() -> GithubError) -> Self {
        Self {
            fleet: Err(error),
            ..Self::new(MemFleet::default())
        }
    }

    /// The base branch is named `branch`.
    pub fn on_branch(mut self, branch: &str) -> Self {
        self.branch = Some(branch.to_owned());
        self
    }

    /// Each read gives what its keep keeps, the rest of each cell read past, as GitHub's
    /// archive is read.
    pub fn as_archive(mut self) -> Self {
        self.archive = true;
        self
    }

    /// The keep of every read so far, in order.
    pub fn reads(&self) -> Vec<Keep> {
        self.reads.lock().unwrap().clone()
    }
}

impl FleetSource for MemSource {
    async fn fleet(&self, keep: &Keep, _deadline: Instant) -> Result<BaseFleet, GithubError> {
        self.reads.lock().unwrap().push(keep.clone());
        let fleet = self.fleet.as_ref().map_err(|e| e())?;
        let fleet = if self.archive {
            let mut f = MemFleet::kept(keep);
            for (p, (m, b)) in fleet.files() {
                match keep.read_past(p) {
                    Some(dir) => f.insert_read_past(dir),
                    None => f.insert_mode(p.clone(), *m, b.clone()),
                }
            }
            f
        } else {
            fleet.clone()
        };
        Ok(BaseFleet {
            fleet: Arc::new(fleet) as Arc<dyn FleetRead>,
            branch: self.branch.clone(),
        })
    }
}
