//! The Flux column: what a row's cluster says of its bootstrap, read from the two tags
//! cluster-bootstrap records on the cluster ([`FluxRecord`]). The dashboard reads them with
//! DescribeCluster (`jobs/sync/dashboard/flux.rs`); a row whose cell names no cluster, or whose
//! cluster EKS no longer knows, has none ([`super::CellStatus::flux`] is `None`) and shows what
//! it showed before.

use std::collections::HashMap;

use serde::Serialize;

use crate::pure::bootstrap::confirm::Outcome;
use crate::pure::bootstrap::record::{FluxRecord, format_time};

/// What the column shows for a cluster EKS described (or failed to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flux {
    /// The bootstrap's record: `ready`, `confirming` while re-checks are queued, or the reason
    /// Flux did not take over.
    Recorded(FluxRecord),
    /// The cluster has no record: cellbridge never bootstrapped it (Flux installed another way),
    /// or bootstrapped it before the record existed. Shown `—`.
    NoRecord,
    /// Not known: why (DescribeCluster failed or was refused, the account is out of reach, or a
    /// person edited the tags into something that is no record).
    Unknown { reason: String },
}

impl Flux {
    /// What the cluster's tags (DescribeCluster's `tags`) say.
    pub fn from_tags(tags: &HashMap<String, String>) -> Flux {
        match FluxRecord::from_tags(tags) {
            None => Flux::NoRecord,
            Some(Ok(record)) => Flux::Recorded(record),
            Some(Err(e)) => Flux::Unknown {
                reason: format!("the cluster's {e}"),
            },
        }
    }

    /// The column's word: the outcome (`ready`, `confirming`, `git-auth`, …), `—` or `unknown`.
    pub fn label(&self) -> &str {
        match self {
            Flux::Recorded(r) => r.outcome.as_str(),
            Flux::NoRecord => "—",
            Flux::Unknown { .. } => "unknown",
        }
    }

    /// A final outcome other than `ready`: Flux did not take over (the `flux-stuck` alarm's
    /// clusters).
    pub fn stuck(&self) -> bool {
        matches!(self, Flux::Recorded(r) if !matches!(r.outcome, Outcome::Ready | Outcome::Confirming))
    }

    /// Whether a person should look: a stuck cluster, or one whose record cannot be read.
    pub fn needs_attention(&self) -> bool {
        self.stuck() || matches!(self, Flux::Unknown { .. })
    }

    /// What the row's detail adds: why it is unknown, or since when it is stuck (a fixed time,
    /// so that the dashboard does not change by itself).
    pub fn detail(&self) -> Option<String> {
        match self {
            Flux::Unknown { reason } => Some(format!("Flux unknown: {reason}")),
            Flux::Recorded(r) if self.stuck() => Some(format!(
                "Flux did not take over: {} (bootstrapped {})",
                r.outcome,
                format_time(r.since)
            )),
            _ => None,
        }
    }
}

/// `{"outcome": "ready", "since": "2026-12-05T20:31:42Z"}`, `{"outcome": "none"}`,
/// `{"outcome": "unknown", "reason": "..."}`.
impl Serialize for Flux {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut m = s.serialize_map(None)?;
        match self {
            Flux::Recorded(r) => {
                m.serialize_entry("outcome", r.outcome.as_str())?;
                m.serialize_entry("since", &format_time(r.since))?;
            }
            Flux::NoRecord => m.serialize_entry("outcome", "none")?,
            Flux::Unknown { reason } => {
                m.serialize_entry("outcome", "unknown")?;
                m.serialize_entry("reason", reason)?;
            }
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::bootstrap::record::{FLUX_SINCE_TAG, FLUX_TAG};

    fn tags(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_column_says_the_outcome_no_record_or_unknown() {
        let since = "2026-12-05T20:31:42Z";
        let of = |outcome: &str| Flux::from_tags(&tags(&[(FLUX_TAG, outcome), (FLUX_SINCE_TAG, since), ("team", "a")]));
        assert_eq!(of("ready").label(), "ready");
        assert!(!of("ready").stuck() && !of("ready").needs_attention() && of("ready").detail().is_none());
        assert_eq!(of("confirming").label(), "confirming");
        assert!(!of("confirming").stuck() && !of("confirming").needs_attention());
        for reason in [
            "no-nodes",
            "unschedulable",
            "image-pull",
            "git-auth",
            "git-unreachable",
            "build-failed",
            "timed-out",
        ] {
            let f = of(reason);
            assert_eq!(f.label(), reason);
            assert!(f.stuck() && f.needs_attention(), "{reason}");
            assert_eq!(
                f.detail().as_deref(),
                Some(format!("Flux did not take over: {reason} (bootstrapped {since})").as_str())
            );
        }
        let none = Flux::from_tags(&tags(&[("cellbridge.dev/cell", "prod")]));
        assert_eq!(
            (none.label(), none.stuck(), none.needs_attention()),
            ("—", false, false)
        );
        assert_eq!(
            serde_json::to_value(&none).unwrap(),
            serde_json::json!({"outcome": "none"})
        );
        assert_eq!(
            serde_json::to_value(of("git-auth")).unwrap(),
            serde_json::json!({"outcome": "git-auth", "since": since})
        );
    }

    #[test]
    fn an_edited_tag_is_unknown_and_says_which() {
        let f = Flux::from_tags(&tags(&[(FLUX_TAG, "fine"), (FLUX_SINCE_TAG, "2026-12-05T20:31:42Z")]));
        assert_eq!((f.label(), f.needs_attention(), f.stuck()), ("unknown", true, false));
        assert!(
            f.detail()
                .unwrap()
                .starts_with("Flux unknown: the cluster's tag cellbridge.dev/flux: \"fine\" is not"),
            "{f:?}"
        );
        let f = Flux::from_tags(&tags(&[(FLUX_TAG, "ready")]));
        assert_eq!(f.label(), "unknown");
        assert_eq!(serde_json::to_value(&f).unwrap()["outcome"], "unknown");
    }
}
