//! The state-sync Lambda: every Terraform state update becomes a reviewed pull request.
//! Thin over `cellbridge::sync`; everything it does is testable without Lambda.

use cellbridge::lambda::Deferred;
use cellbridge::sync::{self, SyncConfig};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    cellbridge::telemetry::install_crypto_provider();
    cellbridge::telemetry::init_lambda();
    // Init checks the configuration, so a bad variable fails the cold start with an error that
    // names it; the clients are built by the first invocation (see `cellbridge::lambda`).
    let config = match SyncConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "state-sync cannot start");
            return Err(e.into());
        }
    };
    let service = Deferred::new(config);
    let service = &service;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        sync::lambda_handler(service.get(sync::service_with).await, event).await
    }))
    .await
}
