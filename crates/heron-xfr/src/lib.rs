//! Zone transfers for Heron.
//!
//! * [`primary`]: AXFR and IXFR out (message packing, no I/O), NOTIFY out.
//! * [`acl`]: who may transfer or notify, by address prefix and TSIG key.
//! * [`serial`]: SOA serial arithmetic (RFC 1982).

pub mod acl;
pub mod primary;
pub mod serial;
