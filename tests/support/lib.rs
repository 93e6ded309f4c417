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
