//! DNSSEC signing for Heron (RFC 4033–4035, 5155, 6781, 7583).
//!
//! The crate is I/O-free where it decides (which keys sign, when a key
//! moves to its next state: the clock is passed in, as in
//! `heron_xfr::timers`) and does the cryptography for the server, which
//! owns files, timers and the zone swap.

pub mod dnskey;
pub mod ds;
pub mod file_names;
pub mod import;
pub mod keys;
pub mod policy;
pub mod rollover;
pub mod sign;
pub mod validity;
pub mod zonemd;
