//! Where memory lives: the server's allocator (jemalloc), handing freed
//! heap back to the kernel, and moving memory to huge pages
//! (`MADV_COLLAPSE`).

use std::io;

/// The size of a huge page on x86-64 and on arm64 with 4 KiB pages.
pub const HUGE_PAGE: usize = 2 << 20;

/// Linux's `MADV_COLLAPSE` (6.1 and later).
const MADV_COLLAPSE: libc::c_int = 25;

/// Moves the `len` bytes at address `start` (huge-page aligned) to huge
/// pages now. Fails where the kernel is older than 6.1, part of the range
/// is not mapped, or no free huge page could be found; what the program
/// reads from the range never changes.
pub fn collapse_into_huge_pages(start: usize, len: usize) -> io::Result<()> {
    // SAFETY: MADV_COLLAPSE does not change what the program sees in
    // memory: the kernel copies the pages' contents into a huge page, and
    // fails with ENOMEM on any part of the range that is not mapped. The
    // address is only passed to the kernel; no Rust reference is created.
    let done = unsafe { libc::madvise(start as *mut libc::c_void, len, MADV_COLLAPSE) };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The allocator the server runs on. A secondary's cold start allocates
/// each zone's long-lived blocks between its transfer's short-lived
/// scratch; glibc's heaps keep the holes that scratch leaves (a 100,000
/// zone secondary: 312 MiB resident for about 175 MB in use), where
/// jemalloc's size-class slabs fill them and give whole pages back (180
/// MiB). The binary names it with `#[global_allocator]`.
pub use tikv_jemallocator::Jemalloc as ServerAllocator;

/// `MALLCTL_ARENAS_ALL` in a jemalloc control name: every arena at once.
const PURGE_EVERY_ARENA: &std::ffi::CStr = c"arena.4096.purge";

/// Returns free heap pages to the kernel now: jemalloc's unused dirty
/// pages in every arena (which its decay would otherwise return over ten
/// seconds, and only while the arena is in use), then glibc's
/// (`malloc_trim`, for what C code allocates through it).
pub fn release_free_heap() {
    // SAFETY: `arena.<MALLCTL_ARENAS_ALL>.purge` reads and writes nothing
    // through the pointers (all null, lengths 0); the name is a valid
    // NUL-terminated string. jemalloc takes its own locks, so any thread
    // may call it at any time.
    let failed = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_EVERY_ARENA.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    debug_assert_eq!(failed, 0, "jemalloc refused {PURGE_EVERY_ARENA:?}");
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and only inspects the
    // allocator's own free lists under its locks; any thread may call it
    // at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_bytes() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    #[test]
    fn freed_small_blocks_leave_the_resident_set() {
        // 64 MiB in small blocks (slabs of the server's allocator, which
        // this crate's tests run on), all freed but the last, which pins
        // its slab: what free() left dirty goes back only with the purge.
        let mut blocks: Vec<Vec<u8>> = (0..262_144).map(|i| vec![i as u8; 256]).collect();
        let pin = blocks.pop();
        drop(blocks);
        let before = resident_bytes();
        release_free_heap();
        let after = resident_bytes();
        drop(pin);
        assert!(
            after + 32 * 1024 * 1024 < before,
            "resident {before} bytes before the trim, {after} after"
        );
    }

    #[test]
    fn a_mapped_range_collapses_and_keeps_its_contents() {
        if std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").is_err() {
            eprintln!("this kernel has no transparent huge pages: nothing to check");
            return;
        }
        // 8 MiB: an mmap of its own, with at least three whole huge pages.
        let block: Vec<u8> = (0..8 << 20).map(|i: usize| (i % 251) as u8).collect();
        let start = (block.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
        let collapsed = collapse_into_huge_pages(start, 3 * HUGE_PAGE);
        assert!(
            collapsed.is_ok(),
            "MADV_COLLAPSE (Linux 6.1): {collapsed:?}"
        );
        assert!(block.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }

    #[test]
    fn an_unmapped_range_is_an_error_not_a_crash() {
        // The first huge page of the address space is never mapped.
        assert!(collapse_into_huge_pages(0, HUGE_PAGE).is_err());
    }
}
