//! What the planner's tests (and the rules built on plans) plan against: a cell's metadata and a
//! fleet with the template and, optionally, that cell merged.

use crate::pure::fleet::MemFleet;
use crate::pure::plan::*;
use crate::pure::template::{SyncSource, render_gotk_sync};

pub(crate) fn meta(cell: &str, serial: u64, data: &[(&str, &str)]) -> CellMetadata {
    let mut d: BTreeMap<String, String> = data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    d.insert("cell_name".into(), cell.into());
    d.entry("schema".into()).or_insert_with(|| "1".into());
    CellMetadata {
        cell: cell.into(),
        schema: d["schema"].parse().unwrap(),
        data: d,
        serial,
        lineage: "L".into(),
        terraform_version: "1.11.4".into(),
    }
}

pub(crate) fn fleet_with(existing: Option<&CellMetadata>) -> MemFleet {
    let mut m = MemFleet::new();
    m.insert(
        "clusters/_template/kustomization.yaml",
        "resources:\n  - cell-metadata.yaml\n  - flux-system\n",
    );
    m.insert(
        "clusters/_template/flux-system/gotk-sync.yaml",
        render_gotk_sync(
            "_template",
            &SyncSource {
                url: "https://g/fleet".into(),
                branch: "main".into(),
            },
        ),
    );
    if let Some(e) = existing {
        m.insert(format!("clusters/{}/kustomization.yaml", e.cell), "resources: []\n");
        m.insert(configmap::path_for(&e.cell), configmap::render(e));
    }
    m
}
