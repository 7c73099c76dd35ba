//! Work that must not slow down answering: reloads run on a thread of
//! their own that gets the CPU only when the query workers leave it idle.
//!
//! Re-reading a large zone file takes seconds of CPU. On a server whose
//! workers share cores with it (or are pinned to the same one), an equal
//! share would halve the query rate for that time, and even a lower
//! niceness lets it hold the core for milliseconds at a time, which queues
//! queries (measured with the suite's reload workload: p99 latency 2.7 ms
//! at nice 10, 42 us under `SCHED_IDLE`, the same as with no reload). The
//! price: on a core the workers keep fully busy, a reload waits. It waits
//! [`IDLE_PATIENCE`] at most: then it goes on at housekeeping priority
//! (nice 10), so a server kept busy (a flood, or other work on the
//! machine) still takes a zone change, and the catalog's writer lock that
//! a reload holds is not held for as long as the load lasts.

use std::time::Duration;

use heron_sys::sched::{self, Policy, ThreadId};

/// Moves the calling thread to `SCHED_IDLE`: it runs when nothing else on
/// its core wants to, and a real-time policy it may have inherited is
/// dropped. Only this thread changes; returns false if the kernel refused.
pub fn lower_this_thread() -> bool {
    sched::set_current_thread_policy(Policy::Idle).is_ok()
}

/// How nice [`to_housekeeping_priority`] makes a thread: on a core the
/// workers keep busy it still gets about a tenth of the time.
const HOUSEKEEPING_NICE: i32 = 10;

/// Moves the calling thread to the normal policy (`SCHED_OTHER`) at nice
/// 10, for housekeeping that must finish on a busy server but should not
/// make queries wait: a real-time policy inherited from the process (an
/// operator's `chrt`) would let it hold a worker's core for a whole
/// time slice (100 ms under `SCHED_RR`). A server the operator already
/// runs nicer than that keeps its niceness: this only ever lowers. Only
/// this thread changes; returns false if the kernel refused either step.
pub fn to_housekeeping_priority() -> bool {
    sched::set_current_thread_policy(Policy::Other).is_ok()
        && (sched::current_thread_nice().is_ok_and(|nice| nice >= HOUSEKEEPING_NICE)
            || sched::set_current_thread_nice(HOUSEKEEPING_NICE).is_ok())
}

/// Moves `thread` to housekeeping priority, as
/// [`to_housekeeping_priority`] does for the calling thread.
fn raise_to_housekeeping(thread: ThreadId) -> bool {
    sched::set_thread_policy(thread, Policy::Other).is_ok()
        && (sched::thread_nice(thread).is_ok_and(|nice| nice >= HOUSEKEEPING_NICE)
            || sched::set_thread_nice(thread, HOUSEKEEPING_NICE).is_ok())
}

/// What [`raise_idle_threads_named`] did.
#[derive(Default)]
struct Raised {
    raised: usize,
    /// Threads the kernel would not raise: leaving `SCHED_IDLE` needs
    /// `CAP_SYS_NICE` (or a `RLIMIT_NICE` that allows nice 10), which a
    /// server that gave its privileges up (`user`) no longer has.
    refused: usize,
}

/// Raises to housekeeping priority every thread of this process named
/// `name` that is under `SCHED_IDLE`: a background thread and the
/// threads it started (a reload reads zones on several), which inherit
/// its name and its policy.
fn raise_idle_threads_named(name: &str) -> Raised {
    // The kernel keeps 15 bytes of a thread's name.
    let name = &name.as_bytes()[..name.len().min(15)];
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Raised::default();
    };
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let comm = std::fs::read(task.path().join("comm")).ok()?;
            let tid = task.file_name().to_str()?.parse().ok()?;
            (comm.trim_ascii_end() == name).then_some(ThreadId::from_raw(tid)?)
        })
        .filter(|&thread| sched::thread_policy(thread).is_ok_and(|p| p == Policy::Idle))
        .fold(Raised::default(), |mut done, thread| {
            match raise_to_housekeeping(thread) {
                true => done.raised += 1,
                false => done.refused += 1,
            }
            done
        })
}

/// How long background work runs under `SCHED_IDLE` before it is raised
/// to housekeeping priority. Reloads of ordinary zones take milliseconds
/// and large ones a few seconds of CPU: past this, the cores have been
/// kept busy and idle time may not come at all.
pub const IDLE_PATIENCE: Duration = Duration::from_secs(5);

/// After the first raise, how often threads the work started since (still
/// idle) are looked for.
const RAISE_AGAIN_EVERY: Duration = Duration::from_secs(1);

/// Runs `work` on a new thread named `name` at background priority and
/// waits for it without blocking the async runtime; past
/// [`IDLE_PATIENCE`] the thread, and those it started, go on at
/// housekeeping priority.
pub async fn run<T: Send + 'static>(name: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    run_with_patience(name, IDLE_PATIENCE, work).await
}

