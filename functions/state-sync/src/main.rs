//! The state-sync Lambda: every Terraform state update becomes a reviewed pull request.
//! Thin over `cellbridge::jobs::sync`; everything it does is testable without Lambda.

use cellbridge::jobs::sync::{self, SyncConfig};
use cellbridge::shell::lambda::{self, Deferred, Shell};
use cellbridge::shell::metrics::Stdout;
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use std::process::ExitCode;

const NAME: &str = "state-sync";

#[tokio::main]
async fn main() -> ExitCode {
    cellbridge::shell::telemetry::install_crypto_provider();
    cellbridge::shell::telemetry::init_lambda();
    // Init checks the configuration, so a bad variable fails the cold start with an error that
    // names it; the clients are built by the first invocation (see `cellbridge::shell::lambda`).
    let config = match SyncConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            // Said once, in words, on the log line: returned from `main`, the error would
            // also be printed in Rust's Debug form.
            tracing::error!(scope = "fleet", error = %e, "state-sync cannot start");
            return ExitCode::FAILURE;
        }
    };
    let service = Deferred::new(config);
    let service = &service;
    // Each invocation: the environment's shell, the one handler, Lambda's answer.
    match lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = lambda::deadline_from_epoch_ms(event.context.deadline);
        let shell = Shell::lambda(NAME, &Stdout);
        let service = service.get(sync::service_with).await;
        lambda::respond(NAME, lambda::handler(service, &event.payload, deadline, &shell).await)
    }))
    .await
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(scope = "fleet", error = %e, "state-sync stopped: the Lambda runtime failed");
            ExitCode::FAILURE
        }
    }
}
