//! A destroyed cell's proposal: remove `clusters/<cell>/` from the fleet repo, in a pull request a
//! person reviews and merges (never cellbridge, never auto-merge).
//!
//! A state with no outputs and no resources is what `terraform destroy` leaves
//! ([`super::metadata::ContractError::Destroyed`]). That alone is not enough: a state moved to
//! another key, a `terraform state rm` or a wrong backend can look the same while the cluster
//! runs. So a pull request is only for when EKS confirms that the cell's cluster (the
//! `cluster_name` and `aws_region` of its merged `cell-metadata.yaml`) does not exist
//! ([`ClusterCheck::Gone`]); [`ClusterCheck::NotAsked`] is the command line's dry view.

use std::collections::BTreeMap;

use super::check::{self, Layer};
use super::configmap;
use super::fleet::{FileMode, FleetError, FleetRead};
use super::plan::{LABEL_CELLBRIDGE, StateRef, branch_for};

pub const LABEL_DECOMMISSION: &str = "decommission";

#[derive(Debug, thiserror::Error)]
pub enum DecommissionError {
    #[error("cell {cell}: {source}")]
    Fleet {
        cell: String,
        #[source]
        source: FleetError,
    },
}

/// What EKS said about the cell's cluster before anything is proposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterCheck {
    /// `DescribeCluster` answered `ResourceNotFoundException` in the cell's account and region.
    Gone {
        cluster: String,
        region: String,
        /// The account that answered.
        account: String,
    },
    /// Not asked (the command line): the plan says what would be proposed once EKS confirms.
    NotAsked,
}

/// The cluster a cell's merged metadata names: what EKS is asked about.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CellCluster {
    pub cluster: String,
    pub region: String,
    /// The role the cell's clusters are reached with (`bootstrap_role_arn`), when it has one.
    pub role_arn: Option<String>,
}

/// The pull request that removes a destroyed cell's directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decommission {
    pub cell: String,
    pub branch: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    /// Every file and symlink under `clusters/<cell>/`, sorted.
    pub removed: Vec<String>,
    /// The Flux Kustomizations (layers) the directory runs, as the strict check finds them.
    pub layers: Vec<Layer>,
    pub cluster: Option<CellCluster>,
    /// Whether EKS confirmed that the cluster is gone: only then is the pull request opened.
    pub confirmed: bool,
    pub serial: u64,
    pub lineage: String,
    pub source: StateRef,
    /// Each removed path's mode, for the body's notes (a symlink, an executable).
    #[serde(skip)]
    modes: BTreeMap<String, FileMode>,
}

impl Decommission {
    /// The same decommission once EKS answered `eks`: whether it is confirmed, and the body that
    /// says so. Nothing of the fleet is read again.
    pub fn checked(mut self, eks: &ClusterCheck) -> Self {
        self.confirmed = matches!(eks, ClusterCheck::Gone { .. });
        self.body = body(
            &self.cell,
            &self.removed,
            &self.modes,
            &self.layers,
            self.cluster.as_ref(),
            eks,
            &self.source,
            self.serial,
        );
        self
    }

