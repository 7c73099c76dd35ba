//! Where the served zones' memory lives, once they are loaded.
//!
//! Loading parses the config and every zone file, and the parser's scratch
//! (tokens, tables, builders) is freed once the zones are built. glibc keeps
//! freed blocks in its heaps for reuse, so without a trim the resident size
//! after loading 100,000 zones stays at the parse's high-water mark rather
//! than what the zones take.
//!
//! Then the zones' memory is moved to 2 MiB pages. A query to a zone of
//! 2,000,000 names, or to one of 100,000 zones, reads memory no cache
//! holds, and with 4 KiB pages each such read also walks the page tables
//! (twice over, in a virtual machine). With huge pages that walk mostly
//! hits the TLB: measured with the suite's closed loop, the user time per
//! query went from 0.27 to 0.22 us (2M records) and 0.31 to 0.26 us
//! (100,000 zones). `MADV_COLLAPSE` (Linux 6.1) does it at once;
//! `khugepaged` would take minutes at its default pace.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use heron_zone::Catalog;

/// Returns freed memory to the kernel, then puts the catalog's zones in
/// huge pages. After every load, reload or burst of transfers.
pub fn settle(catalog: &Catalog) {
    release_free_memory();
    match back_with_huge_pages(catalog) {
        Some(done) if done.collapsed + done.failed == 0 => {
            tracing::debug!("no zone memory worth a huge page")
        }
        Some(done) => tracing::info!(
            "zone memory in huge pages: {} MiB in {} ms{}",
            done.collapsed >> 20,
            done.took.as_millis(),
            match done.failed {
                0 => String::new(),
                n => format!(" ({} MiB left in small pages)", n >> 20),
            }
        ),
        None => tracing::debug!("transparent huge pages are off: zone memory stays in small pages"),
    }
}

/// Returns free heap pages to the kernel (glibc `malloc_trim`). A no-op
/// where the C library has no such call.
pub fn release_free_memory() {
    heron_sys::memory::release_free_heap();
}

use heron_sys::memory::HUGE_PAGE;

/// A huge page is made only where zone data fills at least half of it:
/// the kernel fills the rest with zeroes, which then count as resident.
const DENSE_ENOUGH: usize = HUGE_PAGE / 2;

/// What [`back_with_huge_pages`] did.
struct Collapsed {
    /// Bytes now in huge pages.
    collapsed: usize,
    /// Bytes the kernel could not move (no free huge page, say).
    failed: usize,
    took: Duration,
}

/// Moves the huge-page-sized runs of memory that are mostly the catalog's
/// to huge pages. None when the operator turned transparent huge pages
/// off (`never`): `MADV_COLLAPSE` ignores that setting, Heron does not.
fn back_with_huge_pages(catalog: &Catalog) -> Option<Collapsed> {
    let enabled = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    if enabled.contains("[never]") {
        return None;
    }
    let started = Instant::now();
    let mut fill = PageFill::default();
    catalog.for_each_block(|at, len| fill.add(at, len));
    let (mut collapsed, mut failed) = (0, 0);
    // A page at a time: one that crosses into another mapping fails
    // alone, and what was moved is counted exactly.
    for page in fill.dense_pages() {
        match huge_pages::collapse(page) {
            Ok(()) => collapsed += HUGE_PAGE,
            Err(e) => {
                tracing::debug!("no huge page at {page:#x}: {e}");
                failed += HUGE_PAGE;
            }
        }
    }
    Some(Collapsed {
        collapsed,
        failed,
        took: started.elapsed(),
    })
}

/// How many bytes of each huge page the blocks added cover.
#[derive(Default)]
struct PageFill {
    /// Huge page number (address / HUGE_PAGE) to bytes covered.
    covered: HashMap<usize, usize>,
}

impl PageFill {
    /// Counts the block of `len` bytes at address `at`.
    fn add(&mut self, at: usize, len: usize) {
        let end = at.saturating_add(len);
        let mut start = at;
        while start < end {
            let page = start / HUGE_PAGE;
            let page_end = (page + 1).saturating_mul(HUGE_PAGE).min(end);
            *self.covered.entry(page).or_default() += page_end - start;
            start = page_end;
        }
    }

    /// The addresses of the huge pages at least half covered, in order.
    fn dense_pages(&self) -> Vec<usize> {
        let mut dense: Vec<usize> = self
            .covered
            .iter()
            .filter(|&(_, &bytes)| bytes >= DENSE_ENOUGH)
            .map(|(&page, _)| page * HUGE_PAGE)
            .collect();
        dense.sort_unstable();
        dense
    }
}

/// The one system call, kept apart because it takes an address.
mod huge_pages {
    use std::io;

    use super::HUGE_PAGE;

