//! The rule suite's test beds and helpers, in one place: the handler as the functions' mains
//! compose it (here), state-sync's bed (`sync`) and cluster-bootstrap's (`bootstrap`).

pub(crate) mod bootstrap;
pub(crate) mod sync;

use std::time::Instant;

use cellbridge::shell::lambda::{self, Invocation, Job, Shell};
use cellbridge::shell::metrics::Metrics;
use cellbridge::shell::pause::Pause;
use serde_json::Value;

/// One invocation through the functions' one handler, as `cellbridge invoke` runs it: not
/// paused, no metric record.
pub(crate) async fn handle<J: Job>(job: &J, event: &Value, deadline: Instant) -> Result<Invocation, J::Error> {
    lambda::handler(job, event, deadline, &Shell::quiet()).await
}

/// The same with the environment's pause switch `pause` and metric records to `metrics`.
pub(crate) async fn handle_with<J: Job>(
    job: &J,
    event: &Value,
    deadline: Instant,
    pause: Option<Pause>,
    metrics: &Metrics<'_>,
) -> Result<Invocation, J::Error> {
    lambda::handler(job, event, deadline, &Shell::new(pause, metrics)).await
}

/// What Lambda gets for one invocation, composed as the functions' mains compose it.
pub(crate) async fn lambda_handler<J: Job>(
    job: &J,
    event: lambda_runtime::LambdaEvent<Value>,
) -> Result<Value, lambda_runtime::Diagnostic> {
    let deadline = lambda::deadline_from_epoch_ms(event.context.deadline);
    let shell = Shell::lambda(J::NAME, &cellbridge::shell::metrics::Stdout);
    lambda::respond(J::NAME, lambda::handler(job, &event.payload, deadline, &shell).await)
}

/// A tiny deterministic generator for the seeded schedules (xorshift64).
pub(crate) struct Dice(pub(crate) u64);

impl Dice {
    pub(crate) fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}
