//! SIGINT and SIGTERM stop the measurements: the servers are stopped on
//! the way out and the partial results kept.

/// Raised by `heron_sys::process::set_on_termination`'s handler.
pub static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether SIGINT or SIGTERM arrived: measurements stop and the servers
/// are stopped on the way out.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}
