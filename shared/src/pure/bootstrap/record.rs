//! Where a bootstrap's outcome lives: two tags on the EKS cluster, written by cluster-bootstrap
//! after each check (TagResource) and read back with the DescribeCluster every reader already
//! makes (the sweep, the dashboard, the next re-check), so nothing enters the cluster to learn
//! how its bootstrap went.
//!
//! - [`FLUX_TAG`]: the outcome in the product's words ([`Outcome::as_str`]): `confirming` while
//!   re-checks are queued, then `ready` or the reason.
//! - [`FLUX_SINCE_TAG`]: when the apply that started the confirmation finished (RFC 3339, UTC):
//!   the clock the grace and the deadline count from, kept with the cluster so that a re-check
//!   lost with its message still tells the sweep how old the confirmation is.
//!
//! EKS tag values take letters, digits, spaces and `_ . : / = + - @` up to 256 characters
//! (<https://docs.aws.amazon.com/eks/latest/userguide/eks-using-tags.html>): both values fit.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_sdk_eks::primitives::{DateTime, DateTimeFormat};

use super::confirm::Outcome;

pub const FLUX_TAG: &str = "cellbridge.dev/flux";
pub const FLUX_SINCE_TAG: &str = "cellbridge.dev/flux-since";
/// A cluster tagged `cellbridge.dev/sweep = skip` (set where the cluster is defined, beside the
/// cell tag) is one the daily sweep never bootstraps: a cell whose Flux is installed another
/// way opts out of being caught up.
pub const OPT_OUT_TAG: &str = "cellbridge.dev/sweep";
/// When the sweep last queued the cluster's catch-up (RFC 3339, UTC), written right after the
/// message is sent: while it is younger than [`pending`] (the confirmation's deadline and an hour), the
/// catch-up is pending and a sweep (a retried one, the next page of a chain run twice) does not
/// queue another. SQS cannot tell: the function's queue is a standard queue (its re-checks need
/// per-message `DelaySeconds`, which FIFO queues do not take), and only FIFO queues deduplicate
/// (<https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-queues-exactly-once-processing.html>,
/// <https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-timers.html>).
pub const CATCH_UP_TAG: &str = "cellbridge.dev/catch-up";
pub const OPT_OUT_VALUE: &str = "skip";

/// What the cluster's tags say of its bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FluxRecord {
    pub outcome: Outcome,
    pub since: SystemTime,
}

