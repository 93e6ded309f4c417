//! Reading Terraform state (format version 4) as a stream.
//!
//! Only the top-level scalars and `outputs` are kept. `resources` — which can be hundreds of
//! megabytes — is skipped token by token as it streams past, so peak memory does not grow with
//! the size of the state.

mod scanner;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io::Read;

use serde::Deserialize;

use scanner::Scanner;

/// Where a state came from, for error messages: a file path or `s3://bucket/key?versionId=..`.
pub type Origin = String;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{origin}: not JSON at byte {offset}: {reason}")]
    NotJson {
        origin: Origin,
        offset: u64,
        reason: String,
    },
    #[error("{origin}: truncated: the state ends at byte {offset} in the middle of the document")]
    Truncated { origin: Origin, offset: u64 },
    #[error(
        "{origin}: unsupported state format version {version} (cellbridge reads version 4, written by Terraform 0.12 and later)"
    )]
    UnsupportedVersion { origin: Origin, version: u64 },
    #[error("{origin}: not a Terraform state: {reason}")]
    NotAState { origin: Origin, reason: String },
    #[error("{origin}: reading failed: {source}")]
    Io {
        origin: Origin,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = StateError> = std::result::Result<T, E>;

/// One root module output. `value` is kept as JSON; only `cell_metadata` is ever written out.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Output {
    pub value: serde_json::Value,
    #[serde(default)]
    pub sensitive: bool,
    #[serde(default, rename = "type")]
    pub value_type: Option<serde_json::Value>,
}

/// What cellbridge needs from a state: its identity, ordering and outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct StateOutputs {
    pub serial: u64,
    pub lineage: String,
    pub terraform_version: String,
    pub outputs: BTreeMap<String, Output>,
    /// Whether `resources` lists any: a state with neither outputs nor resources is what
    /// `terraform destroy` leaves.
    pub has_resources: bool,
}

/// Reads a state from `reader` (a file, or the body of an S3 object as it downloads).
/// `origin` names it in every error.
///
/// The top-level object is walked by a small validating scanner: the few values cellbridge
/// keeps are captured and handed to serde_json; everything else (`resources`, `check_results`)
/// is checked for well-formedness and dropped as it streams past, a buffer at a time. That
/// keeps memory flat and runs at memory speed, where a full parse would build every resource.
pub fn read_state(reader: impl Read, origin: &str) -> Result<StateOutputs> {
    let mut sc = Scanner::new(reader, origin);
    let top = sc.top_level()?;
    let version = top.version.ok_or_else(|| sc.not_a_state("no \"version\" field"))?;
    if version != 4 {
        return Err(StateError::UnsupportedVersion {
            origin: origin.into(),
            version,
        });
    }
    Ok(StateOutputs {
        serial: top.serial.ok_or_else(|| sc.not_a_state("no \"serial\" field"))?,
        lineage: top.lineage.ok_or_else(|| sc.not_a_state("no \"lineage\" field"))?,
        terraform_version: top.terraform_version.unwrap_or_default(),
        outputs: top.outputs.unwrap_or_default(),
        has_resources: top.resources.unwrap_or(false),
    })
}

/// Reads a state file from disk.
pub fn read_state_file(path: &std::path::Path) -> Result<StateOutputs> {
    let origin = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| StateError::Io {
        origin: origin.clone(),
        source: e,
    })?;
    read_state(file, &origin)
}
