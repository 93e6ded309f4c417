//! The functions' own SQS queues, as they send to them: state-sync's sync-all fans out to its
//! queue ([`crate::jobs::sync::fanout`]), cluster-bootstrap queues its re-checks to its own with
//! a delay ([`crate::jobs::bootstrap`]). In memory with the `test-support` feature.

use std::time::Duration;

use crate::ports::queue::{Enqueue, EnqueueError};

/// SQS takes at most ten messages per `SendMessageBatch`
/// (<https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html>).
pub const BATCH: usize = 10;
/// SQS's longest `DelaySeconds`
/// (<https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html>).
pub const MAX_DELAY_SECS: u64 = 900;

/// A function's own queue: SQS, or the in-memory record of the `test-support` feature.
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
    async fn enqueue(&self, bodies: &[String], delay: Duration) -> Result<(), EnqueueError> {
        match self {
            Queue::Sqs(q) => q.enqueue(bodies, delay).await,
            #[cfg(feature = "test-support")]
            Queue::Mem(q) => q.enqueue(bodies, delay).await,
        }
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
    /// sent once more. A delay is each entry's `DelaySeconds` (at most 900): the message is
    /// invisible until then, and unlike a visibility hand-back it is a new message, with no
    /// receive counted toward the dead-letter redrive.
    async fn send_batch(&self, bodies: &[String], delay: Duration) -> Result<(), EnqueueError> {
        let delay_secs = (!delay.is_zero()).then(|| delay.as_secs().clamp(1, MAX_DELAY_SECS) as i32);
        let mut pending: Vec<(String, &String)> = bodies.iter().enumerate().map(|(i, b)| (i.to_string(), b)).collect();
        for attempt in 1..=2 {
            let entries = pending
                .iter()
                .map(|(id, body)| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(id)
                        .message_body(*body)
                        .set_delay_seconds(delay_secs)
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
    async fn enqueue(&self, bodies: &[String], delay: Duration) -> Result<(), EnqueueError> {
        for chunk in bodies.chunks(BATCH) {
            self.send_batch(chunk, delay).await?;
        }
        Ok(())
    }
}
