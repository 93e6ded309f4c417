//! The contract with Terraform: the `cell_metadata` output, validated into the data of the
//! `cell-metadata` ConfigMap.
//!
//! Identifiers only. Anything that looks like a secret is refused with an error that names the
//! key and never carries the value, because errors end up in logs, pull requests and alarms.

use std::collections::BTreeMap;

use super::secrets;
use super::tfstate::StateOutputs;

/// The output cellbridge reads.
pub const OUTPUT_NAME: &str = "cell_metadata";
/// Kubernetes refuses a ConfigMap whose data exceeds 1 MiB.
pub const CONFIGMAP_DATA_LIMIT: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("the state has no `cell_metadata` output (outputs present: {present})")]
    MissingOutput { present: String },
    /// No outputs and no resources: what `terraform destroy` leaves of a stack.
    #[error(
        "the state has no outputs and no resources: the cell's stack was destroyed (`terraform destroy`); its directory stays in the fleet repo until a person removes it"
    )]
    Destroyed,
    #[error("output `cell_metadata` is marked sensitive; cellbridge carries identifiers only and will not write it")]
    SensitiveOutput,
    #[error("output `cell_metadata` must be a map of strings, found {found}")]
    NotAMap { found: &'static str },
    #[error("cell_metadata key `{key}` holds a nested {found}; values must be strings, numbers or booleans")]
    NestedValue { key: String, found: &'static str },
    #[error("cell_metadata key `{key}` is null; give it a value or leave it out")]
    NullValue { key: String },
    #[error("cell_metadata key `{key}` is not a valid Flux variable name (it must match ^[_a-zA-Z][_a-zA-Z0-9]*$)")]
    InvalidKey { key: String },
    #[error(
        "cell_metadata key `{key}` looks like a secret ({why}); cellbridge carries identifiers only: {hint}",
        hint = secrets::HINT
    )]
    SecretLooking { key: String, why: &'static str },
    #[error("cell_metadata value of key `{key}` {why}")]
    InvalidValue { key: String, why: &'static str },
    #[error("cell_metadata has no `{key}` key; the contract requires `cell_name` and `schema`")]
    MissingKey { key: &'static str },
    #[error(
        "cell_metadata `cell_name` {value:?} is not a DNS-1123 label (lowercase letters, digits and `-`, at most 63, starting and ending alphanumeric)"
    )]
    InvalidCellName { value: String },
    #[error("cell_metadata `schema` {value:?} is not a positive whole number")]
    InvalidSchema { value: String },
    #[error("cell_metadata is {size} bytes; a ConfigMap holds at most {limit} bytes of data")]
    TooLarge { size: usize, limit: usize },
}

/// A validated `cell_metadata`, with the identity of the state it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellMetadata {
    pub cell: String,
    pub schema: u64,
    /// The ConfigMap's data: every key of the output, values rendered as strings.
    pub data: BTreeMap<String, String>,
    pub serial: u64,
    pub lineage: String,
    pub terraform_version: String,
}

/// Applies the contract to a state's outputs.
pub fn from_state(state: &StateOutputs) -> Result<CellMetadata, ContractError> {
    if state.outputs.is_empty() && !state.has_resources {
        return Err(ContractError::Destroyed);
    }
    let output = state
        .outputs
        .get(OUTPUT_NAME)
        .ok_or_else(|| ContractError::MissingOutput {
            present: if state.outputs.is_empty() {
                "none".into()
            } else {
                state.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        })?;
    if output.sensitive {
        return Err(ContractError::SensitiveOutput);
    }
    let data = validate_map(&output.value)?;
    let (cell, schema) = identity(&data)?;
    Ok(CellMetadata {
        cell,
        schema,
        data,
        serial: state.serial,
        lineage: state.lineage.clone(),
        terraform_version: state.terraform_version.clone(),
    })
}

/// The `cell_name` and `schema` of an already string-typed map (also used on the fleet repo's
/// ConfigMap, which went through the same rules when it was written).
pub fn identity(data: &BTreeMap<String, String>) -> Result<(String, u64), ContractError> {
    let cell = data
        .get("cell_name")
        .ok_or(ContractError::MissingKey { key: "cell_name" })?;
    if !is_dns1123_label(cell) {
        return Err(ContractError::InvalidCellName { value: cell.clone() });
    }
    let schema_raw = data.get("schema").ok_or(ContractError::MissingKey { key: "schema" })?;
    let schema = schema_raw
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0 && !schema_raw.starts_with('+') && !schema_raw.starts_with('0'))
        .ok_or_else(|| ContractError::InvalidSchema {
            value: schema_raw.clone(),
        })?;
    Ok((cell.clone(), schema))
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::Object(_) => "map",
    }
}

