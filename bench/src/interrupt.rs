//! SIGINT and SIGTERM stop the measurements: the servers are stopped on
//! the way out and the partial results kept.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// From now on SIGINT and SIGTERM set the flag [`interrupted`] reads.
pub fn watch_termination() -> Result<(), String> {
    heron_sys::process::set_on_termination(&INTERRUPTED).map_err(|e| e.to_string())
}

/// Whether SIGINT or SIGTERM arrived: measurements stop and the servers
/// are stopped on the way out.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}
