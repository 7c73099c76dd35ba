//! When the process started, for the start-to-ready time and the uptime
//! that operators compare servers by.

use std::sync::OnceLock;
use std::time::Instant;

/// The moment of the first call (`main` makes it first thing).
pub fn started() -> Instant {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}
