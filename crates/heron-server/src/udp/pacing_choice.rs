//! Whether pacing ([`super::coalesce`]) pays, decided by what it costs.
//!
//! Pacing trades a timer wake for the wakes that single datagrams would
//! cause. Which is cheaper depends on the machine and on the traffic: with
//! `blast` (sends in bursts) it saved CPU, while with `dnsperf` (evenly
//! spaced sends) at 80k–120k queries/s it cost 19–30% more per query on
//! the suite's VM, where each timer wake is expensive. So a worker
//! measures instead of assuming: it runs a short epoch without pacing and
//! one with, compares its own CPU time per datagram received in each, and
//! keeps the cheaper until the next comparison. Pacing must win by a
//! margin; a tie keeps it off. Only traffic fast enough for pacing to act
//! is measured, and traffic that becomes so starts a new comparison. The
//! same winner twice in a row doubles the
//! time until the next comparison (up to [`MAX_KEEP`] epochs), so the
//! epochs spent in the dearer mode shrink to a few percent.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Length of one measuring epoch.
pub const EPOCH: Duration = Duration::from_millis(100);
/// Epochs the winner is kept after a comparison, at first.
pub const MIN_KEEP: u32 = 10;
/// ... and at most, after the same winner again and again.
pub const MAX_KEEP: u32 = 80;
/// Pacing is kept only when it costs at most this share of not pacing.
pub const WIN_MARGIN: f64 = 0.97;
/// An epoch with fewer datagrams than this says nothing: pacing is off.
pub const MIN_DATAGRAMS: u64 = 1_000;

/// The CPU time the calling thread has used so far.
pub trait CpuClock {
    fn cpu_time(&mut self) -> Option<Duration>;
}

/// The worker thread's own CPU time, from /proc/thread-self/schedstat
/// (nanoseconds run; brought up to date when the thread blocks, which a
/// worker does between batches). Open it on the worker's thread.
pub struct ThreadCpuClock {
    file: Option<File>,
}

impl ThreadCpuClock {
    pub fn open() -> ThreadCpuClock {
        ThreadCpuClock {
            file: File::open("/proc/thread-self/schedstat").ok(),
        }
    }
}

impl CpuClock for ThreadCpuClock {
    fn cpu_time(&mut self) -> Option<Duration> {
        let mut buf = [0u8; 96];
        let n = self.file.as_ref()?.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let ns = text.split_whitespace().next()?.parse().ok()?;
        Some(Duration::from_nanos(ns))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Measuring without pacing, then with.
    ProbeOff,
    ProbeOn {
        off_cost: Option<u64>,
    },
    /// Keeping the winner for this many more epochs.
    Keep {
        pacing: bool,
        left: u32,
    },
}

/// One worker's choice, updated at the end of every epoch.
#[derive(Debug)]
pub struct PacingChoice {
    /// Whether the traffic is fast enough for pacing to act: only then
    /// is anything measured or decided.
    busy: bool,
    stage: Stage,
    epoch_start: Instant,
    epoch_cpu: Option<Duration>,
    epoch_datagrams: u64,
    /// Epochs to keep the next winner.
    keep: u32,
    last_winner: Option<bool>,
}

impl PacingChoice {
    /// Starts with a comparison, its first epoch from `now`.
    pub fn new(now: Instant, clock: &mut impl CpuClock) -> PacingChoice {
        PacingChoice {
            busy: true,
            stage: Stage::ProbeOff,
            epoch_start: now,
            epoch_cpu: clock.cpu_time(),
            epoch_datagrams: 0,
            keep: MIN_KEEP,
            last_winner: None,
        }
    }

    /// Whether to pace now.
    pub fn pacing(&self) -> bool {
        match self.stage {
            Stage::ProbeOff => false,
            Stage::ProbeOn { .. } => true,
            Stage::Keep { pacing, .. } => pacing,
        }
    }

