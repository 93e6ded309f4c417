//! The repository permissions cellbridge writes with, and what a permission's level grants:
//! one reading for the adapter, which checks a GitHub App installation's permissions before the
//! first write, and for the in-memory double, which refuses a call its App lacks the
//! permission for.

use serde_json::Value;

/// The repository permissions cellbridge writes with (docs/github.md, "What state-sync does with
/// GitHub"), as an installation's `permissions` names them.
pub(super) const REQUIRED: [(&str, &str); 5] = [
    ("metadata", "read"),
    ("contents", "write"),
    ("pull_requests", "write"),
    ("issues", "write"),
    ("statuses", "write"),
];

/// The permission the merge state's check runs need ("Checks", "Permissions required for GitHub
/// Apps"; a token without it is refused the rollup's check runs inside an answer of HTTP 200:
/// <https://github.com/poseidon/wait-for-status-checks/issues/63>). Asked for only where the
/// installation grants it: asking for a permission an installation lacks gets no token at all.
/// Without it the merge state is read without check runs (README, "Auto-merge").
pub(crate) const CHECKS: (&str, &str) = ("checks", "read");

/// Whether `granted` (a token's or an installation's `permissions`) covers [`CHECKS`].
pub(crate) fn reads_checks(granted: &Value) -> bool {
    grants(granted[CHECKS.0].as_str(), CHECKS.1)
}

/// Whether the level `granted` (none: `None`) of a permission covers `needed`: `write` grants
/// `read`, `admin` both.
pub(crate) fn grants(granted: Option<&str>, needed: &str) -> bool {
    let rank = |level: &str| match level {
        "read" => 1,
        "write" => 2,
        "admin" => 3,
        _ => 0,
    };
    rank(granted.unwrap_or("")) >= rank(needed)
}

/// What `granted` (an installation's `permissions`) lacks of [`REQUIRED`], as `name=level`.
pub(crate) fn missing(granted: &Value) -> Vec<String> {
    REQUIRED
        .iter()
        .filter(|(name, level)| !grants(granted[*name].as_str(), level))
        .map(|(name, level)| format!("{name}={level}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn missing_permissions_are_named_and_write_grants_read() {
        let all = json!({"metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "statuses": "write"});
        assert!(missing(&all).is_empty());
        let mut some = all.clone();
        some["statuses"] = json!("read");
        some.as_object_mut().unwrap().remove("issues");
        some["metadata"] = json!("write");
        assert_eq!(missing(&some), ["issues=write", "statuses=write"]);
        assert_eq!(missing(&json!({})).len(), 5);
    }
}
