//! Redelivery with backoff for SQS records that failed retryably. Lambda hands a record listed
//! in `batchItemFailures` back to the queue, where it becomes visible again when its visibility
//! timeout runs out ("all messages in that batch become visible in the queue again after the
//! visibility timeout expires",
//! <https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html>). That timeout is the queue's,
//! the same for every try: six times the function's timeout for state-sync, half an hour and
//! more. Changing the in-flight message's visibility timeout before answering
//! (`ChangeMessageVisibility`: "the new value is counted from the time of the call",
//! <https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html>)
//! sets when each record comes back: soon after the first failure, then exponentially later,
//! from `ApproximateReceiveCount`, until the queue's `maxReceiveCount` moves it to the
//! dead-letter queue.
//!
//! A postponement that fails (throttled, a queue in another account) is logged and left: the
//! record then comes back after the queue's own timeout, later but never lost.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::change_message_visibility::ChangeMessageVisibilityError;
use aws_sdk_sqs::operation::get_queue_url::GetQueueUrlError;
use serde_json::Value;
use tokio::sync::{Mutex, OnceCell};

use super::config::{self, ConfigError};
use super::error::{Class, Classify};

/// The longest visibility timeout SQS takes: twelve hours.
pub const SQS_MAX: Duration = Duration::from_secs(43_200);

/// How soon a failed record comes back: `base` after its first delivery, doubling with each
/// delivery, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(60),
            max: Duration::from_secs(3600),
        }
    }
}

impl Backoff {
    /// `CELLBRIDGE_RETRY_BASE_SECS` and `CELLBRIDGE_RETRY_MAX_SECS`; the error names the variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        let d = Self::default();
        let secs = |name: &'static str, default: Duration| -> Result<Duration, ConfigError> {
            match config::optional(name) {
                None => Ok(default),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if Duration::from_secs(n) <= SQS_MAX => Ok(Duration::from_secs(n)),
                    _ => Err(ConfigError::Invalid {
                        name,
                        value: v,
                        reason: "expected whole seconds, at most 43200 (SQS's longest visibility timeout)".into(),
                    }),
                },
            }
        };
        let base = secs("CELLBRIDGE_RETRY_BASE_SECS", d.base)?;
        let max = secs("CELLBRIDGE_RETRY_MAX_SECS", d.max)?;
        if max < base {
            return Err(ConfigError::Invalid {
                name: "CELLBRIDGE_RETRY_MAX_SECS",
                value: max.as_secs().to_string(),
                reason: format!("below CELLBRIDGE_RETRY_BASE_SECS ({})", base.as_secs()),
            });
        }
        Ok(Self { base, max })
    }

    /// The delay before the next delivery of a record delivered `receive_count` times.
    pub fn delay(&self, receive_count: u32) -> Duration {
        let doublings = receive_count.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << doublings).min(self.max).min(SQS_MAX)
    }
}

/// One failed record to bring back later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Postponement {
    pub message_id: String,
    /// `eventSourceARN`: `arn:aws:sqs:<region>:<account>:<queue>`.
    pub queue_arn: String,
    pub receipt_handle: String,
    pub receive_count: u32,
    pub delay: Duration,
}

/// The records of an SQS `event` that `response` lists in `batchItemFailures`, each with its
/// delay. Records without what `ChangeMessageVisibility` needs are left out (they come back after
/// the queue's timeout).
pub fn postponements(event: &Value, response: &Value, backoff: Backoff) -> Vec<Postponement> {
    let Some(failed) = response.get("batchItemFailures").and_then(Value::as_array) else {
        return Vec::new();
    };
    let failed: Vec<&str> = failed.iter().filter_map(|f| f["itemIdentifier"].as_str()).collect();
    let records = event
        .get("Records")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    records
        .iter()
        .filter_map(|r| {
            let message_id = r["messageId"].as_str()?;
            if !failed.contains(&message_id) {
                return None;
            }
            let receive_count = r["attributes"]["ApproximateReceiveCount"]
                .as_str()
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            Some(Postponement {
                message_id: message_id.to_owned(),
                queue_arn: r["eventSourceARN"].as_str()?.to_owned(),
                receipt_handle: r["receiptHandle"].as_str()?.to_owned(),
                receive_count,
                delay: backoff.delay(receive_count),
            })
        })
        .collect()
}