    /// Counts `datagrams` received at `now`; at the end of an epoch reads
    /// `clock` and moves on. `busy`: the traffic is fast enough for pacing
    /// to act. Traffic that becomes so starts a new comparison (the clock
    /// is read then, not per receive, so quiet traffic costs nothing).
    pub fn received(
        &mut self,
        now: Instant,
        datagrams: usize,
        busy: bool,
        clock: &mut impl CpuClock,
    ) {
        if !busy {
            self.busy = false;
            return;
        }
        if !self.busy {
            *self = PacingChoice::new(now, clock);
            return;
        }
        self.epoch_datagrams += datagrams as u64;
        if now.saturating_duration_since(self.epoch_start) < EPOCH {
            return;
        }
        let cpu = clock.cpu_time();
        let cost = match (self.epoch_cpu, cpu) {
            (Some(start), Some(end)) if self.epoch_datagrams >= MIN_DATAGRAMS => {
                Some(end.saturating_sub(start).as_nanos() as u64 * 1_000 / self.epoch_datagrams)
            }
            _ => None,
        };
        self.stage = self.next(cost);
        self.epoch_start = now;
        self.epoch_cpu = cpu;
        self.epoch_datagrams = 0;
    }

    /// The stage after an epoch whose CPU per datagram (picoseconds) was
    /// `cost` (None: unknown).
    fn next(&mut self, cost: Option<u64>) -> Stage {
        match self.stage {
            Stage::ProbeOff => Stage::ProbeOn { off_cost: cost },
            Stage::ProbeOn { off_cost } => {
                let pacing = match (off_cost, cost) {
                    (Some(off), Some(on)) => (on as f64) <= off as f64 * WIN_MARGIN,
                    _ => false,
                };
                self.keep = match self.last_winner == Some(pacing) {
                    true => (self.keep * 2).min(MAX_KEEP),
                    false => MIN_KEEP,
                };
                self.last_winner = Some(pacing);
                Stage::Keep {
                    pacing,
                    left: self.keep,
                }
            }
            Stage::Keep { left: 0, .. } => Stage::ProbeOff,
            Stage::Keep { pacing, left } => Stage::Keep {
                pacing,
                left: left - 1,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock the test advances: CPU time used so far.
    struct FakeCpu(Duration);

    impl CpuClock for FakeCpu {
        fn cpu_time(&mut self) -> Option<Duration> {
            Some(self.0)
        }
    }

    /// Runs epochs of `datagrams` each, costing `off` or `on` ns per
    /// datagram as the choice paces or not; returns the choice at each
    /// epoch's start.
    fn run(
        c: &mut PacingChoice,
        now: &mut Instant,
        cpu: &mut FakeCpu,
        epochs: usize,
        off_ns: u64,
        on_ns: u64,
    ) -> Vec<bool> {
        let datagrams = 10_000u64;
        let mut seen = Vec::new();
        for _ in 0..epochs {
            let pacing = c.pacing();
            seen.push(pacing);
            cpu.0 += Duration::from_nanos(datagrams * if pacing { on_ns } else { off_ns });
            *now += EPOCH;
            c.received(*now, datagrams as usize, true, cpu);
        }
        seen
    }

    fn start() -> (PacingChoice, Instant, FakeCpu) {
        let now = Instant::now();
        let mut cpu = FakeCpu(Duration::from_secs(1));
        (PacingChoice::new(now, &mut cpu), now, cpu)
    }

    #[test]
    fn pacing_that_costs_more_is_turned_off() {
        let (mut c, mut now, mut cpu) = start();
        let seen = run(&mut c, &mut now, &mut cpu, 200, 5_000, 6_500);
        // One probe epoch with pacing per comparison, nothing else.
        let paced = seen.iter().filter(|p| **p).count();
        let probes = seen.windows(2).filter(|w| !w[0] && w[1]).count();
        assert_eq!(paced, probes);
        assert!(paced * 20 < seen.len(), "{paced} of {}", seen.len());
    }

    #[test]
    fn pacing_that_saves_is_kept() {
        let (mut c, mut now, mut cpu) = start();
        let seen = run(&mut c, &mut now, &mut cpu, 200, 8_000, 5_000);
        let unpaced = seen.iter().filter(|p| !**p).count();
        assert!(unpaced * 20 < seen.len(), "{unpaced} of {}", seen.len());
        assert!(seen[seen.len() - 1]);
    }

    #[test]
    fn a_tie_keeps_pacing_off() {
        let (mut c, mut now, mut cpu) = start();
        let seen = run(&mut c, &mut now, &mut cpu, 50, 5_000, 4_950);
        assert!(!seen[seen.len() - 1]);
    }

    #[test]
    fn the_choice_follows_a_change_in_the_traffic() {
        let (mut c, mut now, mut cpu) = start();
        run(&mut c, &mut now, &mut cpu, 300, 8_000, 5_000);
        assert!(c.pacing());
        // Now pacing costs more: within one longest keep and a probe it
        // is off, and stays off.
        let seen = run(
            &mut c,
            &mut now,
            &mut cpu,
            MAX_KEEP as usize + 5,
            5_000,
            8_000,
        );
        assert!(!seen[seen.len() - 1]);
        assert!(!seen[seen.len() - 2]);
    }

    #[test]
    fn quiet_traffic_reads_no_clock_and_busy_traffic_compares_afresh() {
        let (mut c, mut now, mut cpu) = start();
        run(&mut c, &mut now, &mut cpu, 300, 5_000, 8_000);
        assert!(!c.pacing());
        /// Counts its reads.
        struct Counting(u32);
        impl CpuClock for Counting {
            fn cpu_time(&mut self) -> Option<Duration> {
                self.0 += 1;
                Some(Duration::from_secs(u64::from(self.0)))
            }
        }
        let mut counting = Counting(0);
        for _ in 0..100 {
            now += EPOCH;
            c.received(now, 10, false, &mut counting);
        }
        assert_eq!(counting.0, 0);
        // Busy again, and now pacing is cheaper: compared at once, not
        // after the long keep of the old winner.
        now += EPOCH;
        c.received(now, 10_000, true, &mut cpu);
        let seen = run(&mut c, &mut now, &mut cpu, 3, 8_000, 5_000);
        assert_eq!(seen, [false, true, true]);
    }

    #[test]
    fn the_time_between_comparisons_grows_and_is_bounded() {
        let (mut c, mut now, mut cpu) = start();
        let seen = run(&mut c, &mut now, &mut cpu, 1_000, 5_000, 7_000);
        let probe_at: Vec<usize> = seen
            .windows(2)
            .enumerate()
            .filter(|(_, w)| !w[0] && w[1])
            .map(|(i, _)| i + 1)
            .collect();
        let gaps: Vec<usize> = probe_at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "{gaps:?}");
        assert_eq!(gaps.last().copied(), Some(MAX_KEEP as usize + 3));
    }

    #[test]
    fn epochs_with_too_few_datagrams_or_no_clock_keep_pacing_off() {
        let now = Instant::now();
        struct NoClock;
        impl CpuClock for NoClock {
            fn cpu_time(&mut self) -> Option<Duration> {
                None
            }
        }
        let mut c = PacingChoice::new(now, &mut NoClock);
        let mut t = now;
        for _ in 0..50 {
            t += EPOCH;
            c.received(t, 100_000, true, &mut NoClock);
            assert!(!c.pacing() || matches!(c.stage, Stage::ProbeOn { .. }));
        }
        let mut cpu = FakeCpu(Duration::ZERO);
        let mut c = PacingChoice::new(now, &mut cpu);
        let mut t = now;
        for _ in 0..50 {
            t += EPOCH;
            cpu.0 += Duration::from_micros(10);
            c.received(t, (MIN_DATAGRAMS - 1) as usize, true, &mut cpu);
            assert!(!c.pacing() || matches!(c.stage, Stage::ProbeOn { .. }));
        }
    }

    #[test]
    fn the_thread_clock_reads_this_threads_cpu_time() {
        std::thread::spawn(|| {
            let mut clock = ThreadCpuClock::open();
            let t0 = clock.cpu_time().expect("schedstat readable");
            let mut x = 0u64;
            // Bounded: the clock must move within a second of spinning.
            let deadline = Instant::now() + Duration::from_secs(1);
            while clock.cpu_time().unwrap() == t0 && Instant::now() < deadline {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            assert!(clock.cpu_time().unwrap() > t0);
        })
        .join()
        .unwrap();
    }
}
