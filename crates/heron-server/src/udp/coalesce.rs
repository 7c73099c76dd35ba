//! Letting datagrams gather before a receive, under steady load.
//!
//! A worker blocked in `recvmmsg` is woken for nearly every datagram once
//! queries arrive faster than it sleeps and slower than it answers: each
//! wake then carries one query and costs about as much as answering it.
//! Measured with the suite's reload workload (one worker pinned to one
//! core, 120k queries/s): 93% of the core busy, against about 45% for the
//! same queries in full batches, which left a reload running at idle
//! priority 7% of the core and 20–50 s to finish.
//!
//! So, above [`MIN_RATE`] queries per second, a worker whose last batch was
//! small sleeps until about [`TARGET_BATCH`] datagrams should be queued,
//! at most a configured delay (e.g. [`SUGGESTED_MAX_DELAY`]) after its last
//! receive: that is all it adds to an answer's latency (NICs coalesce
//! their interrupts the same way). Below that rate (the suite's latency
//! figures are taken at 20k/s), or when batches come back large, it never
//! waits. Measured with `blast` at fixed rates on one pinned worker, the
//! default at 120k/s: 80% -> 58% of the core, median latency 10 -> 49 µs.
//! Under evenly spaced `dnsperf` load it cost more than it saved, so the
//! worker only paces while that measures cheaper ([`super::pacing_choice`]).
//! On a quiet machine even that cost up to 10% more than never pacing (the
//! suite's cost matrix, 2026-11-23: the probe epochs are paid, the savings
//! did not come), so pacing is off unless configured.

use std::time::{Duration, Instant};

/// Below this rate (queries per second) a worker never waits: wakes are
/// few and cheap enough.
pub const MIN_RATE: u64 = 50_000;
/// Datagrams a worker waits to gather.
pub const TARGET_BATCH: u64 = 8;
/// A good `udp-coalesce-us` for an operator who turns pacing on (the
/// default is off): about the added latency of a NIC's interrupt moderation.
pub const SUGGESTED_MAX_DELAY: Duration = Duration::from_micros(50);
/// Waits shorter than this are skipped: a timer costs more than it saves.
const MIN_SLEEP: Duration = Duration::from_micros(5);
/// The rate is measured over windows of this length.
const RATE_WINDOW: Duration = Duration::from_millis(2);

/// One worker's receive pacing: counts what it receives and says how long
/// to wait before the next receive.
#[derive(Debug)]
pub struct Coalescer {
    /// Zero: never wait.
    max_delay: Duration,
    window_start: Instant,
    window_count: u64,
    /// Queries per second over the last full window.
    rate: u64,
    last_receive: Instant,
    last_batch: u64,
}

impl Coalescer {
    /// Waits at most `max_delay` (zero: never).
    pub fn new(now: Instant, max_delay: Duration) -> Coalescer {
        Coalescer {
            max_delay,
            window_start: now,
            window_count: 0,
            rate: 0,
            last_receive: now,
            last_batch: 0,
        }
    }

    /// Records a receive that returned `received` datagrams at `now`.
    pub fn received(&mut self, now: Instant, received: usize) {
        let received = received as u64;
        self.last_receive = now;
        self.last_batch = received;
        self.window_count += received;
        let span = now.saturating_duration_since(self.window_start);
        if span >= RATE_WINDOW {
            self.rate = self.window_count * 1_000_000 / span.as_micros().max(1) as u64;
            self.window_start = now;
            self.window_count = 0;
        }
    }

    /// Whether the traffic is fast enough for waiting to be considered.
    pub fn busy(&self) -> bool {
        self.rate >= MIN_RATE
    }

    /// How long to wait at `now`, before the next receive (None: receive
    /// at once).
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        if self.max_delay.is_zero() || self.rate < MIN_RATE || self.last_batch >= TARGET_BATCH {
            return None;
        }
        let gather = Duration::from_nanos(TARGET_BATCH * 1_000_000_000 / self.rate);
        let until = self.last_receive + gather.min(self.max_delay);
        let left = until.saturating_duration_since(now);
        (left >= MIN_SLEEP).then_some(left)
    }
}

