//! SIGINT and SIGTERM stop the measurements: the servers are stopped on
//! the way out and the partial results kept.

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether SIGINT or SIGTERM arrived: measurements stop and the servers
/// are stopped on the way out.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}
