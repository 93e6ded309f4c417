//! Terraform states in memory (feature `test-support`): a versioned bucket as S3 keeps one
//! (every write a new version, reads return the latest; <https://docs.aws.amazon.com/AmazonS3/latest/userguide/Versioning.html>),
//! read through the same state reader as [`crate::adapters::s3::S3States`], with injectable faults.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::ports::state::{Result, S3Error, StateSource};
use crate::pure::plan::StateRef;
use crate::pure::tfstate::{self, StateOutputs};

#[derive(Default)]
struct Store {
    objects: BTreeMap<(String, String), Vec<Vec<u8>>>,
    failing_reads: usize,
    reads: usize,
}

/// Versioned buckets of Terraform states.
#[derive(Default)]
pub struct MemStates {
    store: Mutex<Store>,
}

impl MemStates {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes a new version of `bucket`/`key`, as `terraform apply` does.
    pub fn put(&self, bucket: &str, key: &str, state: impl Into<Vec<u8>>) {
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        s.objects
            .entry((bucket.to_owned(), key.to_owned()))
            .or_default()
            .push(state.into());
    }

    /// The next `times` reads fail as S3 throttling that outlived the SDK's retries would.
    pub fn fail_reads(&self, times: usize) {
        self.store.lock().unwrap_or_else(|p| p.into_inner()).failing_reads = times;
    }

    pub fn reads(&self) -> usize {
        self.store.lock().unwrap_or_else(|p| p.into_inner()).reads
    }
}

impl StateSource for MemStates {
    async fn read_latest(&self, bucket: &str, key: &str) -> Result<(StateOutputs, StateRef)> {
        let (bytes, version) = {
            let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
            s.reads += 1;
            if s.failing_reads > 0 {
                s.failing_reads -= 1;
                return Err(S3Error::Request {
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                    reason: "SlowDown: injected".into(),
                    retryable: true,
                });
            }
            let versions = s
                .objects
                .get(&(bucket.to_owned(), key.to_owned()))
                .ok_or_else(|| S3Error::NotFound {
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                })?;
            (versions.last().cloned().unwrap_or_default(), versions.len())
        };
        let version_id = Some(format!("v{version}"));
        let origin = format!("s3://{bucket}/{key}?versionId=v{version}");
        let state = tfstate::read_state(bytes.as_slice(), &origin)?;
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
        let s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        Ok(s.objects
            .keys()
            .filter(|(b, k)| b == bucket && k.starts_with(prefix))
            .map(|(_, k)| k.clone())
            .collect())
    }
}
