//! Zone transfers for Heron.
//!
//! * [`primary`]: AXFR and IXFR out (message packing, no I/O), NOTIFY out.
//! * [`secondary`]: AXFR and IXFR in (message reading, no I/O), and the
//!   received zone kept on disk.
//! * [`catalog_zone`]: catalog zones (RFC 9432) read, checked and
//!   compared, without I/O.
//! * [`acl`]: who may transfer or notify, by address prefix and TSIG key.
//! * [`journal`]: the recent diffs of a zone, bounded, for IXFR out, and
//!   the file that keeps them across restarts.
//! * [`serial`]: SOA serial arithmetic (RFC 1982).
//! * [`timers`]: every secondary zone's refresh, retry and expire timers,
//!   as a state machine without I/O.
//! * [`update`]: dynamic update (RFC 2136, RFC 3007 rules) without I/O:
//!   an UPDATE read, checked and applied to a zone version.
//!
//! `disk` makes many files durable at once, for the kept copies of
//! secondary zones and the journal files alike.

pub mod acl;
pub mod catalog_zone;
pub mod disk;
mod growth;
pub mod journal;
pub mod keys;
pub mod origin_index;
pub mod primary;
pub mod secondary;
pub mod serial;
pub mod stats;
pub mod timers;
mod unix_seconds;
pub mod update;
