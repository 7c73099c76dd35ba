//! The monotonic clock as a number of milliseconds.

/// Milliseconds of `CLOCK_MONOTONIC` (from an unspecified start): one
/// vDSO read and a multiply. A UDP worker dates each batch with it, where
/// `Instant::elapsed`'s checked arithmetic costs more than the read
/// itself. Through libc rather than rustix, whose own vDSO call crashes
/// under valgrind, which profiles the server (callgrind).
pub fn monotonic_millis() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec the call writes; CLOCK_MONOTONIC
    // exists on every Linux, so the call cannot fail.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    debug_assert_eq!(rc, 0);
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
        let std_span = elapsed.as_millis() as u64;
        assert!(span.abs_diff(std_span) <= 1, "{span} ms, {elapsed:?}");
    }
}
