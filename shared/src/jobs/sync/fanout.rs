//! sync-all as a fan-out: one message per cell's state on state-sync's own queue, so that each
//! cell is synced, retried and dead-lettered on its own (a refused cell fails alone, no cell
//! waits behind the others for the deadline). The message is the manual payload
//! `{"action": "sync", "bucket": ..., "key": ...}`, which the queue path reads like an S3 event:
//! a record brought back from the dead-letter queue by a redrive is synced as it was meant to be.

use std::time::Duration;

use serde_json::json;

use crate::pure::events::sync::StateObject;
use crate::shell::config::{self, ConfigError};

/// The message that makes state-sync sync one state object.
pub fn message_for(obj: &StateObject) -> String {
    json!({"action": "sync", "bucket": obj.bucket, "key": obj.key}).to_string()
}

/// `CELLBRIDGE_SYNC_QUEUE_URL`: state-sync's own queue; unset, sync-all syncs every cell in the
/// invocation itself (the command line, a local run).
pub fn queue_url_from_env() -> Result<Option<String>, ConfigError> {
    match config::optional("CELLBRIDGE_SYNC_QUEUE_URL") {
        None => Ok(None),
        Some(u) if u.starts_with("https://") || u.starts_with("http://") => Ok(Some(u)),
        Some(u) => Err(ConfigError::Invalid {
            name: "CELLBRIDGE_SYNC_QUEUE_URL",
            value: u,
            reason: "expected the queue's URL, https://sqs.<region>.amazonaws.com/<account>/<name>".into(),
        }),
    }
}

/// How long a scheduled sync-all's dashboard waits before it is tried again, when it failed for a
/// reason that passes (GitHub's rate limits, a 5xx, the deadline): long enough for a secondary
/// rate limit or an outage's first minutes to pass, short enough that the table is not a day
/// old. The queue's own retries (`CELLBRIDGE_RETRY_BASE_SECS`) take over from there.
pub const DASHBOARD_RETRY_DEFAULT: Duration = Duration::from_secs(300);
/// SQS's longest `DelaySeconds`.
const SQS_MAX_DELAY: Duration = Duration::from_secs(900);

/// The message that rebuilds the fleet dashboard alone.
pub fn dashboard_message() -> String {
    json!({"action": "dashboard"}).to_string()
}

/// `CELLBRIDGE_DASHBOARD_RETRY_SECS`: the delay of a scheduled sync-all's dashboard retry
/// ([`DASHBOARD_RETRY_DEFAULT`] unset), at most SQS's 900 s.
pub fn dashboard_retry_from_env() -> Result<Duration, ConfigError> {
    let name = "CELLBRIDGE_DASHBOARD_RETRY_SECS";
    match config::optional(name) {
        None => Ok(DASHBOARD_RETRY_DEFAULT),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if Duration::from_secs(n) <= SQS_MAX_DELAY => Ok(Duration::from_secs(n)),
            _ => Err(ConfigError::Invalid {
                name,
                value: v,
                reason: "expected whole seconds, at most 900 (SQS's longest DelaySeconds)".into(),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_manual_payload_of_one_state() {
        let m = message_for(&StateObject {
            bucket: "tfstate".into(),
            key: "cells/a b/terraform.tfstate".into(),
            version_id: Some("v1".into()),
        });
        let v: serde_json::Value = serde_json::from_str(&m).unwrap();
        assert_eq!(
            v,
            json!({"action": "sync", "bucket": "tfstate", "key": "cells/a b/terraform.tfstate"})
        );
    }
}
