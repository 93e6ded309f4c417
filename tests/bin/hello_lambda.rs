//! The peer of the cold-start benchmark: the smallest `lambda_runtime` function there is,
//! built with the same profile as cellbridge's functions.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|e: LambdaEvent<Value>| async move {
        Ok::<Value, Error>(e.payload)
    }))
    .await
}
