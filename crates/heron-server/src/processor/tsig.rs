//! Layer 3: the TSIG signature (RFC 8945), verified where `parse` found
//! it. A failure is answered NOTAUTH with the TSIG error (5.2), its TSIG
//! record signed only where the RFC asks (BADTIME).

use heron_proto::tsig::{self, Key, TsigFailure, Verified};

use super::Deferred;

/// The verified key and MAC, None if unsigned.
pub(super) fn verify(keys: &[Key], d: &Deferred) -> Result<Option<Verified>, TsigFailure> {
    let at = d.q.tsig.as_ref().map(|r| r.start);
    tsig::verify_request_at(d.req.bytes, at, keys, d.req.now)
}

/// The NOTAUTH (or FORMERR) a failed check gets.
pub(super) fn error_response(keys: &[Key], d: &Deferred, failure: &TsigFailure, out: &mut Vec<u8>) {
    d.header_response(failure.error.response_rcode(), false, out);
    tsig::error_response_tsig(out, failure, keys, d.req.now);
}
