//! An access entry as cellbridge writes it and reads it back: the policy it associates, the tags
//! that mark it cellbridge's and temporary, their time format, and the IAM principal an entry is
//! made for. The rule that takes and releases one is `rules/bootstrap/access.rs`.

use std::time::SystemTime;

use aws_sdk_eks::primitives::{DateTime, DateTimeFormat};

use super::AccessError;

pub const ADMIN_POLICY: &str = "AmazonEKSClusterAdminPolicy";

pub const TEMPORARY_TAG: &str = "cellbridge.dev/temporary";

/// When cellbridge made the entry (RFC 3339, UTC). EKS's own `createdAt` is authoritative when
/// DescribeAccessEntry answers it; the tag keeps the time with the entry whatever reads it.
pub const CREATED_AT_TAG: &str = "cellbridge.dev/created-at";

/// The run that made the entry (a token of its own): a run whose CreateAccessEntry's answer was
/// lost and whose retry finds the entry there tells its own entry, which it deletes, from
/// another run's, which it must leave.
pub const RUN_TAG: &str = "cellbridge.dev/run";

pub fn format_rfc3339(t: SystemTime) -> String {
    DateTime::from(t)
        .fmt(DateTimeFormat::DateTime)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

pub fn parse_rfc3339(v: &str) -> Option<SystemTime> {
    DateTime::from_str(v, DateTimeFormat::DateTime)
        .ok()
        .and_then(|t| SystemTime::try_from(t).ok())
}

/// The IAM principal an access entry is made for: an assumed-role session ARN becomes its
/// role's ARN (`arn:aws:sts::1:assumed-role/R/s` → `arn:aws:iam::1:role/R`).
pub fn principal_arn(caller: &str) -> Result<String, AccessError> {
    let bad = || AccessError::Principal { arn: caller.to_owned() };
    let parts: Vec<&str> = caller.splitn(6, ':').collect();
    if parts.len() != 6 || parts[0] != "arn" {
        return Err(bad());
    }
    let (partition, service, account, resource) = (parts[1], parts[2], parts[4], parts[5]);
    match (service, resource.split('/').collect::<Vec<_>>().as_slice()) {
        ("sts", ["assumed-role", role, _session]) => Ok(format!("arn:{partition}:iam::{account}:role/{role}")),
        ("iam", [kind, ..]) if *kind == "role" || *kind == "user" => Ok(caller.to_owned()),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn assumed_role_becomes_role() {
        assert_eq!(
            principal_arn("arn:aws:sts::123456789012:assumed-role/cellbridge-bootstrap/fn-session").unwrap(),
            "arn:aws:iam::123456789012:role/cellbridge-bootstrap"
        );
        assert_eq!(
            principal_arn("arn:aws-cn:sts::1:assumed-role/r/s").unwrap(),
            "arn:aws-cn:iam::1:role/r"
        );
        assert_eq!(
            principal_arn("arn:aws:iam::1:user/alice").unwrap(),
            "arn:aws:iam::1:user/alice"
        );
        assert!(principal_arn("arn:aws:sts::1:federated-user/x").is_err());
        assert!(principal_arn("nonsense").is_err());
    }

    #[test]
    fn created_at_round_trips_as_rfc3339() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_576_000);
        assert_eq!(format_rfc3339(t), "2025-12-01T08:00:00Z");
        assert_eq!(parse_rfc3339("2025-12-01T08:00:00Z"), Some(t));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
