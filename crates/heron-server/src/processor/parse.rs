//! Layer 1: the query read once. A plain query leaves for the answer
//! engine from here; the full message is walked again only for an SOA
//! serial ([`soa_serial_in`]), by the transfer and NOTIFY layers.

use std::cell::RefCell;

use heron_proto::message::{Header, Message, Query, QueryError, Record, parse_query_into};
use heron_proto::writer::header_response;
use heron_proto::{RType, rdata};

use super::Outcome;

thread_local! {
    /// The parsed query, reused by every query on this thread, as the
    /// engine's own: a new one zeroes a 255-byte name buffer each time.
    static QUERY: RefCell<Query> = RefCell::new(Query::new());
}

/// Parses `bytes` and hands the query to `then`; answers FORMERR (the
/// header alone: the question may be what is malformed) or drops what is
/// not a query.
pub(super) fn with_query(
    bytes: &[u8],
    out: &mut Vec<u8>,
    then: impl FnOnce(&Query, &mut Vec<u8>) -> Outcome,
) -> Outcome {
    QUERY.with_borrow_mut(|q| match parse_query_into(bytes, q) {
        Ok(()) => then(q, out),
        Err(QueryError::Drop) => Outcome::Nothing,
        Err(QueryError::FormErr(_)) => {
            let header = Header::read(bytes).expect("FormErr implies a header");
            header_response(out, &header, &[], header.unreadable_rcode(), false);
            Outcome::Response
        }
    })
}

/// The serial of the first SOA in the section `pick` chooses: an IXFR
/// request's authority section holds the client's version (RFC 1995 3),
/// a NOTIFY's answer section may hint the new one (RFC 1996 3.7).
pub(super) fn soa_serial_in(bytes: &[u8], pick: fn(&Message) -> &[Record]) -> Option<u32> {
    let m = Message::parse(bytes).ok()?;
    let soa = pick(&m).iter().find(|r| r.rtype == RType::SOA)?;
    rdata::soa_serial(&soa.rdata)
}