/// Why a record could not be postponed (it then comes back after the queue's own timeout).
#[derive(Debug, thiserror::Error)]
pub enum PostponeError {
    /// The record's `eventSourceARN` names no SQS queue.
    #[error("{arn} is not an SQS queue ARN")]
    NotAQueue { arn: String },
    /// The queue's URL could not be asked, said with its causes.
    #[error("GetQueueUrl {arn}: {}", crate::pure::redact::chain(source))]
    QueueUrl {
        arn: String,
        #[source]
        source: Box<SdkError<GetQueueUrlError>>,
    },
    /// SQS did not change the message's visibility timeout, said with its causes.
    #[error("ChangeMessageVisibility on {queue}: {}", crate::pure::redact::chain(source))]
    Change {
        queue: String,
        #[source]
        source: Box<SdkError<ChangeMessageVisibilityError>>,
    },
}

impl Classify for PostponeError {
    /// Throttling, SQS's server errors and no answer at all may pass; a refusal (a missing
    /// permission, a stale receipt handle) or an ARN that is no queue will not.
    fn class(&self) -> Class {
        let passes = match self {
            PostponeError::NotAQueue { .. } => false,
            PostponeError::QueueUrl { source, .. } => sqs_retryable(source),
            PostponeError::Change { source, .. } => sqs_retryable(source),
        };
        if passes { Class::Retryable } else { Class::Final }
    }
}

/// Whether an SQS call that failed may succeed later: server errors and throttling, and any
/// failure to get an answer at all.
fn sqs_retryable<E: ProvideErrorMetadata>(e: &SdkError<E>) -> bool {
    match e {
        SdkError::ServiceError(se) => {
            se.raw().status().is_server_error()
                || matches!(
                    e.code(),
                    Some("ThrottlingException" | "RequestThrottled" | "AWS.SimpleQueueService.RequestThrottled")
                )
        }
        _ => true,
    }
}

/// Where postponements go: SQS ([`SqsVisibility`]), or a test's record of them.
pub trait Visibility: Send + Sync {
    fn postpone(&self, p: &Postponement) -> impl std::future::Future<Output = Result<(), PostponeError>> + Send;
}

/// SQS's `ChangeMessageVisibility`, with each queue's URL asked once (`GetQueueUrl`, which also
/// answers for an endpoint other than AWS's).
pub struct SqsVisibility {
    sqs: aws_sdk_sqs::Client,
    urls: Mutex<HashMap<String, String>>,
}

impl SqsVisibility {
    pub fn new(conf: &aws_config::SdkConfig) -> Self {
        Self {
            sqs: aws_sdk_sqs::Client::new(conf),
            urls: Mutex::new(HashMap::new()),
        }
    }

    async fn url(&self, arn: &str) -> Result<String, PostponeError> {
        if let Some(u) = self.urls.lock().await.get(arn) {
            return Ok(u.clone());
        }
        // arn:<partition>:sqs:<region>:<account>:<name>
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let [_, _, "sqs", _, account, name] = parts[..] else {
            return Err(PostponeError::NotAQueue { arn: arn.to_owned() });
        };
        let out = self
            .sqs
            .get_queue_url()
            .queue_name(name)
            .queue_owner_aws_account_id(account)
            .send()
            .await
            .map_err(|source| PostponeError::QueueUrl {
                arn: arn.to_owned(),
                source: Box::new(source),
            })?;
        let url = out.queue_url().unwrap_or_default().to_owned();
        self.urls.lock().await.insert(arn.to_owned(), url.clone());
        Ok(url)
    }
}

