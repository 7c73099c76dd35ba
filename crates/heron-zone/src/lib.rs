//! Zones for Heron: zone files in, the in-memory zone, the catalog of zones
//! and the answer engine.
//!
//! * [`zonefile`]: reading RFC 1035 master files (with `$INCLUDE`, `$GENERATE`).
//! * [`zone`]: the checked, read-only zone built from records.
//! * [`catalog`]: all zones served, found by longest matching origin.
//! * [`diff`] (in [`zone`]): the records that differ between two versions
//!   of a zone (IXFR), used by the zone's incremental apply and by
//!   heron-xfr's journal.
//! * [`answer`]: the answer engine, a pure function of catalog and query,
//!   with its denial proofs and the batch answerer ([`lookahead`]).

pub mod answer;
pub mod catalog;
mod prefetch;
pub mod zone;
pub mod zonefile;

pub use answer::lookahead::{self, BatchAnswerer};
pub use answer::{AnswerConfig, Answered, Summary, Transport, answer, answer_parsed, is_deferred};
pub use catalog::{Catalog, Served};
pub use zone::diff;
pub use zone::{
    Loaded, MAX_PROBLEMS, Problem, Severity, Zone, ZoneBuilder, load_zone_file,
    load_zone_file_to_sign, load_zone_str, load_zone_text, load_zone_text_to_sign,
    reload_zone_file, reload_zone_str, reload_zone_text,
};

/// The cores this process may run on, asked once (by the first caller:
/// the server asks at startup, before any thread is pinned). The standard
/// library reads cgroup files each time it is asked, which took a third of
/// the time to start with 100,000 small zones when asked once a zone.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
