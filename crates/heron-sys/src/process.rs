//! Processes: signals to children and from the outside, resource limits,
//! identity, network namespaces and the kernel's clock tick.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use rustix::process::{Pid, Resource, Rlimit};

pub use rustix::process::Signal;

fn pid(raw: u32) -> io::Result<Pid> {
    i32::try_from(raw)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no process {raw}")))
}

/// Sends `signal` to process `pid`.
pub fn signal_process(target: u32, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process(pid(target)?, signal)?)
}

/// Sends `signal` to every process of the group `pgid` leads.
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process_group(pid(pgid)?, signal)?)
}

/// The process group of the calling process.
pub fn process_group() -> u32 {
    rustix::process::getpgrp().as_raw_nonzero().get() as u32
}

/// Whether the process runs as root (effective user 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The flag [`set_on_termination`] raises; null until it is called.
static TERMINATION_FLAG: AtomicPtr<AtomicBool> = AtomicPtr::new(ptr::null_mut());

extern "C" fn raise_termination_flag(_: libc::c_int) {
    let flag = TERMINATION_FLAG.load(Ordering::Relaxed);
    // SAFETY: the pointer is null or comes from a `&'static AtomicBool`
    // (see `set_on_termination`), so it is valid for the program's life;
    // an atomic store is async-signal-safe.
    if let Some(flag) = unsafe { flag.as_ref() } {
        flag.store(true, Ordering::Relaxed);
    }
}

