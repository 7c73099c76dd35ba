//! Instants as the timers keep them: 8 octets where an `Instant` takes 16
//! and an `Option<Instant>` 16 too, for the four or five a zone holds
//! (100,000 zones: 4 MB).

use std::cell::OnceCell;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// Nanoseconds from an epoch, plus 2^63: instants before the epoch fit
/// (292 years either way), the order is the instants' order, and zero
/// never occurs, so that `Option<Stamp>` is 8 octets too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Stamp(NonZeroU64);

const BIAS: u64 = 1 << 63;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Stamp {
    fn from_biased(biased: u64) -> Stamp {
        // 0 would be 2^63 ns (292 years) before the epoch.
        Stamp(NonZeroU64::new(biased).unwrap_or(NonZeroU64::MIN))
    }

    /// How long after `earlier` this is; zero if it is not after.
    pub(super) fn saturating_duration_since(self, earlier: Stamp) -> Duration {
        Duration::from_nanos(self.0.get().saturating_sub(earlier.0.get()))
    }
}

/// The time `d` after a stamp (saturating, where `Instant` would panic
/// only centuries on).
impl std::ops::Add<Duration> for Stamp {
    type Output = Stamp;

    fn add(self, d: Duration) -> Stamp {
        Stamp::from_biased(self.0.get().saturating_add(nanos(d)))
    }
}

/// Turns instants into stamps and back, exactly, relative to the first
/// instant it is given (the timers read no clock of their own).
#[derive(Default)]
pub(super) struct Epoch(OnceCell<Instant>);

impl Epoch {
    fn epoch(&self, t: Instant) -> Instant {
        *self.0.get_or_init(|| t)
    }

    pub(super) fn stamp(&self, t: Instant) -> Stamp {
        let epoch = self.epoch(t);
        let biased = match t.checked_duration_since(epoch) {
            Some(after) => BIAS.saturating_add(nanos(after)),
            None => BIAS.saturating_sub(nanos(epoch - t)),
        };
        Stamp::from_biased(biased)
    }

    pub(super) fn instant(&self, s: Stamp) -> Instant {
        let epoch = *self.0.get().expect("a stamp was made");
        let biased = s.0.get();
        if biased >= BIAS {
            epoch + Duration::from_nanos(biased - BIAS)
        } else {
            epoch - Duration::from_nanos(BIAS - biased)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip_and_keep_their_order() {
        let clock = Epoch::default();
        let t0 = Instant::now();
        let times = [
            t0,
            t0 + Duration::from_nanos(1),
            t0 + Duration::from_secs(86_400 * 365),
            t0.checked_sub(Duration::from_millis(1500)).unwrap_or(t0),
        ];
        for t in times {
            assert_eq!(clock.instant(clock.stamp(t)), t);
        }
        let mut stamps: Vec<Stamp> = times.iter().map(|&t| clock.stamp(t)).collect();
        let mut sorted = times;
        sorted.sort();
        stamps.sort();
        let back: Vec<Instant> = stamps.iter().map(|&s| clock.instant(s)).collect();
        assert_eq!(back, sorted);
    }

    #[test]
    fn durations_add_and_subtract_as_with_instants() {
        let clock = Epoch::default();
        let t0 = Instant::now();
        let s0 = clock.stamp(t0);
        let later = s0 + Duration::from_secs(3600);
        assert_eq!(clock.instant(later), t0 + Duration::from_secs(3600));
        assert_eq!(
            later.saturating_duration_since(s0),
            Duration::from_secs(3600)
        );
        assert_eq!(s0.saturating_duration_since(later), Duration::ZERO);
    }

    #[test]
    fn an_optional_stamp_takes_eight_octets() {
        assert_eq!(size_of::<Option<Stamp>>(), 8);
    }
}
