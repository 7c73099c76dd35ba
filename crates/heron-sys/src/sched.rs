//! How the kernel schedules the calling thread: its policy
//! (`sched_setscheduler(2)`), its nice value (`setpriority(2)`) and its
//! timer slack (`prctl(PR_SET_TIMERSLACK)`). Linux schedules threads one
//! by one, so each call changes one thread: the calling thread (and the
//! threads it starts afterwards, which inherit it), or one named by its
//! [`ThreadId`].

use std::io;
use std::num::NonZeroU64;
use std::time::Duration;

/// A scheduling policy (`sched(7)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// `SCHED_OTHER`, the normal time-sharing policy.
    Other,
    /// `SCHED_BATCH`.
    Batch,
    /// `SCHED_IDLE`: runs only when nothing else on the core wants to.
    Idle,
    /// `SCHED_FIFO` at a real-time priority (1 to 99).
    Fifo(i32),
    /// `SCHED_RR` at a real-time priority (1 to 99).
    RoundRobin(i32),
}

impl Policy {
    fn to_raw(self) -> (libc::c_int, libc::c_int) {
        match self {
            Policy::Other => (libc::SCHED_OTHER, 0),
            Policy::Batch => (libc::SCHED_BATCH, 0),
            Policy::Idle => (libc::SCHED_IDLE, 0),
            Policy::Fifo(p) => (libc::SCHED_FIFO, p),
            Policy::RoundRobin(p) => (libc::SCHED_RR, p),
        }
    }
}

/// A thread of this process, as the kernel numbers it (`gettid(2)`), so
/// that one thread can change how another is scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadId(rustix::thread::Pid);

impl ThreadId {
    /// The thread with kernel ID `tid` (as `/proc/self/task` lists them);
    /// None for an ID no thread can have (zero or negative).
    pub fn from_raw(tid: i32) -> Option<ThreadId> {
        // rustix asserts the ID is not negative.
        (tid > 0)
            .then(|| rustix::thread::Pid::from_raw(tid))
            .flatten()
            .map(ThreadId)
    }
}

/// The calling thread's kernel thread ID.
pub fn current_thread_id() -> ThreadId {
    ThreadId(rustix::thread::gettid())
}

/// Moves the calling thread to `policy`.
pub fn set_current_thread_policy(policy: Policy) -> io::Result<()> {
    set_policy(0, policy)
}

/// Moves `thread` to `policy` (a thread of this process; raising a
/// policy needs the same rights as for the calling thread).
pub fn set_thread_policy(thread: ThreadId, policy: Policy) -> io::Result<()> {
    set_policy(thread.0.as_raw_nonzero().get(), policy)
}

