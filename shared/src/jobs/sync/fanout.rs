//! sync-all as a fan-out: one message per cell's state on state-sync's own queue, so that each
//! cell is synced, retried and dead-lettered on its own (a refused cell fails alone, no cell
//! waits behind the others for the deadline). The message is the manual payload
//! `{"action": "sync", "bucket": ..., "key": ...}`, which the queue path reads like an S3 event:
//! a record brought back from the dead-letter queue by a redrive is synced as it was meant to be.

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
