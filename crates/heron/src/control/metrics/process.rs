//! The process's own series under the names every Prometheus client
//! library exports (`process_*`), so that the dashboards and alerts
//! written for any service work on Heron: read from `/proc/self` at each
//! scrape.

/// What `/proc/self` says of this process; None where it could not be
/// read.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// When the process started, Unix seconds.
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    /// The soft limit on open files.
    pub max_fds: Option<u64>,
}

/// Reads them now.
pub fn read() -> ProcessStats {
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let boot_time = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|text| boot_time(&text));
    let ticks = heron_sys::process::clock_ticks_per_second() as f64;
    let times = stat.as_deref().and_then(stat_times);
    ProcessStats {
        resident_bytes: status.as_deref().and_then(|s| status_kib(s, "VmRSS:")),
        virtual_bytes: status.as_deref().and_then(|s| status_kib(s, "VmSize:")),
        cpu_seconds: times.map(|t| (t.user + t.system) as f64 / ticks),
        start_time_seconds: times
            .zip(boot_time)
            .map(|(t, boot)| boot as f64 + t.start as f64 / ticks),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|fds| fds.count() as u64),
        max_fds: heron_sys::process::open_files_limit().0,
    }
}

/// A `NAME: N kB` line of `/proc/PID/status`, in bytes.
fn status_kib(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Times of `/proc/PID/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatTimes {
    user: u64,
    system: u64,
    /// After boot.
    start: u64,
}

/// `utime`, `stime` and `starttime` (fields 14, 15 and 22) of
/// `/proc/PID/stat`. The command name (field 2) is in parentheses and
/// may hold blanks and parentheses itself: fields are counted from the
/// last `)`.
fn stat_times(stat: &str) -> Option<StatTimes> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name.
    let field = |n: usize| -> Option<u64> { rest.split_whitespace().nth(n - 3)?.parse().ok() };
    Some(StatTimes {
        user: field(14)?,
        system: field(15)?,
        start: field(22)?,
    })
}

/// The `btime` line of `/proc/stat`: when the machine booted, Unix seconds.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 2000 0 0 0 \
                    350 120 0 0 20 0 9 0 98765 123456789 3000 18446744073709551615";
        assert_eq!(
            stat_times(stat),
            Some(StatTimes {
                user: 350,
                system: 120,
                start: 98765
            })
        );
        assert_eq!(stat_times("4242 (heron) S 1 2"), None);
        assert_eq!(stat_times("no parenthesis"), None);
        assert_eq!(stat_times(""), None);
    }

    #[test]
    fn status_lines_are_read_in_bytes() {
        let status = "Name:\theron\nVmSize:\t  123456 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(2048 * 1024));
        assert_eq!(status_kib(status, "VmSize:"), Some(123_456 * 1024));
        assert_eq!(status_kib(status, "VmSwap:"), None);
        assert_eq!(status_kib("VmRSS:\tlots kB\n", "VmRSS:"), None);
        assert_eq!(status_kib("VmRSS: 18446744073709551615 kB", "VmRSS:"), None);
    }

    #[test]
    fn boot_time_is_the_btime_line() {
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        assert_eq!(boot_time("cpu  1 2 3\n"), None);
    }

    #[test]
    fn this_process_reads_plausibly() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let stats = read();
        assert!(stats.resident_bytes.unwrap() > 0);
        assert!(stats.virtual_bytes.unwrap() >= stats.resident_bytes.unwrap());
        assert!(stats.cpu_seconds.unwrap() >= 0.0);
        let started = stats.start_time_seconds.unwrap();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0 * 365.0,
            "{started} vs {now}"
        );
        assert!(stats.open_fds.unwrap() >= 3);
    }
}
