//! DNS wire format for Heron.
//!
//! * [`name`]: domain names (wire form, text form, canonical order).
//! * [`types`]: record types, classes, opcodes and response codes.
//! * [`text`]: presentation-format tokens shared by zone files and RDATA.
//! * [`rdata`]: RDATA of every supported type, text ⇄ wire.
//! * [`message`]: a zero-copy reader of DNS messages.
//! * [`writer`]: a response writer with name compression.
//! * [`edns`]: the EDNS(0) OPT record and the options Heron reads and writes.
//! * [`cookie`]: DNS cookies (RFC 7873, RFC 9018 server cookies).
//! * [`encoded`]: RRsets pre-encoded for responses, compressed against the apex.
//! * [`tsig`]: TSIG transaction signatures (RFC 8945), server and client side.
//! * [`prefix`]: network address prefixes, for access lists and client limits.
//! * [`time`]: the wall clock in seconds, as TSIG and SOA serials count it.

pub mod cookie;
pub mod edns;
pub mod encoded;
pub mod message;
pub mod name;
pub mod prefix;
pub mod rdata;
pub mod text;
pub mod time;
pub mod tsig;
pub mod types;
pub mod writer;

pub use name::{Name, NameError};
pub use types::{Class, Opcode, RType, Rcode};