impl Visibility for SqsVisibility {
    async fn postpone(&self, p: &Postponement) -> Result<(), PostponeError> {
        let url = self.url(&p.queue_arn).await?;
        self.sqs
            .change_message_visibility()
            .queue_url(&url)
            .receipt_handle(&p.receipt_handle)
            .visibility_timeout(p.delay.as_secs().min(SQS_MAX.as_secs()) as i32)
            .send()
            .await
            .map(drop)
            .map_err(|source| PostponeError::Change {
                queue: url,
                source: Box::new(source),
            })
    }
}

/// The process's SQS client for postponements, built from the environment the first time a
/// record is postponed (an invocation with no failed record never builds it).
pub async fn sqs() -> &'static SqsVisibility {
    static SQS: OnceCell<SqsVisibility> = OnceCell::const_new();
    SQS.get_or_init(|| async {
        let conf = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        SqsVisibility::new(&conf)
    })
    .await
}

/// Postpones every record of `event` that `response` hands back, before `deadline`; returns the
/// ones postponed. Failures are logged: those records come back after the queue's timeout.
pub async fn postpone_failures<V: Visibility>(
    vis: &V,
    function: &str,
    event: &Value,
    response: &Value,
    backoff: Backoff,
    deadline: Instant,
) -> Vec<Postponement> {
    let mut done = Vec::new();
    // A failed postponement is the queue's, which every cell's records share (a missing
    // permission, a stale receipt handle): its lines say scope=fleet; the record's own line
    // (`lambda::sqs_redeliver`) names its cell or cluster, with the same message id.
    for p in postponements(event, response, backoff) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, vis.postpone(&p)).await {
            Ok(Ok(())) => {
                tracing::info!(function, message_id = %p.message_id, receive_count = p.receive_count, delay_secs = p.delay.as_secs(), "SQS record redelivered after a backoff");
                done.push(p);
            }
            Ok(Err(e)) => {
                tracing::warn!(function, scope = "fleet", message_id = %p.message_id, error = %e, "could not postpone the SQS record; it comes back after the queue's visibility timeout")
            }
            Err(_) => {
                tracing::warn!(function, scope = "fleet", message_id = %p.message_id, "no time left to postpone the SQS record; it comes back after the queue's visibility timeout");
                break;
            }
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_delay_doubles_with_each_delivery_up_to_the_maximum() {
        let b = Backoff {
            base: Duration::from_secs(60),
            max: Duration::from_secs(600),
        };
        let delays: Vec<u64> = (1..=6).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [60, 120, 240, 480, 600, 600]);
        assert_eq!(b.delay(0).as_secs(), 60, "a count SQS did not give counts as the first");
        assert_eq!(b.delay(u32::MAX), b.max);
    }

    #[test]
    fn only_the_records_handed_back_are_postponed() {
        let record = |id: &str, count: &str| {
            json!({"messageId": id, "receiptHandle": format!("rh-{id}"), "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:q",
                   "attributes": {"ApproximateReceiveCount": count}})
        };
        let event = json!({"Records": [record("a", "1"), record("b", "3"), record("c", "1")]});
        let response = json!({"batchItemFailures": [{"itemIdentifier": "b"}, {"itemIdentifier": "c"}]});
        let ps = postponements(&event, &response, Backoff::default());
        assert_eq!(
            ps.iter()
                .map(|p| (p.message_id.as_str(), p.delay.as_secs()))
                .collect::<Vec<_>>(),
            [("b", 240), ("c", 60)]
        );
        assert_eq!(ps[0].receipt_handle, "rh-b");
        assert!(postponements(&event, &json!({"batchItemFailures": []}), Backoff::default()).is_empty());
        assert!(
            postponements(
                &json!({"action": "sync-all"}),
                &json!({"cells": []}),
                Backoff::default()
            )
            .is_empty()
        );
    }
}
