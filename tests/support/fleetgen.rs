//! Synthetic fleets for the fleet bench (`tests/benches/fleet.rs`), and docs/github.md's table of
//! GitHub requests per outcome, which the benches hold the measured requests to.
//!
//! A fleet is laid out like `examples/fleet`: the shared manifests (`apps/`, `infrastructure/`,
//! and a `monitoring/` layer), `clusters/_template/`, and one `clusters/<cell>/` per cell with
//! `cell-metadata.yaml`, `kustomization.yaml`, `layers.yaml` (two or three Flux Kustomizations
//! filled in by `${var}` substitution) and `flux-system/` (a full-size `gotk-components.yaml`,
//! `gotk-sync.yaml`, `kustomization.yaml`). Generated under `target/bench-data/` and kept for
//! later runs; every cell's `gotk-components.yaml` is a hard link to one file, as identical as
//! they are in a fleet on one Flux version.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::github::FakeGithub;
use crate::process::repo_root;

/// Bumped whenever the generated layout changes, so cached fleets are made again.
const VERSION: &str = "fleetgen-1";

/// Where generated fleets are kept.
pub fn bench_data() -> PathBuf {
    repo_root().join("target/bench-data")
}

/// The name of cell `i`.
pub fn cell_name(i: usize) -> String {
    format!("cell-{i:04}")
}

fn region(i: usize) -> &'static str {
    ["eu-west-1", "us-east-1", "ap-southeast-2", "eu-central-1"][i % 4]
}

/// A generated fleet on disk.
pub struct Fleet {
    pub root: PathBuf,
    pub cells: Vec<String>,
    /// Files in the fleet, and their total size (each hard link counted in full, as Git's tree
    /// and the archive hold them).
    pub files: usize,
    pub bytes: u64,
    pub components_bytes: usize,
}

/// Flux's components for a cell: the whole documents of the full-size fixture
/// (`tests/fixtures/flux/`, Flux v2.6.0, 756 KB) that a fleet running source-controller (Git and
/// OCI sources) and kustomize-controller only installs: about 290 KB, at the small end of the
/// 270–750 KB that `flux install --export` writes.
pub fn gotk_components() -> String {
    let full = std::fs::read_to_string(
        repo_root().join("tests/fixtures/flux/fleet/clusters/_template/flux-system/gotk-components.yaml"),
    )
    .expect("the Flux fixture");
    let keep_crds = [
        "gitrepositories.source.toolkit.fluxcd.io",
        "ocirepositories.source.toolkit.fluxcd.io",
        "kustomizations.kustomize.toolkit.fluxcd.io",
    ];
    let left_out = ["helm-controller", "notification-controller", "webhook-receiver"];
    let mut out = String::from(
        "# Flux v2.6.0 components, shaped like `flux install --export --components=source-controller,kustomize-controller`\n# (bench fixture: whole documents of tests/fixtures/flux/).\n",
    );
    for doc in full.split("\n---\n").skip(1) {
        let name = doc
            .lines()
            .find_map(|l| l.strip_prefix("  name: "))
            .unwrap_or_default()
            .trim();
        let keep =
            if doc.contains("\nkind: CustomResourceDefinition") || doc.starts_with("kind: CustomResourceDefinition") {
                keep_crds.contains(&name)
            } else {
                !left_out.iter().any(|l| name.contains(l))
            };
        if keep {
            out.push_str("---\n");
            out.push_str(doc.trim_end_matches('\n'));
            out.push('\n');
        }
    }
    out
}

/// The cell's Terraform output `cell_metadata`, as the bench's states carry it. `replicas` is
/// the value the benches change.
pub fn cell_data(i: usize, cell: &str, replicas: u32) -> serde_json::Map<String, serde_json::Value> {
    let r = region(i);
    let v = json!({
        "aws_account_id": "123456789012",
        "aws_region": r,
        "cell_name": cell,
        "cluster_name": cell,
        "dns_zone": format!("{cell}.example.internal"),
        "external_dns_role_arn": format!("arn:aws:iam::123456789012:role/external-dns-{cell}"),
        "karpenter_queue_name": format!("karpenter-{cell}"),
        "karpenter_role_arn": format!("arn:aws:iam::123456789012:role/karpenter-{cell}"),
        "kms_key_id": format!("1234abcd-12ab-34cd-56ef-{:012}", i),
        "podinfo_replicas": replicas.to_string(),
        "schema": "1",
        "vpc_id": format!("vpc-{:017x}", 0x0a1b_2c3d_0000_u64 + i as u64),
    });
    v.as_object().unwrap().clone()
}

