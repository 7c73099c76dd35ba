//! Gives memory freed after a load back to the kernel.
//!
//! Loading parses the config and every zone file, and the parser's scratch
//! (tokens, tables, builders) is freed once the zones are built. glibc keeps
//! freed blocks in its heaps for reuse, so without this the resident size
//! after loading 100,000 zones stays at the parse's high-water mark rather
//! than what the zones take.

/// Returns free heap pages to the kernel (glibc `malloc_trim`). A no-op
/// where the C library has no such call.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and only inspects the
    // allocator's own free lists under its locks; any thread may call it
    // at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    fn resident_bytes() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    #[test]
    fn freed_small_blocks_leave_the_resident_set() {
        // 64 MiB in small blocks (below the mmap threshold, so they live in
        // the heap), then all freed but the last, which pins the heap's top
        // so that free() alone cannot shrink it.
        let mut blocks: Vec<Vec<u8>> = (0..262_144).map(|i| vec![i as u8; 256]).collect();
        let pin = blocks.pop();
        drop(blocks);
        let before = resident_bytes();
        release_free_memory();
        let after = resident_bytes();
        drop(pin);
        assert!(
            after + 32 * 1024 * 1024 < before,
            "resident {before} bytes before the trim, {after} after"
        );
    }
}
