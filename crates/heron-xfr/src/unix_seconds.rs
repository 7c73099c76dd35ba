//! Times kept by the hundred thousand (one per zone, or per queued
//! write) in whole seconds since the Unix epoch: 4 octets, and `Option`
//! of it 4 too, where a `SystemTime` takes 16. The refresh timers count
//! in whole seconds; so do file dates that record them.

use std::num::NonZeroU32;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnixSeconds(NonZeroU32);

impl UnixSeconds {
    /// `t` to the second below; None outside 1970 (exclusive) to 2106,
    /// which a u32 of seconds cannot hold.
    pub(crate) fn of(t: SystemTime) -> Option<UnixSeconds> {
        let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
        Some(UnixSeconds(NonZeroU32::new(u32::try_from(secs).ok()?)?))
    }

    pub(crate) fn time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0.get().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_keeps_its_second_and_none_comes_from_outside_u32() {
        let at = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        assert_eq!(UnixSeconds::of(at).map(UnixSeconds::time), Some(at));
        let subsecond = at + Duration::from_millis(999);
        assert_eq!(UnixSeconds::of(subsecond).map(UnixSeconds::time), Some(at));
        let last = UNIX_EPOCH + Duration::from_secs(u32::MAX.into());
        assert_eq!(UnixSeconds::of(last).map(UnixSeconds::time), Some(last));
        assert_eq!(UnixSeconds::of(last + Duration::from_secs(1)), None);
        assert_eq!(UnixSeconds::of(UNIX_EPOCH), None);
        assert_eq!(UnixSeconds::of(UNIX_EPOCH - Duration::from_secs(1)), None);
        assert_eq!(size_of::<Option<UnixSeconds>>(), 4);
    }
}
