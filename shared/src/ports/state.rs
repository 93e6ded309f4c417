//! Where Terraform states are read from: the latest version of one state, and the listing
//! sync-all walks. S3 in [`crate::adapters::s3`]; in memory with the `test-support` feature.

use std::future::Future;

use crate::pure::plan::StateRef;
use crate::pure::tfstate::{StateError, StateOutputs};
use crate::shell::error::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error("s3://{bucket}/{key}: no such object (deleted, or never written)")]
    NotFound { bucket: String, key: String },
    #[error("s3://{bucket}/{key}: {reason}")]
    Request {
        bucket: String,
        key: String,
        reason: String,
        retryable: bool,
    },
    #[error(transparent)]
    State(#[from] StateError),
}

impl Classify for S3Error {
    fn class(&self) -> Class {
        match self {
            S3Error::Request { retryable: true, .. } => Class::Retryable,
            // A body cut off mid-download reads as an I/O error; the next try reads it whole.
            S3Error::State(StateError::Io { .. }) => Class::Retryable,
            // A state that is not a state, or does not keep the contract.
            S3Error::State(_) => Class::InvalidInput,
            S3Error::NotFound { .. } | S3Error::Request { .. } => Class::Final,
        }
    }
}

pub type Result<T, E = S3Error> = std::result::Result<T, E>;

/// Where Terraform states are read from; [`S3States`](crate::adapters::s3::S3States) is the real one.
pub trait StateSource: Send + Sync {
    /// The latest version of the state at `bucket`/`key`, with the version it came from.
    fn read_latest(&self, bucket: &str, key: &str) -> impl Future<Output = Result<(StateOutputs, StateRef)>> + Send;
    /// Every object key under `prefix` (for sync-all), in key order.
    fn list(&self, bucket: &str, prefix: &str) -> impl Future<Output = Result<Vec<String>>> + Send;
}
