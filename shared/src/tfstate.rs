//! Reading Terraform state (format version 4) as a stream.
//!
//! Only the top-level scalars and `outputs` are kept. `resources` — which can be hundreds of
//! megabytes — is skipped token by token as it streams past, so peak memory does not grow with
//! the size of the state.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufReader, Read};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

/// Where a state came from, for error messages: a file path or `s3://bucket/key?versionId=..`.
pub type Origin = String;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{origin}: not JSON at byte {offset} (line {line}, column {column}): {reason}")]
    NotJson { origin: Origin, offset: u64, line: usize, column: usize, reason: String },
    #[error("{origin}: truncated: the state ends at byte {offset} in the middle of the document")]
    Truncated { origin: Origin, offset: u64 },
    #[error("{origin}: unsupported state format version {version} (cellbridge reads version 4, written by Terraform 0.12 and later)")]
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
}

/// Counts the bytes the parser has consumed, so a syntax error can name its byte offset.
struct Counting<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

/// Reads a state from `reader` (a file, or the body of an S3 object as it downloads).
/// `origin` names it in every error.
pub fn read_state(reader: impl Read, origin: &str) -> Result<StateOutputs> {
    // 64 KiB keeps syscalls rare on files and on S3 bodies bridged from async.
    let mut buffered = BufReader::with_capacity(64 * 1024, Counting { inner: reader, count: 0 });
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(&mut buffered);
        TopLevel::deserialize(&mut de).and_then(|t| de.end().map(|()| t))
    };
    let consumed = buffered.get_ref().count - buffered.buffer().len() as u64;
    let top = parsed.map_err(|e| classify(e, origin, consumed))?;
    let version = top.version.ok_or_else(|| StateError::NotAState { origin: origin.into(), reason: "no \"version\" field".into() })?;
    if version != 4 {
        return Err(StateError::UnsupportedVersion { origin: origin.into(), version });
    }
    Ok(StateOutputs {
        serial: top.serial.ok_or_else(|| StateError::NotAState { origin: origin.into(), reason: "no \"serial\" field".into() })?,
        lineage: top.lineage.ok_or_else(|| StateError::NotAState { origin: origin.into(), reason: "no \"lineage\" field".into() })?,
        terraform_version: top.terraform_version.unwrap_or_default(),
        outputs: top.outputs.unwrap_or_default(),
    })
}

/// Reads a state file from disk.
pub fn read_state_file(path: &std::path::Path) -> Result<StateOutputs> {
    let origin = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| StateError::Io { origin: origin.clone(), source: e })?;
    read_state(file, &origin)
}

/// Sentinel message for a version seen early: stops the parse before reading any further.
const VERSION_SENTINEL: &str = "cellbridge: unsupported state version ";

fn classify(e: serde_json::Error, origin: &str, consumed: u64) -> StateError {
    use serde_json::error::Category;
    let origin = origin.to_owned();
    match e.classify() {
        Category::Io => StateError::Io { origin, source: e.into() },
        Category::Eof => StateError::Truncated { origin, offset: consumed },
        Category::Syntax => StateError::NotJson {
            origin,
            offset: consumed.saturating_sub(1),
            line: e.line(),
            column: e.column(),
            reason: strip_position(&e.to_string()),
        },
        Category::Data => {
            let msg = e.to_string();
            if let Some(rest) = msg.strip_prefix(VERSION_SENTINEL) {
                let version = rest.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
                return StateError::UnsupportedVersion { origin, version };
            }
            StateError::NotAState { origin, reason: msg }
        }
    }
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

#[derive(Default)]
struct TopLevel {
    version: Option<u64>,
    serial: Option<u64>,
    lineage: Option<String>,
    terraform_version: Option<String>,
    outputs: Option<BTreeMap<String, Output>>,
}

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = TopLevel;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Terraform state object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<TopLevel, A::Error> {
        let mut top = TopLevel::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                Key::Version => {
                    let v: u64 = map.next_value()?;
                    // Terraform writes "version" first: refusing here means a version 3 state is
                    // never parsed past its first line.
                    if v != 4 {
                        return Err(de::Error::custom(format!("{VERSION_SENTINEL}{v}")));
                    }
                    top.version = Some(v);
                }
                Key::Serial => top.serial = Some(map.next_value()?),
                Key::Lineage => top.lineage = Some(map.next_value()?),
                Key::TerraformVersion => top.terraform_version = Some(map.next_value()?),
                Key::Outputs => top.outputs = Some(map.next_value()?),
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }
}

enum Key {
    Version,
    Serial,
    Lineage,
    TerraformVersion,
    Outputs,
    Other,
}

/// Matches keys without allocating a String for every key the state has.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Key, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Key, E> {
        Ok(match v {
            "version" => Key::Version,
            "serial" => Key::Serial,
            "lineage" => Key::Lineage,
            "terraform_version" => Key::TerraformVersion,
            "outputs" => Key::Outputs,
            _ => Key::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = r#"{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": 7,
  "lineage": "5f0c1a2b-0000-4000-8000-000000000001",
  "outputs": {
    "cell_metadata": {"value": {"cell_name": "prod-eu-west-1", "schema": "1"}, "type": ["map", "string"]},
    "db_password": {"value": "x", "type": "string", "sensitive": true}
  },
  "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "instances": [{"attributes": {"id": "a"}}]}],
  "check_results": null
}"#;

    #[test]
    fn reads_scalars_and_outputs() {
        let s = read_state(STATE.as_bytes(), "t.tfstate").unwrap();
        assert_eq!(s.serial, 7);
        assert_eq!(s.lineage, "5f0c1a2b-0000-4000-8000-000000000001");
        assert_eq!(s.terraform_version, "1.11.4");
        assert_eq!(s.outputs.len(), 2);
        assert!(s.outputs["db_password"].sensitive);
        assert_eq!(s.outputs["cell_metadata"].value["cell_name"], "prod-eu-west-1");
    }

    #[test]
    fn syntax_error_names_file_and_byte_offset() {
        let bad = r#"{"version": 4, "serial": 1,, "lineage": "x"}"#;
        let e = read_state(bad.as_bytes(), "bad.tfstate").unwrap_err();
        match &e {
            StateError::NotJson { offset, line, .. } => {
                assert_eq!(*offset, 27, "{e}");
                assert_eq!(*line, 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().starts_with("bad.tfstate: not JSON at byte 27"), "{e}");
    }

    #[test]
    fn truncated_state_is_named_truncated() {
        let cut = &STATE[..STATE.len() / 2];
        let e = read_state(cut.as_bytes(), "cut.tfstate").unwrap_err();
        assert!(matches!(e, StateError::Truncated { .. }), "{e:?}");
        assert!(e.to_string().contains("cut.tfstate: truncated"));
    }

    #[test]
    fn version_3_is_refused_by_number() {
        let v3 = r#"{"version": 3, "terraform_version": "0.11.14", "serial": 2, "lineage": "x", "modules": []}"#;
        let e = read_state(v3.as_bytes(), "old.tfstate").unwrap_err();
        assert_eq!(e.to_string(), "old.tfstate: unsupported state format version 3 (cellbridge reads version 4, written by Terraform 0.12 and later)");
    }

    #[test]
    fn trailing_garbage_is_refused() {
        let e = read_state(format!("{STATE} x").as_bytes(), "t").unwrap_err();
        assert!(matches!(e, StateError::NotJson { .. }), "{e:?}");
    }

    #[test]
    fn a_json_array_is_not_a_state() {
        let e = read_state("[1,2]".as_bytes(), "t").unwrap_err();
        assert!(matches!(e, StateError::NotAState { .. }), "{e:?}");
    }
}
