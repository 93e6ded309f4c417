//! state-sync's configuration: the environment variables the Terraform module sets, checked,
//! and the pattern that maps a state object's key to its cell.

use crate::config::{self, ConfigError};
use crate::github::GithubConfig;

pub const DEFAULT_KEY_PATTERN: &str = "cells/{cell}/terraform.tfstate";

/// The state-sync configuration, from environment variables (the Terraform module sets them).
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// The fleet repo and its credentials, as cluster-bootstrap reads them too.
    pub github: GithubConfig,
    pub state_bucket: String,
    pub key_pattern: KeyPattern,
    /// Flux's Git URL for a new cell's gotk-sync.yaml; the template's when unset.
    pub flux_git_url: Option<String>,
}

impl SyncConfig {
    /// Reads and validates every variable; the error names the variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        let github = GithubConfig::from_env()?;
        let state_bucket = config::required(
            "CELLBRIDGE_STATE_BUCKET",
            "set it to the S3 bucket of the Terraform states",
        )?;
        let pattern =
            config::optional("CELLBRIDGE_STATE_KEY_PATTERN").unwrap_or_else(|| DEFAULT_KEY_PATTERN.to_owned());
        let key_pattern = KeyPattern::parse(&pattern).map_err(|reason| ConfigError::Invalid {
            name: "CELLBRIDGE_STATE_KEY_PATTERN",
            value: pattern.clone(),
            reason,
        })?;
        Ok(Self {
            github,
            state_bucket,
            key_pattern,
            flux_git_url: config::optional("CELLBRIDGE_FLUX_GIT_URL"),
        })
    }
}

/// Where a cell's state lives: a key with one `{cell}`, e.g. `cells/{cell}/terraform.tfstate`.
/// Workspaces of the S3 backend add `env:/<workspace>/` in front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    prefix: String,
    suffix: String,
}

impl KeyPattern {
    pub fn parse(p: &str) -> Result<Self, String> {
        let Some((prefix, suffix)) = p.split_once("{cell}") else {
            return Err("must contain {cell}".into());
        };
        if suffix.contains("{cell}") {
            return Err("must contain {cell} once".into());
        }
        if suffix.is_empty() && prefix.is_empty() {
            return Err("must have more than {cell}".into());
        }
        Ok(Self {
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
        })
    }

    /// The cell (and workspace) of a state key, or `None` when the key is not a cell's state.
    pub fn cell_of(&self, key: &str) -> Option<(String, Option<String>)> {
        let (workspace, rest) = match key.strip_prefix("env:/") {
            Some(r) => {
                let (ws, rest) = r.split_once('/')?;
                (Some(ws.to_owned()), rest)
            }
            None => (None, key),
        };
        let cell = rest.strip_prefix(&self.prefix)?.strip_suffix(&self.suffix)?;
        (!cell.is_empty() && !cell.contains('/')).then(|| (cell.to_owned(), workspace))
    }

    pub fn key_for(&self, cell: &str) -> String {
        format!("{}{cell}{}", self.prefix, self.suffix)
    }

    /// The listing prefix for sync-all.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_pattern_maps_keys_to_cells() {
        let p = KeyPattern::parse(DEFAULT_KEY_PATTERN).unwrap();
        assert_eq!(
            p.cell_of("cells/prod-eu-west-1/terraform.tfstate"),
            Some(("prod-eu-west-1".into(), None))
        );
        assert_eq!(
            p.cell_of("env:/staging/cells/a/terraform.tfstate"),
            Some(("a".into(), Some("staging".into())))
        );
        assert_eq!(p.cell_of("cells/a/b/terraform.tfstate"), None);
        assert_eq!(p.cell_of("cells/a/terraform.tfstate.tflock"), None);
        assert_eq!(p.cell_of("other/a/terraform.tfstate"), None);
        assert_eq!(p.key_for("x"), "cells/x/terraform.tfstate");
        assert!(KeyPattern::parse("cells/terraform.tfstate").is_err());
    }
}
