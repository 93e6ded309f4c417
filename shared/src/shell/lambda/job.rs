//! What a function does with one invocation, as the one [`handler`](fn@super::handler) drives it:
//! the event read into items, what a group of items shares prepared once, each item run to its
//! typed outcome, and an after-step (the fleet dashboard, the access sweep). Pausing, counting,
//! the SQS batch answer and the backoff are the handler's, the same for every job.

use std::future::Future;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::{About, RecordFailure};
use crate::shell::config::ConfigError;
use crate::shell::error::{Class, Classify};
use crate::shell::metrics::{Metrics, Outcome};
use crate::shell::pause::Pause;

/// One function's work, item by item.
pub trait Job: Sync {
    /// The function's kind (`state-sync`, `cluster-bootstrap`): the `function` of its log lines.
    const NAME: &'static str;
    /// Items prepared together (they share one read of what `prepare` reads).
    const GROUP: usize;
    /// Items of a group run at once.
    const PARALLEL: usize;

    /// One thing to do: a state to sync, a cluster to bootstrap.
    type Item: Send;
    /// What a group of items shares.
    type Batch: Send + Sync;
    /// What running one item came to.
    type Outcome: ItemOutcome + Send;
    /// What the after-step and the answer need to know of the invocation.
    type Plan: Send + Sync;
    /// Why an invocation failed as a whole.
    type Error: std::error::Error + Classify + From<ConfigError> + Send;

    /// What the event asks for; `pause` is the environment's switch, read before anything else.
    fn parse(
        &self,
        event: &Value,
        pause: Option<&Pause>,
        deadline: Instant,
    ) -> impl Future<Output = Result<Work<Self>, Self::Error>> + Send;

    /// The answer of an item while paused, or `None` when the item pauses nothing (an event
    /// that is ignored anyway) and is run as usual.
    fn paused(&self, item: &Self::Item, pause: &Pause) -> Option<Self::Outcome>;

    /// What an item names when it could not be run at all (its group could not be prepared).
    fn about(&self, item: &Self::Item) -> About;

    /// What `items` share, read once for them.
    fn prepare(
        &self,
        items: &[Self::Item],
        plan: &Self::Plan,
        deadline: Instant,
    ) -> impl Future<Output = Result<Self::Batch, Self::Error>> + Send;

    /// One item, run to its outcome: a failure is an outcome too.
    fn run(&self, item: Self::Item, batch: &Self::Batch, ctx: &Ctx) -> impl Future<Output = Self::Outcome> + Send;

    /// What runs once the items are done. `batch` is the first group's (a job whose after-step
    /// reads it prepares its items as one group); the step writes its own metric records.
    fn after(
        &self,
        plan: &Self::Plan,
        batch: Option<&Self::Batch>,
        pause: Option<&Pause>,
        ctx: &Ctx,
        metrics: &Metrics<'_>,
    ) -> impl Future<Output = Result<Option<After>, Self::Error>> + Send;

    /// The invocation's answer from its outcomes and after-step, without `batchItemFailures`
    /// (the handler's).
    fn answer(
        &self,
        plan: Self::Plan,
        outcomes: Vec<Self::Outcome>,
        after: Option<After>,
        pause: Option<Pause>,
        ctx: &Ctx,
    ) -> Value;
}

/// What an invocation is, beyond its event.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    pub deadline: Instant,
    /// An SQS batch: records are answered one by one, and the failed ones handed back.
    pub sqs: bool,
}

/// What an event asks of a job.
pub struct Work<J: Job + ?Sized> {
    pub plan: J::Plan,
    /// Outcomes known without running anything (the states a sync-all sent to the queue).
    pub answered: Vec<J::Outcome>,
    pub items: Vec<J::Item>,
    /// `Some` for an SQS batch: its records, each naming items by their index in `items`.
    pub records: Option<Vec<Record>>,
    /// Records that failed while they were read, before any item ran.
    pub failed: Vec<RecordFailure>,
    /// The after-step is the whole invocation (`{"action": "dashboard"}`, the sweep).
    pub alone: bool,
}

/// One SQS record: the items it names, or why it cannot be read.
pub struct Record {
    pub message_id: String,
    pub items: Result<Vec<usize>, RecordFailure>,
}

/// An item's outcome as the handler counts and answers it.
pub trait ItemOutcome: Serialize {
    /// Its metric (`Outcome` dimension).
    fn metric(&self) -> Outcome;
    /// The plain members of its metric record: `cell`, `cluster`.
    fn properties(&self) -> Vec<(&'static str, Option<&str>)>;
    /// What failed, when it did.
    fn failure(&self) -> Option<Failed>;
    /// The final outcome of a bootstrap's confirmation this item reached, counted apart
    /// ([`crate::shell::metrics::flux_record`]).
    fn flux(&self) -> Option<crate::pure::bootstrap::confirm::Outcome> {
        None
    }
}

/// One item's failure, as its record's line and class take it.
#[derive(Debug, Clone)]
pub struct Failed {
    pub class: Class,
    /// The line's `error`: the item's error, in words.
    pub reason: String,
    pub about: About,
}

impl Failed {
    /// A record naming several failed items: handed back when any of them may work later (the
    /// others fail again, counted again, which costs less than losing the one that would have
    /// worked).
    pub fn of_record(message_id: &str, failures: Vec<Failed>) -> Option<RecordFailure> {
        let class = if failures.iter().any(|f| f.class == Class::Retryable) {
            Class::Retryable
        } else {
            failures.first()?.class
        };
        let reason = failures
            .iter()
            .map(|f| f.reason.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let about = match failures.as_slice() {
            [one] => one.about.clone(),
            many => About::cells(many.iter().filter_map(|f| f.about.cell.as_deref())),
        };
        Some(RecordFailure {
            message_id: message_id.to_owned(),
            about,
            class,
            reason,
        })
    }
}

/// What the after-step did, and what its failure fails.
pub struct After {
    /// Its answer (the dashboard's run, the sweep's report).
    pub answer: Value,
    /// Its failure's class and reason.
    pub failure: Option<(Class, String)>,
    pub fails: Fails,
}

/// What an after-step's failure fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fails {
    /// Nothing: the step's failure is its own (in the answer, its metric and its line).
    Nothing,
    /// The invocation: the step is all it asked for.
    Invocation,
    /// These SQS records, which asked for the step alone.
    Records(Vec<String>),
}
