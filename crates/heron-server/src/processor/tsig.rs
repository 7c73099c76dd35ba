//! Layer 3: the TSIG signature (RFC 8945), verified where `parse` found
//! it. A failure is answered NOTAUTH with the TSIG error (5.2), its TSIG
//! record signed only where the RFC asks (BADTIME). A verified request
//! seen already is answered again when it is a retransmission and
//! refused when it is a replay ([`super::replay`]).

use heron_proto::tsig::{self, Key, TsigError, TsigFailure, Verified};
use heron_proto::{Opcode, RType};

use super::replay::{ReplayCache, Seen};
use super::{Deferred, Refusal};

/// The verified key and MAC, None if unsigned; or why not, with the
/// error its answer carries.
pub(super) fn verify(
    keys: &[Key],
    replays: &ReplayCache,
    d: &Deferred,
) -> Result<Option<Verified>, (TsigFailure, Refusal)> {
    let at = d.q.tsig.as_ref().map(|r| r.start);
    // A copy of these must not hand out a zone or change one again.
    let once =
        matches!(d.q.qtype, RType::AXFR | RType::IXFR) || d.q.header.opcode() == Opcode::UPDATE;
    let from = d.req.peer.ip().to_canonical();
    let update = d.q.header.opcode() == Opcode::UPDATE;
    match tsig::verify_request_at(d.req.bytes, at, keys, d.req.now) {
        Ok(Some(v)) => match replays.check(&v, from, once, d.req.now) {
            Seen::First | Seen::Retransmission => Ok(Some(v)),
            // nsupdate resends an UPDATE over UDP after 3 s; the first is
            // still being applied, or its answer was lost: not applied
            // again, and not told BADTIME, which it takes for a clock
            // error though the update is applied (black-box finding).
            Seen::Resent if update => Err((replayed(&v), Refusal::UpdateResent)),
            Seen::Resent | Seen::Replay => Err((replayed(&v), Refusal::TsigReplay)),
        },
        Ok(None) => Ok(None),
        Err(failure) => Err((failure, Refusal::Tsig)),
    }
}

/// A copy of a request answered already: BADTIME, as RFC 8945 5.2.3 has
/// a server answer a request whose time it has seen pass, signed.
fn replayed(v: &Verified) -> TsigFailure {
    TsigFailure {
        error: TsigError::BadTime,
        key_name: Some(v.key.name.clone()),
        algorithm: Some(v.key.algorithm.name()),
        request_mac: Some(v.mac.clone()),
        time_signed: v.time_signed,
    }
}

/// The NOTAUTH (or FORMERR) a failed check gets.
pub(super) fn error_response(keys: &[Key], d: &Deferred, failure: &TsigFailure, out: &mut Vec<u8>) {
    d.header_response(failure.error.response_rcode(), false, out);
    tsig::error_response_tsig(out, failure, keys, d.req.now);
}