/// From now on SIGTERM and SIGINT set `flag` instead of ending the
/// process, for loops that stop cleanly. A later call moves both signals
/// to its own flag.
pub fn set_on_termination(flag: &'static AtomicBool) -> io::Result<()> {
    TERMINATION_FLAG.store(ptr::from_ref(flag).cast_mut(), Ordering::Relaxed);
    let handler = raise_termination_flag as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler is an `extern "C" fn(c_int)` that lives for
        // the program's life and does only async-signal-safe work (an
        // atomic load and store).
        if unsafe { libc::signal(signal, handler) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Raised by a SIGHUP that came while [`hold_hangups`] held them.
static HANGUP_HELD: AtomicBool = AtomicBool::new(false);

/// Set by [`release_hangups`]: SIGHUPs are no longer noted.
static HANGUPS_RELEASED: AtomicBool = AtomicBool::new(false);

extern "C" fn note_hangup(_: libc::c_int) {
    if !HANGUPS_RELEASED.load(Ordering::Relaxed) {
        HANGUP_HELD.store(true, Ordering::Relaxed);
    }
}

/// SIGHUPs from now on are no longer noted by the handler
/// [`hold_hangups`] set (one the caller's own handler, which chains to
/// it, takes then). Without this a SIGHUP after the caller's handler was
/// set was both taken by it and noted as held: two reloads for one.
pub fn release_hangups() {
    HANGUPS_RELEASED.store(true, Ordering::Relaxed);
}

/// From now on a SIGHUP is noted instead of ending the process (its
/// default), until a handler of the caller's own replaces this one: a
/// server loading its zones is not killed by a reload asked too early
/// (NSD and Knot survive it), and [`hangup_held`] says one came.
pub fn hold_hangups() -> io::Result<()> {
    let handler = note_hangup as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler is an `extern "C" fn(c_int)` that lives for the
    // program's life and does only async-signal-safe work (an atomic
    // store to a static).
    if unsafe { libc::signal(libc::SIGHUP, handler) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a SIGHUP came while [`hold_hangups`] held them; clears it.
pub fn hangup_held() -> bool {
    HANGUP_HELD.swap(false, Ordering::Relaxed)
}

/// From now on a write past the file-size limit (`ulimit -f`, systemd
/// `LimitFSIZE=`) fails with `EFBIG`, which the writer handles as a full
/// disk, instead of the kernel's SIGXFSZ ending the process.
pub fn survive_file_size_limit() -> io::Result<()> {
    // SAFETY: SIG_IGN is no handler to run; setting a disposition is
    // sound at any time.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The soft and hard limits on open files of this process.
pub fn open_files_limit() -> (Option<u64>, Option<u64>) {
    limit(Resource::Nofile)
}

/// The soft and hard limits on locked memory, in bytes (None: unlimited).
pub fn locked_memory_limit() -> (Option<u64>, Option<u64>) {
    limit(Resource::Memlock)
}

/// Sets the soft and hard limits on open files (None: unlimited).
pub fn set_open_files_limit(soft: Option<u64>, hard: Option<u64>) -> io::Result<()> {
    set_limit(Resource::Nofile, soft, hard)
}

/// The soft and hard limits on `resource` (None: unlimited).
fn limit(resource: Resource) -> (Option<u64>, Option<u64>) {
    let limit = rustix::process::getrlimit(resource);
    (limit.current, limit.maximum)
}

fn set_limit(resource: Resource, soft: Option<u64>, hard: Option<u64>) -> io::Result<()> {
    let limit = Rlimit {
        current: soft,
        maximum: hard,
    };
    Ok(rustix::process::setrlimit(resource, limit)?)
}

/// The soft and hard `RLIMIT_NICE` of this process, in the kernel's form:
/// a limit `n` lets an unprivileged thread lower its nice value down to
/// `20 - n` (0, the usual default, allows no lowering at all, and no
/// leaving `SCHED_IDLE`). None: unlimited.
pub fn nice_limit() -> (Option<u64>, Option<u64>) {
    limit(Resource::Nice)
}

/// Sets the soft and hard `RLIMIT_NICE` (raising the hard limit needs
/// `CAP_SYS_RESOURCE`; raising the soft one up to the hard one does not).
pub fn set_nice_limit(soft: Option<u64>, hard: Option<u64>) -> io::Result<()> {
    set_limit(Resource::Nice, soft, hard)
}

/// Whether `error` says this process reached its limit on open files
/// (`EMFILE`), as opposed to a fault of the other side.
pub fn is_open_files_limit(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::EMFILE)
}

/// Moves the calling thread, and the threads and processes it starts from
/// then on, into a new network namespace of its own. Needs root.
pub fn unshare_network_namespace() -> io::Result<()> {
    // SAFETY: rustix marks unshare unsafe for CLONE_FILES, which would let
    // threads see different descriptor tables; a new network namespace
    // changes which network new sockets see, no memory or descriptor.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }?;
    Ok(())
}

/// Moves the calling thread into the network namespace `ip netns add
/// NAME` made (`/run/netns/NAME`): sockets it opens from then on are
/// that namespace's. Needs root.
pub fn enter_network_namespace(name: &str) -> io::Result<()> {
    let file = std::fs::File::open(std::path::Path::new("/run/netns").join(name))?;
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&file),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )?;
    Ok(())
}

/// Clock ticks per second of the times in /proc/PID/stat.
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    }

    #[test]
    fn the_nice_limit_reads_back_as_set() {
        // Other tests of this process run beside this one: the limits are
        // set to what they are, and past the hard limit only where that is
        // refused (no CAP_SYS_RESOURCE), so nothing they see changes.
        let (soft, hard) = nice_limit();
        set_nice_limit(soft, hard).unwrap();
        assert_eq!(nice_limit(), (soft, hard));
        if let Some(hard) = hard.filter(|&h| h < 40) {
            let past = set_nice_limit(Some(hard + 1), Some(hard + 1));
            match past {
                Err(_) => assert_eq!(nice_limit(), (soft, Some(hard))),
                Ok(()) => set_nice_limit(soft, Some(hard)).unwrap(),
            }
        }
    }

    #[test]
    fn a_signal_ends_a_child() {
        let mut child = sleeper();
        signal_process(child.id(), Signal::TERM).unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_signal_to_a_group_reaches_its_members() {
        use std::os::unix::process::CommandExt;
        let mut leader = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        signal_group(leader.id(), Signal::KILL).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(leader.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(signal_process(0, Signal::TERM).is_err(), "0 is no process");
    }

    #[test]
    fn termination_signals_raise_the_flag() {
        static STOP: AtomicBool = AtomicBool::new(false);
        set_on_termination(&STOP).unwrap();
        // The test harness's own group is not ours to signal: raise it on
        // this process alone, and only with the handler in place.
        signal_process(std::process::id(), Signal::INT).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !STOP.load(Ordering::Relaxed) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(STOP.load(Ordering::Relaxed));
    }

    #[test]
    fn a_held_hangup_is_noted_not_fatal() {
        hold_hangups().unwrap();
        assert!(!hangup_held());
        signal_process(std::process::id(), Signal::HUP).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !HANGUP_HELD.load(Ordering::Relaxed) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(hangup_held(), "noted");
        assert!(!hangup_held(), "and cleared");
        // Released: a SIGHUP is no longer noted (nor fatal).
        release_hangups();
        signal_process(std::process::id(), Signal::HUP).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(!hangup_held(), "not noted once released");
    }

    /// Ignored, SIGXFSZ sent to the process leaves it running.
    #[test]
    fn a_file_size_signal_is_survived() {
        survive_file_size_limit().unwrap();
        signal_process(std::process::id(), Signal::XFSZ).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }

    #[test]
    fn the_open_files_limit_round_trips() {
        let (soft, hard) = open_files_limit();
        let lower = soft.map_or(1024, |s| s.min(1024) - 1);
        set_open_files_limit(Some(lower), hard).unwrap();
        assert_eq!(open_files_limit(), (Some(lower), hard));
        set_open_files_limit(soft, hard).unwrap();
        assert_eq!(open_files_limit(), (soft, hard));
        if let Some(hard) = hard {
            // The soft limit may not pass the hard one.
            assert!(set_open_files_limit(Some(hard + 1), Some(hard)).is_err());
        }
    }

    #[test]
    fn running_out_of_descriptors_is_recognised() {
        // The limit is the whole process's: lowering it here would starve
        // the tests running beside this one, so a copy of this test binary
        // does it, alone.
        const CHILD: &str = "HERON_SYS_OUT_OF_DESCRIPTORS";
        if std::env::var_os(CHILD).is_none() {
            let out = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "process::tests::running_out_of_descriptors_is_recognised",
                ])
                .args(["--nocapture", "--test-threads=1"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{text}");
            assert!(text.contains("1 passed"), "{text}");
            return;
        }
        let (_, hard) = open_files_limit();
        let opened = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        set_open_files_limit(Some(opened + 4), hard).unwrap();
        let mut files = Vec::new();
        let err = loop {
            match std::fs::File::open("/dev/null") {
                Ok(f) if files.len() < 100 => files.push(f),
                Ok(_) => panic!("the limit did not apply"),
                Err(e) => break e,
            }
        };
        assert!(is_open_files_limit(&err), "{err}");
        assert!(!is_open_files_limit(&io::Error::from(
            io::ErrorKind::NotFound
        )));
    }

    #[test]
    fn identity_and_clock_are_plausible() {
        assert!(clock_ticks_per_second() > 0);
        let group = process_group();
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after_name = stat.rsplit_once(')').unwrap().1;
        let pgrp: u32 = after_name
            .split_whitespace()
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(group, pgrp);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let euid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap();
        assert_eq!(is_root(), euid == "0");
    }

    #[test]
    fn a_new_network_namespace_has_its_own_loopback() {
        if !is_root() {
            eprintln!("not root: no namespace to make");
            return;
        }
        let inside = std::thread::spawn(|| {
            unshare_network_namespace().unwrap();
            // Loopback starts down in a new namespace.
            std::fs::read_to_string("/proc/thread-self/net/dev").unwrap()
        })
        .join()
        .unwrap();
        let interfaces: Vec<&str> = inside
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(str::trim)
            .collect();
        assert_eq!(interfaces, ["lo"]);
    }
}
