//! Work that must not slow down answering: reloads run on a thread of
//! their own that gets the CPU only when the query workers leave it idle.
//!
//! Re-reading a large zone file takes seconds of CPU. On a server whose
//! workers share cores with it (or are pinned to the same one), an equal
//! share would halve the query rate for that time, and even a lower
//! niceness lets it hold the core for milliseconds at a time, which queues
//! queries (measured with the suite's reload workload: p99 latency 2.7 ms
//! at nice 10, 42 us under `SCHED_IDLE`, the same as with no reload). The
//! price: on a core the workers keep fully busy, a reload waits.

use heron_sys::sched::{self, Policy};

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

/// Runs `work` on a new thread at background priority and waits for it
/// without blocking the async runtime.
pub async fn run<T: Send + 'static>(name: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if !lower_this_thread() {
                tracing::debug!("background thread keeps its CPU priority");
            }
            let _ = done.send(work());
        })
        .expect("a thread for background work");
    result.await.expect("background work finished")
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
}
