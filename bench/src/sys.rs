//! What the suite reads from and writes to the kernel: CPU time and memory
//! of process groups (/proc), CPU quotas (cgroup v1 or v2, detected at run
//! time), and the scheduling of the suite's own threads.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Clock ticks per second of /proc/PID/stat times.
fn ticks_per_second() -> f64 {
    let t = heron_sys::process::clock_ticks_per_second();
    if t > 0 { t as f64 } else { 100.0 }
}

/// Fields of /proc/PID/stat after the command name: state is index 0, so
/// field N of proc(5) (1-based) is index N - 3.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Busy CPU seconds of the whole machine so far, every CPU; only
/// differences mean anything. Where every CPU reports its idle states
/// (cpuidle), the time outside them: the kernel keeps their residency in
/// µs, so a window's figure is exact and counts what entering and leaving
/// idle costs on each wake. Else [`machine_busy_ticks_seconds`], which the
/// scheduler tick samples: at HZ 250 the short bursts of a server at
/// 20,000 q/s were misread by half either way from one window to the next.
/// An idle period counts only once it ends, so this is for windows over
/// which every CPU works (a loaded trial), not for an idle machine.
pub fn machine_busy_seconds() -> f64 {
    idle_residency_busy_seconds().unwrap_or_else(machine_busy_ticks_seconds)
}

/// [`machine_busy_seconds`] from cpuidle: CPUs × time since a fixed
/// instant, less the time every CPU spent in its idle states. None where
/// a CPU has no idle states listed.
fn idle_residency_busy_seconds() -> Option<f64> {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(std::time::Instant::now);
    let cpus = heron_sys::cpu::online_cpus();
    let mut idle_us = 0.0;
    for cpu in 0..cpus {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
        let states: Vec<PathBuf> = fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("state"))
            })
            .collect();
        if states.is_empty() {
            return None;
        }
        for state in states {
            let time = fs::read_to_string(state.join("time")).ok()?;
            idle_us += time.trim().parse::<f64>().ok()?;
        }
    }
    Some(start.elapsed().as_secs_f64() * cpus as f64 - idle_us / 1e6)
}

/// Busy CPU seconds of the whole machine so far from the scheduler tick's
/// samples (/proc/stat: user, nice, system, irq and softirq; not idle,
/// iowait or steal): right on average, for an idle machine too.
pub fn machine_busy_ticks_seconds() -> f64 {
    let text = fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    let busy: f64 = [0, 1, 2, 5, 6].iter().filter_map(|&i| f.get(i)).sum();
    busy / ticks_per_second()
}

/// CPU seconds the calling thread has run (/proc/thread-self/schedstat,
/// nanoseconds).
pub fn thread_cpu_seconds() -> f64 {
    fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

/// Live members of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let want = pgid.to_string();
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(f) = stat_fields(pid)
            && f.get(2) == Some(&want)
            && f.first().map(String::as_str) != Some("Z")
        {
            out.push(pid);
        }
    }
    out
}

/// User + system CPU seconds of every live process in group `pgid` (all
/// threads of each; NSD's forked servers are members of the group too).
pub fn group_cpu_seconds(pgid: u32) -> f64 {
    let tps = ticks_per_second();
    group_members(pgid)
        .into_iter()
        .filter_map(stat_fields)
        .map(|f| {
            let utime: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            let stime: f64 = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            (utime + stime) / tps
        })
        .sum()
}

/// CPU seconds run by every thread of every live process in group
/// `pgid`, to the nanosecond (/proc/PID/task/TID/schedstat: the time
/// utime + stime split, without their clock-tick rounding).
pub fn group_runtime_seconds(pgid: u32) -> f64 {
    let mut ns = 0u64;
    for pid in group_members(pgid) {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            ns += fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

/// Memory of a process group in KiB: (sum of VmRSS, sum of PSS, sum of
/// VmHWM). PSS counts pages shared between NSD's processes once.
pub fn group_memory_kib(pgid: u32) -> (u64, u64, u64) {
    let (mut rss, mut pss, mut hwm) = (0, 0, 0);
    for pid in group_members(pgid) {
        if let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) {
            rss += kib_field(&status, "VmRSS:");
            hwm += kib_field(&status, "VmHWM:");
        }
        if let Ok(rollup) = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
            pss += kib_field(&rollup, "Pss:");
        }
    }
    (rss, pss, hwm)
}

