//! Terraform states in S3: the latest version of one object, read as it downloads (a state can
//! be hundreds of megabytes; only its outputs are kept), and the listing `sync-all` walks.

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use tokio_util::io::SyncIoBridge;

use crate::ports::state::{Result, S3Error, StateSource};
use crate::pure::plan::StateRef;
use crate::pure::tfstate::{self, StateOutputs};

#[derive(Clone)]
pub struct S3States {
    client: aws_sdk_s3::Client,
}

impl S3States {
    pub fn new(client: aws_sdk_s3::Client) -> Self {
        Self { client }
    }

    /// A client from the environment's configuration (`AWS_ENDPOINT_URL` included). Path-style
    /// addressing when an endpoint is set, since S3-compatible servers rarely do virtual hosts.
    pub fn from_conf(conf: &aws_config::SdkConfig) -> Self {
        let mut b = aws_sdk_s3::config::Builder::from(conf);
        if conf.endpoint_url().is_some() {
            b = b.force_path_style(true);
        }
        Self {
            client: aws_sdk_s3::Client::from_conf(b.build()),
        }
    }
}

/// One line an operator can act on: S3's status, code and message, and for a refusal the
/// permission the call needs (`permission`); never the SDK's nested debug context.
fn sdk_error<E>(
    bucket: &str,
    key: &str,
    (operation, permission): (&str, &str),
    e: SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> S3Error
where
    E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
{
    let (retryable, reason) = match &e {
        // Throttling and 5xx are worth another try; access denied or a bad bucket are not.
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            let code = e.code().unwrap_or("an error");
            let message = e.message().map(|m| format!(": {m}")).unwrap_or_default();
            let hint = if status == 403 {
                format!(" (the function's role needs {permission})")
            } else {
                String::new()
            };
            (
                status >= 500 || status == 429 || status == 408,
                format!("S3 {operation} answered HTTP {status} {code}{message}{hint}"),
            )
        }
        SdkError::ConstructionFailure(_) => (false, format!("S3 {operation}: the request could not be built")),
        SdkError::TimeoutError(_) => (true, format!("S3 {operation}: no answer in time")),
        // A connection or a response that never came whole: the SDK's own words, on one line.
        _ => (
            true,
            format!("S3 {operation}: {}", crate::pure::redact::chain(&e).replace('\n', " ")),
        ),
    };
    S3Error::Request {
        bucket: bucket.to_owned(),
        key: key.to_owned(),
        reason,
        retryable,
    }
}

impl StateSource for S3States {
    async fn read_latest(&self, bucket: &str, key: &str) -> Result<(StateOutputs, StateRef)> {
        let out = match self.client.get_object().bucket(bucket).key(key).send().await {
            Ok(o) => o,
            Err(SdkError::ServiceError(s)) if s.err().is_no_such_key() => {
                return Err(S3Error::NotFound {
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                });
            }
            Err(e) => {
                return Err(sdk_error(
                    bucket,
                    key,
                    (
                        "GetObject",
                        "s3:GetObject on the object, and s3:ListBucket on the bucket",
                    ),
                    e,
                ));
            }
        };
        let version_id = out.version_id().map(str::to_owned);
        let origin = match &version_id {
            Some(v) => format!("s3://{bucket}/{key}?versionId={v}"),
            None => format!("s3://{bucket}/{key}"),
        };
        // The parser is synchronous; bridge the download into it on a blocking thread so the
        // state streams through and is never held whole in memory.
        let reader = SyncIoBridge::new(out.body.into_async_read());
        let state = tokio::task::spawn_blocking(move || tfstate::read_state(reader, &origin))
            .await
            .map_err(|e| S3Error::Request {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
                reason: format!("reader task failed: {e}"),
                retryable: true,
            })??;
        Ok((
            state,
            StateRef {
                bucket: Some(bucket.to_owned()),
                key: key.to_owned(),
                version_id,
            },
        ))
    }

    async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page =
                page.map_err(|e| sdk_error(bucket, prefix, ("ListObjectsV2", "s3:ListBucket on the bucket"), e))?;
            keys.extend(page.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
        }
        keys.sort();
        Ok(keys)
    }
}
