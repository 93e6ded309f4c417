//! The Lambda shell every job shares: the one invocation handler ([`lambda`]), the error model
//! ([`error`]), settings ([`config`]), metrics, pause, the SQS batch answer's backoff, retries and
//! telemetry.

pub mod backoff;
pub mod config;
pub mod error;
pub mod lambda;
pub mod metrics;
pub mod pause;
pub mod retry;
#[cfg(test)]
mod runbook;
pub mod telemetry;
