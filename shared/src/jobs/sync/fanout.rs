//! sync-all as a fan-out: one message per cell's state on state-sync's own queue, so that each
//! cell is synced, retried and dead-lettered on its own (a refused cell fails alone, no cell
//! waits behind the others for the deadline). The message is the manual payload
//! `{"action": "sync", "bucket": ..., "key": ...}`, which the queue path reads like an S3 event:
//! a record brought back from the dead-letter queue by a redrive is synced as it was meant to be.

use serde_json::json;

use crate::ports::queue::{Enqueue, EnqueueError};
use crate::pure::events::sync::StateObject;
use crate::shell::config::{self, ConfigError};

/// SQS takes at most ten messages per `SendMessageBatch`
/// (<https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html>).
pub const BATCH: usize = 10;

/// The queue state-sync holds: SQS, or the in-memory record of the `test-support` feature.
pub enum Queue {
    Sqs(SqsQueue),
    #[cfg(feature = "test-support")]
    Mem(std::sync::Arc<crate::doubles::queue::MemQueue>),
}

impl From<SqsQueue> for Queue {
    fn from(q: SqsQueue) -> Self {
        Queue::Sqs(q)
    }
}

#[cfg(feature = "test-support")]
impl From<std::sync::Arc<crate::doubles::queue::MemQueue>> for Queue {
    fn from(q: std::sync::Arc<crate::doubles::queue::MemQueue>) -> Self {
        Queue::Mem(q)
    }
}

impl Enqueue for Queue {
    async fn enqueue(&self, bodies: &[String]) -> Result<(), EnqueueError> {
        match self {
            Queue::Sqs(q) => q.enqueue(bodies).await,
            #[cfg(feature = "test-support")]
            Queue::Mem(q) => q.enqueue(bodies).await,
        }
    }
}

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

/// An SQS queue, by URL.
pub struct SqsQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

impl SqsQueue {
    pub fn new(conf: &aws_config::SdkConfig, url: String) -> Self {
        Self {
            sqs: aws_sdk_sqs::Client::new(conf),
            url,
        }
    }

    /// One `SendMessageBatch`; the entries it did not take (a batch succeeds entry by entry),
    /// sent once more.
    async fn send_batch(&self, bodies: &[String]) -> Result<(), EnqueueError> {
        let mut pending: Vec<(String, &String)> = bodies.iter().enumerate().map(|(i, b)| (i.to_string(), b)).collect();
        for attempt in 1..=2 {
            let entries = pending
                .iter()
                .map(|(id, body)| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(id)
                        .message_body(*body)
                        .build()
                        .map_err(|source| EnqueueError::Entry {
                            queue: self.url.clone(),
                            source,
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = self
                .sqs
                .send_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|source| EnqueueError::Send {
                    queue: self.url.clone(),
                    source: Box::new(source),
                })?;
            let failed: Vec<String> = out.failed().iter().map(|f| f.id().to_owned()).collect();
            if failed.is_empty() {
                return Ok(());
            }
            if attempt == 2 {
                return Err(EnqueueError::NotSent {
                    queue: self.url.clone(),
                    count: failed.len(),
                    code: out.failed().first().map(|f| f.code().to_owned()).unwrap_or_default(),
                });
            }
            pending.retain(|(id, _)| failed.contains(id));
        }
        Ok(())
    }
}

impl Enqueue for SqsQueue {
    async fn enqueue(&self, bodies: &[String]) -> Result<(), EnqueueError> {
        for chunk in bodies.chunks(BATCH) {
            self.send_batch(chunk).await?;
        }
        Ok(())
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
