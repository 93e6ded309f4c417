//! What the check reports: the layers it checked and the findings, one per file and line.

use super::release::FluxRelease;

/// One Flux Kustomization of the cell with a `postBuild` (substitution).
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

/// What a finding is about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// The layer itself: its path, a source, a key Flux refuses, what kustomize cannot build.
    #[default]
    Layer,
    /// A variable nothing sets, where the cell's release fails on it.
    Unset,
    /// An expression Flux's parser refuses.
    Malformed,
    /// A known value that, substituted, makes the resource something Flux cannot read back.
    Value,
    /// An expression the cell's kustomize-controller release fails on (a negative length).
    Release,
    /// A layer whose manifests hold `${...}` while kustomize-controller skips its substitution
    /// (no variable resolves): the literal text reaches the cluster.
    Skipped,
    /// A warning: a variable a layer uses whose value is the empty string.
    Empty,
    /// A warning: a key of the fleet's `cell-metadata.yaml` that looks like a secret.
    Secret,
}

/// A `${var}` that would fail a strict post-build, or a malformed expression.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
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
    pub kind: FindingKind,
}

/// A `${var}` that only a source the check cannot see could supply (a Secret created in the
/// cluster): not a failure, but nobody has verified it; declaring the source's keys in
/// `.cellbridge/in-cluster-sources.yaml` settles it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Unverified {
    pub file: String,
    pub line: usize,
    pub variable: String,
    pub layer: String,
    /// The sources that might supply it (`Secret/cluster-secrets`).
    pub sources: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    pub cell: String,
    pub layers: Vec<Layer>,
    pub findings: Vec<Finding>,
    /// What Flux accepts on the cell's release but a reader wants to know: a variable nothing
    /// sets where strict mode is off (Flux substitutes an empty string), a used variable whose
    /// value is empty (`Empty`), a secret already in the fleet's ConfigMap (`Secret`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Finding>,
    /// The kustomize-controller release whose rules were applied.
    pub flux: FluxRelease,
    /// References only an undeclared in-cluster source could satisfy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<Unverified>,
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

    /// The variables the findings say are unset, sorted, each once.
    pub fn unset_variables(&self) -> Vec<&str> {
        let mut vars: Vec<&str> = self
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Unset)
            .map(|f| f.variable.as_str())
            .collect();
        vars.sort_unstable();
        vars.dedup();
        vars
    }
}