/// A Terraform state of cell `i` (`cell` its name) at `serial`.
pub fn state(i: usize, cell: &str, serial: u64, replicas: u32) -> String {
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial,
        "lineage": format!("bench-lineage-{cell}"),
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": cell_data(i, cell, replicas)}},
        "resources": [], "check_results": null
    })
    .to_string()
}

fn cell_metadata_yaml(i: usize, cell: &str) -> String {
    let mut out = format!(
        "# Written by cellbridge from the Terraform output `cell_metadata`. Do not edit by hand:\n\
         # change the Terraform output and apply; cellbridge opens the pull request.\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\n  labels:\n    \
         app.kubernetes.io/managed-by: cellbridge\n    cellbridge.dev/cell: \"{cell}\"\n    cellbridge.dev/schema: \"1\"\n  \
         annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\n    cellbridge.dev/state-lineage: \"bench-lineage-{cell}\"\n    \
         cellbridge.dev/state-serial: \"1\"\n    cellbridge.dev/terraform-version: \"1.11.4\"\ndata:\n"
    );
    for (k, v) in cell_data(i, cell, 2) {
        out.push_str(&format!("  {k}: {v}\n"));
    }
    out
}

fn gotk_sync(path: &str, comment: &str) -> String {
    format!(
        "# {comment}\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\n\
         spec:\n  interval: 1m0s\n  ref:\n    branch: \"main\"\n  secretRef:\n    name: flux-system\n  url: \"ssh://git@github.com/acme/fleet\"\n\
         ---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\n\
         spec:\n  interval: 10m0s\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
    )
}

const FLUX_KUSTOMIZATION: &str = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\n";

const CELL_KUSTOMIZATION: &str = "# The layers every cell runs. Reviewed in Git: Terraform never decides what runs in a cell.\n\
     apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - flux-system\n  - cell-metadata.yaml\n  - layers.yaml\n";

fn layer(name: &str, path: &str, depends_on: Option<&str>, substitute: &[(&str, &str)]) -> String {
    let mut out = format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n"
    );
    if let Some(d) = depends_on {
        out.push_str(&format!("  dependsOn:\n    - name: {d}\n"));
    }
    out.push_str(&format!(
        "  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  postBuild:\n"
    ));
    if !substitute.is_empty() {
        out.push_str("    substitute:\n");
        for (k, v) in substitute {
            out.push_str(&format!("      {k}: \"{v}\"\n"));
        }
    }
    out.push_str("    substituteFrom:\n      - kind: ConfigMap\n        name: cell-metadata\n");
    out
}

/// Two layers (infrastructure, apps), or three with monitoring.
fn layers(monitoring: bool) -> String {
    let mut docs = vec![
        layer("infrastructure", "./infrastructure/base", None, &[]),
        layer(
            "apps",
            "./apps/base",
            Some("infrastructure"),
            &[("podinfo_replicas", "2")],
        ),
    ];
    if monitoring {
        docs.push(layer(
            "monitoring",
            "./monitoring/base",
            Some("infrastructure"),
            &[("scrape_interval", "30s")],
        ));
    }
    format!(
        "# Each layer is built from Git and filled in from the cell's `cell-metadata` ConfigMap.\n{}",
        docs.join("---\n")
    )
}

const MONITORING_KUSTOMIZATION: &str =
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - agent-config.yaml\n";

const MONITORING_CONFIG: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: metrics-agent\n  namespace: monitoring\n\
     data:\n  agent.yaml: |\n    global:\n      scrape_interval: ${scrape_interval}\n      external_labels:\n        \
     cell: ${cell_name}\n        cluster: ${cluster_name}\n        region: ${aws_region}\n    remote_write:\n      \
     - url: https://metrics.${dns_zone:=example.internal}/api/v1/write\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The fleet of `cells` cells, generated on first use and kept under `target/bench-data/`.
