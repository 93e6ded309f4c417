//! Pacing: at most `CELLBRIDGE_AUTO_MERGE_CAP` of cellbridge's pull requests queued or
//! auto-merging at once. A fleet-wide change opens a pull request per cell; enqueued all at once
//! they flood the queue, and projects have dropped their queue over bot floods. The rest wait
//! for their turn.
//!
//! - What counts, GitHub tells, never a body: the open pull requests of cellbridge's branches
//!   (`cellbridge/<cell>`, this repository's) in the merge queue (`isInMergeQueue`) or with
//!   auto-merge on (`autoMergeRequest`), whoever enabled or queued it. It is read with the
//!   dashboard's listing (`openCellPulls`, a hundred a request) right before cellbridge enables
//!   auto-merge or enqueues, and only then: a pull request already queued or auto-merging, or
//!   one that is not eligible, costs nothing more.
//! - The order: oldest pull request first (`createdAt`, then number). An eligible head that waits
//!   says so in its record (`automerge-wait=turn`); a waiting pull request older than this one is
//!   ahead of it. Two runs racing over the same listing compute the same turn. A person can edit
//!   that word: it changes only who goes first, never how many are in flight, which GitHub
//!   counts. A waiting pull request goes in at its own cell's next event (a state change, a
//!   replay, at the latest the schedule's sync-all); a younger one's event does not jump it.
//! - Races: the records of one invocation run in parallel; their admissions (count, write, count
//!   again) take turns through one lock, so one invocation never has more than the cap in flight.
//!   Across invocations GitHub offers no lock, and two may each see a free place and both take
//!   it: each reads the number again after its own enabling or enqueueing, and one that finds
//!   more than the cap in flight takes its own back (both, when both see it). Over the cap only
//!   between a racing invocation's write and its check, never once both ended: the last check
//!   of those kept sees every one of them.
//! - Fail closed: a number that cannot be read (or a cap that cannot) lets nothing in, and says
//!   why; cellbridge's own enabling whose check cannot be read is taken back.
//! - Merging at once, where GitHub says every requirement is met and there is no queue, is not
//!   auto-merging: it holds no place and is not paced.

use std::time::Instant;

use tokio::sync::{Mutex, MutexGuard};

use super::{Done, Run, WAIT_FIELD, Wait, quote};
use crate::ports::github::{GithubError, Merges, OpenPull, Pulls, Result};
use crate::pure::plan;
use crate::pure::record;
use crate::shell::config::{self, ConfigError};

/// The variable that sets the cap.
pub const CAP_VARIABLE: &str = "CELLBRIDGE_AUTO_MERGE_CAP";
/// The cap when the variable is unset: a merge queue's default group size
/// (`max_entries_to_build`, 5).
pub const CAP_DEFAULT: usize = 5;
/// The highest cap: one listing page.
const CAP_MAX: usize = 100;

/// `CELLBRIDGE_AUTO_MERGE_CAP`: [`CAP_DEFAULT`] when unset, a whole number from 1 to 100 otherwise.
pub fn cap_from_env() -> std::result::Result<usize, ConfigError> {
    parse_cap(config::optional(CAP_VARIABLE))
}

fn parse_cap(value: Option<String>) -> std::result::Result<usize, ConfigError> {
    let Some(v) = value else { return Ok(CAP_DEFAULT) };
    match v.parse::<usize>() {
        Ok(n) if (1..=CAP_MAX).contains(&n) => Ok(n),
        _ => Err(ConfigError::Invalid {
            name: CAP_VARIABLE,
            value: v,
            reason: format!("expected a whole number from 1 to {CAP_MAX}"),
        }),
    }
}

/// One admission at a time in this process: count, write, count again.
static ADMISSION: Mutex<()> = Mutex::const_new(());

/// A place taken by [`Run::take_turn`], held until [`Run::kept_turn`] checked it (or dropped
/// when nothing was written after all).
pub(super) struct Admission(#[allow(dead_code)] MutexGuard<'static, ()>);

/// One open pull request of cellbridge's branches, as the turn sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seat {
    pub number: u64,
    /// When it was opened (seconds since the epoch): the order of turns, then `number`.
    pub created_at: u64,
    /// In the merge queue or auto-merging, as GitHub says.
    pub in_flight: bool,
    /// Its record says it waits for its turn (only the order reads it).
    pub waiting: bool,
}

impl Seat {
    pub fn of(p: &OpenPull) -> Self {
        Self {
            number: p.number,
            created_at: p.created_at,
            in_flight: p.queued || p.auto_merge,
            waiting: record::field(&p.body, WAIT_FIELD).as_deref() == Some("turn"),
        }
    }
}

