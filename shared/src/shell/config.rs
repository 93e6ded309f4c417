//! Reading configuration from the environment: every problem names the variable.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{name} is not set; {hint}")]
    Missing { name: &'static str, hint: &'static str },
    #[error("{name}={value:?} is invalid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
}

/// The variable's value, `None` when unset or empty.
pub fn optional(name: &'static str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The variable's value when set, checked as a Git branch name.
pub fn optional_branch(name: &'static str) -> Result<Option<String>, ConfigError> {
    let Some(b) = optional(name) else { return Ok(None) };
    crate::pure::template::check_branch(&b).map_err(|reason| ConfigError::Invalid {
        name,
        value: b.clone(),
        reason,
    })?;
    Ok(Some(b))
}

/// The variable's value; `hint` tells the user what to set it to.
pub fn required(name: &'static str, hint: &'static str) -> Result<String, ConfigError> {
    optional(name).ok_or(ConfigError::Missing { name, hint })
}

/// A map of AWS accounts to IAM roles (`CELLBRIDGE_ACCOUNT_ROLES`,
/// `CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES`), read by `parse`: empty when unset.
pub fn account_role_map(
    name: &'static str,
    parse: fn(&str) -> Result<std::collections::BTreeMap<String, String>, String>,
) -> Result<std::collections::BTreeMap<String, String>, ConfigError> {
    match optional(name) {
        None => Ok(Default::default()),
        Some(v) => parse(&v).map_err(|reason| ConfigError::Invalid { name, value: v, reason }),
    }
}

/// `owner/name` of a GitHub repository.
pub fn repo(name: &'static str, value: &str) -> Result<(String, String), ConfigError> {
    match value.split_once('/') {
        Some((o, r)) if !o.is_empty() && !r.is_empty() && !r.contains('/') => {
            Ok((o.to_owned(), r.trim_end_matches(".git").to_owned()))
        }
        _ => Err(ConfigError::Invalid {
            name,
            value: value.to_owned(),
            reason: "expected owner/name".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_names_the_variable() {
        assert_eq!(
            repo("CELLBRIDGE_FLEET_REPO", "acme/fleet.git").unwrap(),
            ("acme".into(), "fleet".into())
        );
        let e = repo("CELLBRIDGE_FLEET_REPO", "fleet").unwrap_err();
        assert_eq!(
            e.to_string(),
            "CELLBRIDGE_FLEET_REPO=\"fleet\" is invalid: expected owner/name"
        );
    }
}
