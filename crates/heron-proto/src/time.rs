//! The wall clock in seconds since the Unix epoch: TSIG's Time Signed,
//! cookie timestamps, `unixtime` serials. Read by the drivers, which
//! pass it to the I/O-free layers as `now`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the epoch (0 for a clock set before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_reads_after_2020() {
        assert!(super::unix_now() > 1_577_836_800);
    }
}
