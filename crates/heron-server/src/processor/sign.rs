//! Layer 6: a response to a signed request is signed with the key that
//! verified it (RFC 8945 5.3); a transfer stream signs each message as it
//! is pulled ([`super::Messages`]).

use heron_proto::tsig::ResponseSigner;

use super::Deferred;

/// Signs the single response in `out` if the request was signed.
pub(super) fn response(d: &Deferred, out: &mut Vec<u8>) {
    if let Some(verified) = &d.signed {
        ResponseSigner::new(verified).sign(out, d.req.now);
    }
}
