//! Logging and process-wide set-up shared by the Lambda functions and the command line.

/// Installs the one crypto provider the whole dependency tree uses (aws-lc-rs). With two
/// providers compiled in, rustls cannot pick one and `kube::Client::try_from` panics; calling
/// this first in `main` makes the choice explicit. Safe to call twice.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Structured JSON logs for Lambda (CloudWatch keeps one event per line; the runtime adds the
/// request id as a span field). `RUST_LOG` filters, `info` by default.
pub fn init_lambda() {
    let builder = tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .without_time(); // CloudWatch stamps every line already
    // Building an EnvFilter parses and compiles its directives at every cold start; without
    // RUST_LOG a plain level does the same job for less.
    let _ = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => builder.with_env_filter(filter).try_init(),
        Err(_) => builder
            .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
            .try_init(),
    };
}

/// Human-readable logs on stderr for the command line; `json` for automation.
pub fn init_cli(json: bool, verbose: bool) {
    let default = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
