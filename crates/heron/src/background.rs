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
//!
//! Leaving `SCHED_IDLE` needs `CAP_SYS_NICE`, or a `RLIMIT_NICE` that
//! allows the thread's nice value. A background thread takes nice 10
//! before it goes idle, so a limit of 10 suffices: [`allow_the_raise`]
//! sets it before privileges are dropped, the shipped systemd unit sets
//! `LimitNICE=+10`. Where neither holds (an unprivileged `user` under a
//! limit of 0), work that could never be raised does not go idle at all:
//! it runs at housekeeping priority from the start, so a reload under
//! load still finishes in bounded time.

use std::time::Duration;

use heron_sys::sched::{self, Policy, ThreadId};

/// Moves the calling thread to `SCHED_IDLE`: it runs when nothing else on
/// its core wants to, and a real-time policy it may have inherited is
/// dropped. It takes nice 10 first (unless nicer already): the kernel
/// lets a thread leave `SCHED_IDLE` at the nice value it holds, so from
/// 10 a `RLIMIT_NICE` of 10 allows the raise where from 0 it would take
/// 20. Only this thread changes; returns false if the kernel refused.
pub fn lower_this_thread() -> bool {
    let _ = at_least_housekeeping_nice();
    sched::set_current_thread_policy(Policy::Idle).is_ok()
}

/// Makes the calling thread nice 10, or leaves it nicer.
fn at_least_housekeeping_nice() -> bool {
    sched::current_thread_nice().is_ok_and(|nice| nice >= HOUSEKEEPING_NICE)
        || sched::set_current_thread_nice(HOUSEKEEPING_NICE).is_ok()
}

/// The `RLIMIT_NICE` that lets a thread at nice 10 leave `SCHED_IDLE`
/// without `CAP_SYS_NICE` (the kernel allows nice `20 - limit`).
const NICE_LIMIT_FOR_THE_RAISE: u64 = (20 - HOUSEKEEPING_NICE) as u64;

/// Raises this process's `RLIMIT_NICE` to 10 where it is lower, so that
/// background work can still be raised out of `SCHED_IDLE` once
/// privileges are dropped (`[server] user`). The soft limit may rise to
/// the hard one freely; a hard limit below 10 needs `CAP_SYS_RESOURCE`
/// (root has it, a container's root may not). Returns whether the limit
/// now allows the raise.
pub fn allow_the_raise() -> bool {
    let enough = |limit: Option<u64>| limit.is_none_or(|l| l >= NICE_LIMIT_FOR_THE_RAISE);
    let (soft, hard) = heron_sys::process::nice_limit();
    if enough(soft) {
        return true;
    }
    let hard = if enough(hard) {
        hard
    } else {
        Some(NICE_LIMIT_FOR_THE_RAISE)
    };
    heron_sys::process::set_nice_limit(Some(NICE_LIMIT_FOR_THE_RAISE), hard).is_ok()
}

/// Whether a thread of this process that goes `SCHED_IDLE` (as
/// [`lower_this_thread`] does) could be raised out of it again: asked of
/// the kernel on a thread that tries and then ends, since going idle
/// cannot be undone where the answer is no.
fn idle_can_be_left() -> bool {
    std::thread::Builder::new()
        .name("idle-probe".into())
        .spawn(|| lower_this_thread() && sched::set_current_thread_policy(Policy::Other).is_ok())
        .is_ok_and(|probe| probe.join().unwrap_or(false))
}

/// Whether the one line saying that background work cannot go idle was
/// written (it holds for the process's life).
static SAID_NOT_IDLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Where background work starts: idle when it could be raised later, else
/// at housekeeping priority, said once.
fn lower_for_background(name: &str) {
    if idle_can_be_left() {
        if !lower_this_thread() {
            tracing::debug!("background thread keeps its CPU priority");
        }
        return;
    }
    if !to_housekeeping_priority() {
        tracing::debug!("background thread keeps its CPU priority");
    }
    if !SAID_NOT_IDLE.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(
            "{name} and other background work run at nice {HOUSEKEEPING_NICE}, not only on idle CPU: \
             the kernel would not raise them out of SCHED_IDLE under load (no CAP_SYS_NICE, \
             RLIMIT_NICE below {NICE_LIMIT_FOR_THE_RAISE}; systemd: LimitNICE=+{HOUSEKEEPING_NICE})"
        );
    }
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
    sched::set_current_thread_policy(Policy::Other).is_ok() && at_least_housekeeping_nice()
}