/// Validates every key and value of the output and renders values as strings.
pub fn validate_map(value: &serde_json::Value) -> Result<BTreeMap<String, String>, ContractError> {
    let serde_json::Value::Object(map) = value else {
        return Err(ContractError::NotAMap {
            found: json_kind(value),
        });
    };
    let mut data = BTreeMap::new();
    let mut size = 0usize;
    for (key, v) in map {
        if !crate::pure::envsubst::valid_name(key) {
            return Err(ContractError::InvalidKey { key: key.clone() });
        }
        let rendered = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => return Err(ContractError::NullValue { key: key.clone() }),
            other => {
                return Err(ContractError::NestedValue {
                    key: key.clone(),
                    found: json_kind(other),
                });
            }
        };
        check_value(key, &rendered)?;
        size += key.len() + rendered.len();
        data.insert(key.clone(), rendered);
    }
    if size > CONFIGMAP_DATA_LIMIT {
        return Err(ContractError::TooLarge {
            size,
            limit: CONFIGMAP_DATA_LIMIT,
        });
    }
    Ok(data)
}

fn check_value(key: &str, value: &str) -> Result<(), ContractError> {
    if let Some(why) = secrets::shape(key, value) {
        return Err(ContractError::SecretLooking {
            key: key.to_owned(),
            why,
        });
    }
    if value.contains(['\n', '\r']) {
        // Flux removes every newline from a value before substituting it, so a multi-line value
        // would not break the manifest: it would arrive silently changed, its lines run
        // together. An identifier has one line; refusing is the honest answer. What does break
        // Flux (`: `, a leading `[`, a lone quote...) depends on where the value lands, so the
        // strict check refuses it there, naming the file, line and key.
        return Err(ContractError::InvalidValue {
            key: key.to_owned(),
            why: if value.contains("-----BEGIN ") {
                // A PEM certificate passes the secret rules, but Flux would run its lines
                // together: EKS's own `certificate_authority` data shows the way.
                "spans several lines; identifiers are single-line (output a PEM certificate base64-encoded, `base64encode(...)`, as EKS gives `certificate_authority` data)"
            } else {
                "spans several lines; identifiers are single-line"
            },
        });
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(ContractError::InvalidValue {
            key: key.to_owned(),
            why: "contains control characters",
        });
    }
    Ok(())
}