/// Whether pull request `me` may be queued or auto-merged now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    Go,
    /// `in_flight` others are queued or auto-merging, and `ahead` older ones wait before it.
    Wait {
        in_flight: usize,
        ahead: usize,
    },
}

/// The turn of pull request `me` among `seats` (every open pull request of cellbridge's
/// branches) under `cap`: it goes when the pull requests in flight and the older ones waiting
/// leave it a place. One not listed (a listing that lags its opening) is the youngest.
pub fn turn(me: u64, seats: &[Seat], cap: usize) -> Turn {
    let order = |s: &Seat| (s.created_at, s.number);
    let mine = seats.iter().find(|s| s.number == me).map_or((u64::MAX, me), order);
    let others = || seats.iter().filter(|s| s.number != me);
    let in_flight = others().filter(|s| s.in_flight).count();
    let ahead = others()
        .filter(|s| !s.in_flight && s.waiting && order(s) < mine)
        .count();
    if in_flight + ahead < cap {
        Turn::Go
    } else {
        Turn::Wait { in_flight, ahead }
    }
}

impl Run {
    /// Before cellbridge enables auto-merge on or enqueues pull request `number`: its place,
    /// when its turn has come. When not, the run says why and does nothing.
    pub(super) async fn take_turn<G: Pulls>(&mut self, gh: &G, number: u64, deadline: Instant) -> Option<Admission> {
        let guard = ADMISSION.lock().await;
        let (cap, pulls) = match in_flight(gh, deadline).await {
            Ok(read) => read,
            Err(why) => {
                self.cannot_count(number, &why);
                return None;
            }
        };
        let seats: Vec<Seat> = pulls.iter().map(Seat::of).collect();
        match turn(number, &seats, cap) {
            Turn::Go => Some(Admission(guard)),
            Turn::Wait { in_flight, ahead } => {
                tracing::info!(pull_request = number, in_flight, ahead, cap, "waiting for its turn");
                self.done = Done::WaitingForTurn;
                self.wait = Some(Wait::Turn);
                let older = match ahead {
                    0 => String::new(),
                    1 => ", and 1 older one waits before it".to_owned(),
                    n => format!(", and {n} older ones wait before it"),
                };
                self.detail = Some(format!(
                    "waiting for its turn: {in_flight} of cellbridge's pull requests are queued or auto-merging, the cap is {cap}{older}"
                ));
                self.note = Some(format!(
                    "**Waiting for its turn.** {in_flight} of cellbridge's pull requests are queued or auto-merging, the cap is {cap} (`{CAP_VARIABLE}`){older}. They go in oldest first: cellbridge adds this one at its cell's next event once a place is free (at the latest, the schedule's sync-all)."
                ));
                None
            }
        }
    }

    /// After cellbridge enabled auto-merge on (`queued`: enqueued) pull request `node`: the
    /// number read again, and its own taken back when more than the cap are in flight (another
    /// run took a place meanwhile) or the number cannot be read.
    pub(super) async fn kept_turn<G: Merges + Pulls>(
        &mut self,
        _place: Admission,
        gh: &G,
        number: u64,
        node: &str,
        deadline: Instant,
    ) -> Result<()> {
        let over = match in_flight(gh, deadline).await {
            Ok((cap, pulls)) => {
                let n = pulls.iter().filter(|p| Seat::of(p).in_flight).count();
                if n <= cap {
                    return Ok(());
                }
                Ok((n, cap))
            }
            Err(why) => Err(why),
        };
        if self.done == Done::Queued {
            gh.dequeue(node, deadline).await?;
        } else {
            gh.disable_auto_merge(node, deadline).await?;
        }
        self.ours = false;
        match over {
            Ok((n, cap)) => {
                tracing::info!(
                    pull_request = number,
                    in_flight = n,
                    cap,
                    "taken back: another run took the last place"
                );
                self.done = Done::WaitingForTurn;
                self.wait = Some(Wait::Turn);
                self.detail = Some(format!(
                    "waiting for its turn: {n} of cellbridge's pull requests were queued or auto-merging with this one, the cap is {cap}"
                ));
                self.note = Some(format!(
                    "**Waiting for its turn.** Another run took the last place at the same time: with this one, {n} of cellbridge's pull requests were queued or auto-merging, the cap is {cap} (`{CAP_VARIABLE}`), so cellbridge took this one back. It is added at its cell's next event once a place is free."
                ));
            }
            Err(why) => self.cannot_count(number, &why),
        }
        Ok(())
    }

