//! Which CPUs a thread may run on (`sched_setaffinity(2)`), and how many
//! the machine has. Pinning keeps a worker on its caches, and lets a
//! benchmark give every server the same cores.

use std::io;

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// Restricts the calling thread to `cpus` (and the threads it starts from
/// then on, which inherit the mask). Fails on an empty list, a CPU number
/// past what the kernel's mask holds, or a set with no online CPU.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no CPU to pin to",
        ));
    }
    let mut set = CpuSet::new();
    for &cpu in cpus {
        if cpu >= CpuSet::MAX_CPU {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is out of range"),
            ));
        }
        set.set(cpu);
    }
    sched_setaffinity(None, &set)?;
    Ok(())
}

/// The CPUs the calling thread may run on, in ascending order.
pub fn current_thread_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// CPUs online on the machine, whatever this thread is pinned to (unlike
/// `std::thread::available_parallelism`, which counts the pinned set).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf takes a plain integer and reads no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_cpu_zero_and_reads_the_mask_back() {
        std::thread::spawn(|| {
            pin_current_thread(&[0]).unwrap();
            assert_eq!(current_thread_cpus().unwrap(), vec![0]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn only_the_pinned_thread_changes() {
        let before = current_thread_cpus().unwrap();
        std::thread::spawn(|| pin_current_thread(&[0]).unwrap())
            .join()
            .unwrap();
        assert_eq!(current_thread_cpus().unwrap(), before);
    }

    #[test]
    fn nonsense_sets_are_refused() {
        std::thread::spawn(|| {
            let before = current_thread_cpus().unwrap();
            assert!(pin_current_thread(&[]).is_err());
            assert!(pin_current_thread(&[CpuSet::MAX_CPU]).is_err());
            assert!(pin_current_thread(&[0, 1 << 20]).is_err());
            assert_eq!(current_thread_cpus().unwrap(), before, "unchanged");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn online_cpus_cover_this_threads_set() {
        let cpus = current_thread_cpus().unwrap();
        assert!(online_cpus() >= cpus.len());
    }
}