/// RFC 1123 label, as Kubernetes checks namespace names: also what keeps `../x` out of paths.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::tfstate::{Output, StateOutputs};
    use serde_json::json;

    fn state(value: serde_json::Value, sensitive: bool) -> StateOutputs {
        let mut outputs = BTreeMap::new();
        outputs.insert(
            OUTPUT_NAME.to_owned(),
            Output {
                value,
                sensitive,
                value_type: None,
            },
        );
        StateOutputs {
            serial: 3,
            lineage: "l".into(),
            terraform_version: "1.11.4".into(),
            outputs,
            has_resources: true,
        }
    }

    fn ok_map() -> serde_json::Value {
        json!({"cell_name": "prod-eu-west-1", "schema": "2", "vpc_id": "vpc-0a1b2c3d4e5f67890", "node_count": 3, "karpenter_enabled": true,
               "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab", "external_dns_role_arn": "arn:aws:iam::123456789012:role/external-dns",
               "db_password_secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf"})
    }

    #[test]
    fn valid_output_renders_numbers_and_booleans_as_strings() {
        let m = from_state(&state(ok_map(), false)).unwrap();
        assert_eq!(m.cell, "prod-eu-west-1");
        assert_eq!(m.schema, 2);
        assert_eq!(m.data["node_count"], "3");
        assert_eq!(m.data["karpenter_enabled"], "true");
        assert_eq!(m.serial, 3);
    }

    #[test]
    fn refusals_name_the_key_and_never_the_value() {
        let cases = [
            ("db_password", "hunter2-is-not-a-good-password"),
            ("github_token", "abc"),
            ("tls_private_key", "x"),
            (
                "some_value",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
            ),
            ("deploy_key", "AKIAIOSFODNN7EXAMPLE"),
            ("ci", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"),
            ("blob", "q8Zr4Lx2Vb7Nw1Ps9Tk3Yd6Hf0Jg5MaCeWuXo2Ri"),
        ];
        for (key, value) in cases {
            let mut m = ok_map();
            m[key] = json!(value);
            let e = from_state(&state(m, false)).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, ContractError::SecretLooking { .. }), "{key}: {e:?}");
            assert!(msg.contains(key), "{msg}");
            assert!(!msg.contains(value), "{msg} leaks the value");
        }
    }

    /// What a Terraform output really holds, row by row: refused (naming the key and the kind,
    /// with the way to keep the identifier, never the value) or passed.
    #[test]
    fn identifiers_only_row_by_row() {
        use base64::Engine;
        let eks_ca = base64::engine::general_purpose::STANDARD
            .encode(include_str!("../../../tests/fixtures/secrets/eks-ca.crt"));
        let refused: &[(&str, &str, &str)] = &[
            (
                "db_url",
                "postgres://admin:S3cr3tP4ss@db.internal:5432/app",
                "a URL with a password",
            ),
            (
                "cache_url",
                "redis://:hunter2pass@cache:6379/0",
                "a URL with a password",
            ),
            (
                "mongo_url",
                "mongodb+srv://app:Pa55word!@cluster0.example.net/db",
                "a URL with a password",
            ),
            (
                "storage",
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=bm90LWEtcmVhbC1rZXk=;",
                "`AccountKey=`",
            ),
            (
                "alerts_webhook",
                "https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/abcdefghijklmnopqrstuvwx",
                "Slack webhook",
            ),
            ("ci", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "access token"),
            ("deploy_identity", "AKIAIOSFODNN7EXAMPLE", "AWS access key id"),
            (
                "chat",
                "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
                "access token",
            ),
            (
                "tls",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
                "private key",
            ),
            (
                "session",
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjaSJ9.c2lnbmF0dXJlLW5vdC1yZWFsLWF0LWFsbA",
                "JSON Web Token",
            ),
        ];
        for (key, value, kind) in refused {
            let mut m = ok_map();
            m[*key] = json!(value);
            let e = from_state(&state(m, false)).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, ContractError::SecretLooking { .. }), "{key}: {e:?}");
            assert!(msg.contains(&format!("`{key}`")) && msg.contains(kind), "{msg}");
            assert!(msg.contains("output the endpoint and the ARN of the secret"), "{msg}");
            for piece in [
                "S3cr3tP4ss",
                "hunter2pass",
                "Pa55word",
                "bm90LWEtcmVhbC1rZXk",
                "abcdefghijklmnopqrstuvwx",
            ] {
                assert!(!msg.contains(piece), "{msg} leaks the value");
            }
            assert!(!msg.contains(value), "{msg} leaks the value");
        }
        let mut m = ok_map();
        m["cluster_certificate_authority_data"] = json!(eks_ca);
        m["db_endpoint"] = json!("postgres://app@db.internal:5432/app");
        let meta = from_state(&state(m, false)).expect("a certificate is public, a user name is an account");
        assert_eq!(meta.data["cluster_certificate_authority_data"], eks_ca);
    }

    #[test]
    fn identifiers_that_resemble_secrets_pass() {
        let mut m = ok_map();
        m["commit_sha"] = json!("4b825dc642cb6eb9a060e54bf8d69288fbee4904");
        m["secrets_manager_prefix"] = json!("cells/prod");
        m["oidc_issuer_url"] = json!("https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE");
        from_state(&state(m, false)).unwrap();
    }

    #[test]
    fn sensitive_output_is_refused() {
        assert_eq!(
            from_state(&state(ok_map(), true)).unwrap_err(),
            ContractError::SensitiveOutput
        );
    }

    #[test]
    fn shape_errors() {
        let e = from_state(&state(json!(["a"]), false)).unwrap_err();
        assert_eq!(e, ContractError::NotAMap { found: "list" });
        let mut m = ok_map();
        m["nested"] = json!({"a": 1});
        assert_eq!(
            from_state(&state(m, false)).unwrap_err(),
            ContractError::NestedValue {
                key: "nested".into(),
                found: "map"
            }
        );
        for bad in ["cluster.name", "cluster-name", "1st", ""] {
            let mut m = ok_map();
            m[bad] = json!("x");
            assert_eq!(
                from_state(&state(m, false)).unwrap_err(),
                ContractError::InvalidKey { key: bad.into() },
                "{bad}"
            );
        }
        let mut m = ok_map();
        m["note"] = json!("two\nlines");
        assert!(matches!(
            from_state(&state(m, false)).unwrap_err(),
            ContractError::InvalidValue { .. }
        ));
    }

    #[test]
    fn cell_name_must_be_a_label() {
        for bad in ["../x", "a/b", "Prod", "-a", "a-", "..", &"a".repeat(64)] {
            let mut m = ok_map();
            m["cell_name"] = json!(bad);
            assert!(
                matches!(
                    from_state(&state(m, false)).unwrap_err(),
                    ContractError::InvalidCellName { .. }
                ),
                "{bad}"
            );
        }
        let mut m = ok_map();
        m.as_object_mut().unwrap().remove("schema");
        assert_eq!(
            from_state(&state(m, false)).unwrap_err(),
            ContractError::MissingKey { key: "schema" }
        );
        let mut m = ok_map();
        m["schema"] = json!("v2");
        assert!(matches!(
            from_state(&state(m, false)).unwrap_err(),
            ContractError::InvalidSchema { .. }
        ));
    }

    #[test]
    fn oversized_map_is_refused() {
        let mut m = ok_map();
        for i in 0..20 {
            m[format!("k{i}")] = json!("a ".repeat(30_000));
        }
        assert!(matches!(
            from_state(&state(m, false)).unwrap_err(),
            ContractError::TooLarge { .. }
        ));
    }

    #[test]
    fn missing_output_lists_what_is_there() {
        let mut s = StateOutputs {
            serial: 1,
            lineage: "l".into(),
            terraform_version: String::new(),
            outputs: BTreeMap::new(),
            has_resources: true,
        };
        assert_eq!(
            from_state(&s).unwrap_err().to_string(),
            "the state has no `cell_metadata` output (outputs present: none)"
        );
        // Nothing at all: a destroyed stack, told apart from a broken contract.
        s.has_resources = false;
        assert!(matches!(from_state(&s).unwrap_err(), ContractError::Destroyed));
    }
}