/// Anonymous resident memory of a process group in KiB (sum of
/// RssAnon): the part of VmRSS that is the processes' own (heap, stacks),
/// without the file-backed pages of their binaries and libraries, which
/// the page cache holds and other processes share.
pub fn group_anon_kib(pgid: u32) -> u64 {
    group_members(pgid)
        .into_iter()
        .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .map(|status| kib_field(&status, "RssAnon:"))
        .sum()
}

fn kib_field(text: &str, key: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l[key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Moves the calling thread, and the threads and processes it starts from
/// then on, into a network namespace of its own: a loopback interface
/// with 127.0.0.1/8 and `extra` addresses, the kernel's default network
/// settings, and no traffic but ours (so connection counters and socket
/// lists are ours alone). Needs root.
pub fn private_loopback(extra: &[std::net::Ipv4Addr]) -> io::Result<()> {
    heron_sys::process::unshare_network_namespace()?;
    let ip = |args: &[&str]| -> io::Result<()> {
        let out = std::process::Command::new("ip").args(args).output()?;
        if out.status.success() {
            return Ok(());
        }
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    };
    ip(&["link", "set", "lo", "up"])?;
    for a in extra {
        ip(&["addr", "add", &format!("{a}/8"), "dev", "lo"])?;
    }
    Ok(())
}

/// The scheduling weight of this process's session, raised for as long as
/// the guard lives. With autogroups (`kernel.sched_autogroup_enabled`)
/// the kernel first shares CPU time between sessions, and a process's own
/// nice value counts only inside its session: other people's builds in
/// their sessions would take as much CPU time from the servers as ever.
pub struct SessionPriority {
    before: Option<i32>,
}

/// Sets this session's autogroup nice value (and the calling thread's own)
/// to `nice` until the guard is dropped; a no-op where there are no
/// autogroups.
pub fn raise_session_priority(nice: i32) -> SessionPriority {
    const PATH: &str = "/proc/self/autogroup";
    // "/autogroup-20 nice 0"
    let before = fs::read_to_string(PATH)
        .ok()
        .and_then(|t| t.split_whitespace().last()?.parse().ok());
    if before.is_some() {
        let _ = fs::write(PATH, nice.to_string());
    }
    let _ = heron_sys::sched::set_current_thread_nice(nice);
    SessionPriority { before }
}

impl Drop for SessionPriority {
    fn drop(&mut self) {
        if let Some(n) = self.before {
            let _ = fs::write("/proc/self/autogroup", n.to_string());
        }
    }
}

/// Sets the calling thread's scheduling policy: real-time round robin at
/// `priority` (Some), or back to the normal policy (None).
pub fn set_self_realtime(priority: Option<i32>) -> io::Result<()> {
    use heron_sys::sched::Policy;
    heron_sys::sched::set_current_thread_policy(priority.map_or(Policy::Other, Policy::RoundRobin))
}

/// Which cgroup interface limits CPU on this machine.
#[derive(Clone, Debug, PartialEq)]
pub enum CgroupFlavor {
    /// cgroup v1: the `cpu` hierarchy (and `cpuacct`, possibly the same
    /// mount) for the quota and the usage.
    V1 {
        cpu: PathBuf,
        cpuacct: Option<PathBuf>,
    },
    /// cgroup v2: one unified hierarchy with the `cpu` controller.
    V2 { root: PathBuf },
}

/// Finds the cgroup CPU controller from /proc/mounts: v1 `cpu` first (a
/// v2 hierarchy mounted beside it has no cpu controller then), else v2.
pub fn detect_cgroup() -> Option<CgroupFlavor> {
    let mounts = fs::read_to_string("/proc/mounts").ok()?;
    parse_mounts(&mounts, |p| {
        fs::read_to_string(p.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|w| w == "cpu"))
    })
}

fn parse_mounts(mounts: &str, v2_has_cpu: impl Fn(&Path) -> bool) -> Option<CgroupFlavor> {
    let mut cpu = None;
    let mut cpuacct = None;
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let opts: Vec<&str> = f[3].split(',').collect();
        match f[2] {
            "cgroup" => {
                if opts.contains(&"cpu") {
                    cpu = Some(PathBuf::from(f[1]));
                }
                if opts.contains(&"cpuacct") {
                    cpuacct = Some(PathBuf::from(f[1]));
                }
            }
            "cgroup2" if v2.is_none() => v2 = Some(PathBuf::from(f[1])),
            _ => {}
        }
    }
    if let Some(cpu) = cpu {
        return Some(CgroupFlavor::V1 { cpu, cpuacct });
    }
    v2.filter(|p| v2_has_cpu(p))
        .map(|root| CgroupFlavor::V2 { root })
}

