//! Layer 5, for NOTIFY (RFC 1996): an accepted NOTIFY becomes an event for
//! whoever refreshes secondary zones, and is acknowledged NOERROR.
//!
//! A NOTIFY over UDP is easily sent from a primary's address by anyone:
//! 20,000 of them were 20,000 lines. The first [`LINES`] of each
//! interval are logged, the rest counted and told by the next line; the
//! refresh they cause is coalesced, and each zone's NOTIFYs are counted
//! in `heron ctl zone-status` and the metrics.

use heron_proto::message::Message;
use heron_proto::{Name, Rcode};

use super::log_limit::LogLimiter;
use super::parse::soa_serial_in;
use super::{Deferred, Event, NotifyReceived};

/// NOTIFYs accepted that get a line per interval.
pub const LINES: u64 = 5;

pub(super) fn accept(
    d: &Deferred,
    origin: Name,
    log: &LogLimiter<1>,
    out: &mut Vec<u8>,
    events: &mut Vec<Event>,
) {
    let serial = soa_serial_in(d.req.bytes, |m: &Message| &m.answers);
    if let Some(due) = log.admit(0, d.req.now) {
        // With the transfers it asks for, under `heron_xfr`, as `[log]
        // targets` documents.
        tracing::info!(
            target: "heron_xfr::notify",
            zone = %origin,
            peer = %d.req.peer,
            "NOTIFY for {origin} from {} (serial {}){}",
            d.req.peer,
            serial.map_or("-".into(), |s| s.to_string()),
            due.tail()
        );
    }
    events.push(Event::Notify(NotifyReceived {
        origin,
        from: d.req.peer,
        serial,
    }));
    // We serve the zone, as its secondary: an authoritative acknowledgement.
    d.header_response(Rcode::NOERROR, true, out);
}
