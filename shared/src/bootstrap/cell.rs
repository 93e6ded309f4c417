//! Which cell a cluster is: the tag `cellbridge.dev/cell`, else the cell whose
//! `cell-metadata.yaml` on the fleet repo's base branch names the cluster and its region.

use std::collections::BTreeMap;

use crate::configmap;
use crate::fleet::{EntryKind, FleetError, FleetRead};

pub const CELL_TAG: &str = "cellbridge.dev/cell";

#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(transparent)]
    ConfigMap(#[from] configmap::ConfigMapError),
    #[error("cluster {cluster}: cell name {cell:?} (from {source_of}) is not a DNS-1123 label")]
    BadName {
        cluster: String,
        cell: String,
        source_of: &'static str,
    },
    #[error(
        "cluster {cluster} in {region} matches several cells in the fleet repo: {cells}; tag the cluster with {CELL_TAG}"
    )]
    Ambiguous {
        cluster: String,
        region: String,
        cells: String,
    },
}

/// A cell as the fleet repo knows it (its metadata is empty while its pull request is open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub name: String,
    pub metadata: BTreeMap<String, String>,
}

impl Cell {
    pub fn bootstrap_role_arn(&self) -> Option<&str> {
        self.metadata
            .get("bootstrap_role_arn")
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}

pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The named cell, with its metadata when the base branch has it.
pub fn named(fleet: &dyn FleetRead, cluster: &str, name: &str, source_of: &'static str) -> Result<Cell, CellError> {
    if !is_dns_label(name) || name == "_template" {
        return Err(CellError::BadName {
            cluster: cluster.into(),
            cell: name.into(),
            source_of,
        });
    }
    let file = configmap::path_for(name);
    let metadata = match fleet.read_text(&file)? {
        Some(text) => configmap::parse(&text, &file)?.data,
        None => BTreeMap::new(),
    };
    Ok(Cell {
        name: name.into(),
        metadata,
    })
}

/// Scans `clusters/*/cell-metadata.yaml` for `cluster_name` and `aws_region`. A file that does
/// not parse is skipped with a warning: one broken cell must not stop every other bootstrap.
pub fn find_by_cluster(fleet: &dyn FleetRead, cluster: &str, region: &str) -> Result<Option<Cell>, CellError> {
    let mut found = Vec::new();
    for e in fleet.list("clusters")?.unwrap_or_default() {
        if e.kind != EntryKind::Dir || e.name.starts_with('_') || !is_dns_label(&e.name) {
            continue;
        }
        let file = configmap::path_for(&e.name);
        let Some(text) = fleet.read_text(&file)? else { continue };
        let data = match configmap::parse(&text, &file) {
            Ok(x) => x.data,
            Err(err) => {
                tracing::warn!(%file, error = %err, "skipping a cell-metadata file that does not parse");
                continue;
            }
        };
        if configmap::names_cluster(&data, cluster, region) {
            found.push(Cell {
                name: e.name.clone(),
                metadata: data,
            });
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(CellError::Ambiguous {
            cluster: cluster.into(),
            region: region.into(),
            cells: found.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::MemFleet;

    fn cm(pairs: &[(&str, &str)]) -> String {
        let mut s =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n"
                .to_owned();
        for (k, v) in pairs {
            s.push_str(&format!("  {k}: \"{v}\"\n"));
        }
        s
    }

    #[test]
    fn finds_the_cell_by_cluster_and_region() {
        let mut f = MemFleet::new();
        f.insert(
            "clusters/a/cell-metadata.yaml",
            cm(&[("cluster_name", "eks-a"), ("aws_region", "eu-west-1")]),
        );
        f.insert(
            "clusters/b/cell-metadata.yaml",
            cm(&[
                ("cluster_name", "eks-a"),
                ("aws_region", "us-east-1"),
                ("bootstrap_role_arn", "arn:aws:iam::1:role/x"),
            ]),
        );
        f.insert("clusters/c/cell-metadata.yaml", "kind: [");
        f.insert(
            "clusters/_template/cell-metadata.yaml",
            cm(&[("cluster_name", "eks-a")]),
        );
        assert_eq!(find_by_cluster(&f, "eks-a", "eu-west-1").unwrap().unwrap().name, "a");
        let b = find_by_cluster(&f, "eks-a", "us-east-1").unwrap().unwrap();
        assert_eq!(b.bootstrap_role_arn(), Some("arn:aws:iam::1:role/x"));
        assert_eq!(find_by_cluster(&f, "other", "eu-west-1").unwrap(), None);
    }

    #[test]
    fn refuses_names_that_are_not_cells() {
        let f = MemFleet::new();
        assert!(matches!(
            named(&f, "c", "../etc", "tag"),
            Err(CellError::BadName { .. })
        ));
        assert!(matches!(
            named(&f, "c", "_template", "tag"),
            Err(CellError::BadName { .. })
        ));
        assert!(named(&f, "c", "new-cell", "tag").unwrap().metadata.is_empty());
    }
}
