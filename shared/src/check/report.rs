//! What the check reports: the layers it checked and the findings, one per file and line.

/// One Flux Kustomization of the cell that substitutes from `cell-metadata`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Layer {
    /// `metadata.name` of the Flux Kustomization.
    pub name: String,
    /// The file of the cell directory that defines it.
    pub defined_in: String,
    /// `spec.path`, normalized to a repo path.
    pub path: String,
    /// How many manifest files kustomize would build there.
    pub files: usize,
}

/// A `${var}` that would fail a strict post-build, or a malformed expression.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Finding {
    /// Repo-relative path of the manifest.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The variable name (empty for a malformed expression).
    pub variable: String,
    /// The layer (Flux Kustomization name) that builds this file.
    pub layer: String,
    /// What is wrong, in words: "variable not set", "bad substitution: ...".
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    pub cell: String,
    pub layers: Vec<Layer>,
    pub findings: Vec<Finding>,
    /// Keys of the ConfigMap that no manifest of any layer uses.
    pub unused_keys: Vec<String>,
    /// What the check could not look at (remote resources), one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_checked: Vec<String>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }
}
