//! The `cell-metadata` ConfigMap file of the fleet repo: deterministic rendering and parsing.
//!
//! Rendering is byte-stable (sorted keys, every value double-quoted the same way) so an
//! unchanged map renders to an identical file and Git sees no change.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::metadata::CellMetadata;

pub const NAME: &str = "cell-metadata";
pub const NAMESPACE: &str = "flux-system";
pub const FILE_NAME: &str = "cell-metadata.yaml";
pub const ANNOTATION_SERIAL: &str = "cellbridge.dev/state-serial";
pub const ANNOTATION_LINEAGE: &str = "cellbridge.dev/state-lineage";
pub const ANNOTATION_TERRAFORM: &str = "cellbridge.dev/terraform-version";
pub const LABEL_CELL: &str = "cellbridge.dev/cell";
pub const LABEL_SCHEMA: &str = "cellbridge.dev/schema";

/// `clusters/<cell>/cell-metadata.yaml`.
pub fn path_for(cell: &str) -> String {
    format!("clusters/{cell}/{FILE_NAME}")
}

/// Whether a cell's metadata names `cluster` in `region` (a map without `aws_region` names the
/// cluster in any region): how a cluster's cell is found.
pub fn names_cluster(data: &BTreeMap<String, String>, cluster: &str, region: &str) -> bool {
    data.get("cluster_name").map(String::as_str) == Some(cluster)
        && data.get("aws_region").map(String::as_str).is_none_or(|r| r == region)
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigMapError {
    #[error("{file}: not valid YAML: {reason}")]
    Yaml { file: String, reason: String },
    #[error("{file}: expected ConfigMap `{NAME}` in namespace `{NAMESPACE}`, found {found}")]
    WrongObject { file: String, found: String },
}

/// What the fleet repo holds for a cell today.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Existing {
    pub data: BTreeMap<String, String>,
    pub serial: Option<u64>,
    pub lineage: Option<String>,
}

impl Existing {
    pub fn schema(&self) -> Option<&str> {
        self.data.get("schema").map(String::as_str)
    }
}

/// A JSON string is a valid YAML double-quoted scalar with the same meaning, and serde_json's
/// escaping is canonical: one spelling per string.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

/// Renders the ConfigMap for `meta`, recording the state's serial and lineage.
pub fn render(meta: &CellMetadata) -> String {
    let mut out = String::with_capacity(512 + meta.data.iter().map(|(k, v)| k.len() + v.len() + 8).sum::<usize>());
    out.push_str("# Written by cellbridge from the Terraform output `cell_metadata`. Do not edit by hand:\n");
    out.push_str("# change the Terraform output and apply; cellbridge opens the pull request.\n");
    out.push_str("apiVersion: v1\nkind: ConfigMap\nmetadata:\n");
    out.push_str(&format!("  name: {NAME}\n  namespace: {NAMESPACE}\n"));
    out.push_str("  labels:\n    app.kubernetes.io/managed-by: cellbridge\n");
    out.push_str(&format!("    {LABEL_CELL}: {}\n", quote(&meta.cell)));
    out.push_str(&format!("    {LABEL_SCHEMA}: {}\n", quote(&meta.schema.to_string())));
    out.push_str("  annotations:\n");
    // Values are data, not templates: never let a Flux post-build touch them.
    out.push_str("    kustomize.toolkit.fluxcd.io/substitute: disabled\n");
    out.push_str(&format!("    {ANNOTATION_LINEAGE}: {}\n", quote(&meta.lineage)));
    out.push_str(&format!(
        "    {ANNOTATION_SERIAL}: {}\n",
        quote(&meta.serial.to_string())
    ));
    if !meta.terraform_version.is_empty() {
        out.push_str(&format!(
            "    {ANNOTATION_TERRAFORM}: {}\n",
            quote(&meta.terraform_version)
        ));
    }
    out.push_str("data:\n");
    for (k, v) in &meta.data {
        // Keys are Flux variable names (validated), so they never need quoting.
        out.push_str(&format!("  {k}: {}\n", quote(v)));
    }
    out
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Option<Meta>,
    #[serde(default)]
    data: Option<BTreeMap<String, Scalar>>,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// A hand-edited file may say `replicas: 3` unquoted; Kubernetes would refuse it, but we read
/// it as the string it means rather than failing the whole sync.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    S(String),
    I(i64),
    F(f64),
    B(bool),
}

