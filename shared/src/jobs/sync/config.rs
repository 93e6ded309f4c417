//! state-sync's configuration: the environment variables the Terraform module sets, checked,
//! and the pattern that maps a state object's key to its cell.

use crate::adapters::github::GithubConfig;
use crate::pure::template::FluxGit;
use crate::shell::config::{self, ConfigError};

pub const DEFAULT_KEY_PATTERN: &str = "cells/{cell}/terraform.tfstate";

/// The state-sync configuration, from environment variables (the Terraform module sets them).
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// The fleet repo and its credentials, as cluster-bootstrap reads them too.
    pub github: GithubConfig,
    pub state_bucket: String,
    pub key_pattern: KeyPattern,
    /// `CELLBRIDGE_FLUX_GIT_URL`: Flux's Git URL for a new cell's gotk-sync.yaml; the
    /// template's when unset.
    pub flux_git_url: Option<String>,
    /// `CELLBRIDGE_FLUX_GIT_BRANCH`: the branch Flux follows in a new cell's gotk-sync.yaml;
    /// when unset the template's `ref.branch`, else the base branch.
    pub flux_git_branch: Option<String>,
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
        let flux_git_branch = config::optional_branch("CELLBRIDGE_FLUX_GIT_BRANCH")?;
        // Read again by each invocation; checked here so a bad value fails the cold start.
        crate::shell::pause::from_env()?;
        super::state_role_from_env()?;
        crate::rules::cells::describe_roles_from_env()?;
        crate::shell::backoff::Backoff::from_env()?;
        super::fanout::queue_url_from_env()?;
        super::fanout::dashboard_retry_from_env()?;
        crate::rules::automerge::cap_from_env()?;
        crate::shell::metrics::namespace_from_env()?;
        Ok(Self {
            github,
            state_bucket,
            key_pattern,
            flux_git_url: config::optional("CELLBRIDGE_FLUX_GIT_URL"),
            flux_git_branch,
        })
    }

    /// What cellbridge sets in a new cell's gotk-sync.yaml, `base_branch` being the branch the
    /// fleet was read from (`CELLBRIDGE_BASE_BRANCH`, else GitHub's default branch).
    pub fn flux_git(&self, base_branch: &str) -> FluxGit {
        FluxGit {
            url: self.flux_git_url.clone(),
            branch: self.flux_git_branch.clone(),
            base_branch: Some(base_branch.to_owned()),
        }
    }
}

/// Where a cell's state lives: a key with `{cell}`, e.g. `cells/{cell}/terraform.tfstate`.
/// Workspaces of the S3 backend add `env:/<workspace>/` in front, and their states are the same
/// cell's. A pattern that names `{workspace}` makes each workspace a cell of its own:
/// `env:/{workspace}/stacks/eks/terraform.tfstate` (the workspace is the cell), or
/// `env:/{workspace}/cells/{cell}/terraform.tfstate` (the cell is `<cell>-<workspace>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    /// Literal text and placeholders, in order.
    parts: Vec<Part>,
    has_cell: bool,
    has_workspace: bool,
}