/// Why the tags could not be read (someone edited them): the reader treats the cluster as
/// having no record, and says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tag {tag}: {value:?} is not {expected}")]
pub struct RecordError {
    pub tag: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// RFC 3339 in whole seconds (`2026-12-05T20:31:42Z`).
pub fn format_time(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    DateTime::from_secs(secs as i64)
        .fmt(DateTimeFormat::DateTime)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

pub fn parse_time(v: &str) -> Option<SystemTime> {
    DateTime::from_str(v, DateTimeFormat::DateTime)
        .ok()
        .and_then(|t| SystemTime::try_from(t).ok())
}

impl FluxRecord {
    /// The record the tags hold: `None` when the cluster has none (never bootstrapped by
    /// cellbridge, or bootstrapped before the record existed).
    pub fn from_tags(tags: &HashMap<String, String>) -> Option<Result<FluxRecord, RecordError>> {
        let value = tags.get(FLUX_TAG)?;
        let outcome = match Outcome::parse(value) {
            Some(o) => o,
            None => {
                return Some(Err(RecordError {
                    tag: FLUX_TAG,
                    value: value.clone(),
                    expected: "a bootstrap outcome (ready, confirming, no-nodes, …)",
                }));
            }
        };
        let since = tags.get(FLUX_SINCE_TAG).map(String::as_str).unwrap_or("");
        Some(match parse_time(since) {
            Some(since) => Ok(FluxRecord { outcome, since }),
            None => Err(RecordError {
                tag: FLUX_SINCE_TAG,
                value: since.to_owned(),
                expected: "an RFC 3339 time",
            }),
        })
    }

    /// The tags to write (TagResource adds or overwrites these two and leaves the others).
    pub fn to_tags(&self) -> Vec<(String, String)> {
        vec![
            (FLUX_TAG.to_owned(), self.outcome.as_str().to_owned()),
            (FLUX_SINCE_TAG.to_owned(), format_time(self.since)),
        ]
    }

    /// How long ago the confirmation started, at `now` (zero for a clock that went back).
    pub fn elapsed(&self, now: SystemTime) -> Duration {
        now.duration_since(self.since).unwrap_or_default()
    }
}

/// What the daily sweep does for a cell's cluster, decided from its record alone (nothing
/// enters the cluster to decide it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatchUp {
    /// ACTIVE with no record of a bootstrap (a `CreateCluster` event EventBridge never
    /// delivered, a cluster from before cellbridge): bootstrapped through the queue.
    Bootstrap,
    /// Recorded stuck (a final outcome other than `ready`: someone may have fixed the cause
    /// since), or `confirming` well past the deadline (its re-checks stopped: a pause, a queue
    /// that refused the next one). Bootstrapped through the queue too: finding Flux there, the
    /// run applies nothing and checks once, and past the deadline that check is final.
    Recheck,
}

/// How long after the deadline a `confirming` record counts as abandoned: the last re-check is
/// due at the deadline and may be queued behind others.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// How long a queued catch-up stays pending: its run's own confirmation deadline plus
/// [`ABANDONED_AFTER`] (deliveries retried, a queue behind).
pub fn pending(deadline: Duration) -> Duration {
    deadline + ABANDONED_AFTER
}

/// Whether a catch-up queued for the cluster is still pending at `now` ([`CATCH_UP_TAG`]): queued
/// less than [`pending`] ago. Its run's record cannot say it is done (a re-check keeps the
/// confirmation's clock, `flux-since`), so the mark holds for the whole window: the daily sweep
/// after it catches the cluster up again if it still needs it. A value someone edited into
/// something else is not a pending catch-up.
pub fn catch_up_pending(tags: &HashMap<String, String>, now: SystemTime, deadline: Duration) -> bool {
    tags.get(CATCH_UP_TAG)
        .and_then(|v| parse_time(v))
        .is_some_and(|at| now.duration_since(at).unwrap_or_default() <= pending(deadline))
}

/// What the sweep does for a cluster: `active` (DescribeCluster's status), `running` (a
/// bootstrap run holds cellbridge's temporary access entry right now), its tags.
pub fn catch_up(
    tags: &HashMap<String, String>,
    active: bool,
    running: bool,
    now: SystemTime,
    deadline: Duration,
) -> Option<CatchUp> {
    if !active
        || running
        || tags.get(OPT_OUT_TAG).map(String::as_str) == Some(OPT_OUT_VALUE)
        || catch_up_pending(tags, now, deadline)
    {
        return None;
    }
    match FluxRecord::from_tags(tags) {
        None | Some(Err(_)) => Some(CatchUp::Bootstrap),
        Some(Ok(r)) => match r.outcome {
            Outcome::Ready => None,
            Outcome::Confirming if r.elapsed(now) <= deadline + ABANDONED_AFTER => None,
            _ => Some(CatchUp::Recheck),
        },
    }
}

/// The first re-check's delay; each one after waits twice as long, up to [`MAX_INTERVAL`].
pub const FIRST_INTERVAL: Duration = Duration::from_secs(30);
pub const MAX_INTERVAL: Duration = Duration::from_secs(300);

/// When to look again after check number `check` (the bootstrap's own is 1), `elapsed` after
/// the apply: 30 s, 60 s, 120 s, 240 s, then every 5 minutes, and never past the deadline, so
/// that the last check is made at it. Well under SQS's 900-second cap on `DelaySeconds`
/// (<https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html>).
/// `None` once the deadline has passed: that check's verdict was final.
pub fn next_delay(check: u32, elapsed: Duration, deadline: Duration) -> Option<Duration> {
    let left = deadline.checked_sub(elapsed).filter(|l| !l.is_zero())?;
    let doubled = FIRST_INTERVAL.saturating_mul(1 << check.saturating_sub(1).min(8));
    Some(doubled.min(MAX_INTERVAL).min(left).max(Duration::from_secs(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_record_reads_back_what_was_written() {
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        for outcome in Outcome::ALL {
            let written = FluxRecord { outcome, since };
            let read: HashMap<_, _> = written.to_tags().into_iter().collect();
            assert_eq!(FluxRecord::from_tags(&read), Some(Ok(written)));
        }
        assert_eq!(
            parse_time("1970-01-01T00:01:40Z"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(100))
        );
    }

    #[test]
    fn re_checks_back_off_to_five_minutes_and_the_last_one_is_at_the_deadline() {
        let min = |m: u64| Duration::from_secs(60 * m);
        let deadline = min(20);
        let (mut elapsed, mut check, mut delays) = (min(2), 1, Vec::new());
        while let Some(d) = next_delay(check, elapsed, deadline) {
            delays.push(d.as_secs());
            elapsed += d;
            check += 1;
        }
        assert_eq!(delays, [30, 60, 120, 240, 300, 300, 30]);
        assert_eq!(elapsed, deadline, "the last check is made at the deadline");
        assert_eq!(
            next_delay(1, min(25), deadline),
            None,
            "past the deadline: no more checks"
        );
    }

    #[test]
    fn the_sweep_catches_up_what_has_no_record_or_an_abandoned_one_and_nothing_else() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let deadline = Duration::from_secs(1200);
        let at = |outcome: Outcome, ago: u64| -> HashMap<String, String> {
            FluxRecord {
                outcome,
                since: now - Duration::from_secs(ago),
            }
            .to_tags()
            .into_iter()
            .collect()
        };
        let cu = |tags: &HashMap<String, String>| catch_up(tags, true, false, now, deadline);
        assert_eq!(cu(&tags(&[("cellbridge.dev/cell", "c")])), Some(CatchUp::Bootstrap));
        assert_eq!(cu(&tags(&[(FLUX_TAG, "edited")])), Some(CatchUp::Bootstrap));
        assert_eq!(cu(&at(Outcome::Confirming, 600)), None, "being confirmed");
        assert_eq!(cu(&at(Outcome::Confirming, 1200 + 3601)), Some(CatchUp::Recheck));
        assert_eq!(
            cu(&at(Outcome::GitAuth, 99_999)),
            Some(CatchUp::Recheck),
            "stuck: re-checked, never re-applied"
        );
        assert_eq!(cu(&at(Outcome::Ready, 99_999)), None);
        let none = tags(&[]);
        assert_eq!(catch_up(&none, false, false, now, deadline), None, "not ACTIVE");
        assert_eq!(catch_up(&none, true, true, now, deadline), None, "a run holds it");
        assert_eq!(cu(&tags(&[(OPT_OUT_TAG, OPT_OUT_VALUE)])), None, "opted out");
        let queued = |ago: u64| tags(&[(CATCH_UP_TAG, &format_time(now - Duration::from_secs(ago)))]);
        assert_eq!(cu(&queued(600)), None, "a catch-up is pending");
        assert_eq!(cu(&queued(1200 + 3601)), Some(CatchUp::Bootstrap), "long gone");
        assert_eq!(cu(&tags(&[(CATCH_UP_TAG, "soon")])), Some(CatchUp::Bootstrap));
        // Stuck after its catch-up: re-checked by the next daily sweep, not by a retried one.
        let mut after = at(Outcome::GitAuth, 60);
        after.insert(CATCH_UP_TAG.into(), format_time(now - Duration::from_secs(120)));
        assert_eq!(cu(&after), None);
        after.insert(CATCH_UP_TAG.into(), format_time(now - Duration::from_secs(86_400)));
        assert_eq!(cu(&after), Some(CatchUp::Recheck));
    }

    #[test]
    fn no_tag_is_no_record_and_an_edited_tag_is_named() {
        assert_eq!(FluxRecord::from_tags(&tags(&[("team", "a")])), None);
        let bad = FluxRecord::from_tags(&tags(&[(FLUX_TAG, "fine"), (FLUX_SINCE_TAG, "2026-12-05T20:31:42Z")]));
        assert_eq!(bad.unwrap().unwrap_err().tag, FLUX_TAG);
        let bad = FluxRecord::from_tags(&tags(&[(FLUX_TAG, "ready"), (FLUX_SINCE_TAG, "yesterday")]));
        assert_eq!(
            bad.unwrap().unwrap_err().to_string(),
            "tag cellbridge.dev/flux-since: \"yesterday\" is not an RFC 3339 time"
        );
    }
}