pub fn fleet(cells: usize) -> Fleet {
    let data = bench_data();
    let root = data.join(format!("fleet-{cells}"));
    let marker = data.join(format!("fleet-{cells}.done"));
    let components = data.join("fleet-gotk-components.yaml");
    let names: Vec<String> = (0..cells).map(cell_name).collect();
    let fresh = std::fs::read_to_string(&marker).is_ok_and(|m| m.trim() == VERSION) && root.is_dir();
    if !fresh {
        let _ = std::fs::remove_file(&marker);
        let _ = std::fs::remove_dir_all(&root);
        write(&components, &gotk_components());
        // The shared manifests, as the example fleet has them, and a monitoring layer.
        let example = repo_root().join("examples/fleet");
        for (path, text) in crate::github::fleet_files(&example) {
            if !path.starts_with("clusters/") {
                write(&root.join(&path), &text);
            }
        }
        write(
            &root.join("monitoring/base/kustomization.yaml"),
            MONITORING_KUSTOMIZATION,
        );
        write(&root.join("monitoring/base/agent-config.yaml"), MONITORING_CONFIG);
        let link = |to: &Path| {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            if std::fs::hard_link(&components, to).is_err() {
                std::fs::copy(&components, to).unwrap();
            }
        };
        let template = root.join("clusters/_template");
        link(&template.join("flux-system/gotk-components.yaml"));
        write(
            &template.join("flux-system/gotk-sync.yaml"),
            &gotk_sync(
                "./clusters/_template",
                "Flux's own sync objects; cellbridge renders a copy for each new cell at ./clusters/<cell>.",
            ),
        );
        write(&template.join("flux-system/kustomization.yaml"), FLUX_KUSTOMIZATION);
        write(&template.join("kustomization.yaml"), CELL_KUSTOMIZATION);
        write(&template.join("layers.yaml"), &layers(true));
        for (i, cell) in names.iter().enumerate() {
            let dir = root.join("clusters").join(cell);
            write(&dir.join("cell-metadata.yaml"), &cell_metadata_yaml(i, cell));
            link(&dir.join("flux-system/gotk-components.yaml"));
            write(
                &dir.join("flux-system/gotk-sync.yaml"),
                &gotk_sync(
                    &format!("./clusters/{cell}"),
                    &format!("Flux's own sync objects for cell {cell}."),
                ),
            );
            write(&dir.join("flux-system/kustomization.yaml"), FLUX_KUSTOMIZATION);
            write(&dir.join("kustomization.yaml"), CELL_KUSTOMIZATION);
            // Two cells in three run the monitoring layer too.
            write(&dir.join("layers.yaml"), &layers(i % 3 != 0));
        }
        std::fs::write(&marker, VERSION).unwrap();
    }
    let (mut files, mut bytes) = (0, 0);
    fn walk(dir: &Path, files: &mut usize, bytes: &mut u64) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                walk(&p, files, bytes);
            } else {
                *files += 1;
                *bytes += m.len();
            }
        }
    }
    walk(&root, &mut files, &mut bytes);
    Fleet {
        root,
        cells: names,
        files,
        bytes,
        components_bytes: std::fs::metadata(&components).unwrap().len() as usize,
    }
}

/// Seeds `repo`'s `main` with every file of `dir`, read by the fake itself from disk (the fake's
/// `"dir"` seed): the fleet's text never goes through the control API. The head commit's id.
pub fn seed_from_disk(gh: &FakeGithub, repo: &str, dir: &Path) -> String {
    let url = gh.url();
    let port: u16 = url
        .trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("the fake's port");
    let (status, v) = crate::github::http(
        port,
        "POST",
        "/_fake/seed",
        Some(&json!({"repo": repo, "branch": "main", "dir": dir, "files": {}, "replace": true})),
        None,
    );
    assert!(
        (200..300).contains(&status),
        "seeding {repo} from {}: HTTP {status}: {v}",
        dir.display()
    );
    v["sha"].as_str().unwrap().to_owned()
}

/// One row of docs/github.md's table "GitHub requests per outcome".
#[derive(Debug, Clone)]
pub struct BudgetRow {
    /// The outcome cell as written, e.g. "new cell (`opened`)".
    pub outcome: String,
    /// API requests and writes; `None` where the cell is not a plain number ("+1 or +2").
    pub api: Option<u32>,
    pub writes: Option<u32>,
}

