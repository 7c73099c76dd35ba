//! The arithmetic of waiting after failures, without I/O: a zone's
//! retries and a primary's windows double from a base up to a cap, with
//! up to a fifth more at random so that zones that failed together
//! spread out. [`crate::secondary::backoff`] keeps the primaries' state.

use std::time::Duration;

/// The wait after a first failure.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest a primary that keeps failing is left alone: it is tried
/// again at least this often.
pub const PRIMARY_MAX_BACKOFF: Duration = Duration::from_secs(60);

/// `base` after one failure, doubled after each further one, at most
/// `cap`; zero before any failure.
pub fn exponential(failures: u32, base: Duration, cap: Duration) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let doublings = (failures - 1).min(31);
    base.saturating_mul(1 << doublings).min(cap)
}

/// `d` plus up to a fifth more, at random.
pub fn jitter(d: Duration) -> Duration {
    jitter_by(d, heron_proto::message::random_id())
}

/// `d` plus `r / u16::MAX` of a fifth more.
pub fn jitter_by(d: Duration, r: u16) -> Duration {
    d + d / 5 * r as u32 / u16::MAX as u32
}

/// When a zone whose check failed `failures` times in a row tries again:
/// its own backoff up to `cap` (its SOA retry interval), but not before
/// its primaries' windows end (`primaries_back`, if they are all left
/// alone), so the zones of a failed primary wait for it together; `r`
/// is the jitter ([`jitter_by`]).
pub fn retry_delay(
    failures: u32,
    primaries_back: Option<Duration>,
    cap: Duration,
    r: u16,
) -> Duration {
    let own = exponential(failures, FIRST_RETRY.min(cap), cap);
    let wait = primaries_back.map_or(own, |back| own.max(back.min(cap)));
    jitter_by(wait, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_wait_doubles_from_the_base_up_to_the_cap() {
        let waits: Vec<u64> = (0..8)
            .map(|n| exponential(n, secs(1), secs(20)).as_secs())
            .collect();
        assert_eq!(waits, [0, 1, 2, 4, 8, 16, 20, 20]);
        assert_eq!(exponential(u32::MAX, secs(1), secs(3600)), secs(3600));
    }

    #[test]
    fn jitter_adds_at_most_a_fifth() {
        for _ in 0..100 {
            let d = jitter(secs(10));
            assert!(d >= secs(10) && d <= secs(12));
        }
    }

    #[test]
    fn a_zone_retries_sooner_at_first_and_never_later_than_its_retry_interval() {
        let at_least = |failures, back, cap| retry_delay(failures, back, cap, 0);
        assert_eq!(at_least(1, None, secs(600)), secs(1));
        assert_eq!(at_least(4, None, secs(600)), secs(8));
        assert_eq!(at_least(30, None, secs(600)), secs(600));
        // A retry interval shorter than the first retry caps it too.
        assert_eq!(at_least(1, None, secs(1)), secs(1));
        // Its primaries left alone for 30 s: it waits for them...
        assert_eq!(at_least(1, Some(secs(30)), secs(600)), secs(30));
        // ...but not past its own retry interval, nor less than its own wait.
        assert_eq!(at_least(1, Some(secs(30)), secs(10)), secs(10));
        assert_eq!(at_least(7, Some(secs(30)), secs(600)), secs(64));
        // The jitter adds at most a fifth.
        assert_eq!(retry_delay(4, None, secs(600), u16::MAX), secs(8) * 6 / 5);
    }
}
