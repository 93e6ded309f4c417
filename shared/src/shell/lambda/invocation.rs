//! The one handler of both functions, for the Lambda runtime, the command line's `invoke` and
//! the tests alike: the pause switch, the item loop, one metric record per outcome, the SQS
//! partial batch answer and its backoff, whatever the [`Job`].

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::Value;
use tracing::Instrument as _;

use super::job::{After, Ctx, Failed, Fails, ItemOutcome, Job, Record, Work};
use super::{About, RecordFailure, sqs_redeliver};
use crate::pure::events::sync::batch_response;
use crate::shell::backoff::Backoff;
use crate::shell::config::ConfigError;
use crate::shell::error::{Class, Classify};
use crate::shell::metrics::{self, Metrics, Outcome, Sink};
use crate::shell::pause::{self, Pause};

/// What an invocation runs with besides its event: the environment's pause switch, where its
/// metric records go, and whether the SQS records it hands back are postponed.
pub struct Shell<'a> {
    /// `CELLBRIDGE_PAUSED` as read for this invocation, or why it cannot be read.
    pub pause: Result<Option<Pause>, ConfigError>,
    pub metrics: Result<Metrics<'a>, ConfigError>,
    /// The delay before a handed-back record comes back ([`crate::shell::backoff`]); `None` leaves the
    /// queue's own visibility timeout.
    pub backoff: Option<Backoff>,
}

impl<'a> Shell<'a> {
    /// The given switch and metric records, no postponement.
    pub fn new(pause: Option<Pause>, metrics: &Metrics<'a>) -> Self {
        Self {
            pause: Ok(pause),
            metrics: Ok(metrics.clone()),
            backoff: None,
        }
    }

    /// In Lambda: the switch read for each invocation, metric records on stdout, and the
    /// configured backoff. Both variables were checked at init, so a bad one is answered as a
    /// final failure that names it.
    pub fn lambda(function: &str, sink: &'a dyn Sink) -> Self {
        Self {
            pause: pause::from_env(),
            metrics: Metrics::from_env(function, sink),
            // Checked at init; a bad value there failed the cold start.
            backoff: Some(Backoff::from_env().unwrap_or_default()),
        }
    }
}

impl Shell<'static> {
    /// The command line's: `CELLBRIDGE_PAUSED`, and no metric record (its stdout is the answer).
    pub fn command_line() -> Self {
        Self {
            pause: pause::from_env(),
            metrics: Ok(Metrics::new("", &metrics::Discard)),
            backoff: None,
        }
    }

    /// Not paused, no metric record.
    pub fn quiet() -> Self {
        Self {
            pause: Ok(None),
            metrics: Ok(Metrics::new("", &metrics::Discard)),
            backoff: None,
        }
    }
}

/// What one invocation answers.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The JSON answer (for SQS, it carries `batchItemFailures`).
    pub response: Value,
    /// What the failures mean (`None` when nothing failed): retryable only when every one is.
    /// For SQS every record is answered in the response.
    pub class: Option<Class>,
}

impl Invocation {
    /// Something failed.
    pub fn failed(&self) -> bool {
        self.class.is_some()
    }
}

