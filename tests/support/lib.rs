//! The local test bed, shared by the integration tests: moto_server for AWS, and the fakes of
//! GitHub and the Kubernetes API under `tests/fakes/`. Each service is a real process on
//! 127.0.0.1; tests reach AWS only through `AWS_ENDPOINT_URL`, as the product does.

pub mod github;
pub mod kube;
pub mod leak;
pub mod moto;
pub mod process;
pub mod runtime_api;
