//! Layer 7: a UDP response fits what the client can take (512 octets, or
//! its EDNS size up to our `max-udp-payload`). The engine keeps to it as
//! it writes; this catches what the other layers build (an IXFR's SOA
//! with its TSIG to a client without EDNS): cut to the question, TC set,
//! signed again.

use heron_proto::Rcode;
use heron_proto::message::{Header, Query, flags};
use heron_zone::AnswerConfig;

use super::{Deferred, Transport, sign};

pub(super) fn fit(config: &AnswerConfig, d: &Deferred, out: &mut Vec<u8>) {
    if d.req.transport != Transport::Udp || out.len() <= limit(config, d.q) {
        return;
    }
    let header = Header::read(out).expect("a response has a header");
    d.header_response(Rcode(header.rcode()), header.has(flags::AA), out);
    out[2] |= (flags::TC >> 8) as u8;
    sign::response(d, out);
}

/// The largest UDP response the client takes, as the engine computes it.
pub(super) fn limit(config: &AnswerConfig, q: &Query) -> usize {
    match q.edns {
        None => 512,
        Some(e) => usize::from(e.udp_size.min(config.max_udp_payload.max(512))),
    }
}
