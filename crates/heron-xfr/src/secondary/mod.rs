//! The secondary side: taking a zone in from a primary.
//!
//! * [`receive`]: reads the messages of an AXFR (RFC 5936) or IXFR
//!   (RFC 1995) answer and produces the new version of the zone.
//! * [`store`]: writes a received zone to disk as a master file, so that a
//!   restart serves it without transferring it again.
//! * [`client`]: SOA checks and transfers over pooled TCP connections.
//! * [`pipelined`]: one connection carrying many SOA checks at once.
//! * [`tls`]: those connections over TLS (XoT, RFC 9103).
//! * [`keeper`]: kept copies written to disk in batches.
//! * [`kept_file`]: where each zone's copy is kept.
//! * [`refresh`]: the one task that keeps every zone fresh, driving the
//!   timers of [`crate::timers`] (SOA checks, transfers, expire).
//! * [`backoff`]: the primaries left alone after failing (the waits'
//!   arithmetic is the timers', [`crate::timers::backoff`]).
//! * [`zone`]: one secondary zone: its primaries and its kept copy.
//! * [`primary_log`]: the lines about those failures, bounded per primary.

pub mod backoff;
pub mod client;
pub mod keeper;
pub mod kept_file;
pub mod pipelined;
pub mod primary_log;
pub mod receive;
pub mod refresh;
pub mod seal;
pub mod store;
pub mod tls;
pub mod zone;

#[cfg(test)]
mod tests;