    /// What the pull request removes, as one id: a person's close declines this very removal,
    /// and an open pull request is rewritten only when it changes.
    pub fn digest(&self) -> String {
        use sha1::Digest as _;
        let mut h = sha1::Sha1::new();
        h.update(b"decommission\0");
        for p in &self.removed {
            h.update(p.as_bytes());
            h.update([0]);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The cluster `clusters/<cell>/cell-metadata.yaml` names on the base branch; `None` when the
/// cell has no (readable) metadata there.
pub fn cell_cluster(fleet: &dyn FleetRead, cell: &str) -> Result<Option<CellCluster>, DecommissionError> {
    Ok(cluster_of(&merged_metadata(fleet, cell)?))
}

/// The cell's merged `cell-metadata.yaml` data (empty when it has none, or none that parses).
fn merged_metadata(fleet: &dyn FleetRead, cell: &str) -> Result<BTreeMap<String, String>, DecommissionError> {
    let file = configmap::path_for(cell);
    let text = fleet.read_text(&file).map_err(|source| DecommissionError::Fleet {
        cell: cell.to_owned(),
        source,
    })?;
    Ok(text
        .and_then(|t| configmap::parse(&t, &file).ok())
        .map(|e| e.data)
        .unwrap_or_default())
}

fn cluster_of(data: &BTreeMap<String, String>) -> Option<CellCluster> {
    let get = |k: &str| data.get(k).filter(|v| !v.is_empty()).cloned();
    get("cluster_name")
        .zip(get("aws_region"))
        .map(|(cluster, region)| CellCluster {
            cluster,
            region,
            role_arn: get("bootstrap_role_arn"),
        })
}

/// The decommission of `cell`, whose state (`serial`, `lineage`, from `source`) is a destroyed
/// one; `None` when the base branch has no `clusters/<cell>/` (nothing to remove).
pub fn plan(
    cell: &str,
    serial: u64,
    lineage: &str,
    source: StateRef,
    fleet: &dyn FleetRead,
    eks: &ClusterCheck,
) -> Result<Option<Decommission>, DecommissionError> {
    let fleet_err = |source| DecommissionError::Fleet {
        cell: cell.to_owned(),
        source,
    };
    let dir = format!("clusters/{cell}");
    if !fleet.is_dir(&dir).map_err(fleet_err)? {
        return Ok(None);
    }
    let modes: BTreeMap<String, FileMode> = fleet.walk(&dir).map_err(fleet_err)?.into_iter().collect();
    let removed: Vec<String> = modes.keys().cloned().collect();
    let vars = merged_metadata(fleet, cell)?;
    let cluster = cluster_of(&vars);
    // The layers as the check sees them, against the cell's own merged metadata; a directory the
    // check cannot build still lists its files.
    let layers = check::check_cell(fleet, cell, &vars)
        .map(|r| r.layers)
        .unwrap_or_default();
    let d = Decommission {
        cell: cell.to_owned(),
        branch: branch_for(cell),
        title: format!("cellbridge: decommission cell {cell}"),
        body: String::new(),
        labels: vec![LABEL_CELLBRIDGE.to_owned(), LABEL_DECOMMISSION.to_owned()],
        removed,
        layers,
        cluster,
        confirmed: false,
        serial,
        lineage: lineage.to_owned(),
        source,
        modes,
    };
    Ok(Some(d.checked(eks)))
}

#[allow(clippy::too_many_arguments)]
fn body(
    cell: &str,
    removed: &[String],
    modes: &BTreeMap<String, FileMode>,
    layers: &[Layer],
    cluster: Option<&CellCluster>,
    eks: &ClusterCheck,
    source: &StateRef,
    serial: u64,
) -> String {
    let mut b = String::new();
    b.push_str(&format!(
        "The Terraform stack of cell `{cell}` was destroyed: its state (`{source}`, serial {serial}) has no outputs and no resources, which is what `terraform destroy` leaves.\n\n"
    ));
    match (eks, cluster) {
        (ClusterCheck::Gone { cluster, region, account }, _) => b.push_str(&format!(
            "EKS confirms that the cell's cluster `{cluster}` does not exist in account `{account}`, region `{region}` (`DescribeCluster`: not found).\n\n"
        )),
        (ClusterCheck::NotAsked, Some(c)) => b.push_str(&format!(
            "Not checked here: the cell's cluster `{}` must be confirmed gone from `{}` (EKS `DescribeCluster`) before its directory is removed.\n\n",
            c.cluster, c.region
        )),
        (ClusterCheck::NotAsked, None) => b.push_str(
            "The cell's `cell-metadata.yaml` names no cluster and region: nothing can confirm that its cluster is gone.\n\n",
        ),
    }
    if matches!(eks, ClusterCheck::Gone { .. }) {
        b.push_str(&format!(
            "This pull request removes `clusters/{cell}/` ({} file(s)). **cellbridge never merges it**: review that nothing else still needs the directory, then merge. A later `terraform apply` that brings the cell back closes it.\n\n",
            removed.len()
        ));
    } else {
        b.push_str(&format!(
            "Removing `clusters/{cell}/` takes {} file(s) out of the fleet repo, in a pull request a person merges.\n\n",
            removed.len()
        ));
    }
    if !layers.is_empty() {
        b.push_str("The layers the cell ran:\n\n| layer | path | defined in |\n|---|---|---|\n");
        for l in layers {
            b.push_str(&format!("| `{}` | `{}` | `{}` |\n", l.name, l.path, l.defined_in));
        }
        b.push('\n');
    }
    b.push_str("<details><summary>Files removed</summary>\n\n");
    for p in removed {
        let note = match modes.get(p) {
            Some(FileMode::Symlink) => " (symlink)",
            Some(FileMode::Executable) => " (executable)",
            _ => "",
        };
        b.push_str(&format!("- `{p}`{note}\n"));
    }
    b.push_str("\n</details>\n");
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::fleet::MemFleet;

    fn fleet() -> MemFleet {
        let mut f = MemFleet::new();
        f.insert(
            "clusters/eu-1/cell-metadata.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  cluster_name: \"eks-eu-1\"\n  aws_region: \"eu-west-1\"\n",
        );
        f.insert("clusters/eu-1/kustomization.yaml", "resources: [cell-metadata.yaml]\n");
        f.insert_mode("clusters/eu-1/run.sh", FileMode::Executable, "#!/bin/sh\n");
        f.insert("clusters/eu-2/kustomization.yaml", "resources: []\n");
        f
    }

    fn source() -> StateRef {
        StateRef {
            bucket: Some("tfstate".into()),
            key: "cells/eu-1/terraform.tfstate".into(),
            version_id: None,
        }
    }

    #[test]
    fn it_removes_exactly_the_cells_directory_and_says_whether_eks_confirmed() {
        let f = fleet();
        let gone = ClusterCheck::Gone {
            cluster: "eks-eu-1".into(),
            region: "eu-west-1".into(),
            account: "123456789012".into(),
        };
        let d = plan("eu-1", 7, "l", source(), &f, &gone).unwrap().unwrap();
        assert_eq!(
            d.removed,
            [
                "clusters/eu-1/cell-metadata.yaml",
                "clusters/eu-1/kustomization.yaml",
                "clusters/eu-1/run.sh"
            ]
        );
        assert_eq!((d.branch.as_str(), d.confirmed), ("cellbridge/eu-1", true));
        assert_eq!(d.labels, ["cellbridge", "decommission"]);
        assert!(
            d.body
                .contains("does not exist in account `123456789012`, region `eu-west-1`"),
            "{}",
            d.body
        );
        assert!(d.body.contains("never merges it"), "{}", d.body);
        assert!(d.body.contains("`clusters/eu-1/run.sh` (executable)"), "{}", d.body);
        assert_eq!(
            d.cluster,
            Some(CellCluster {
                cluster: "eks-eu-1".into(),
                region: "eu-west-1".into(),
                role_arn: None
            })
        );
        let dry = plan("eu-1", 7, "l", source(), &f, &ClusterCheck::NotAsked)
            .unwrap()
            .unwrap();
        assert!(
            !dry.confirmed && dry.body.contains("must be confirmed gone"),
            "{}",
            dry.body
        );
        assert!(!dry.body.contains("never merges it"), "{}", dry.body);
        // No directory, nothing to remove; no metadata, no cluster to ask about.
        assert_eq!(plan("eu-9", 7, "l", source(), &f, &gone).unwrap(), None);
        assert_eq!(cell_cluster(&f, "eu-2").unwrap(), None);
    }
}