    fn cannot_count(&mut self, number: u64, why: &str) {
        tracing::warn!(pull_request = number, error = %why, "the pull requests in flight could not be counted: nothing added");
        self.done = Done::WaitingForTurn;
        self.wait = Some(Wait::Turn);
        self.detail = Some(format!(
            "the number of cellbridge's pull requests queued or auto-merging could not be read: {why}"
        ));
        self.note = Some(format!(
            "**Waiting.** cellbridge could not read how many of its pull requests are queued or auto-merging (\"{}\"), so it adds none: the next event tries again.",
            quote(why)
        ));
    }
}

/// The cap and every open pull request of cellbridge's branches, or why either cannot be read.
async fn in_flight<G: Pulls>(gh: &G, deadline: Instant) -> std::result::Result<(usize, Vec<OpenPull>), String> {
    let cap = cap_from_env().map_err(|e| e.to_string())?;
    let pulls = gh
        .open_pulls(&plan::branch_for(""), plan::STATUS_CONTEXT, deadline)
        .await
        .map_err(|e: GithubError| e.to_string())?;
    Ok((cap, pulls))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(number: u64, created_at: u64, in_flight: bool, waiting: bool) -> Seat {
        Seat {
            number,
            created_at,
            in_flight,
            waiting,
        }
    }

    /// The pacing decision as a table: (seats, me, cap) → the turn.
    #[test]
    fn the_turn_counts_what_is_in_flight_and_the_older_ones_waiting() {
        let go = Turn::Go;
        let wait = |in_flight, ahead| Turn::Wait { in_flight, ahead };
        let cases: &[(&str, Vec<Seat>, u64, usize, Turn)] = &[
            ("nothing in flight", vec![seat(1, 10, false, false)], 1, 1, go),
            (
                "the cap reached",
                vec![
                    seat(1, 10, true, false),
                    seat(2, 11, true, false),
                    seat(3, 12, false, false),
                ],
                3,
                2,
                wait(2, 0),
            ),
            (
                "one place left",
                vec![seat(1, 10, true, false), seat(3, 12, false, false)],
                3,
                2,
                go,
            ),
            (
                "an older one waits for the last place",
                vec![
                    seat(1, 10, true, false),
                    seat(2, 11, false, true),
                    seat(3, 12, false, true),
                ],
                3,
                2,
                wait(1, 1),
            ),
            (
                "the older one takes it",
                vec![
                    seat(1, 10, true, false),
                    seat(2, 11, false, true),
                    seat(3, 12, false, true),
                ],
                2,
                2,
                go,
            ),
            (
                "a younger one waiting is not ahead",
                vec![seat(2, 11, false, false), seat(3, 12, false, true)],
                2,
                1,
                go,
            ),
            (
                "an older one not waiting (not eligible) is not ahead",
                vec![seat(1, 10, false, false), seat(2, 11, false, false)],
                2,
                1,
                go,
            ),
            (
                "same second: the lower number is older",
                vec![seat(4, 10, false, true), seat(5, 10, false, true)],
                5,
                1,
                wait(0, 1),
            ),
            (
                "not listed yet: the youngest",
                vec![seat(1, 10, false, true)],
                9,
                1,
                wait(0, 1),
            ),
            (
                "its own place does not count against it",
                vec![seat(1, 10, true, false), seat(2, 11, true, true)],
                2,
                2,
                go,
            ),
        ];
        for (what, seats, me, cap, want) in cases {
            assert_eq!(turn(*me, seats, *cap), *want, "{what}");
        }
    }

    #[test]
    fn two_racing_runs_over_one_listing_let_in_the_same_one() {
        let seats = vec![
            seat(1, 10, true, false),
            seat(7, 20, false, true),
            seat(8, 21, false, true),
        ];
        assert_eq!(
            (turn(7, &seats, 2), turn(8, &seats, 2)),
            (Turn::Go, Turn::Wait { in_flight: 1, ahead: 1 })
        );
    }

    #[test]
    fn the_cap_is_a_whole_number_from_1_to_100_naming_the_variable() {
        assert_eq!(parse_cap(None), Ok(CAP_DEFAULT));
        assert_eq!(parse_cap(Some("12".into())), Ok(12));
        for bad in ["0", "101", "-1", "five", "2.5"] {
            let e = parse_cap(Some(bad.into())).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{CAP_VARIABLE}=\"{bad}\" is invalid")), "{e}");
        }
    }
}
