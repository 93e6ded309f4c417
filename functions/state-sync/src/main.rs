//! The state-sync Lambda: every Terraform state update becomes a reviewed pull request.
//! Thin over `cellbridge::sync`; everything it does is testable without Lambda.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    cellbridge::telemetry::install_crypto_provider();
    cellbridge::telemetry::init_lambda();
    // Configuration is validated here, once: a bad variable fails the cold start with an error
    // that names it, instead of failing every invocation.
    let service = match cellbridge::sync::service_from_env().await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "state-sync cannot start");
            return Err(e.into());
        }
    };
    let service = &service;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        cellbridge::sync::lambda_handler(service, event).await
    }))
    .await
}
