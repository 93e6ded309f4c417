//! Logging and process-wide set-up shared by the Lambda functions and the command line.

use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the one crypto provider the whole dependency tree uses (aws-lc-rs). With two
/// providers compiled in, rustls cannot pick one and `kube::Client::try_from` panics; calling
/// this first in `main` makes the choice explicit. Safe to call twice.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// What no log level may show, whatever `RUST_LOG` asks for: `aws_sigv4` prints the whole
/// canonical request at TRACE, and for the presigned STS request that is the EKS token that
/// request carries the session token (`X-Amz-Security-Token`). Every subscriber cellbridge
/// installs is filtered by this too (and so is the test suite's leak capture).
pub fn credential_safe() -> Targets {
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target("aws_sigv4", LevelFilter::DEBUG)
}

/// Structured JSON logs for Lambda (CloudWatch keeps one event per line; the runtime adds the
/// request id as a span field). `RUST_LOG` filters, `info` by default.
pub fn init_lambda() {
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .without_time(); // CloudWatch stamps every line already
    // Building an EnvFilter parses and compiles its directives at every cold start; without
    // RUST_LOG a plain level does the same job for less.
    let _ = match EnvFilter::try_from_default_env() {
        Ok(filter) => tracing_subscriber::registry()
            .with(layer.with_filter(filter).with_filter(credential_safe()))
            .try_init(),
        Err(_) => tracing_subscriber::registry()
            .with(layer.with_filter(quiet_dependencies()).with_filter(credential_safe()))
            .try_init(),
    };
}

/// The default level, INFO, without what a dependency repeats of cellbridge's own lines:
/// kube's client logs every failed request at ERROR ("failed with error client error") with
/// neither the cluster nor the object, where cellbridge's own line names both and says whether
/// it retries. `RUST_LOG` brings them back.
fn quiet_dependencies() -> Targets {
    Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("kube_client::client::builder", LevelFilter::OFF)
}

/// Human-readable logs on stderr for the command line; `json` for automation.
pub fn init_cli(json: bool, verbose: bool) {
    let default = if verbose { "info" } else { "warn" };
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colours only for a person at a terminal: a redirected log stays plain text.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = if json {
        tracing_subscriber::registry()
            .with(layer.json().with_filter(filter()).with_filter(credential_safe()))
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(layer.with_filter(filter()).with_filter(credential_safe()))
            .try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;
    use tracing::subscriber::with_default;

    use std::sync::{Arc, Mutex};

    /// A layer that records the target and level of what reaches it.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
        fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {}", e.metadata().target(), e.metadata().level()));
        }
    }

    #[test]
    fn signing_details_never_pass_whatever_the_level() {
        let seen = Seen::default();
        let sub = tracing_subscriber::registry().with(
            seen.clone()
                .with_filter(EnvFilter::new("trace"))
                .with_filter(credential_safe()),
        );
        with_default(sub, || {
            tracing::event!(target: "aws_sigv4::http_request::sign", Level::TRACE, "canonical_request=...");
            tracing::event!(target: "aws_sigv4::http_request::sign", Level::DEBUG, "signing");
            tracing::event!(target: "hyper_util::client", Level::TRACE, "connecting");
        });
        assert_eq!(
            *seen.0.lock().unwrap(),
            ["aws_sigv4::http_request::sign DEBUG", "hyper_util::client TRACE"]
        );
    }

    #[test]
    fn by_default_kubes_repeat_of_a_failed_request_is_left_out_and_cellbridges_own_lines_kept() {
        let seen = Seen::default();
        let sub = tracing_subscriber::registry().with(
            seen.clone()
                .with_filter(quiet_dependencies())
                .with_filter(credential_safe()),
        );
        with_default(sub, || {
            tracing::event!(target: "kube_client::client::builder", Level::ERROR, "failed with error client error (Connect)");
            tracing::event!(target: "cellbridge::bootstrap::apply::calls", Level::WARN, "retrying");
            tracing::event!(target: "cellbridge::sync", Level::INFO, "state synced");
            tracing::event!(target: "hyper_util::client", Level::DEBUG, "connecting");
        });
        assert_eq!(
            *seen.0.lock().unwrap(),
            ["cellbridge::bootstrap::apply::calls WARN", "cellbridge::sync INFO"]
        );
    }
}
