//! Layer 5, for queries: the answer engine (`heron_zone`), called once.

use heron_proto::message::Query;
use heron_zone::{AnswerConfig, Catalog, answer_parsed};

use super::{Deferred, Request};

/// The fast path: a plain query, answered whole by the engine.
#[inline]
pub(super) fn plain(
    catalog: &Catalog,
    config: &AnswerConfig,
    req: &Request,
    q: &Query,
    out: &mut Vec<u8>,
) {
    let transport = req.transport.engine();
    answer_parsed(catalog, config, q, req.bytes, transport, 0, out);
}

/// A signed query: the engine's answer, leaving room for the TSIG record
/// `sign` appends.
pub(super) fn signed(catalog: &Catalog, config: &AnswerConfig, d: &Deferred, out: &mut Vec<u8>) {
    let transport = d.req.transport.engine();
    answer_parsed(
        catalog,
        config,
        d.q,
        d.req.bytes,
        transport,
        d.tsig_room(),
        out,
    );
}