/// A cgroup made for one server: a CPU quota and a CPU usage counter.
/// Removed on drop (once its processes have exited).
#[derive(Debug)]
pub struct Cgroup {
    pub flavor: CgroupFlavor,
    dirs: Vec<PathBuf>,
    period_us: u64,
    /// The quota is a real-time bandwidth (cgroup v1 `cpu.rt_runtime_us`)
    /// for servers run SCHED_RR, instead of a CFS quota.
    realtime: bool,
}

/// Whether cgroup v1 real-time group scheduling is available (the kernel
/// has CONFIG_RT_GROUP_SCHED).
pub fn rt_group_available(flavor: &CgroupFlavor) -> bool {
    matches!(flavor, CgroupFlavor::V1 { cpu, .. } if cpu.join("cpu.rt_runtime_us").exists())
}

impl Cgroup {
    pub fn create(
        flavor: &CgroupFlavor,
        name: &str,
        period_us: u64,
        realtime: bool,
    ) -> io::Result<Cgroup> {
        let dirs = match flavor {
            CgroupFlavor::V1 { cpu, cpuacct } => {
                let mut d = vec![cpu.join(name)];
                if let Some(a) = cpuacct
                    && a != cpu
                {
                    d.push(a.join(name));
                }
                d
            }
            CgroupFlavor::V2 { root } => {
                // Let children of the root use the cpu controller.
                let _ = fs::write(root.join("cgroup.subtree_control"), "+cpu");
                vec![root.join(name)]
            }
        };
        for d in &dirs {
            fs::create_dir_all(d)?;
        }
        let cg = Cgroup {
            flavor: flavor.clone(),
            dirs,
            period_us,
            realtime: realtime && rt_group_available(flavor),
        };
        cg.set_quota(None)?;
        Ok(cg)
    }

    /// Files to write a PID into to move that process into this group.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Limits the group to `share` of one CPU (0.4 = 40%), or lifts the
    /// limit with None.
    pub fn set_quota(&self, share: Option<f64>) -> io::Result<()> {
        let quota = share.map(|s| ((s * self.period_us as f64) as u64).max(1000));
        if self.realtime {
            let d = &self.dirs[0];
            // The group's real-time runtime per period; "no limit" is the
            // most the root allows (95% by default, kernel.sched_rt_*).
            let runtime = quota.unwrap_or(self.period_us * 95 / 100);
            let period = fs::read_to_string(d.join("cpu.rt_period_us")).unwrap_or_default();
            if period.trim() != self.period_us.to_string() {
                // Only while the group is empty: the runtime cannot drop to
                // 0 under running real-time tasks.
                fs::write(d.join("cpu.rt_runtime_us"), "0")?;
                fs::write(d.join("cpu.rt_period_us"), self.period_us.to_string())?;
            }
            fs::write(d.join("cpu.rt_runtime_us"), runtime.to_string())?;
            return Ok(());
        }
        match &self.flavor {
            CgroupFlavor::V1 { .. } => {
                let d = &self.dirs[0];
                // Lift the quota before changing the period, then set it.
                fs::write(d.join("cpu.cfs_quota_us"), "-1")?;
                fs::write(d.join("cpu.cfs_period_us"), self.period_us.to_string())?;
                if let Some(q) = quota {
                    fs::write(d.join("cpu.cfs_quota_us"), q.to_string())?;
                }
            }
            CgroupFlavor::V2 { .. } => {
                let q = quota.map_or("max".to_string(), |q| q.to_string());
                fs::write(
                    self.dirs[0].join("cpu.max"),
                    format!("{q} {}", self.period_us),
                )?;
            }
        }
        Ok(())
    }

