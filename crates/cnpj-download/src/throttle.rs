//! The limit of concurrent transfers, lowered when the server stalls parallel streams: every
//! attempt holds a slot; two stalls of transfers started under the current limit, within ten
//! stall timeouts of each other, halve it (never below one), and say so. It never rises again
//! during a download.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Stalls under one limit that lower it.
const STALLS_TO_DROP: usize = 2;

/// How the number of concurrent transfers went during a download (in the summary).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Parallelism {
    /// The limit asked for.
    pub started: usize,
    /// The limit at the end.
    pub ended: usize,
    /// Transfers dropped after the stall timeout without a byte (or a connection that timed out).
    pub stalls: usize,
    pub drops: Vec<ParallelismDrop>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ParallelismDrop {
    pub from: usize,
    pub to: usize,
    /// Seconds since the download started.
    pub at_seconds: f64,
}

pub(crate) struct Throttle {
    state: Mutex<State>,
    freed: Condvar,
    /// Two stalls further apart than this do not count together.
    window: Duration,
    started: Instant,
}

struct State {
    limit: usize,
    active: usize,
    /// Bumped at each drop: a stall of a transfer started under an earlier limit does not count.
    epoch: u32,
    /// Stalls under the current limit, recent ones.
    recent: Vec<Instant>,
    report: Parallelism,
}

/// A transfer's right to run; released when dropped.
pub(crate) struct Slot<'a> {
    throttle: &'a Throttle,
    epoch: u32,
}

impl Throttle {
    pub(crate) fn new(limit: usize, stall: Duration) -> Throttle {
        let limit = limit.max(1);
        Throttle {
            state: Mutex::new(State {
                limit,
                active: 0,
                epoch: 0,
                recent: Vec::new(),
                report: Parallelism { started: limit, ended: limit, ..Parallelism::default() },
            }),
            freed: Condvar::new(),
            window: stall.saturating_mul(10),
            started: Instant::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until fewer transfers than the limit run.
    pub(crate) fn acquire(&self) -> Slot<'_> {
        let mut state = self.lock();
        while state.active >= state.limit {
            state = self.freed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.active += 1;
        Slot { throttle: self, epoch: state.epoch }
    }

    /// The transfer holding `slot` stalled.
    pub(crate) fn stalled(&self, slot: &Slot<'_>) {
        let now = Instant::now();
        let mut state = self.lock();
        state.report.stalls += 1;
        if slot.epoch != state.epoch || state.limit == 1 {
            return;
        }
        let window = self.window;
        state.recent.retain(|t| now.duration_since(*t) <= window);
        state.recent.push(now);
        if state.recent.len() < STALLS_TO_DROP {
            return;
        }
        let (from, to) = (state.limit, state.limit / 2);
        let to = to.max(1);
        tracing::warn!(from, to, "server stalls parallel streams: dropping to {to} transfers");
        let at_seconds = self.started.elapsed().as_secs_f64();
        state.report.drops.push(ParallelismDrop { from, to, at_seconds });
        state.report.ended = to;
        state.limit = to;
        state.epoch += 1;
        state.recent.clear();
    }

    pub(crate) fn report(&self) -> Parallelism {
        self.lock().report.clone()
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.throttle.lock().active -= 1;
        self.throttle.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stalls` transfers on a throttle of `limit`, one after the other, each stalling: the limits
    /// it goes through.
    fn check(limit: usize, stalls: usize, expected: &[usize]) {
        let throttle = Throttle::new(limit, Duration::from_secs(60));
        for _ in 0..stalls {
            let slot = throttle.acquire();
            throttle.stalled(&slot);
        }
        let report = throttle.report();
        let mut limits = vec![report.started];
        limits.extend(report.drops.iter().map(|d| d.to));
        assert_eq!(limits, expected, "{limit} {stalls}");
        assert_eq!((report.ended, report.stalls), (*expected.last().unwrap(), stalls));
    }

    #[test]
    fn stalls_halve_the_limit() {
        check(4, 1, &[4]);
        check(4, 2, &[4, 2]);
        check(4, 4, &[4, 2, 1]);
        check(8, 10, &[8, 4, 2, 1]);
        check(3, 2, &[3, 1]);
        check(1, 3, &[1]);
    }

    #[test]
    fn stalls_of_transfers_started_under_an_earlier_limit_do_not_count() {
        // After the drop to 2, the transfers still running from before stall too: no further drop.
        let throttle = Throttle::new(4, Duration::from_secs(60));
        let before: Vec<Slot<'_>> = (0..4).map(|_| throttle.acquire()).collect();
        for slot in &before {
            throttle.stalled(slot);
        }
        let report = throttle.report();
        assert_eq!((report.ended, report.stalls, report.drops.len()), (2, 4, 1));
    }

    #[test]
    fn stalls_far_apart_do_not_count_together() {
        let throttle = Throttle::new(4, Duration::from_millis(1));
        let slot = throttle.acquire();
        throttle.stalled(&slot);
        std::thread::sleep(Duration::from_millis(30));
        throttle.stalled(&slot);
        assert_eq!(throttle.report().ended, 4);
    }

    #[test]
    fn a_lowered_limit_holds_transfers_back() {
        let throttle = Throttle::new(2, Duration::from_secs(60));
        let a = throttle.acquire();
        let b = throttle.acquire();
        throttle.stalled(&a);
        throttle.stalled(&b);
        drop(a);
        // One runs (b) and the limit is 1: the next waits for b.
        let waited = std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let started = Instant::now();
                drop(throttle.acquire());
                started.elapsed()
            });
            std::thread::sleep(Duration::from_millis(100));
            drop(b);
            waiter.join().unwrap()
        });
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
    }
}
