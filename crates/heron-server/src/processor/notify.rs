//! Layer 5, for NOTIFY (RFC 1996): an accepted NOTIFY becomes an event for
//! whoever refreshes secondary zones, and is acknowledged NOERROR.

use heron_proto::message::Message;
use heron_proto::{Name, Rcode};

use super::parse::soa_serial_in;
use super::{Deferred, Event, NotifyReceived};

pub(super) fn accept(d: &Deferred, origin: Name, out: &mut Vec<u8>, events: &mut Vec<Event>) {
    let serial = soa_serial_in(d.req.bytes, |m: &Message| &m.answers);
    tracing::info!(
        zone = %origin,
        peer = %d.req.peer,
        "NOTIFY for {origin} from {} (serial {})",
        d.req.peer,
        serial.map_or("-".into(), |s| s.to_string())
    );
    events.push(Event::Notify(NotifyReceived {
        origin,
        from: d.req.peer,
        serial,
    }));
    // We serve the zone, as its secondary: an authoritative acknowledgement.
    d.header_response(Rcode::NOERROR, true, out);
}
