//! One cell per cluster, proven before anything is written: the cluster's own tag
//! `cellbridge.dev/cell`, else the merged `cell-metadata.yaml` that names the cluster (its
//! `cluster_name` and `aws_region`, and its `aws_account_id` being the account the cluster was
//! reached in), decides which cell a run applies. A request naming a cell (the manual payload,
//! the sweep's catch-up) is held to it and refused, naming both, when the cluster says otherwise:
//! a cluster of one cell never receives another cell's `gotk-sync.yaml`.

use super::{BootstrapError, Request};
use crate::ports::cluster::Accounts;
use crate::pure::fleet::FleetRead;
use crate::rules::cells::{self as cell, Cell};

/// The account a cluster was reached in: the request's, else the role's, else `None`
/// (cellbridge's own, asked of STS only when a cell's metadata names an account).
fn reached(req: &Request, role: Option<&str>) -> Option<String> {
    req.account
        .clone()
        .or_else(|| role.and_then(cell::role_account).map(str::to_owned))
}

fn refuse(req: &Request, asked: &str, proof: String) -> BootstrapError {
    BootstrapError::OtherCell {
        cluster: req.cluster.clone(),
        region: req.region.clone(),
        asked: asked.to_owned(),
        proof,
    }
}

/// The cell the run applies. `tag`: the cluster's `cellbridge.dev/cell`; `tagged`: that cell as
/// the fleet has it (read by the caller, which holds it to the role too); `role`: the role the
/// cluster was reached with (`None`: cellbridge's own identity).
pub(super) async fn proven<A: Accounts>(
    accounts: &A,
    fleet: &dyn FleetRead,
    req: &Request,
    tag: Option<&str>,
    tagged: Option<Cell>,
    role: Option<&str>,
) -> Result<Option<Cell>, BootstrapError> {
    if let Some(tag) = tag {
        return match &req.cell {
            Some(asked) if asked != tag => Err(refuse(
                req,
                asked,
                format!("the cluster's own tag {} names cell {tag}", cell::CELL_TAG),
            )),
            _ => Ok(tagged),
        };
    }
    // No tag: the merged metadata naming the cluster and its region is the only proof.
    let found = cell::find_by_cluster(fleet, &req.cluster, &req.region)?;
    let found = match (&req.cell, found) {
        (Some(asked), Some(c)) if c.name != *asked => {
            return Err(refuse(
                req,
                asked,
                format!("cell {}'s merged cell-metadata.yaml names the cluster", c.name),
            ));
        }
        (Some(asked), None) => {
            return Err(refuse(
                req,
                asked,
                format!(
                    "the cluster has no {} tag and no merged cell-metadata.yaml names it (cluster_name, aws_region)",
                    cell::CELL_TAG
                ),
            ));
        }
        (_, found) => found,
    };
    let Some(c) = found else { return Ok(None) };
    // Its account too: a cluster of the same name in another account is another cell's.
    if let Some(theirs) = c.metadata.get("aws_account_id").filter(|a| !a.is_empty()) {
        let account = match reached(req, role) {
            Some(a) => a,
            None => accounts.home_account().await?,
        };
        if *theirs != account {
            return Err(refuse(
                req,
                &c.name,
                format!(
                    "cell {}'s merged cell-metadata.yaml puts it in account {theirs}, and the cluster reached is in {account}",
                    c.name
                ),
            ));
        }
    }
    Ok(Some(c))
}
