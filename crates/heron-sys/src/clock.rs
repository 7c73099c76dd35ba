//! The monotonic clock as a number of milliseconds.

use rustix::time::{ClockId, clock_gettime};

/// Milliseconds of `CLOCK_MONOTONIC` (from an unspecified start): one
/// vDSO read and a multiply. A UDP worker dates each batch with it, where
/// `Instant::elapsed`'s checked arithmetic costs more than the read
/// itself (callgrind: about 65 instructions against 25).
pub fn monotonic_millis() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_with_the_standard_one() {
        let (start, started) = (monotonic_millis(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (end, elapsed) = (monotonic_millis(), started.elapsed());
        // Both clocks are CLOCK_MONOTONIC: the same span, to the millisecond.
        let span = end - start;
        assert!(span >= 20, "{span} ms");
        assert!(
            span.abs_diff(elapsed.as_millis() as u64) <= 1,
            "{span} ms, {elapsed:?}"
        );
    }
}
