//! Pacing of the requests that create content. GitHub's secondary rate limits allow "no more
//! than 80 content-generating requests per minute and no more than 500 content-generating
//! requests per hour" (<https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits>),
//! across everything a token does. A sync-all over hundreds of cells would pass them; rather than
//! be refused and retried, each process keeps its share: the module divides the limits by the
//! queue's maximum concurrency (`infra/README.md`). Reads are not paced. A write that would have
//! to wait past the deadline is not sent: the record comes back later.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
// Tokio's clock: the same as the system's, but one the tests can pause.
use tokio::time::Instant as Clock;

use crate::shell::config::{self, ConfigError};

/// At most `count` writes in any `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub count: u32,
    pub window: Duration,
}

/// The limits one process keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pacing {
    pub limits: Vec<Limit>,
}

impl Default for Pacing {
    /// GitHub's whole secondary limits: one process alone.
    fn default() -> Self {
        Self::per_minute_and_hour(80, 500)
    }
}

impl Pacing {
    pub fn per_minute_and_hour(per_minute: u32, per_hour: u32) -> Self {
        Self {
            limits: vec![
                Limit {
                    count: per_minute,
                    window: Duration::from_secs(60),
                },
                Limit {
                    count: per_hour,
                    window: Duration::from_secs(3600),
                },
            ],
        }
    }

    /// `CELLBRIDGE_GITHUB_WRITES_PER_MINUTE` and `CELLBRIDGE_GITHUB_WRITES_PER_HOUR`.
    pub fn from_env() -> Result<Self, ConfigError> {
        let read = |name: &'static str, default: u32| -> Result<u32, ConfigError> {
            match config::optional(name) {
                None => Ok(default),
                Some(v) => match v.parse::<u32>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(ConfigError::Invalid {
                        name,
                        value: v,
                        reason: "expected a whole number of requests, at least 1".into(),
                    }),
                },
            }
        };
        Ok(Self::per_minute_and_hour(
            read("CELLBRIDGE_GITHUB_WRITES_PER_MINUTE", 80)?,
            read("CELLBRIDGE_GITHUB_WRITES_PER_HOUR", 500)?,
        ))
    }
}

/// The writes of one process, paced to [`Pacing`].
pub struct Pacer {
    pacing: Pacing,
    /// When the writes still inside the longest window were sent, oldest first.
    sent: Mutex<VecDeque<Clock>>,
}

/// Sending now would break the pacing until after the deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooSoon {
    pub wait: Duration,
}

impl Pacer {
    pub fn new(pacing: Pacing) -> Self {
        Self {
            pacing,
            sent: Mutex::new(VecDeque::new()),
        }
    }

    /// How long from `now` until one more write keeps every limit.
    fn wait_at(&self, sent: &VecDeque<Clock>, now: Clock) -> Duration {
        self.pacing
            .limits
            .iter()
            .filter_map(|l| {
                let inside: Vec<&Clock> = sent.iter().filter(|t| now.duration_since(**t) < l.window).collect();
                (inside.len() >= l.count as usize).then(|| {
                    // The write that leaves the window first makes room.
                    let oldest = inside[inside.len() - l.count as usize];
                    (*oldest + l.window).saturating_duration_since(now)
                })
            })
            .max()
            .unwrap_or_default()
    }

    /// Whether one write would find room before `deadline`, taking nothing: a state that will
    /// write is not worth reading the base for when it cannot. (Busy: assume room.)
    pub fn room_before(&self, deadline: Instant) -> Result<(), TooSoon> {
        let Ok(sent) = self.sent.try_lock() else { return Ok(()) };
        let now = Clock::now();
        let wait = self.wait_at(&sent, now);
        if !wait.is_zero() && now + wait > Clock::from_std(deadline) {
            return Err(TooSoon { wait });
        }
        Ok(())
    }

    /// Waits for room for one write and takes it; [`TooSoon`] when the room comes after
    /// `deadline` (nothing is taken).
    pub async fn acquire(&self, deadline: Instant) -> Result<(), TooSoon> {
        let deadline = Clock::from_std(deadline);
        loop {
            let mut sent = self.sent.lock().await;
            let now = Clock::now();
            let longest = self.pacing.limits.iter().map(|l| l.window).max().unwrap_or_default();
            while sent.front().is_some_and(|t| now.duration_since(*t) >= longest) {
                sent.pop_front();
            }
            let wait = self.wait_at(&sent, now);
            if wait.is_zero() {
                sent.push_back(now);
                return Ok(());
            }
            if now + wait > deadline {
                return Err(TooSoon { wait });
            }
            drop(sent);
            tracing::info!(wait_ms = wait.as_millis() as u64, "pacing GitHub writes");
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(count: u32, window_ms: u64) -> Pacer {
        Pacer::new(Pacing {
            limits: vec![Limit {
                count,
                window: Duration::from_millis(window_ms),
            }],
        })
    }

    #[tokio::test(start_paused = true)]
    async fn writes_beyond_the_limit_wait_for_the_window() {
        let p = pacer(3, 1000);
        let start = Clock::now();
        let far = (start + Duration::from_secs(60)).into_std();
        let mut at = Vec::new();
        for _ in 0..7 {
            p.acquire(far).await.unwrap();
            at.push(start.elapsed().as_millis() / 100 * 100);
        }
        assert_eq!(at, [0, 0, 0, 1000, 1000, 1000, 2000]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_the_deadline_is_refused_and_takes_nothing() {
        let p = pacer(1, 1000);
        let start = Clock::now();
        p.acquire((start + Duration::from_secs(5)).into_std()).await.unwrap();
        let e = p
            .acquire((start + Duration::from_millis(500)).into_std())
            .await
            .unwrap_err();
        assert_eq!(e.wait, Duration::from_millis(1000));
        // Nothing was taken: the next write with time enough goes at the window's end.
        p.acquire((start + Duration::from_secs(5)).into_std()).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn the_stricter_of_two_limits_decides() {
        let p = Pacer::new(Pacing {
            limits: vec![
                Limit {
                    count: 5,
                    window: Duration::from_secs(1),
                },
                Limit {
                    count: 6,
                    window: Duration::from_secs(10),
                },
            ],
        });
        let start = Clock::now();
        let far = (start + Duration::from_secs(60)).into_std();
        for _ in 0..7 {
            p.acquire(far).await.unwrap();
        }
        // Five at once, the sixth a second later (per second), the seventh when the first
        // leaves the ten-second window.
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }
}