/// `sched_setscheduler` for thread `tid` (0: the calling thread).
fn set_policy(tid: libc::pid_t, policy: Policy) -> io::Result<()> {
    let (raw, priority) = policy.to_raw();
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain values and a pointer to a live, initialised
    // sched_param that the kernel only reads; `tid` is 0 (the calling
    // thread) or a thread ID, which the kernel checks (ESRCH if gone).
    let rc = unsafe { libc::sched_setscheduler(tid, raw, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's policy.
pub fn current_thread_policy() -> io::Result<Policy> {
    policy_of(0)
}

/// `thread`'s policy.
pub fn thread_policy(thread: ThreadId) -> io::Result<Policy> {
    policy_of(thread.0.as_raw_nonzero().get())
}

/// `sched_getscheduler` for thread `tid` (0: the calling thread).
fn policy_of(tid: libc::pid_t) -> io::Result<Policy> {
    // SAFETY: `tid` is 0 (the calling thread) or a thread ID, which the
    // kernel checks (ESRCH if gone); no pointers.
    let raw = unsafe { libc::sched_getscheduler(tid) };
    let priority = || {
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: the kernel writes one sched_param into a live value;
        // `tid` as above.
        match unsafe { libc::sched_getparam(tid, &mut param) } {
            0 => Ok(param.sched_priority),
            _ => Err(io::Error::last_os_error()),
        }
    };
    match raw {
        libc::SCHED_OTHER => Ok(Policy::Other),
        libc::SCHED_BATCH => Ok(Policy::Batch),
        libc::SCHED_IDLE => Ok(Policy::Idle),
        libc::SCHED_FIFO => Ok(Policy::Fifo(priority()?)),
        libc::SCHED_RR => Ok(Policy::RoundRobin(priority()?)),
        -1 => Err(io::Error::last_os_error()),
        other => Err(io::Error::other(format!("unknown policy {other}"))),
    }
}

/// The calling thread's nice value (-20 to 19).
pub fn current_thread_nice() -> io::Result<i32> {
    Ok(rustix::process::getpriority_process(None)?)
}

/// Sets the calling thread's nice value (-20 to 19; lowering it needs
/// `CAP_SYS_NICE`).
pub fn set_current_thread_nice(nice: i32) -> io::Result<()> {
    Ok(rustix::process::setpriority_process(None, nice)?)
}

/// `thread`'s nice value (on Linux a nice value belongs to each thread).
pub fn thread_nice(thread: ThreadId) -> io::Result<i32> {
    Ok(rustix::process::getpriority_process(Some(thread.0))?)
}

/// Sets `thread`'s nice value, as [`set_current_thread_nice`] does for
/// the calling thread.
pub fn set_thread_nice(thread: ThreadId, nice: i32) -> io::Result<()> {
    Ok(rustix::process::setpriority_process(Some(thread.0), nice)?)
}

/// Sets how late the kernel may end the calling thread's sleeps, to
/// gather wake-ups (the default is 50 µs). A zero slack means the
/// thread's default.
pub fn set_timer_slack(slack: Duration) -> io::Result<()> {
    let nanos = u64::try_from(slack.as_nanos()).unwrap_or(u64::MAX);
    Ok(rustix::thread::set_current_timer_slack(NonZeroU64::new(
        nanos,
    ))?)
}

/// The calling thread's timer slack.
pub fn timer_slack() -> io::Result<Duration> {
    Ok(Duration::from_nanos(rustix::thread::current_timer_slack()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread of its own, so the test's changes die with it.
    fn on_own_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn policy_round_trips_on_one_thread_only() {
        let before = current_thread_policy().unwrap();
        let lowered = on_own_thread(|| {
            set_current_thread_policy(Policy::Idle).unwrap();
            current_thread_policy().unwrap()
        });
        assert_eq!(lowered, Policy::Idle);
        assert_eq!(current_thread_policy().unwrap(), before);
    }

    #[test]
    fn a_real_time_policy_keeps_its_priority_where_allowed() {
        let got = on_own_thread(|| {
            set_current_thread_policy(Policy::RoundRobin(3))
                .map(|()| current_thread_policy().unwrap())
        });
        match got {
            Ok(policy) => assert_eq!(policy, Policy::RoundRobin(3)),
            // Not root: the kernel refuses, and says so.
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied),
        }
        assert!(on_own_thread(|| set_current_thread_policy(Policy::RoundRobin(1000))).is_err());
    }

    #[test]
    fn nice_round_trips() {
        let nice = on_own_thread(|| {
            set_current_thread_nice(15).unwrap();
            current_thread_nice().unwrap()
        });
        assert_eq!(nice, 15);
    }

    #[test]
    fn one_thread_changes_how_another_is_scheduled() {
        let (ready, told) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            set_current_thread_policy(Policy::Idle).unwrap();
            ready.send(current_thread_id()).unwrap();
            released.recv().unwrap();
            (
                current_thread_policy().unwrap(),
                current_thread_nice().unwrap(),
            )
        });
        let thread = told.recv().unwrap();
        assert_ne!(thread, current_thread_id());
        assert_eq!(thread_policy(thread).unwrap(), Policy::Idle);
        set_thread_policy(thread, Policy::Other).unwrap();
        assert_eq!(thread_policy(thread).unwrap(), Policy::Other);
        let nicer = thread_nice(thread).unwrap().max(12);
        set_thread_nice(thread, nicer).unwrap();
        assert_eq!(thread_nice(thread).unwrap(), nicer);
        release.send(()).unwrap();
        assert_eq!(other.join().unwrap(), (Policy::Other, nicer));
        // This thread kept its own.
        assert_ne!(current_thread_policy().unwrap(), Policy::Idle);
    }

    #[test]
    fn a_thread_that_is_gone_is_an_error() {
        let gone = std::thread::spawn(current_thread_id).join().unwrap();
        // Thread IDs are reused only after the whole PID space wraps.
        assert!(set_thread_policy(gone, Policy::Other).is_err());
        assert!(thread_policy(gone).is_err());
        assert!(thread_nice(gone).is_err());
        assert_eq!(ThreadId::from_raw(0), None);
        assert_eq!(ThreadId::from_raw(-1), None);
    }

    #[test]
    fn timer_slack_is_set_and_read_back() {
        let (set, reset) = on_own_thread(|| {
            set_timer_slack(Duration::from_micros(1)).unwrap();
            let set = timer_slack().unwrap();
            set_timer_slack(Duration::from_micros(7)).unwrap();
            (set, timer_slack().unwrap())
        });
        assert_eq!(set, Duration::from_micros(1));
        assert_eq!(reset, Duration::from_micros(7));
    }
}
