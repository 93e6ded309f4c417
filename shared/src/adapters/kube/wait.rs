//! Waiting for what the apply set in motion: CRDs Established, the GitRepository Ready.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::calls::retry;
use super::{Applier, ApplyError, crd_resource};

impl Applier {
    /// Waits until every named CRD is Established (bounded by `crd_timeout`), listing all
    /// CRDs in one request per poll.
    pub(super) async fn established(&mut self, names: &[String]) -> Result<(), ApplyError> {
        if names.is_empty() {
            return Ok(());
        }
        let start = Instant::now();
        let mut delay = Duration::from_millis(100);
        loop {
            let client = self.session.client().await?;
            let api: Api<DynamicObject> = Api::all_with(client, &crd_resource());
            let lp = ListParams::default();
            let list = retry(&self.session, "list", "CustomResourceDefinitions", false, || {
                api.list(&lp)
            })
            .await?;
            let established: std::collections::HashSet<String> = list
                .items
                .iter()
                .filter(|o| condition(&o.data, "Established").0 == Some(true))
                .filter_map(|o| o.metadata.name.clone())
                .collect();
            let pending: Vec<&str> = names
                .iter()
                .filter(|n| !established.contains(*n))
                .map(String::as_str)
                .collect();
            if pending.is_empty() {
                tracing::info!(
                    crds = names.len(),
                    waited_ms = start.elapsed().as_millis() as u64,
                    "CRDs established"
                );
                return Ok(());
            }
            if start.elapsed() >= self.session.tuning.crd_timeout {
                return Err(ApplyError::CrdTimeout {
                    pending: pending.join(", "),
                    waited_secs: start.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.session.tuning.poll.max(Duration::from_millis(100)));
        }
    }
}

/// `(status, reason, message)` of the condition `kind` in `.status.conditions`.
pub(super) fn condition(obj: &Value, kind: &str) -> (Option<bool>, Option<String>, Option<String>) {
    let Some(conds) = obj.pointer("/status/conditions").and_then(Value::as_array) else {
        return (None, None, None);
    };
    for c in conds {
        if c.get("type").and_then(Value::as_str) == Some(kind) {
            let status = match c.get("status").and_then(Value::as_str) {
                Some("True") => Some(true),
                Some("False") => Some(false),
                _ => None,
            };
            let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
            return (status, s("reason"), s("message"));
        }
    }
    (None, None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_read() {
        let v = serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "AuthFailed", "message": "no"}]}});
        assert_eq!(
            condition(&v, "Ready"),
            (Some(false), Some("AuthFailed".into()), Some("no".into()))
        );
        assert_eq!(condition(&v, "Established").0, None);
    }
}