/// The Lambda handler of every job. The environment's pause switch first (paused, an item is
/// answered as such and not run); then each group of items prepared once and run a few at a
/// time; one metric record per outcome; the after-step; for SQS, the records a retry may fix
/// in `batchItemFailures`, postponed by their backoff while their receipt handles are valid.
/// An error is an invocation that failed before its items (an event it cannot read, a
/// sync-all that cannot list), counted once with no cell.
pub async fn handler<J: Job>(
    job: &J,
    event: &Value,
    deadline: Instant,
    shell: &Shell<'_>,
) -> Result<Invocation, J::Error> {
    let pause = shell.pause.clone()?;
    let metrics = shell.metrics.as_ref().map_err(Clone::clone)?;
    // Boxed: the invocation is one deep future, kept behind a pointer in the runtime's.
    let invocation: Pin<Box<dyn Future<Output = Result<Invocation, J::Error>> + Send + '_>> = Box::pin(
        async move {
            let work = match job.parse(event, pause.as_ref(), deadline).await {
                Ok(w) => w,
                Err(e) => {
                    // No cell to name: one record for the invocation, so that a final failure,
                    // which no retry brings back, is still counted.
                    metrics.count(Outcome::of_failure(e.class()), &[]);
                    return Err(e);
                }
            };
            let Work {
                plan,
                answered,
                items,
                records,
                failed,
                alone,
            } = work;
            let ctx = Ctx {
                deadline,
                sqs: records.is_some(),
            };
            // Paused, an item is answered as such; the others run in groups, each prepared once (a
            // group that cannot be prepared fails an SQS batch's records naming its items, and a
            // direct invocation as a whole).
            let mut ran: Vec<Option<Result<J::Outcome, Failed>>> = items.iter().map(|_| None).collect();
            let mut rest = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                match pause.as_ref().and_then(|p| job.paused(&item, p)) {
                    Some(o) => ran[i] = Some(Ok(o)),
                    None => rest.push((i, item)),
                }
            }
            let mut batch = None;
            let mut rest = rest.into_iter().peekable();
            while rest.peek().is_some() {
                let (at, group): (Vec<usize>, Vec<J::Item>) = rest.by_ref().take(J::GROUP).unzip();
                let shared = match job.prepare(&group, &plan, deadline).await {
                    Ok(b) => b,
                    Err(e) => {
                        let class = e.class();
                        for item in &group {
                            let about = job.about(item);
                            metrics.count(
                                Outcome::of_failure(class),
                                &[("cell", about.cell.as_deref()), ("cluster", about.cluster.as_deref())],
                            );
                        }
                        if !ctx.sqs {
                            return Err(e);
                        }
                        let reason = e.to_string();
                        for (i, item) in at.into_iter().zip(&group) {
                            ran[i] = Some(Err(Failed {
                                class,
                                reason: reason.clone(),
                                about: job.about(item),
                            }));
                        }
                        continue;
                    }
                };
                let (shared_ref, ctx) = (&shared, &ctx);
                let runs = at
                    .into_iter()
                    .zip(group)
                    .map(|(i, item)| async move { (i, job.run(item, shared_ref, ctx).await) });
                let done: Vec<(usize, J::Outcome)> = futures::stream::iter(runs)
                    .buffer_unordered(J::PARALLEL)
                    .collect()
                    .await;
                for (i, o) in done {
                    ran[i] = Some(Ok(o));
                }
                batch.get_or_insert(shared);
            }
            // Outcomes answered without a run first, then the items' in their order; an item whose
            // group could not be prepared has its failure only.
            let mut outcomes: Vec<J::Outcome> = answered;
            let mut slots: Vec<Result<usize, Failed>> = Vec::with_capacity(ran.len());
            for r in ran.into_iter().map(|r| r.expect("every item is answered or run")) {
                slots.push(r.map(|o| {
                    outcomes.push(o);
                    outcomes.len() - 1
                }));
            }
            for o in &outcomes {
                metrics.count(o.metric(), &o.properties());
                if let Some(flux) = o.flux() {
                    metrics.flux(flux, &o.properties());
                }
            }
            // A paused invocation with nothing to answer (a sync-all lists nothing) still counts.
            if outcomes.is_empty() && pause.is_some() && !alone {
                metrics.count(Outcome::Paused, &[]);
            }
            let after = job.after(&plan, batch.as_ref(), pause.as_ref(), &ctx, metrics).await?;
            let mut classes: Vec<Class> = outcomes
                .iter()
                .filter_map(ItemOutcome::failure)
                .map(|f| f.class)
                .collect();
            classes.extend(slots.iter().filter_map(|s| s.as_ref().err()).map(|f| f.class));
            if let Some(After {
                failure: Some((class, _)),
                fails: Fails::Invocation,
                ..
            }) = &after
            {
                classes.push(*class);
            }
            let class = Class::of_all(classes);
            let handed_back =
                records.map(|records| hand_back::<J>(records, failed, &slots, &outcomes, after.as_ref(), metrics));
            let mut response = job.answer(plan, outcomes, after, pause, &ctx);
            if let Some(ids) = handed_back {
                let postpone = !ids.is_empty();
                if let (Some(o), Ok(Value::Object(mut answer))) =
                    (response.as_object_mut(), serde_json::to_value(batch_response(ids)))
                {
                    o.append(&mut answer);
                }
                if let Some(backoff) = shell.backoff
                    && postpone
                {
                    // The postponements may use the second kept before Lambda's own deadline.
                    let until = deadline + Duration::from_millis(800);
                    crate::shell::backoff::postpone_failures(
                        crate::shell::backoff::sqs().await,
                        J::NAME,
                        event,
                        &response,
                        backoff,
                        until,
                    )
                    .await;
                }
            }
            Ok(Invocation { response, class })
        }
        .instrument(tracing::trace_span!(target: CHAIN, "lambda.handler")),
    );
    invocation.await
}

/// The SQS records to hand back: those a retry may fix ([`sqs_redeliver`]), each after its
/// line. Records that failed before their items (and the bodies nobody can read, which will not
/// read better later) are counted here, having no outcome of their own; a record naming several
/// items fails with them; messages that asked for the after-step alone fail with it.
fn hand_back<J: Job>(
    records: Vec<Record>,
    failed: Vec<RecordFailure>,
    slots: &[Result<usize, Failed>],
    outcomes: &[J::Outcome],
    after: Option<&After>,
    metrics: &Metrics<'_>,
) -> Vec<String> {
    for f in &failed {
        metrics.count(Outcome::of_failure(f.class), &[]);
    }
    let mut failures = failed;
    for r in records {
        match r.items {
            Err(f) => {
                metrics.count(Outcome::of_failure(f.class), &[]);
                failures.push(f);
            }
            Ok(items) => {
                let failed = items.iter().filter_map(|i| match &slots[*i] {
                    Ok(o) => outcomes[*o].failure(),
                    Err(f) => Some(f.clone()),
                });
                failures.extend(Failed::of_record(&r.message_id, failed.collect()));
            }
        }
    }
    let mut ids = sqs_redeliver(J::NAME, failures);
    if let Some(After {
        failure: Some((class, reason)),
        fails: Fails::Records(messages),
        ..
    }) = after
    {
        ids.extend(sqs_redeliver(
            J::NAME,
            messages.iter().map(|id| RecordFailure {
                message_id: id.clone(),
                about: About::fleet(),
                class: *class,
                reason: reason.clone(),
            }),
        ));
    }
    ids
}

/// The target of the spans that mark the steps of the two chains `lib.rs` documents, one span
/// per step: at TRACE, so that no operator's line shows one in place of the span that names
/// its cell or cluster.
pub const CHAIN: &str = "cellbridge::chain";