    /// CPU time used by the group's processes so far, seconds (None if
    /// this kernel has no usage counter for the group).
    pub fn usage_seconds(&self) -> Option<f64> {
        match &self.flavor {
            CgroupFlavor::V1 { cpuacct, .. } => {
                cpuacct.as_ref()?;
                let d = self.dirs.last()?;
                let ns: f64 = fs::read_to_string(d.join("cpuacct.usage"))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                Some(ns / 1e9)
            }
            CgroupFlavor::V2 { .. } => {
                let stat = fs::read_to_string(self.dirs[0].join("cpu.stat")).ok()?;
                let us: f64 = stat
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))?
                    .trim()
                    .parse()
                    .ok()?;
                Some(us / 1e6)
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for d in &self.dirs {
            // Bounded: a group empties right after its processes exit.
            for _ in 0..50 {
                if fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// Stops a child that leads its own process group: SIGTERM to it, up to
/// 10 s for it to exit, then SIGKILL to the group until no member is left
/// (helpers it forked included; only processes this suite started).
pub fn stop_group(mut child: std::process::Child) {
    use heron_sys::process::{Signal, signal_group, signal_process};
    use std::time::{Duration, Instant};
    let pid = child.id();
    // Our own unreaped child, and then the group it leads.
    let _ = signal_process(pid, Signal::TERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..100 {
        let leader_alive = matches!(child.try_wait(), Ok(None));
        if group_members(pid).is_empty() && !leader_alive {
            break;
        }
        let _ = signal_group(pid, Signal::KILL);
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_v1_before_v2() {
        let m = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
                 cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                 cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n\
                 cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        assert_eq!(
            parse_mounts(m, |_| false),
            Some(CgroupFlavor::V1 {
                cpu: "/sys/fs/cgroup/cpu".into(),
                cpuacct: Some("/sys/fs/cgroup/cpuacct".into())
            })
        );
        let m2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(
            parse_mounts(m2, |_| true),
            Some(CgroupFlavor::V2 {
                root: "/sys/fs/cgroup".into()
            })
        );
        assert_eq!(parse_mounts(m2, |_| false), None);
        let combined = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n";
        assert!(matches!(
            parse_mounts(combined, |_| false),
            Some(CgroupFlavor::V1 {
                cpuacct: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn own_group_cpu_is_readable() {
        let pgid = heron_sys::process::process_group();
        assert!(group_members(pgid).contains(&std::process::id()));
        assert!(group_cpu_seconds(pgid) >= 0.0);
        assert!(group_runtime_seconds(pgid) > 0.0);
        assert!(group_memory_kib(pgid).0 > 0);
        // Alone in its group or not, this process's heap is anonymous
        // and part of the group's resident memory.
        let anon = group_anon_kib(pgid);
        assert!(anon > 0 && anon <= group_memory_kib(pgid).0, "{anon}");
    }

    #[test]
    fn busy_time_counts_this_threads_work() {
        let (thread0, machine0) = (thread_cpu_seconds(), machine_busy_seconds());
        let mut x = 0u64;
        while thread_cpu_seconds() - thread0 < 0.03 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(thread_cpu_seconds() > thread0);
        assert!(machine_busy_seconds() > machine0);
    }
}
