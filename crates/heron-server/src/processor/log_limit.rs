//! At most a few log lines per reason per interval (one for refusals).
//! Refusals, TSIG failures and NOTIFYs come from the network, and UDP
//! sources are spoofable: one sender wrote 217 MB of log in 12 s when
//! every refusal was a line. Each reason keeps three atomics, so a flood
//! costs a load and an add or two per packet and no lock; the line that
//! opens an interval tells how many were left out since the one before.

use std::sync::atomic::{AtomicU64, Ordering};

/// Seconds between two lines for the same reason.
pub const LOG_INTERVAL: u64 = 10;

/// No line written yet.
const NEVER: u64 = u64::MAX;

/// One reason's state.
struct Reason {
    /// When its last line was written (seconds, the requests' clock).
    logged_at: AtomicU64,
    /// Lines written in the interval that line opened.
    written: AtomicU64,
    /// Lines left out since then.
    suppressed: AtomicU64,
}

/// A line that may be written now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// Lines of this reason left out since the last one written.
    pub suppressed: u64,
    /// Seconds since the last one written (0 if none was).
    pub since: u64,
}

/// The limiter, for `N` reasons numbered `0..N`.
pub struct LogLimiter<const N: usize> {
    reasons: [Reason; N],
    interval: u64,
    /// Lines per reason per interval.
    lines: u64,
}

impl<const N: usize> LogLimiter<N> {
    /// One line per reason per `interval` seconds.
    pub fn new(interval: u64) -> LogLimiter<N> {
        LogLimiter::with_lines(interval, 1)
    }

    /// `lines` per reason per `interval` seconds (at least one).
    pub fn with_lines(interval: u64, lines: u64) -> LogLimiter<N> {
        LogLimiter {
            // `written` starts full: a thread that sees the first line's
            // time before its writer has reset the count is not one more.
            reasons: std::array::from_fn(|_| Reason {
                logged_at: AtomicU64::new(NEVER),
                written: AtomicU64::new(lines.max(1)),
                suppressed: AtomicU64::new(0),
            }),
            interval,
            lines: lines.max(1),
        }
    }

    /// Whether a line for `reason` is written at `now` (seconds): Some
    /// with what was left out before it, or None (counted as left out).
    /// Of many threads at the turn of an interval, one wins.
    pub fn admit(&self, reason: usize, now: u64) -> Option<Due> {
        let r = &self.reasons[reason];
        let last = r.logged_at.load(Ordering::Relaxed);
        // A clock that went back opens a new interval too.
        let due = last == NEVER || now.wrapping_sub(last) >= self.interval;
        if !due {
            if r.written.fetch_add(1, Ordering::Relaxed) < self.lines {
                // One more of the interval's first lines.
                return Some(Due {
                    suppressed: 0,
                    since: 0,
                });
            }
            r.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // What was left out goes with the line that opens the interval:
        // taken before the interval is won, so that what threads losing
        // it add goes to the next line. (Taken after, a count added
        // between the win and the take was told one line early: a test
        // of four threads saw 3,996 of 3,999 at the next line.)
        let taken = r.suppressed.swap(0, Ordering::Relaxed);
        let won = (r.logged_at)
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if !won {
            r.suppressed.fetch_add(taken + 1, Ordering::Relaxed);
            return None;
        }
        r.written.store(1, Ordering::Relaxed);
        Some(Due {
            suppressed: taken,
            since: if last == NEVER {
                0
            } else {
                now.wrapping_sub(last)
            },
        })
    }
}

impl<const N: usize> LogLimiter<N> {
    /// For each reason whose last line is an interval old or more and
    /// that left lines out since: how many and since when, as the line
    /// that opens its next interval would say. The interval opens now
    /// (with its lines free), so they are told once; a burst that stopped
    /// is not left untold.
    pub fn left_over(&self, now: u64) -> Vec<(usize, Due)> {
        let mut out = Vec::new();
        for (reason, r) in self.reasons.iter().enumerate() {
            let last = r.logged_at.load(Ordering::Relaxed);
            let old = last != NEVER && now.wrapping_sub(last) >= self.interval;
            if !old || r.suppressed.load(Ordering::Relaxed) == 0 {
                continue;
            }
            // As `admit` does: one caller wins the interval's opening.
            let won = r
                .logged_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed);
            if won.is_err() {
                continue;
            }
            // The summary is no line of the reason's: the new interval
            // keeps its lines for what comes.
            r.written.store(0, Ordering::Relaxed);
            let suppressed = r.suppressed.swap(0, Ordering::Relaxed);
            if suppressed > 0 {
                let since = now.wrapping_sub(last);
                out.push((reason, Due { suppressed, since }));
            }
        }
        out
    }
}