impl Scalar {
    fn into_string(self) -> String {
        match self {
            Scalar::S(s) => s,
            Scalar::I(i) => i.to_string(),
            Scalar::F(f) => f.to_string(),
            Scalar::B(b) => b.to_string(),
        }
    }
}

/// Parses the fleet repo's `cell-metadata.yaml`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Existing, ConfigMapError> {
    let doc: Doc = serde_saphyr::from_str(text).map_err(|e| ConfigMapError::Yaml {
        file: file.to_owned(),
        reason: e.to_string(),
    })?;
    let meta = doc.metadata.unwrap_or_default();
    let (kind, name, ns) = (
        doc.kind.unwrap_or_default(),
        meta.name.unwrap_or_default(),
        meta.namespace.unwrap_or_default(),
    );
    if kind != "ConfigMap" || name != NAME || (!ns.is_empty() && ns != NAMESPACE) {
        return Err(ConfigMapError::WrongObject {
            file: file.to_owned(),
            found: format!("{kind} `{name}` in namespace `{ns}`"),
        });
    }
    let annotations = meta.annotations.unwrap_or_default();
    Ok(Existing {
        data: doc
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_string()))
            .collect(),
        serial: annotations.get(ANNOTATION_SERIAL).and_then(|s| s.parse().ok()),
        lineage: annotations.get(ANNOTATION_LINEAGE).cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta(data: &[(&str, &str)]) -> CellMetadata {
        CellMetadata {
            cell: "prod-eu-west-1".into(),
            schema: 2,
            data: data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            serial: 12,
            lineage: "0b7e-lineage".into(),
            terraform_version: "1.11.4".into(),
        }
    }

    #[test]
    fn render_is_sorted_quoted_and_parses_back() {
        let m = meta(&[
            ("vpc_id", "vpc-1"),
            ("cell_name", "prod-eu-west-1"),
            ("schema", "2"),
            ("weird", "a: b # c \"q\" \\ ${x}"),
        ]);
        let text = render(&m);
        let data_part = text.split("\ndata:\n").nth(1).unwrap();
        assert_eq!(
            data_part,
            "  cell_name: \"prod-eu-west-1\"\n  schema: \"2\"\n  vpc_id: \"vpc-1\"\n  weird: \"a: b # c \\\"q\\\" \\\\ ${x}\"\n"
        );
        let back = parse(&text, "f").unwrap();
        assert_eq!(back.data, m.data);
        assert_eq!(back.serial, Some(12));
        assert_eq!(back.lineage.as_deref(), Some("0b7e-lineage"));
        assert_eq!(render(&m), text, "rendering is byte-stable");
    }

    #[test]
    fn parse_refuses_other_objects() {
        let e = parse(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n",
            "clusters/a/cell-metadata.yaml",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("clusters/a/cell-metadata.yaml: expected ConfigMap"),
            "{e}"
        );
        let e = parse("data: [", "f.yaml").unwrap_err();
        assert!(matches!(e, ConfigMapError::Yaml { .. }));
    }

    #[test]
    fn parse_reads_unquoted_scalars_as_strings() {
        let t = "kind: ConfigMap\nmetadata:\n  name: cell-metadata\ndata:\n  n: 3\n  b: true\n";
        let e = parse(t, "f").unwrap();
        assert_eq!(e.data["n"], "3");
        assert_eq!(e.data["b"], "true");
        assert_eq!(e.serial, None);
    }

    proptest! {
        #[test]
        fn render_then_parse_returns_the_same_map(
            data in proptest::collection::btree_map("[_a-zA-Z][_a-zA-Z0-9]{0,12}", "[ -~\u{a0}-\u{2fff}\t]{0,40}", 0..12)
        ) {
            let m = CellMetadata { cell: "c".into(), schema: 1, data: data.clone(), serial: 1, lineage: "l".into(), terraform_version: String::new() };
            let back = parse(&render(&m), "f").unwrap();
            prop_assert_eq!(back.data, data);
        }
    }
}