/// Lets the calling thread's sleeps end within about a microsecond of
/// when they are due, instead of the default 50 µs of timer slack (which
/// would double [`SUGGESTED_MAX_DELAY`]). Returns false if the kernel refused.
pub fn tighten_timer_slack() -> bool {
    heron_sys::sched::set_timer_slack(Duration::from_micros(1)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_DELAY: Duration = SUGGESTED_MAX_DELAY;

    /// A coalescer that has seen `rate` queries per second arrive in
    /// batches of `batch`, ending at the returned instant.
    fn steady(rate: u64, batch: usize) -> (Coalescer, Instant) {
        steady_with(rate, batch, MAX_DELAY)
    }

    fn steady_with(rate: u64, batch: usize, max_delay: Duration) -> (Coalescer, Instant) {
        let start = Instant::now();
        let mut c = Coalescer::new(start, max_delay);
        let gap = Duration::from_nanos(batch as u64 * 1_000_000_000 / rate);
        let mut now = start;
        while now < start + 3 * RATE_WINDOW {
            now += gap;
            c.received(now, batch);
        }
        (c, now)
    }

    #[test]
    fn a_quiet_worker_never_waits() {
        let (c, now) = steady(20_000, 1);
        assert_eq!(c.wait(now), None);
        let fresh = Coalescer::new(Instant::now(), MAX_DELAY);
        assert_eq!(fresh.wait(Instant::now()), None);
    }

    #[test]
    fn a_busy_worker_with_small_batches_waits_to_gather_some() {
        let (c, now) = steady(120_000, 1);
        let wait = c.wait(now).expect("waits at 120k/s");
        assert!(wait <= MAX_DELAY, "{wait:?}");
        assert!(wait >= MAX_DELAY / 2, "{wait:?}");
        // Faster traffic gathers the same batch sooner.
        let (c, now) = steady(400_000, 2);
        let wait = c.wait(now).expect("waits at 400k/s");
        assert!(wait < Duration::from_micros(21), "{wait:?}");
    }

    #[test]
    fn time_spent_answering_counts_towards_the_wait() {
        let (c, now) = steady(120_000, 1);
        let full = c.wait(now).unwrap();
        let later = now + full - MIN_SLEEP / 2;
        assert_eq!(c.wait(later), None);
        assert_eq!(c.wait(now + MAX_DELAY * 2), None);
    }

    #[test]
    fn a_zero_delay_turns_it_off() {
        let (c, now) = steady_with(200_000, 1, Duration::ZERO);
        assert_eq!(c.wait(now), None);
        let (c, now) = steady_with(100_000, 1, Duration::from_micros(200));
        let wait = c.wait(now).unwrap();
        assert!(wait > MAX_DELAY, "a longer delay is honoured: {wait:?}");
    }

    #[test]
    fn large_batches_are_not_delayed() {
        let (c, now) = steady(300_000, TARGET_BATCH as usize);
        assert_eq!(c.wait(now), None);
    }

    #[test]
    fn the_rate_follows_the_traffic_down() {
        let (mut c, mut now) = steady(200_000, 1);
        assert!(c.wait(now).is_some());
        // Then one query a millisecond for a few windows.
        for _ in 0..10 {
            now += Duration::from_millis(1);
            c.received(now, 1);
        }
        assert_eq!(c.wait(now), None);
    }

    #[test]
    fn timer_slack_can_be_tightened() {
        std::thread::spawn(|| {
            assert!(tighten_timer_slack());
            let slack = heron_sys::sched::timer_slack().unwrap();
            assert_eq!(slack, Duration::from_micros(1));
        })
        .join()
        .unwrap();
    }
}
