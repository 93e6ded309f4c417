//! The state-sync test bed shared by the rule files (`sync/`, `auto_merge.rs`, `dashboard.rs`,
//! `decommission.rs`, `chains.rs`): the product's own `Syncer` over the in-memory GitHub (holding
//! `examples/fleet/`) and state bucket, the Terraform states it reads, and the payloads and readings
//! more than one rule file uses.

use cellbridge::adapters::github::GithubConfig;
use cellbridge::doubles::github::MemGithub;
use cellbridge::doubles::s3::MemStates;
use cellbridge::jobs::sync::{DEFAULT_KEY_PATTERN, KeyPattern, SyncConfig, Syncer};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) const BUCKET: &str = "tfstate";

pub(crate) const LINEAGE: &str = "5f0c2b1e-0000-4000-8000-00000000cafe";

pub(crate) type Bed = Syncer<MemStates, MemGithub>;

/// Every file of `examples/fleet/`, the fleet `make demo` shows.
pub(crate) fn example_fleet() -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/fleet");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out
}

pub(crate) fn bed() -> Bed {
    bed_with(DEFAULT_KEY_PATTERN)
}

pub(crate) fn bed_with(key_pattern: &str) -> Bed {
    let config = SyncConfig {
        github: GithubConfig::checked(
            "acme".into(),
            "fleet".into(),
            None,
            "unused".into(),
            "https://api.github.com".into(),
        )
        .unwrap(),
        state_bucket: BUCKET.into(),
        key_pattern: KeyPattern::parse(key_pattern).unwrap(),
        flux_git_url: None,
        flux_git_branch: None,
    };
    Syncer::new(config, MemStates::new(), MemGithub::new("main", &example_fleet()))
}

/// A Terraform state of `cell` whose metadata passes the example fleet's strict check.
pub(crate) fn state(cell: &str, serial: u64, vpc: &str) -> String {
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE,
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": {
            "cell_name": cell, "schema": "1", "aws_region": "eu-west-1", "cluster_name": cell,
            "dns_zone": "example.internal",
            "external_dns_role_arn": "arn:aws:iam::123456789012:role/external-dns",
            "karpenter_queue_name": "karpenter-q",
            "karpenter_role_arn": "arn:aws:iam::123456789012:role/karpenter",
            "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab", "podinfo_replicas": "2",
            "vpc_id": vpc,
        }}},
        "resources": [],
    })
    .to_string()
}

pub(crate) fn apply(bed: &Bed, cell: &str, serial: u64, vpc: &str) {
    bed.states.put(
        BUCKET,
        &format!("cells/{cell}/terraform.tfstate"),
        state(cell, serial, vpc),
    );
}

pub(crate) fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// The manual payload for one cell; the one result.
pub(crate) async fn sync(bed: &Bed, cell: &str) -> Value {
    sync_until(bed, cell, deadline()).await
}

pub(crate) async fn sync_until(bed: &Bed, cell: &str, deadline: Instant) -> Value {
    let inv = crate::support::handle(bed, &json!({"action": "sync", "cell": cell}), deadline)
        .await
        .unwrap();
    let cells = inv.response["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{}", inv.response);
    cells[0].clone()
}

pub(crate) fn branch(cell: &str) -> String {
    format!("cellbridge/{cell}")
}

pub(crate) const CM: &str = "clusters/eu-c1/cell-metadata.yaml";

pub(crate) const LAYERS: &str = "clusters/eu-c1/layers.yaml";

pub(crate) fn paused_by_env() -> Option<cellbridge::shell::pause::Pause> {
    Some(cellbridge::shell::pause::Pause {
        by: cellbridge::shell::pause::ENV,
        reason: Some("maintenance".into()),
    })
}

pub(crate) async fn direct(bed: &Bed, event: Value) -> Result<Value, lambda_runtime::Diagnostic> {
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 60_000;
    crate::support::lambda_handler(bed, lambda_runtime::LambdaEvent::new(event, ctx)).await
}

/// A state of `cell` that carries a secret-looking value under `api_token`: refused.
pub(crate) fn secret_state(cell: &str, serial: u64) -> (String, &'static str) {
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let text =
        state(cell, serial, "vpc-1").replace("\"podinfo_replicas\":\"2\"", &format!("\"api_token\":\"{secret}\""));
    (text, secret)
}

/// The layer a `layers.yaml` adds when it builds `path` (a Flux Kustomization).
pub(crate) fn layer(name: &str, path: &str) -> String {
    format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cell-metadata\n"
    )
}

pub(crate) fn queued_bed() -> (Bed, std::sync::Arc<cellbridge::doubles::queue::MemQueue>) {
    use cellbridge::doubles::queue::MemQueue;
    let q = std::sync::Arc::new(MemQueue::default());
    (bed().with_queue(q.clone()), q)
}

/// SQS records whose bodies are `bodies`.
pub(crate) fn sqs_bodies(bodies: &[String]) -> Value {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| json!({"messageId": format!("q{i}"), "eventSource": "aws:sqs", "body": b}))
        .collect();
    json!({ "Records": records })
}