impl Due {
    /// What to add to the line: nothing, or how many more were left out.
    pub fn tail(self) -> String {
        match self.suppressed {
            0 => String::new(),
            n => format!(" (and {n} more like it in the last {} s)", self.since),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_that_stopped_is_told_once_an_interval_later() {
        let limiter = LogLimiter::<2>::new(LOG_INTERVAL);
        let t = 1_000;
        assert!(limiter.admit(0, t).is_some());
        for _ in 0..19 {
            assert!(limiter.admit(0, t + 1).is_none());
        }
        assert!(limiter.left_over(t + 5).is_empty(), "within the interval");
        let told = limiter.left_over(t + LOG_INTERVAL);
        assert_eq!(
            told,
            [(
                0,
                Due {
                    suppressed: 19,
                    since: LOG_INTERVAL
                }
            )]
        );
        assert!(limiter.left_over(t + 3 * LOG_INTERVAL).is_empty(), "once");
        // The interval it opened keeps its line for what comes next.
        assert!(limiter.admit(0, t + LOG_INTERVAL + 1).is_some());
        assert!(limiter.admit(0, t + LOG_INTERVAL + 2).is_none());
        assert!(limiter.admit(1, t + 1).is_some(), "other reasons untouched");
    }

    #[test]
    fn one_line_per_reason_per_interval_with_the_count_left_out() {
        let limiter = LogLimiter::<2>::new(LOG_INTERVAL);
        let t = 1_700_000_000;
        let written: Vec<(u64, Due)> = (0..10_000u64)
            .filter_map(|i| {
                // 10,000 refusals over 25 s, 400 a second.
                let now = t + i / 400;
                limiter.admit(0, now).map(|due| (now, due))
            })
            .collect();
        let first = Due {
            suppressed: 0,
            since: 0,
        };
        let after = |since| Due {
            suppressed: 3999,
            since,
        };
        assert_eq!(
            written,
            [(t, first), (t + 10, after(10)), (t + 20, after(10))]
        );
        // The other reason has its own interval.
        assert_eq!(limiter.admit(1, t + 24), Some(first));
        // The rest of the flood is told when the next line is due.
        assert_eq!(
            limiter.admit(0, t + 31),
            Some(Due {
                suppressed: 1999,
                since: 11
            })
        );
        assert_eq!(
            after(10).tail(),
            " (and 3999 more like it in the last 10 s)"
        );
        assert_eq!(first.tail(), "");
    }

    #[test]
    fn a_few_lines_per_interval_when_asked_then_the_count() {
        let limiter = LogLimiter::<1>::with_lines(LOG_INTERVAL, 5);
        let t = 1_000;
        let written = (0..20_000u64)
            .filter(|i| limiter.admit(0, t + i / 4000).is_some())
            .count();
        // The first five at t; the clock stays inside the interval.
        assert_eq!(written, 5);
        let next = limiter.admit(0, t + LOG_INTERVAL).unwrap();
        assert_eq!(next.suppressed, 20_000 - 5);
        // The new interval has its five, counting the one that opened it.
        let more = (0..10).filter(|_| limiter.admit(0, t + LOG_INTERVAL).is_some());
        assert_eq!(more.count(), 4);
    }

    #[test]
    fn a_line_at_the_interval_and_none_just_before() {
        let limiter = LogLimiter::<1>::new(LOG_INTERVAL);
        assert!(limiter.admit(0, 100).is_some());
        assert!(limiter.admit(0, 100 + LOG_INTERVAL - 1).is_none());
        assert!(limiter.admit(0, 100 + LOG_INTERVAL).is_some());
        // A clock set back does not silence the log for years.
        assert!(limiter.admit(0, 50).is_some());
    }

    #[test]
    fn threads_at_once_write_one_line_and_lose_no_count() {
        let limiter = LogLimiter::<1>::new(LOG_INTERVAL);
        let written = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        if limiter.admit(0, 500).is_some() {
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(written.load(Ordering::Relaxed), 1);
        let next = limiter.admit(0, 510).unwrap();
        assert_eq!(next.suppressed, 3999);
    }
}
