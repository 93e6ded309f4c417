//! The cluster-bootstrap Lambda: the first Flux bootstrap of every new EKS cluster.
//! Thin over `cellbridge::bootstrap::handler`; everything it does is testable without Lambda.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    // One crypto provider for rustls, chosen before any client exists (kube panics otherwise).
    cellbridge::telemetry::install_crypto_provider();
    cellbridge::telemetry::init_lambda();
    // Configuration and clients once per process; a bad variable fails the cold start with an
    // error that names it instead of failing every invocation.
    let service = match cellbridge::bootstrap::handler::service_from_env().await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cluster-bootstrap cannot start");
            return Err(e.into());
        }
    };
    let service = &service;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        cellbridge::bootstrap::handler::lambda_handler(service, event).await
    }))
    .await
}