    /// Moves the huge page at `page` (an aligned address) to one 2 MiB
    /// page now. Fails where the kernel is older than 6.1, the page is
    /// not all in one mapping, or no free huge page could be found.
    pub fn collapse(page: usize) -> io::Result<()> {
        heron_sys::memory::collapse_into_huge_pages(page, HUGE_PAGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_page_at_least_half_covered_is_collapsed() {
        let mut fill = PageFill::default();
        // Page 3: exactly half, in two blocks. Page 5: one byte short.
        fill.add(3 * HUGE_PAGE, DENSE_ENOUGH / 2);
        fill.add(
            3 * HUGE_PAGE + HUGE_PAGE - DENSE_ENOUGH / 2,
            DENSE_ENOUGH / 2,
        );
        fill.add(5 * HUGE_PAGE + 1, DENSE_ENOUGH - 1);
        fill.add(7 * HUGE_PAGE, 0);
        assert_eq!(fill.dense_pages(), vec![3 * HUGE_PAGE]);
    }

    #[test]
    fn a_block_over_several_pages_counts_in_each() {
        let mut fill = PageFill::default();
        // From the last quarter of page 10 to the first half of page 13:
        // 11 and 12 are full, 13 is half, 10 is a quarter.
        fill.add(
            10 * HUGE_PAGE + 3 * HUGE_PAGE / 4,
            HUGE_PAGE / 4 + 2 * HUGE_PAGE + DENSE_ENOUGH,
        );
        assert_eq!(fill.covered[&10], HUGE_PAGE / 4);
        assert_eq!(fill.covered[&11], HUGE_PAGE);
        assert_eq!(fill.covered[&13], DENSE_ENOUGH);
        assert_eq!(
            fill.dense_pages(),
            vec![11 * HUGE_PAGE, 12 * HUGE_PAGE, 13 * HUGE_PAGE]
        );
    }

    #[test]
    fn dense_pages_come_in_address_order() {
        let mut fill = PageFill::default();
        for page in [9, 1, 2, 4, 8] {
            fill.add(page * HUGE_PAGE, HUGE_PAGE);
        }
        fill.add(3 * HUGE_PAGE, 100);
        let pages: Vec<usize> = fill.dense_pages().iter().map(|a| a / HUGE_PAGE).collect();
        assert_eq!(pages, vec![1, 2, 4, 8, 9]);
    }

    #[test]
    fn a_block_at_the_top_of_the_address_space_does_not_overflow() {
        let mut fill = PageFill::default();
        fill.add(usize::MAX - 10, 100);
        assert_eq!(fill.covered.values().sum::<usize>(), 10);
        assert!(fill.dense_pages().is_empty());
    }

    /// The kB of huge pages in the mapping that holds `address`
    /// (`/proc/self/smaps`), or None when no mapping holds it.
    #[cfg(target_os = "linux")]
    fn huge_kb_at(address: usize) -> Option<usize> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((from, to)) = first.split_once('-')
                && let (Ok(from), Ok(to)) = (
                    usize::from_str_radix(from, 16),
                    usize::from_str_radix(to, 16),
                )
            {
                inside = (from..to).contains(&address);
            } else if inside && let Some(kb) = line.strip_prefix("AnonHugePages:") {
                return kb.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
        None
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn collapsed_memory_keeps_its_contents_in_huge_pages() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        if thp.is_err() {
            eprintln!("this kernel has no transparent huge pages: nothing to check");
            return;
        }
        // 16 MiB: its own mapping, with at least 7 whole huge pages in it.
        let block: Vec<u8> = (0..16 << 20).map(|i: usize| (i % 251) as u8).collect();
        let mut fill = PageFill::default();
        fill.add(block.as_ptr() as usize, block.len());
        let pages = fill.dense_pages();
        // Seven whole pages, and whichever end page is more than half full.
        assert!(pages.len() == 8 || pages.len() == 9, "{pages:x?}");
        let tried = pages.len();
        let failures: Vec<std::io::Error> = pages
            .into_iter()
            .filter_map(|p| huge_pages::collapse(p).err())
            .collect();
        // Whatever the kernel did, the contents are the same.
        assert!(block.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        // EINVAL: no MADV_COLLAPSE (Linux before 6.1). EAGAIN/ENOMEM on a
        // whole page: no free huge page right now (memory fragmented by
        // other work), which the server takes as "not this time" too.
        let kernel_cannot = failures.iter().any(|e| {
            use std::io::ErrorKind::{InvalidInput, OutOfMemory, WouldBlock};
            matches!(e.kind(), InvalidInput | WouldBlock | OutOfMemory)
        });
        if tried - failures.len() < 7 && kernel_cannot {
            eprintln!("no huge page was free or MADV_COLLAPSE is missing: {failures:?}");
            return;
        }
        let huge = huge_kb_at(block.as_ptr() as usize).expect("the block is mapped");
        assert!(huge >= 7 * 2048, "{huge} kB in huge pages");
    }

    #[test]
    fn a_run_that_is_not_mapped_is_an_error_not_a_crash() {
        // The first huge page of the address space is never mapped.
        assert!(huge_pages::collapse(0).is_err());
    }
}
