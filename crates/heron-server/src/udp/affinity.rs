//! Pinning a worker thread to one CPU (`sched_setaffinity(2)`), so that a
//! worker keeps its caches and benchmarks can give every server the same
//! cores.

use std::io;
use std::mem;

/// Restricts the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is out of range"),
        ));
    }
    // SAFETY: cpu_set_t is a plain bit array (all zeroes = empty set);
    // CPU_SET writes one bit within it (index checked above); pid 0 means
    // the calling thread, and the size passed is the set's own size.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_cpu_zero_and_rejects_nonsense() {
        std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            // SAFETY: reads the calling thread's affinity into a zeroed set.
            let only_zero = unsafe {
                let mut set: libc::cpu_set_t = mem::zeroed();
                libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set);
                libc::CPU_ISSET(0, &set) && libc::CPU_COUNT(&set) == 1
            };
            assert!(only_zero);
            assert!(pin_current_thread(1 << 20).is_err());
        })
        .join()
        .unwrap();
    }
}