/// The pattern as it was written.
impl std::fmt::Display for KeyPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.parts {
            match p {
                Part::Text(t) => f.write_str(t)?,
                Part::Cell => f.write_str("{cell}")?,
                Part::Workspace => f.write_str("{workspace}")?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Cell,
    Workspace,
}

impl KeyPattern {
    pub fn parse(p: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = p;
        while let Some(i) = rest.find('{') {
            if i > 0 {
                parts.push(Part::Text(rest[..i].to_owned()));
            }
            let after = &rest[i..];
            let (part, len) = if after.starts_with("{cell}") {
                (Part::Cell, "{cell}".len())
            } else if after.starts_with("{workspace}") {
                (Part::Workspace, "{workspace}".len())
            } else {
                return Err(format!(
                    "unknown placeholder at {after:?}: use {{cell}} and {{workspace}}"
                ));
            };
            if parts.contains(&part) {
                return Err("must contain each placeholder once".into());
            }
            if matches!(parts.last(), Some(Part::Cell | Part::Workspace)) {
                return Err("placeholders must be separated by text".into());
            }
            parts.push(part);
            rest = &after[len..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        let has_cell = parts.contains(&Part::Cell);
        let has_workspace = parts.contains(&Part::Workspace);
        if !has_cell && !has_workspace {
            return Err("must contain {cell} (or {workspace})".into());
        }
        if parts.len() == 1 {
            return Err("must have more than {cell}".into());
        }
        Ok(Self {
            parts,
            has_cell,
            has_workspace,
        })
    }

    /// The values of the placeholders when `key` matches, each one path segment.
    fn matches(&self, key: &str) -> Option<(Option<String>, Option<String>)> {
        let (mut cell, mut workspace) = (None, None);
        let mut rest = key;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Text(t) => rest = rest.strip_prefix(t.as_str())?,
                Part::Cell | Part::Workspace => {
                    let end = match parts.peek() {
                        Some(Part::Text(t)) => rest.find(t.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.contains('/') {
                        return None;
                    }
                    if *part == Part::Cell {
                        cell = Some(value.to_owned());
                    } else {
                        workspace = Some(value.to_owned());
                    }
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some((cell, workspace))
    }

    /// The cell (and workspace) of a state key, or `None` when the key is not a cell's state.
    pub fn cell_of(&self, key: &str) -> Option<(String, Option<String>)> {
        if self.has_workspace {
            let (cell, workspace) = self.matches(key)?;
            let cell = match (cell, &workspace) {
                (Some(c), Some(w)) => format!("{c}-{w}"),
                (None, Some(w)) => w.clone(),
                (Some(c), None) => c,
                (None, None) => return None,
            };
            return Some((cell, workspace));
        }
        let (workspace, rest) = match key.strip_prefix("env:/") {
            Some(r) => {
                let (ws, rest) = r.split_once('/')?;
                (Some(ws.to_owned()), rest)
            }
            None => (None, key),
        };
        let (cell, _) = self.matches(rest)?;
        Some((cell?, workspace))
    }

    /// The state key of `cell`; `None` when the pattern cannot tell (`{cell}` and `{workspace}`
    /// both: which part of the name is the workspace is not known).
    pub fn key_for(&self, cell: &str) -> Option<String> {
        if self.has_cell && self.has_workspace {
            return None;
        }
        Some(
            self.parts
                .iter()
                .map(|p| match p {
                    Part::Text(t) => t.as_str(),
                    Part::Cell | Part::Workspace => cell,
                })
                .collect(),
        )
    }

    /// The listing prefix for sync-all: the text before the first placeholder.
    pub fn prefix(&self) -> &str {
        match self.parts.first() {
            Some(Part::Text(t)) => t,
            _ => "",
        }
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
        assert_eq!(p.key_for("x").as_deref(), Some("cells/x/terraform.tfstate"));
        assert_eq!(p.to_string(), DEFAULT_KEY_PATTERN);
        assert!(KeyPattern::parse("cells/terraform.tfstate").is_err());
        assert!(KeyPattern::parse("cells/{cel}/x").is_err());
        assert!(KeyPattern::parse("{cell}{workspace}").is_err());
    }

    #[test]
    fn a_workspace_can_be_a_cell_of_its_own() {
        let p = KeyPattern::parse("env:/{workspace}/stacks/eks/terraform.tfstate").unwrap();
        assert_eq!(
            p.cell_of("env:/eu-c1/stacks/eks/terraform.tfstate"),
            Some(("eu-c1".into(), Some("eu-c1".into())))
        );
        assert_eq!(p.cell_of("stacks/eks/terraform.tfstate"), None);
        assert_eq!(
            p.key_for("eu-c1").as_deref(),
            Some("env:/eu-c1/stacks/eks/terraform.tfstate")
        );
        assert_eq!(p.prefix(), "env:/");
        let both = KeyPattern::parse("env:/{workspace}/cells/{cell}/terraform.tfstate").unwrap();
        assert_eq!(
            both.cell_of("env:/staging/cells/eu/terraform.tfstate"),
            Some(("eu-staging".into(), Some("staging".into())))
        );
        assert_eq!(both.key_for("eu-staging"), None);
    }
}
