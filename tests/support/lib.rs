//! The local test bed, shared by the integration tests: moto_server for AWS, and the fakes of
//! GitHub and the Kubernetes API under `tests/fakes/`. Each service is a real process on
//! 127.0.0.1; tests reach AWS only through `AWS_ENDPOINT_URL`, as the product does.

pub mod fleetgen;
pub mod github;
pub mod kube;
pub mod leak;
pub mod moto;
pub mod process;
pub mod runtime_api;
pub mod rusage;

/// A Lambda invocation context whose deadline is `secs` from now, as the runtime hands it over.
pub fn lambda_context(secs: u64) -> lambda_runtime::Context {
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + secs * 1000;
    ctx
}

/// One invocation through the functions' one handler, as `cellbridge invoke` runs it: not
/// paused, no metric record, no postponement.
pub async fn handle<J: cellbridge::shell::lambda::Job>(
    job: &J,
    event: &serde_json::Value,
    deadline: std::time::Instant,
) -> Result<cellbridge::shell::lambda::Invocation, J::Error> {
    cellbridge::shell::lambda::handler(job, event, deadline, &cellbridge::shell::lambda::Shell::quiet()).await
}

/// What Lambda gets for one invocation, composed as the functions' mains compose it: the
/// environment's shell, the one handler, Lambda's answer.
pub async fn lambda_handler<J: cellbridge::shell::lambda::Job>(
    job: &J,
    event: lambda_runtime::LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, lambda_runtime::Diagnostic> {
    let deadline = cellbridge::shell::lambda::deadline_from_epoch_ms(event.context.deadline);
    let shell = cellbridge::shell::lambda::Shell::lambda(J::NAME, &cellbridge::shell::metrics::Stdout);
    cellbridge::shell::lambda::respond(
        J::NAME,
        cellbridge::shell::lambda::handler(job, &event.payload, deadline, &shell).await,
    )
}
