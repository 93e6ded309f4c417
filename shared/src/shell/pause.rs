//! The pause switch: while it is on, state-sync writes nothing to GitHub and cluster-bootstrap
//! touches no cluster; every result says so (`paused`) and counts as the `paused` metric.
//!
//! Two places turn it on (docs/outcomes.md, "Pausing cellbridge"):
//!
//! - `CELLBRIDGE_PAUSED=true` (the module's `paused` variable): checked first, before anything
//!   is read.
//! - the fleet repo's base branch, so that people can pause from the repo:
//!
//! ```yaml
//! # .cellbridge/settings.yaml
//! paused: true
//! reason: "migrating the fleet repo"   # optional, shown in every result
//! ```
//!
//! A paused run is a success, not redelivered: after unpausing, run sync-all (or bootstrap the
//! cluster again) to catch up.

use serde::{Deserialize, Serialize};

use super::config::{self, ConfigError};
use crate::pure::fleet::FleetRead;

/// The variable that pauses both functions.
pub const ENV: &str = "CELLBRIDGE_PAUSED";
/// The fleet repo's settings file, from its root (the `.cellbridge/` directory of
/// `in-cluster-sources.yaml`).
pub const SETTINGS_FILE: &str = ".cellbridge/settings.yaml";

/// Why a run is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    /// `CELLBRIDGE_PAUSED` or `.cellbridge/settings.yaml`.
    pub by: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Pause {
    /// Said in a result's `error`-free explanation.
    pub fn describe(&self) -> String {
        match &self.reason {
            Some(r) => format!("paused by {}: {r}", self.by),
            None => format!("paused by {}", self.by),
        }
    }
}

/// The environment's switch: `true` or `false` (unset: not paused).
pub fn from_env() -> Result<Option<Pause>, ConfigError> {
    let Some(v) = config::optional(ENV) else {
        return Ok(None);
    };
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(Some(Pause { by: ENV, reason: None })),
        "false" => Ok(None),
        _ => Err(ConfigError::Invalid {
            name: ENV,
            value: v,
            reason: "expected true or false".into(),
        }),
    }
}

/// `.cellbridge/settings.yaml` cannot be used: the error names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{SETTINGS_FILE} in the fleet repo: {reason}")]
pub struct SettingsError {
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    paused: bool,
    #[serde(default)]
    reason: Option<String>,
}

/// The fleet repo's switch, from the base branch as read; no file (or an empty one): not
/// paused. A file people got wrong is an error rather than silently ignored.
pub fn from_fleet(fleet: &dyn FleetRead) -> Result<Option<Pause>, SettingsError> {
    let text = fleet
        .read_text(SETTINGS_FILE)
        .map_err(|e| SettingsError { reason: e.to_string() })?;
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(None);
    };
    let s: Settings = serde_saphyr::from_str(&text).map_err(|e| SettingsError {
        reason: format!("not valid (expected `paused: true|false` and an optional `reason:`): {e}"),
    })?;
    Ok(s.paused.then(|| Pause {
        by: SETTINGS_FILE,
        reason: s.reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::fleet::MemFleet;

    #[test]
    fn the_settings_file_pauses_and_is_read_strictly() {
        let mut f = MemFleet::new();
        assert_eq!(from_fleet(&f).unwrap(), None);
        f.insert(SETTINGS_FILE, "paused: false\n");
        assert_eq!(from_fleet(&f).unwrap(), None);
        f.insert(SETTINGS_FILE, "paused: true\nreason: migrating\n");
        assert_eq!(
            from_fleet(&f).unwrap(),
            Some(Pause {
                by: SETTINGS_FILE,
                reason: Some("migrating".into())
            })
        );
        f.insert(SETTINGS_FILE, "pause: true\n");
        let e = from_fleet(&f).unwrap_err().to_string();
        assert!(
            e.starts_with(".cellbridge/settings.yaml in the fleet repo: not valid"),
            "{e}"
        );
        assert!(e.contains("pause"), "{e}");
        f.insert(SETTINGS_FILE, "paused: maybe\n");
        assert!(from_fleet(&f).is_err());
    }
}