/// docs/github.md's table "GitHub requests per outcome" (the markdown table whose header has the
/// columns "outcome", "API requests" and "of which writes"), read at run time so that the
/// benches hold the measured requests to what the docs say. `CELLBRIDGE_BENCH_BUDGET_PAGE` names
/// another file to read instead (to see the check fail without touching the docs).
pub fn documented_budget() -> Result<Vec<BudgetRow>, String> {
    let path = std::env::var_os("CELLBRIDGE_BENCH_BUDGET_PAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("docs").join("github.md"));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    parse_budget(&text)
}

fn cells_of(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(|c| c.trim().to_owned()).collect()
}

pub fn parse_budget(text: &str) -> Result<Vec<BudgetRow>, String> {
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if !line.trim_start().starts_with('|') {
            continue;
        }
        let header: Vec<String> = cells_of(line).iter().map(|c| c.to_lowercase()).collect();
        let col = |name: &str| header.iter().position(|h| h == name);
        let (Some(o), Some(a), Some(w)) = (col("outcome"), col("api requests"), col("of which writes")) else {
            continue;
        };
        let mut rows = Vec::new();
        while let Some(l) = lines.next_if(|l| l.trim_start().starts_with('|')) {
            let c = cells_of(l);
            if c.iter().all(|x| x.chars().all(|ch| matches!(ch, '-' | ':' | ' '))) {
                continue; // the separator row
            }
            let num = |i: usize| c.get(i).and_then(|x| x.parse::<u32>().ok());
            rows.push(BudgetRow {
                outcome: c.get(o).cloned().unwrap_or_default(),
                api: num(a),
                writes: num(w),
            });
        }
        if rows.is_empty() {
            return Err("docs/github.md's table \"GitHub requests per outcome\" has no rows".into());
        }
        return Ok(rows);
    }
    Err("docs/github.md has no table with the columns outcome | API requests | of which writes".into())
}

/// The row for a measured outcome (`opened`, `updated`, `unchanged`, `in-sync`, ...): the one
/// whose outcome cell holds that word in backticks.
pub fn budget_row<'a>(rows: &'a [BudgetRow], action: &str) -> Option<&'a BudgetRow> {
    let word = format!("`{action}`");
    rows.iter().find(|r| r.outcome.contains(&word))
}

/// How measured requests compare with a row: `("OK" | "OVER" | "NO ROW", text)`.
pub fn check_budget(rows: &[BudgetRow], action: &str, api: usize, writes: usize) -> (&'static str, String) {
    match budget_row(rows, action) {
        Some(BudgetRow {
            api: Some(a),
            writes: Some(w),
            ..
        }) => {
            let over = api > *a as usize || writes > *w as usize;
            (
                if over { "OVER" } else { "OK" },
                format!("docs/github.md `{action}`: {a} API, {w} writes"),
            )
        }
        _ => (
            "NO ROW",
            format!("docs/github.md's table has no row with `{action}` and plain numbers"),
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_measured_outcome_over_its_row_is_over() {
        let rows = super::parse_budget(
            "text\n\n| outcome | API requests | of which writes | the requests |\n|---|---|---|---|\n\
             | new cell (`opened`) | 9 | 6 | a |\n| good state after a refusal | +1 or +2 | +1 | b |\n\nafter\n",
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(super::check_budget(&rows, "opened", 9, 6).0, "OK");
        assert_eq!(super::check_budget(&rows, "opened", 10, 6).0, "OVER");
        assert_eq!(super::check_budget(&rows, "opened", 9, 7).0, "OVER");
        assert_eq!(super::check_budget(&rows, "updated", 1, 1).0, "NO ROW");
        assert!(super::parse_budget("| a | b |\n|---|---|\n| 1 | 2 |\n").is_err());
    }

    #[test]
    fn the_documented_budget_table_reads() {
        let rows = super::documented_budget().unwrap();
        for word in ["opened", "updated", "unchanged", "in-sync"] {
            let r = super::budget_row(&rows, word).unwrap_or_else(|| panic!("no row for {word}"));
            assert!(r.api.is_some() && r.writes.is_some(), "{r:?}");
        }
    }
}