/// [`run`], raising the threads after `patience`. `name` must be the
/// name of no other thread of the process.
async fn run_with_patience<T: Send + 'static>(
    name: &str,
    patience: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, mut result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if !lower_this_thread() {
                tracing::debug!("background thread keeps its CPU priority");
            }
            let _ = done.send(work());
        })
        .expect("a thread for background work");
    let (mut wait, mut said_raised, mut said_refused) = (patience, false, false);
    loop {
        if let Ok(finished) = tokio::time::timeout(wait, &mut result).await {
            return finished.expect("background work finished");
        }
        let done = raise_idle_threads_named(name);
        if done.raised > 0 && !said_raised {
            tracing::info!(
                "{name}: no idle CPU for {} s; going on at housekeeping priority (nice {HOUSEKEEPING_NICE})",
                patience.as_secs_f64()
            );
            said_raised = true;
        }
        if done.refused > 0 && !said_refused {
            tracing::warn!(
                "{name}: no idle CPU for {} s, and the kernel refused to raise it (no CAP_SYS_NICE, \
                 as after dropping privileges): it waits for idle CPU",
                patience.as_secs_f64()
            );
            said_refused = true;
        }
        wait = RAISE_AGAIN_EVERY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_of_this_thread() -> Policy {
        sched::current_thread_policy().unwrap()
    }

    #[test]
    fn only_the_background_thread_is_lowered() {
        let before = policy_of_this_thread();
        let lowered = std::thread::spawn(|| {
            assert!(lower_this_thread());
            policy_of_this_thread()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, Policy::Idle);
        assert_eq!(policy_of_this_thread(), before);
    }

    fn nice_of_this_thread() -> i32 {
        sched::current_thread_nice().unwrap()
    }

    /// Whatever niceness the tests run at (`nice -n 19 cargo test`): the
    /// thread starts from nice 0 where it may (root) and from what it
    /// inherited otherwise, and ends at nice 10 or nicer.
    #[test]
    fn housekeeping_drops_a_real_time_policy_for_nice_10() {
        let before = (policy_of_this_thread(), nice_of_this_thread());
        let (started, lowered) = std::thread::spawn(|| {
            // Where this may raise itself (root), start from nice 0 and
            // SCHED_RR, as a server run under `chrt -r` does.
            let _ = sched::set_current_thread_nice(0);
            let _ = sched::set_current_thread_policy(Policy::RoundRobin(1));
            let started = nice_of_this_thread();
            assert!(to_housekeeping_priority());
            (started, (policy_of_this_thread(), nice_of_this_thread()))
        })
        .join()
        .unwrap();
        let expected = started.max(HOUSEKEEPING_NICE);
        assert_eq!(lowered, (Policy::Other, expected), "from nice {started}");
        if heron_sys::process::is_root() {
            assert_eq!(started, 0, "root may start from nice 0");
        }
        assert_eq!((policy_of_this_thread(), nice_of_this_thread()), before);
    }

    #[test]
    fn housekeeping_never_raises_a_nicer_thread() {
        let (nicer, nice) = std::thread::spawn(|| {
            // Nice 15, or the caller's if nicer (only root may lower it).
            let nicer = nice_of_this_thread().max(15);
            sched::set_current_thread_nice(nicer).unwrap();
            assert!(to_housekeeping_priority());
            (nicer, nice_of_this_thread())
        })
        .join()
        .unwrap();
        assert_eq!(nice, nicer);
    }

    #[tokio::test]
    async fn work_runs_and_its_result_comes_back() {
        assert_eq!(run("test", policy_of_this_thread).await, Policy::Idle);
        assert_eq!(run("test", || 6 * 7).await, 42);
    }

    /// Waits (bounded) until this thread is no longer idle; its policy
    /// and nice value then.
    fn once_raised() -> (Policy, i32) {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while policy_of_this_thread() == Policy::Idle && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        (policy_of_this_thread(), nice_of_this_thread())
    }

    /// Work still running past its patience (here it waits for that
    /// itself, bounded) finds itself, and the threads it started, at
    /// housekeeping priority.
    #[tokio::test]
    async fn work_past_its_patience_goes_on_at_housekeeping_priority() {
        let patience = Duration::from_millis(50);
        let (own, started) = run_with_patience("bg-past", patience, || {
            std::thread::scope(|scope| {
                let child = scope.spawn(once_raised);
                (once_raised(), child.join().unwrap())
            })
        })
        .await;
        for (policy, nice) in [own, started] {
            assert_eq!(policy, Policy::Other);
            assert!(nice >= HOUSEKEEPING_NICE, "nice {nice}");
        }
    }

    #[tokio::test]
    async fn work_done_within_its_patience_ran_idle_throughout() {
        let policy = run_with_patience("bg-within", Duration::from_secs(60), policy_of_this_thread);
        assert_eq!(policy.await, Policy::Idle);
    }

    #[test]
    fn only_idle_threads_of_the_name_are_raised() {
        let (ready, told) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = std::sync::Arc::new(std::sync::Mutex::new(released));
        let spawn = |name: &str, idle: bool| {
            let (ready, released) = (ready.clone(), released.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    if idle {
                        assert!(lower_this_thread());
                    }
                    ready.send(()).unwrap();
                    let _ = released.lock().unwrap().recv();
                    policy_of_this_thread()
                })
                .unwrap()
        };
        let idle = spawn("bg-only", true);
        let other_name = spawn("bg-other", true);
        let not_idle = spawn("bg-only", false);
        (0..3).for_each(|_| told.recv().unwrap());
        let done = raise_idle_threads_named("bg-only");
        assert_eq!((done.raised, done.refused), (1, 0));
        (0..3).for_each(|_| release.send(()).unwrap());
        assert_eq!(idle.join().unwrap(), Policy::Other);
        assert_eq!(other_name.join().unwrap(), Policy::Idle);
        assert_ne!(not_idle.join().unwrap(), Policy::Idle);
    }
}
