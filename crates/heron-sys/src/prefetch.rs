//! Asking the CPU to fetch memory that is about to be read.
//!
//! A zone's nodes lie in hash order, so walking them in any other order
//! (canonical order for an AXFR, a build's log in shard order, the batch
//! answerer's lookahead) misses the caches on every node. Knowing the next
//! few positions ahead, a prefetch overlaps those misses instead of taking
//! them one at a time. These are on the per-query path: each compiles to
//! one instruction where it is called.
//!
//! The `unsafe` calls: PREFETCHT0 loads nothing into a register and never
//! faults, whatever the address, and SSE is part of the x86_64 baseline.
//! Elsewhere this is a no-op.

/// Starts loading the cache line that holds the start of `items`.
#[inline(always)]
pub fn prefetch<T>(items: &[T]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: see the module comment; the pointer comes from a live slice
    // (one past its end when it is empty, which a prefetch also accepts).
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(items.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = items;
}

/// Starts loading the cache line after the one that holds the start of
/// `items` (which may be past their end: a prefetch never faults).
#[inline(always)]
pub fn prefetch_next_line<T>(items: &[T]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as for `prefetch`; the address is computed with a wrapping
    // add and never dereferenced.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let next = items.as_ptr().cast::<i8>().wrapping_add(64);
        _mm_prefetch::<_MM_HINT_T0>(next);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = items;
}

/// Starts loading `lines` cache lines from the one that holds the start
/// of `items` on (which may run past their end: a prefetch never faults).
#[inline(always)]
pub fn prefetch_lines<T>(items: &[T], lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in 0..lines {
        // SAFETY: as for `prefetch_next_line`.
        unsafe {
            use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let at = items.as_ptr().cast::<i8>().wrapping_add(64 * line);
            _mm_prefetch::<_MM_HINT_T0>(at);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, lines);
}

#[cfg(test)]
mod tests {
    use super::{prefetch, prefetch_lines, prefetch_next_line};

    #[test]
    fn prefetching_changes_nothing_it_touches() {
        let data: Vec<u8> = (0..=255).collect();
        for at in [0, 1, 63, 64, 255, 256] {
            prefetch(&data[at..]);
        }
        prefetch::<u8>(&[]);
        prefetch_next_line(&data[250..]);
        prefetch_next_line::<u8>(&[]);
        prefetch(&[0u64; 3][1..]);
        prefetch_lines(&data[200..], 8);
        prefetch_lines::<u8>(&[], 4);
        assert_eq!(data, (0..=255).collect::<Vec<u8>>());
    }
}