/// Moves `thread` to housekeeping priority, as
/// [`to_housekeeping_priority`] does for the calling thread.
fn raise_to_housekeeping(thread: ThreadId) -> bool {
    // Nice first: a thread lowered by `lower_this_thread` is at 10 already,
    // and one that is not may still be made nicer without privilege, which
    // the policy change then needs less of.
    let nice = sched::thread_nice(thread).is_ok_and(|nice| nice >= HOUSEKEEPING_NICE)
        || sched::set_thread_nice(thread, HOUSEKEEPING_NICE).is_ok();
    nice && sched::set_thread_policy(thread, Policy::Other).is_ok()
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
        .spawn({
            let name = name.to_owned();
            move || {
                lower_for_background(&name);
                let _ = done.send(work());
            }
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

    /// From nice 10 a `RLIMIT_NICE` of 10 lets the thread leave idle again.
    #[test]
    fn a_thread_goes_idle_at_nice_10_or_nicer() {
        let (policy, nice) = std::thread::spawn(|| {
            assert!(lower_this_thread());
            (policy_of_this_thread(), nice_of_this_thread())
        })
        .join()
        .unwrap();
        assert_eq!(policy, Policy::Idle);
        assert!(nice >= HOUSEKEEPING_NICE, "nice {nice}");
    }

    /// The probe answers for the process as it is, and leaves no thread
    /// of the calling one changed.
    #[test]
    fn idle_can_be_left_where_the_kernel_allows_the_raise() {
        let before = (policy_of_this_thread(), nice_of_this_thread());
        let (soft, _) = heron_sys::process::nice_limit();
        let allowed_by_limit = soft.is_none_or(|l| l >= NICE_LIMIT_FOR_THE_RAISE);
        let can = idle_can_be_left();
        if allowed_by_limit || heron_sys::process::is_root() {
            assert!(can, "limit {soft:?}");
        }
        assert_eq!((policy_of_this_thread(), nice_of_this_thread()), before);
    }

    #[test]
    fn allowing_the_raise_says_whether_the_limit_now_allows_it() {
        let allowed = allow_the_raise();
        let (soft, _) = heron_sys::process::nice_limit();
        assert_eq!(allowed, soft.is_none_or(|l| l >= NICE_LIMIT_FOR_THE_RAISE));
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

    /// Where background work starts here: idle, unless this process
    /// could never raise it again (not root, `RLIMIT_NICE` below 10).
    fn background_start() -> Policy {
        match idle_can_be_left() {
            true => Policy::Idle,
            false => Policy::Other,
        }
    }

    #[tokio::test]
    async fn work_runs_and_its_result_comes_back() {
        assert_eq!(run("test", policy_of_this_thread).await, background_start());
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
        assert_eq!(policy.await, background_start());
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
        // Reading /proc/self/task can fail for a moment while other tests
        // of this process hold many files (EMFILE): the server looks
        // again a second later, and so does this test, a few times.
        let mut done = raise_idle_threads_named("bg-only");
        for _ in 0..50 {
            if done.raised + done.refused > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            done = raise_idle_threads_named("bg-only");
        }
        assert_eq!((done.raised, done.refused), (1, 0));
        (0..3).for_each(|_| release.send(()).unwrap());
        assert_eq!(idle.join().unwrap(), Policy::Other);
        assert_eq!(other_name.join().unwrap(), Policy::Idle);
        assert_ne!(not_idle.join().unwrap(), Policy::Idle);
    }
}
