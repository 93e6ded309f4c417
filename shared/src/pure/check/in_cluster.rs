//! The keys of substitution sources that live only in the cluster (an External Secrets
//! `Secret`, a ConfigMap an operator writes): declared by people in one file of the fleet repo,
//! because nothing in Git says what they hold.
//!
//! ```yaml
//! # .cellbridge/in-cluster-sources.yaml
//! sources:
//!   - kind: Secret            # ConfigMap or Secret
//!     name: cluster-secrets
//!     namespace: flux-system  # optional: any namespace when left out
//!     keys: [db_password, api_token]
//! ```

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::pure::fleet::FleetRead;

use super::{CheckError, invalid};

/// Where the declarations live, from the fleet repo's root.
pub const IN_CLUSTER_SOURCES: &str = ".cellbridge/in-cluster-sources.yaml";

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Declared {
    pub(super) kind: String,
    pub(super) name: String,
    #[serde(default)]
    pub(super) namespace: Option<String>,
    #[serde(default)]
    pub(super) keys: BTreeSet<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    sources: Vec<Declared>,
}

/// The declarations, none when the file does not exist. A file people got wrong stops the
/// check with its error: silently ignoring it would turn declared keys into findings.
pub(super) fn read(fleet: &dyn FleetRead) -> Result<Vec<Declared>, CheckError> {
    let Some(text) = fleet.read_text(IN_CLUSTER_SOURCES)? else {
        return Ok(Vec::new());
    };
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let file: File =
        serde_saphyr::from_str(&text).map_err(|e| invalid(IN_CLUSTER_SOURCES, format!("not valid: {e}")))?;
    for (i, d) in file.sources.iter().enumerate() {
        if d.kind != "ConfigMap" && d.kind != "Secret" {
            return Err(invalid(
                IN_CLUSTER_SOURCES,
                format!(
                    "sources[{i}] ({}): kind must be ConfigMap or Secret, the kinds Flux substitutes from",
                    d.name
                ),
            ));
        }
        if d.name.is_empty() {
            return Err(invalid(IN_CLUSTER_SOURCES, format!("sources[{i}]: name is empty")));
        }
    }
    Ok(file.sources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::fleet::MemFleet;

    #[test]
    fn reads_declarations_and_names_mistakes() {
        let mut f = MemFleet::new();
        assert!(read(&f).unwrap().is_empty());
        f.insert(
            IN_CLUSTER_SOURCES,
            "sources:\n  - kind: Secret\n    name: s\n    keys: [a, b]\n",
        );
        let d = read(&f).unwrap();
        assert_eq!(d[0].keys.iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(d[0].namespace, None);
        f.insert(
            IN_CLUSTER_SOURCES,
            "sources:\n  - kind: Secret\n    name: s\n    kyes: [a]\n",
        );
        let e = read(&f).unwrap_err().to_string();
        assert!(e.starts_with(IN_CLUSTER_SOURCES) && e.contains("kyes"), "{e}");
        f.insert(IN_CLUSTER_SOURCES, "sources:\n  - kind: Deployment\n    name: s\n");
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("kind must be ConfigMap or Secret"), "{e}");
    }
}
