//! A function's own queue, as it sends to it (sync-all's fan-out, cluster-bootstrap's delayed
//! re-checks): SQS in [`crate::jobs::queue`], in memory with the `test-support` feature.

use std::future::Future;

use aws_sdk_sqs::error::SdkError;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;

use crate::shell::error::{Class, Classify};

/// Why fanned-out messages were not all sent (those sent stay sent).
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    /// A message SQS's client refused to build (an entry without its id or body).
    #[error("SendMessageBatch to {queue}: {}", crate::pure::redact::chain(source))]
    Entry {
        queue: String,
        #[source]
        source: aws_sdk_sqs::error::BuildError,
    },
    /// The call itself failed (no answer, throttled, refused), said with its causes.
    #[error("SendMessageBatch to {queue}: {}", crate::pure::redact::chain(source))]
    Send {
        queue: String,
        #[source]
        source: Box<SdkError<SendMessageBatchError>>,
    },
    /// The call answered, but left entries unsent, twice: `code` is the first one's.
    #[error("SendMessageBatch to {queue}: {count} messages not sent ({code})")]
    NotSent { queue: String, count: usize, code: String },
    /// The function's deadline came before every message was sent.
    #[error("sending did not finish before the function's deadline")]
    Deadline,
}

impl Classify for EnqueueError {
    /// A queue that refused or did not answer may take the messages on the next run; a message
    /// that cannot be built never will.
    fn class(&self) -> Class {
        match self {
            EnqueueError::Entry { .. } => Class::Final,
            EnqueueError::Send { .. } | EnqueueError::NotSent { .. } | EnqueueError::Deadline => Class::Retryable,
        }
    }
}

/// Where a function's own messages go: its SQS queue ([`SqsQueue`](crate::jobs::queue::SqsQueue)), or the in-memory record of
/// the `test-support` feature (`doubles::queue::MemQueue`).
pub trait Enqueue: Send + Sync {
    /// Sends every body, visible after `delay` (zero: at once), or fails naming how many were
    /// not sent (those sent stay sent: a cell synced twice is synced once, the sync is
    /// level-triggered; a cluster checked twice is checked once).
    fn enqueue(
        &self,
        bodies: &[String],
        delay: std::time::Duration,
    ) -> impl Future<Output = Result<(), EnqueueError>> + Send;
}
